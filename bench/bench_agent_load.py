"""The agent under ordinary load and under a cheap attack, on the default fabric (root).

Why: one transfer at a time on an idle fabric is not how the testbed is used. This benchmark
brings up the default fabric (Linux SRv6, or BMv2 with ``--target bmv2``; 2 planes x 2 T0 x
2 T1, 2 hosts per T0, prefix ``agl``) with the controller and one ``mrc serve`` per host -- of
this tree, or of another checkout (``--source DIR``, e.g. a ``git worktree`` of an older
commit) -- and measures:

- ``concurrent``: ``--per-pair`` transfers of ``--size`` at once from every host to every
  other (12 ordered pairs), with and without one T0-T1 link flapping every ``--flap-s``
  (down/up); how many end verified, the errors by kind, and how long the batch took;
- ``cancel``: a 4 GiB transfer with ``--deadline 3``: when its error comes back, and how many
  DATA bytes its connection still sends afterwards (the agent's own counters, read until they
  stop moving); then a 256 MiB transfer on the same connection against a clean one;
- ``flood``: a 1 GiB transfer with and without a third host sending ``--connect-rate``
  forged CONNECTs per second (4,096 different nonces, spoofing the sender's address): its
  goodput, and the receiver agent's CPU time and resident memory (VmRSS) before and after.
  A third run sends the same frames to a MAC address nobody has (the first switch drops
  them): the forger shares this machine's cores with both agents and the fabric, and the
  decoy run shows what that costs apart from what reaching the agent costs (``agent_ratio``:
  flood against decoy; ``goodput_ratio``: flood against clean).

Each scenario runs ``--repeat`` times; the JSON has every run and the medians with their
spread; the PNG shows the three. Writes ``agent_load.json`` and ``agent_load.png`` under
``--out``.

    sudo flock /tmp/mrc-live.lock .venv/bin/python -m bench.bench_agent_load --out results/ \
        [--source /tmp/old-tree] [--scenarios concurrent,cancel,flood] [--quick]
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
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from topologies.procs import terminate

PREFIX = "agl"

FORGER = r"""
import os, random, socket, sys, time
from mrc_fabric.ev import EV
from mrc_fabric.hostconfig import HostConfig
from mrc_host.agent.paths import HostPaths
from mrc_host.core import Mode
from mrc_host.wire.codec import FrameEncoder
from mrc_host.wire.framing import FrameAddressing
from mrc_host.wire.messages import Connect, Dscp, PathMeta

cfg_path, victim, ifname, mac, t0_mac, own_addr, claim_addr, victim_addr = sys.argv[1:9]
qp, rate, stop, kind = sys.argv[9:13]
paths = HostPaths(HostConfig.load(cfg_path))
# a decoy is the same frame to a MAC nobody has: the first switch drops it, no agent sees it
dst_mac = "02:00:00:00:de:c0" if kind == "decoy" else t0_mac
enc = FrameEncoder(FrameAddressing(mac, dst_mac, own_addr, claim_addr, victim_addr))
ev = EV(0, 0, 0x1234).value
carrier = paths.peer(victim, Mode.MRC).carrier(ev)
rng = random.Random(7)
meta = PathMeta(ev=ev, ecn=0, dscp=Dscp.CONTROL)
pool = [enc.encode(Connect(int(qp), rng.getrandbits(24), rng.getrandbits(64), meta), carrier)
        for _ in range(4096)]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
s.bind((ifname, 0))
rate = float(rate)
n = 0
start = time.monotonic()
print("ready", flush=True)
while not os.path.exists(stop):  # bursts every 10 ms: the forger's own CPU stays small
    due = int((time.monotonic() - start) * rate)
    while n < due:
        s.send(pool[n % len(pool)])
        n += 1
    time.sleep(0.01)
print(n, time.monotonic() - start, flush=True)
"""


class Fabric:
    """The default fabric, the controller and one agent per host (from ``source``)."""

    def __init__(self, source: Path | None, agent_args: list[str], target: str = "linux") -> None:
        self.source = source
        self.agent_args = agent_args
        self.target = target
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-"))
        self.net: Any = None
        self.topo: Any = None
        self.core: Any = None
        self.server: Any = None
        self.channel: Any = None
        self.stub: Any = None
        self.agents: dict[str, subprocess.Popen[bytes]] = {}

    def open(self) -> Fabric:
        import grpc

        from controller.core import ControllerCore
        from controller.proto.mrc.controller.v1 import controller_pb2 as pb
        from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
        from controller.server import serve
        from mrc_fabric.topology import Topology
        from topologies.clos import TOPOLOGY_FILE, start_clos

        self.net, _ = start_clos(self.run_dir, 2, 2, 2, 2, node_prefix=PREFIX, target=self.target)
        self.topo = Topology.load(self.run_dir / TOPOLOGY_FILE)
        self.core = ControllerCore(self.topo, run_dir=self.run_dir)
        self.core.start()
        if self.core.wait_ready(30):
            raise RuntimeError("controller not ready")
        self.server, _svc, address = serve(self.core, f"unix:{self.run_dir}/controller.sock")
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.ControllerStub(self.channel)
        self.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=60)
        (self.run_dir / "agents").mkdir()
        for h in self.topo.hosts:
            self.start_agent(h.name)
        return self

    def sock(self, host: str) -> Path:
        return self.run_dir / "agents" / f"{host}.sock"

    def client(self, host: str) -> Any:
        from mrc_host.agent.client import AgentClient

        return AgentClient(self.sock(host), timeout_s=60)

    def start_agent(self, host: str) -> None:
        from bench.vethlab import wait_for_socket

        cmd = [sys.executable, "-m", "mrc_host.agent.cli", "serve",
               "--config", str(self.run_dir / "hosts" / f"{host}.json"), "--control", str(self.sock(host)),
               "--log", str(self.run_dir / "agents" / f"{host}.log"), *self.agent_args]  # fmt: skip
        env = None if self.source is None else {**os.environ, "PYTHONPATH": str(self.source)}
        proc = self.net.get(host).popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            cwd=self.source, env=env,
        )  # fmt: skip
        self.agents[host] = proc
        wait_for_socket(self.sock(host), proc)

    def close(self) -> None:
        for proc in self.agents.values():
            terminate(proc, 15)
            if proc.stderr is not None:
                proc.stderr.close()
        if self.channel is not None:
            self.channel.close()
        if self.server is not None:
            self.server.stop(grace=0).wait()
        if self.core is not None:
            self.core.stop()
        if self.net is not None:
            self.net.stop()
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def clear_faults(self) -> None:
        from controller.proto.mrc.controller.v1 import controller_pb2 as pb

        self.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=30)

    def flap(self, period_s: float) -> None:
        from controller.proto.mrc.controller.v1 import controller_pb2 as pb

        spec = pb.FaultSpec(kind=pb.FLAP, target=f"{PREFIX}t0p0n0-{PREFIX}t1p0n0", period_s=period_s)
        self.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=30)

    def proc_usage(self, host: str) -> dict[str, float]:
        """CPU seconds (user + system) and resident memory (MB) of ``host``'s agent."""
        pid = self.agents[host].pid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        rss = 0.0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
        return {"cpu_s": cpu, "rss_mb": rss}


@contextmanager
def fabric(source: Path | None, agent_args: list[str], target: str = "linux") -> Iterator[Fabric]:
    fab = Fabric(source, agent_args, target)
    try:
        yield fab.open()
    finally:
        fab.close()


def send(fab: Fabric, src: str, dst: str, size: int | str, deadline_s: float = 0) -> dict[str, Any]:
    """One transfer; an agent refusal comes back as a summary with ``ok`` false."""
    from mrc_host.agent.client import AgentError

    try:
        return dict(fab.client(src).send(dst, size, deadline_s=deadline_s, timeout_s=300))
    except AgentError as exc:
        return dict(exc.reply.get("summary") or {"ok": False, "error": str(exc)})


def error_kind(text: str) -> str:
    """An error message without its numbers, so that alike failures count together."""
    return "".join("#" if ch.isdigit() else ch for ch in text)[:90]


def concurrent(fab: Fabric, per_pair: int, size: int, flap_s: float) -> dict[str, Any]:
    hosts = [h.name for h in fab.topo.hosts]
    pairs = [(a, b) for a in hosts for b in hosts if a != b]
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def one(src: str, dst: str) -> None:
        s = send(fab, src, dst, size, deadline_s=600)
        with lock:
            results.append(s)

    if flap_s:
        fab.flap(flap_s)
    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=p) for p in pairs for _ in range(per_pair)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=900)
    wall = time.monotonic() - t0
    fab.clear_faults()
    verified = sum(1 for s in results if s.get("ok") and s.get("verified") is True)
    errors = Counter(error_kind(str(s.get("error", ""))) for s in results if not s.get("ok"))
    moved = sum(int(s.get("bytes_acked", 0)) for s in results)
    return {"transfers": len(threads), "verified": verified, "wall_s": round(wall, 2),
            "aggregate_goodput_mbit_s": round(moved * 8 / wall / 1e6, 1),
            "errors": dict(errors), "flap_s": flap_s}  # fmt: skip


def send_conn_counters(fab: Fabric, src: str, dst: str) -> dict[str, int]:
    for c in fab.client(src).stats()["connections"]:
        if c["peer"] == dst and c["conn"] == "send" and c["mode"] == "mrc":
            return dict(c["counters"])
    return {}


def settle(fab: Fabric, src: str, dst: str, quiet_s: float = 1.0, limit_s: float = 60.0) -> dict[str, int]:
    """The send connection's counters once ``data_bytes_sent`` stopped moving for ``quiet_s``."""
    last = send_conn_counters(fab, src, dst)
    still = time.monotonic()
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        time.sleep(0.1)
        now = send_conn_counters(fab, src, dst)
        if now.get("data_bytes_sent") != last.get("data_bytes_sent"):
            last, still = now, time.monotonic()
        elif time.monotonic() - still >= quiet_s:
            break
    return last


def cancel(fab: Fabric, src: str, dst: str) -> dict[str, Any]:
    clean = send(fab, src, dst, "256M")
    before = send_conn_counters(fab, src, dst)
    t0 = time.monotonic()
    cut = send(fab, src, dst, "4G", deadline_s=3)
    took = time.monotonic() - t0
    at_error = send_conn_counters(fab, src, dst)
    after = settle(fab, src, dst)
    nxt = send(fab, src, dst, "256M")
    return {
        "deadline_s": 3,
        "error_after_s": round(took, 2),
        "error": cut.get("error", ""),
        "acked_before_error": cut.get("bytes_acked", 0),
        "bytes_sent_until_error": at_error.get("data_bytes_sent", 0) - before.get("data_bytes_sent", 0),
        "bytes_sent_after_error": after.get("data_bytes_sent", 0) - at_error.get("data_bytes_sent", 0),
        "clean_goodput_mbit_s": clean.get("goodput_mbit_s", 0.0),
        "next_goodput_mbit_s": nxt.get("goodput_mbit_s", 0.0),
        "next_ok": bool(nxt.get("ok")),
        "next_bytes_acked": nxt.get("bytes_acked", 0),
    }


def flood(fab: Fabric, src: str, dst: str, attacker: str, rate: float, size: str) -> dict[str, Any]:
    from mrc_host.agent.paths import ROLE_RECEIVER, QpId
    from mrc_host.core import Mode

    send(fab, src, dst, "16M")  # the connection exists before either run
    out: dict[str, Any] = {"rate_per_s": rate}
    for label in ("clean", "decoy", "flood"):
        u0 = fab.proc_usage(dst)
        forger = None
        stop = fab.run_dir / f"stop-{label}-{time.monotonic_ns()}"
        if label != "clean":
            a, v, c = fab.topo.host(attacker).port(0), fab.topo.host(dst).port(0), fab.topo.host(src).port(0)
            qp = QpId(ROLE_RECEIVER, Mode.MRC, fab.topo.host(src).index, fab.topo.host(dst).index).value
            args = [str(fab.run_dir / "hosts" / f"{attacker}.json"), dst, a.ifname, a.mac, a.t0_mac,
                    a.address, c.address, v.address, str(qp), str(rate), str(stop), label]  # fmt: skip
            forger = fab.net.get(attacker).popen(
                [sys.executable, "-c", FORGER, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert forger.stdout is not None
            if forger.stdout.readline().strip() != "ready":
                raise RuntimeError(f"forger: {forger.stderr.read() if forger.stderr else ''}")
            time.sleep(1.0)  # the agent is under the flood before the transfer starts
        s = send(fab, src, dst, size)
        u1 = fab.proc_usage(dst)
        if forger is not None:
            stop.touch()
            fout, ferr = forger.communicate(timeout=30)
            if forger.returncode != 0 or len(fout.split()) < 2:
                raise RuntimeError(f"forger failed: {ferr[-2000:]}")
            sent, secs = fout.split()[-2:]
            out[f"{label}_sent"] = int(sent)
            out[f"{label}_rate_per_s"] = round(int(sent) / float(secs), 1)
        out[label] = {
            "goodput_mbit_s": s.get("goodput_mbit_s", 0.0),
            "ok": bool(s.get("ok")),
            "receiver_cpu_s": round(u1["cpu_s"] - u0["cpu_s"], 2),
            "receiver_rss_mb_before": round(u0["rss_mb"], 1),
            "receiver_rss_mb_after": round(u1["rss_mb"], 1),
            "receiver_rss_growth_mb": round(u1["rss_mb"] - u0["rss_mb"], 1),
        }
    stats = fab.client(dst).stats()
    out["receiver_refused"] = stats.get("refused", {})
    out["receiver_handshake"] = stats.get("handshake", {})
    clean, decoy, fl = (out[k]["goodput_mbit_s"] for k in ("clean", "decoy", "flood"))
    out["goodput_ratio"] = round(fl / clean, 3) if clean else 0.0
    out["agent_ratio"] = round(fl / decoy, 3) if decoy else 0.0  # what reaching the agent costs
    return out


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("concurrent", "concurrent_flap"):
        if runs.get(key):
            out[key] = {
                "verified": spread([r["verified"] for r in runs[key]]),
                "of": runs[key][0]["transfers"],
                "wall_s": spread([r["wall_s"] for r in runs[key]]),
            }
    if runs.get("cancel"):
        rs = runs["cancel"]
        keys = ("error_after_s", "bytes_sent_after_error", "clean_goodput_mbit_s", "next_goodput_mbit_s")
        out["cancel"] = {k: spread([float(r[k]) for r in rs]) for k in keys}
    if runs.get("flood"):
        rs = runs["flood"]
        out["flood"] = {
            "goodput_ratio": spread([r["goodput_ratio"] for r in rs]),
            "agent_ratio": spread([r["agent_ratio"] for r in rs]),
            "decoy_goodput_mbit_s": spread([r["decoy"]["goodput_mbit_s"] for r in rs]),
            "clean_goodput_mbit_s": spread([r["clean"]["goodput_mbit_s"] for r in rs]),
            "flood_goodput_mbit_s": spread([r["flood"]["goodput_mbit_s"] for r in rs]),
            "clean_receiver_cpu_s": spread([r["clean"]["receiver_cpu_s"] for r in rs]),
            "flood_receiver_cpu_s": spread([r["flood"]["receiver_cpu_s"] for r in rs]),
            "flood_rss_growth_mb": spread([r["flood"]["receiver_rss_growth_mb"] for r in rs]),
        }
    return out


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = doc["summary"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    ax = axes[0]
    keys = [k for k in ("concurrent", "concurrent_flap") if k in s]
    ax.bar(range(len(keys)), [s[k]["verified"]["median"] for k in keys], color="#1f77b4")
    ax.bar(range(len(keys)), [s[k]["of"] - s[k]["verified"]["median"] for k in keys],
           bottom=[s[k]["verified"]["median"] for k in keys], color="#d62728")  # fmt: skip
    ax.set_xticks(range(len(keys)), [k.replace("_", "\n") for k in keys])
    ax.set_title("concurrent transfers: verified (blue) / failed (red)")
    ax = axes[1]
    if "cancel" in s:
        c = s["cancel"]
        ax.bar([0, 1], [c["clean_goodput_mbit_s"]["median"], c["next_goodput_mbit_s"]["median"]])
        ax.set_xticks([0, 1], ["clean", "after a cancel"])
        ax.set_ylabel("Mbit/s")
        ax.set_title(f"cancel: {c['bytes_sent_after_error']['median'] / 2**20:.0f} MiB sent after the error")
    ax = axes[2]
    if "flood" in s:
        f = s["flood"]
        ax.bar([0, 1, 2], [f[f"{k}_goodput_mbit_s"]["median"] for k in ("clean", "decoy", "flood")])
        rate = f"{doc['args']['connect_rate']:.0f}/s"
        ax.set_xticks([0, 1, 2], ["clean", f"decoy {rate}\n(dropped at T0)", f"forged CONNECT {rate}"])
        ax.set_ylabel("Mbit/s")
        ax.set_title(f"flood: receiver RSS +{f['flood_rss_growth_mb']['median']:.0f} MB, "
                     f"CPU {f['flood_receiver_cpu_s']['median']:.1f} s")  # fmt: skip
    fig.suptitle(f"agent under load, default fabric ({doc['label']}, {doc['cpus']} CPUs)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_agent_load", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--source", type=Path, help="run the agents of this checkout (default: this tree)")
    ap.add_argument("--label", default="", help="name of this run in the JSON (default: the source)")
    ap.add_argument("--scenarios", default="concurrent,cancel,flood")
    ap.add_argument("--per-pair", default="4,8", help="concurrent transfers per ordered pair: clean,flap")
    ap.add_argument("--size", default="64M", help="bytes per concurrent transfer")
    ap.add_argument("--flap-s", type=float, default=0.2, help="half period of the flapping link")
    ap.add_argument("--connect-rate", type=float, default=1000.0, help="forged CONNECTs per second")
    ap.add_argument("--flood-size", default="1G")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="smaller transfers (16M, flood 256M)")
    ap.add_argument("--agent-arg", action="append", default=[], help="extra `mrc serve` argument")
    ap.add_argument("--target", default="linux", choices=("linux", "bmv2"), help="the switches' data plane")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_agent_load needs root (Mininet, raw sockets)", file=sys.stderr)
        return 2
    from mrc_host.agent.protocol import parse_size

    size = parse_size("16M" if args.quick else args.size)
    flood_size = "256M" if args.quick else args.flood_size
    clean_n, flap_n = (int(x) for x in args.per_pair.split(","))
    scenarios = [s for s in args.scenarios.split(",") if s]
    runs: dict[str, list[dict[str, Any]]] = {}
    label = args.label or (str(args.source) if args.source else "this tree")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with fabric(args.source, args.agent_arg, args.target) as fab:
        hosts = [h.name for h in fab.topo.hosts]
        src, attacker, dst = hosts[0], hosts[2], hosts[3]
        send(fab, src, dst, "1M")
        for i in range(args.repeat):
            if "concurrent" in scenarios:
                r = concurrent(fab, clean_n, size, 0.0)
                print(f"[{i}] concurrent {clean_n}/pair: {r['verified']}/{r['transfers']} verified "
                      f"in {r['wall_s']} s {r['errors']}", flush=True)  # fmt: skip
                runs.setdefault("concurrent", []).append(r)
                r = concurrent(fab, flap_n, size, args.flap_s)
                print(f"[{i}] concurrent {flap_n}/pair + flap: {r['verified']}/{r['transfers']} verified "
                      f"in {r['wall_s']} s {r['errors']}", flush=True)  # fmt: skip
                runs.setdefault("concurrent_flap", []).append(r)
            if "cancel" in scenarios:
                r = cancel(fab, src, dst)
                print(f"[{i}] cancel: {json.dumps(r)}", flush=True)
                runs.setdefault("cancel", []).append(r)
            if "flood" in scenarios:
                r = flood(fab, src, dst, attacker, args.connect_rate, flood_size)
                print(f"[{i}] flood: {json.dumps(r)}", flush=True)
                runs.setdefault("flood", []).append(r)
    doc = {
        "benchmark": "agent under concurrent transfers, cancellation and a CONNECT flood (default fabric)",
        "label": label,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "seconds": round(time.monotonic() - started, 1),
        "runs": runs,
        "summary": summarise(runs),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / "agent_load.json").write_text(json.dumps(doc, indent=1, default=str))
    plot(doc, args.out / "agent_load.png")
    print(json.dumps(doc["summary"], indent=1))
    print(f"wrote {args.out / 'agent_load.json'} and {args.out / 'agent_load.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
