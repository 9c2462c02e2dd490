"""The controller's fault API at scale: ``python -m bench.bench_controller_faults --out results/``.

Why: an operator scripts thousands of faults (flaps, short black holes) and expects each to
start and end when asked. ``mrc-controller`` runs as its own process with its state file (of
this tree, or of another checkout: ``--source DIR``, e.g. a ``git worktree`` of the previous
commit), against switches served by a helper process (the Linux shim's P4Runtime service
without a kernel, so no root is needed and only the controller is measured). It measures:

- ``inject``: the time to reach ``--faults`` active timed faults from 1 and from 8 concurrent
  clients, and the median injection latency as the count grows;
- ``expiry``: with ``--active`` of them still active, ``--expiries`` faults of 50 ms, one after another,
  each on a port of its own: how late its entry leaves the switch (read back every 2 ms);
- ``flaps``: ``--flaps`` flaps at 50 ms for ``--seconds``: the controller's CPU (user + system
  from /proc) and the toggles it made against the ideal count.

A run over budget (``--budget-s`` per phase, for a tree that cannot keep up) records how far
it got. Writes ``controller_faults.json`` and ``controller_faults.png``.

    flock /tmp/mrc-live.lock .venv/bin/python -m bench.bench_controller_faults --out results/ \\
        [--source /tmp/old-tree] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from mrc_fabric.fault_tables import FAULT_TABLES
from mrc_fabric.topology import build_clos

TICK = os.sysconf("SC_CLK_TCK")
OPTIONS = (("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50))

SWITCHES = r"""
import sys, threading
from concurrent import futures
import grpc
from finsy.proto import p4r_grpc
from linux_target.counters import CounterReader
from linux_target.p4rt_service import P4RuntimeShim
from linux_target.switch_tables import SwitchTables
from mrc_fabric.p4info import default_index
from mrc_fabric.topology import Topology

class NoKernel:
    def transition(self, old, new):
        pass

topo = Topology.load(sys.argv[1])
index = default_index()
servers = []
for s in topo.switches:
    ports = {e.port: e.ifname for e in topo.ports_of(s.name)}
    tables = SwitchTables(index, ports, NoKernel())
    shim = P4RuntimeShim(s.name, s.device_id, index, tables, lambda p=ports: CounterReader(p, {}, {}, {}))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    p4r_grpc.add_P4RuntimeServicer_to_server(shim, server)
    server.add_insecure_port(s.p4rt_address)
    server.start()
    servers.append(server)
print("ready", flush=True)
sys.stdin.read()
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Lab:
    """Switches in one helper process, mrc-controller (of ``source``) in another."""

    def __init__(self, source: Path | None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="bcf-"))
        self.topo = build_clos(2, 2, 2, 2, prefix="bf", p4rt_address_format=f"unix:{self.dir}/{{name}}.sock")
        self.topo.save(self.dir / "topology.json")
        cmd = [sys.executable, "-c", SWITCHES, str(self.dir / "topology.json")]
        self.switches = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.switches.stdout is not None and self.switches.stdout.readline().strip() == "ready"
        cmd = [sys.executable, "-m", "controller.server", "--topology", str(self.dir / "topology.json"),
               "--state-file", str(self.dir / "controller-state.json"), "--install"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(source)} if source else None
        self.log = open(self.dir / "controller.log", "wb")  # noqa: SIM115 (closed in close())
        self.ctl = subprocess.Popen(cmd, cwd=source, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.channel = grpc.insecure_channel(f"unix:{self.dir}/controller.sock", options=OPTIONS)
        self.stub = pb_grpc.ControllerStub(self.channel)
        self.stub.ListFaults(pb.ListFaultsRequest(), timeout=60, wait_for_ready=True)
        deadline = time.monotonic() + 60
        while not all(s.primary for s in self.stub.GetHealth(pb.GetHealthRequest(), timeout=10).switches):
            if time.monotonic() > deadline:
                raise RuntimeError("the switches did not all come up")
            time.sleep(0.05)
        readers = __import__("linux_target.p4rt_client", fromlist=["P4RuntimeTestClient"])
        self.readers = {
            s.name: readers.P4RuntimeTestClient(s.p4rt_address, s.device_id, 0) for s in self.topo.switches
        }

    def close(self) -> None:
        for r in self.readers.values():
            r.close()
        self.channel.close()
        for proc in (self.ctl, self.switches):
            proc.kill()
            proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def fault_ports(self, switch: str) -> int:
        r = self.readers[switch]
        return sum(len(r.read_table(table)) for table in FAULT_TABLES)


def inject(lab: Lab, n: int, clients: int, budget_s: float) -> dict[str, Any]:
    """``n`` timed LOSS faults over every T0-T1 link from ``clients`` threads."""
    links = [lk.name for lk in lab.topo.links if lab.topo.has_switch(lk.a.node)]
    latencies: list[tuple[int, float]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + budget_s
    counter = iter(range(n))

    def one() -> None:
        while time.monotonic() < deadline:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            spec = pb.FaultSpec(kind=pb.LOSS, target=links[i % len(links)], probability=0.001,
                                duration_s=3600.0 + i)  # fmt: skip
            t = time.monotonic()
            lab.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=120)
            with lock:
                latencies.append((len(latencies), time.monotonic() - t))

    t0 = time.monotonic()
    threads = [threading.Thread(target=one) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    per_k = {}
    for k in range(0, n, 1000):
        chunk = [lat for i, lat in latencies if k <= i < k + 200]
        if chunk:
            per_k[k] = round(statistics.median(chunk) * 1e3, 2)
    return {"clients": clients, "asked": n, "done": len(latencies), "wall_s": round(wall, 2),
            "per_s": round(len(latencies) / wall, 1), "median_ms_at": per_k}  # fmt: skip


def expiry(lab: Lab, count: int) -> dict[str, Any]:
    """50 ms black holes on a host link one at a time: lateness of each entry's removal."""
    late: list[float] = []
    target, switch = "bfh0-bft0p0n0", "bft0p0n0"
    base = lab.fault_ports(switch)
    for _ in range(count):
        spec = pb.FaultSpec(kind=pb.BLACKHOLE, target=target, direction=pb.A_TO_B, duration_s=0.05)
        t = time.monotonic()
        lab.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=30)
        due = t + 0.05
        while lab.fault_ports(switch) > base:
            if time.monotonic() - due > 30:
                break
            time.sleep(0.002)
        late.append(time.monotonic() - due)
    return {"count": count, "late_ms": {"median": round(statistics.median(late) * 1e3, 1),
            "min": round(min(late) * 1e3, 1), "max": round(max(late) * 1e3, 1)}}  # fmt: skip


def flaps(lab: Lab, count: int, seconds: float) -> dict[str, Any]:
    """CPU with nobody watching events (a WatchEvents stream costs the controller per event),
    then the toggle rate seen on such a stream."""
    links = [lk.name for lk in lab.topo.links if lab.topo.has_switch(lk.a.node)]
    lab.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=120)
    for i in range(count):
        spec = pb.FaultSpec(kind=pb.FLAP, target=links[i % len(links)], period_s=0.05)
        lab.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=30)
    time.sleep(0.5)
    c0, t0 = cpu_seconds(lab.ctl.pid), time.monotonic()
    time.sleep(seconds)
    cpu = 100 * (cpu_seconds(lab.ctl.pid) - c0) / (time.monotonic() - t0)
    stream = lab.stub.WatchEvents(pb.WatchEventsRequest())
    toggles = [0]

    def follow() -> None:
        try:
            for e in stream:
                if e.kind in ("flap_up", "flap_down"):
                    toggles[0] += 1
        except grpc.RpcError:
            pass

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    time.sleep(0.5)
    n0, t0 = toggles[0], time.monotonic()
    time.sleep(min(seconds, 2.0))
    rate = (toggles[0] - n0) / (time.monotonic() - t0)
    stream.cancel()
    lab.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=120)
    return {"flaps": count, "cpu_percent": round(cpu, 1), "toggles_per_s": round(rate),
            "ideal_per_s": round(count / 0.05)}  # fmt: skip


def fault_ids(lab: Lab) -> list[str]:
    out: list[str] = []
    token = ""
    while True:
        page = lab.stub.ListFaults(pb.ListFaultsRequest(page_size=1000, page_token=token), timeout=30)
        out += [f.id for f in page.faults]
        token = page.next_page_token
        if not token:
            return out


def run(source: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"source": str(source) if source else "this tree"}
    for clients in (8, 1):
        lab = Lab(source)
        try:
            out[f"inject_{clients}"] = inject(lab, args.faults, clients, args.budget_s)
            print(f"  inject x{clients}: {out[f'inject_{clients}']}", flush=True)
            if clients == 8:
                ids = fault_ids(lab)
                for fid in ids[: max(0, len(ids) - args.active)]:
                    lab.stub.ClearFault(pb.ClearFaultRequest(id=fid), timeout=30)
                out["expiry"] = expiry(lab, args.expiries)
                out["expiry"]["active"] = len(fault_ids(lab))
                print(f"  expiry: {out['expiry']}", flush=True)
                out["flaps"] = flaps(lab, args.flaps, args.seconds)
                print(f"  flaps: {out['flaps']}", flush=True)
        finally:
            lab.close()
    return out


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for label, r in doc["runs"].items():
        for clients, style in ((8, "-"), (1, "--")):
            pts = r.get(f"inject_{clients}", {}).get("median_ms_at", {})
            axes[0].plot(
                [int(k) for k in pts], list(pts.values()), style, marker="o", label=f"{label} x{clients}"
            )
    axes[0].set_xlabel("faults active")
    axes[0].set_ylabel("InjectFault median (ms)")
    axes[0].set_yscale("log")
    axes[0].legend(fontsize=7)
    labels = list(doc["runs"])
    axes[1].bar(labels, [doc["runs"][k]["expiry"]["late_ms"]["median"] for k in labels])
    axes[1].set_ylabel("50 ms fault: removal after due (ms, median)")
    axes[1].set_yscale("log")
    axes[2].bar(labels, [doc["runs"][k]["flaps"]["cpu_percent"] for k in labels])
    axes[2].set_ylabel(f"controller CPU % with {doc['args']['flaps']} flaps at 50 ms")
    for ax in axes[1:]:
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"controller fault API at scale ({doc['args']['faults']} faults)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_doc(path: Path, benchmark: str, args: argparse.Namespace, runs: dict[str, Any]) -> dict[str, Any]:
    """The runs as a JSON document at ``path``, with the arguments, the machine and the time."""
    doc_args: dict[str, Any] = {k: v if isinstance(v, int) else str(v) for k, v in vars(args).items()}
    doc = {
        "benchmark": benchmark,
        "args": doc_args,
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "runs": runs,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.bench_controller_faults", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument(
        "--source", type=Path, action="append", default=[], help="also run this checkout's controller"
    )
    ap.add_argument("--faults", type=int, default=4096)
    ap.add_argument("--active", type=int, default=4000, help="faults active while expiries are timed")
    ap.add_argument("--expiries", type=int, default=50)
    ap.add_argument("--flaps", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--budget-s", type=float, default=120.0, help="per injection phase")
    ap.add_argument("--quick", action="store_true", help="1,024 faults, 20 expiries, 100 flaps for 2 s")
    args = ap.parse_args(argv)
    if args.quick:
        args.faults, args.active, args.expiries, args.flaps, args.seconds = 1024, 1000, 20, 100, 2.0
    runs = {}
    for source in [None, *args.source]:
        label = "this tree" if source is None else str(source)
        print(f"{label}:", flush=True)
        runs[label] = run(source, args)
    doc = write_doc(args.out / "controller_faults.json", "controller fault API at scale", args, runs)
    plot(doc, args.out / "controller_faults.png")
    print(f"wrote {args.out / 'controller_faults.json'} and {args.out / 'controller_faults.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
