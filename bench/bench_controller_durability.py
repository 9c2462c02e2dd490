"""kill -9 of mrc-controller during inject/clear while its state's disk fills and drains:
``python -m bench.bench_controller_durability --out results/``.

Why: what the controller acknowledged must survive whatever happens to its process and its
disk, and what it refused must not come back. Each round starts ``mrc-controller`` (of this
tree, or of another checkout: ``--source DIR``) on a state file on a small disk, runs 6
callers injecting and clearing faults while a filler takes the disk's last free byte and gives
it back every 50-300 ms, and kills the controller with SIGKILL at a random moment. After each
restart it counts, against the ledger of acknowledged calls:

- ``lost``: acknowledged faults (not cleared since) that ListFaults no longer lists;
- ``back``: faults whose clear was acknowledged that ListFaults lists again;
- ``reused``: ids handed out a second time (for another fault);
- ``unexplained``: faults listed that no call in flight at the kill could have made;
- ``tables``: rounds whose switches' fault tables differ from what ListFaults says;
- ``refused``: calls answered UNAVAILABLE naming the state file (the disk was full).

The disk: ``tmpfs`` (root; default): a 64 KiB tmpfs mounted in a private mount namespace that a
holder process keeps (the controller runs in it by ``nsenter``; nothing is left mounted when
the holder goes); ``limit`` (no root): a file-size limit set on the controller (``prlimit``).
The switches are the Linux shim's P4Runtime service in a helper process (no kernel).
Writes ``controller_durability.json``.

    flock /tmp/mrc-live.lock .venv/bin/python -m bench.bench_controller_durability --out results/ \\
        [--rounds 20] [--disk tmpfs|limit] [--source /tmp/old-tree]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc

from bench.bench_controller_faults import OPTIONS, SWITCHES, write_doc
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from mrc_fabric.topology import Topology, build_clos

STATE = "controller-state.json"
REPO = Path(__file__).resolve().parent.parent
CALLERS = 6
DEADLINE_S = 60.0


class Disk(Protocol):
    """Where the state file lives, and a way to fill that place up and drain it again."""

    state_dir: Path
    wrap: tuple[str, ...]  # command prefix that runs the controller with this disk

    def attach(self, pid: int) -> None: ...
    def fill(self) -> None: ...
    def drain(self) -> None: ...
    def close(self) -> None: ...


class TmpfsDisk:
    """A ``size`` tmpfs at ``state_dir`` in a private mount namespace held by a sleeping process."""

    def __init__(self, state_dir: Path, size: str = "64k") -> None:
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        mount = f"mount -t tmpfs -o size={size},mode=0700 mrc-state {state_dir}"
        cmd = [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"{mount} && echo ready && exec sleep infinity",
        ]
        self.holder = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.holder.stdout is not None
        if self.holder.stdout.readline().strip() != "ready":
            self.close()
            raise RuntimeError(f"could not mount a tmpfs at {state_dir} (needs root)")
        self.wrap: tuple[str, ...] = ("nsenter", "-t", str(self.holder.pid), "-m", "--")
        self.inside = Path(f"/proc/{self.holder.pid}/root") / str(state_dir).lstrip("/")
        self._filler = self.inside / "filler"

    def attach(self, pid: int) -> None:
        pass

    def fill(self) -> None:
        """Take every free byte (what a write then needs, it does not find)."""
        try:
            with self._filler.open("ab") as f:
                for size in (1 << 16, 4096, 512, 1):
                    try:
                        while True:
                            f.write(b"\0" * size)
                            f.flush()
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise

    def drain(self) -> None:
        self._filler.unlink(missing_ok=True)

    def path(self, name: str) -> Path:
        """A file of the tmpfs as this process can read it."""
        return self.inside / name

    def close(self) -> None:
        if self.holder.poll() is None:
            self.holder.kill()
        self.holder.wait()


class LimitDisk:
    """No file of the controller's may grow past ``limit`` bytes while 'full' (``prlimit``)."""

    def __init__(self, state_dir: Path, limit: int = 200) -> None:
        self.state_dir = state_dir
        state_dir.mkdir(parents=True, exist_ok=True)
        self.wrap: tuple[str, ...] = ()
        self.limit = limit
        self.pid = 0
        self.full = False

    def attach(self, pid: int) -> None:
        self.pid = pid
        self._apply()

    def fill(self) -> None:
        self.full = True
        self._apply()

    def drain(self) -> None:
        self.full = False
        self._apply()

    def _apply(self) -> None:
        soft = self.limit if self.full else resource.RLIM_INFINITY
        with contextlib.suppress(ProcessLookupError, PermissionError):  # (the controller just died)
            resource.prlimit(self.pid, resource.RLIMIT_FSIZE, (soft, resource.RLIM_INFINITY))

    def path(self, name: str) -> Path:
        return self.state_dir / name

    def close(self) -> None:
        pass


class Lab:
    """Switches in a helper process; mrc-controller (of ``source``) on ``disk``, restarted at will."""

    def __init__(self, directory: Path, disk: Disk, source: Path | None = None, prefix: str = "kd") -> None:
        self.dir, self.disk, self.source = directory, disk, source
        self.topo = build_clos(
            2, 2, 2, 1, prefix=prefix, p4rt_address_format=f"unix:{directory}/{{name}}.sock"
        )
        self.topo.save(directory / "topology.json")
        cmd = [sys.executable, "-c", SWITCHES, str(directory / "topology.json")]
        self.switches = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.switches.stdout is not None and self.switches.stdout.readline().strip() == "ready"
        self.ctl: subprocess.Popen[bytes] | None = None
        self.channel = grpc.insecure_channel(f"unix:{directory}/controller.sock", options=OPTIONS)
        self.stub = pb_grpc.ControllerStub(self.channel)
        from linux_target.p4rt_client import P4RuntimeTestClient

        self.readers = {
            s.name: P4RuntimeTestClient(s.p4rt_address, s.device_id, 0) for s in self.topo.switches
        }
        self.log = open(directory / "controller.log", "ab")  # noqa: SIM115 (closed in close())

    def start(self) -> float:
        """Start the controller and wait until it answers; the seconds that took."""
        (self.dir / "controller.sock").unlink(missing_ok=True)
        cmd = [*self.disk.wrap, sys.executable, "-m", "controller.server", "--topology",
               str(self.dir / "topology.json"), "--state-file", str(self.disk.state_dir / STATE)]  # fmt: skip
        # (entering a mount namespace moves the working directory to its root: the tree is named)
        env = {**os.environ, "PYTHONPATH": str(self.source or REPO)}
        t0 = time.monotonic()
        self.ctl = subprocess.Popen(cmd, cwd=self.source, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.disk.attach(self.ctl.pid)
        deadline = t0 + DEADLINE_S
        while True:
            try:
                left = max(deadline - time.monotonic(), 0.1)
                self.stub.ListFaults(pb.ListFaultsRequest(), timeout=left, wait_for_ready=True)
                return time.monotonic() - t0
            except grpc.RpcError as exc:
                # the channel may still hold the killed controller's connection: the first call
                # on it fails ("Stream removed"), and the next one connects to the new controller
                if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() >= deadline:
                    raise

    def kill(self) -> None:
        if self.ctl is not None:
            self.ctl.kill()
            self.ctl.wait()

    def faults(self) -> dict[str, pb.Fault]:
        return {
            f.id: f for f in self.stub.ListFaults(pb.ListFaultsRequest(page_size=1000), timeout=30).faults
        }

    def reconciled(self) -> bool:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if all(s.primary for s in self.stub.GetHealth(pb.GetHealthRequest(), timeout=10).switches):
                return True
            time.sleep(0.05)
        return False

    def tables_match(self, faults: dict[str, pb.Fault]) -> bool:
        """The switches' fault tables are what ``faults`` write (read back, settling for a while)."""
        from controller.faults import fault_entries, resolve
        from mrc_fabric.fault_tables import FAULT_TABLES
        from mrc_fabric.p4info import default_index
        from mrc_p4rt.codec import decode_entry

        want = fault_entries([a for f in faults.values() for a in resolve(self.topo, spec_of(f.spec))])
        index = default_index()
        deadline = time.monotonic() + 10
        while True:
            got = {
                n: {decode_entry(index, e) for t in FAULT_TABLES for e in r.read_table(t)}
                for n, r in self.readers.items()
            }
            if all(got[n] == set(want.get(n, [])) for n in got):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def close(self) -> None:
        self.kill()
        for r in self.readers.values():
            r.close()
        self.channel.close()
        self.switches.kill()
        self.switches.wait()
        self.log.close()


def spec_of(s: pb.FaultSpec) -> Any:
    from controller.faults import Direction, FaultKind, FaultSpec
    from controller.northbound import KINDS

    kinds = {v: FaultKind(k) for k, v in KINDS.items()}
    dirs = {pb.BOTH: Direction.BOTH, pb.A_TO_B: Direction.A2B, pb.B_TO_A: Direction.B2A}
    return FaultSpec(kinds[s.kind], s.target, dirs[s.direction], s.probability, s.period_s, s.duration_s)


def specs(topo: Topology) -> list[pb.FaultSpec]:
    p = topo.switches[0].name[: -len("t0p0n0")]
    return [
        pb.FaultSpec(kind=pb.BLACKHOLE, target=f"{p}t0p0n0-{p}t1p0n0", direction=pb.A_TO_B),
        pb.FaultSpec(kind=pb.LOSS, target=f"{p}h0-{p}t0p0n0", probability=0.25),
        pb.FaultSpec(kind=pb.LINK_DOWN, target=f"{p}t0p1n1-{p}t1p1n0"),
        pb.FaultSpec(kind=pb.SWITCH_DOWN, target=f"{p}t1p0n1"),
        pb.FaultSpec(kind=pb.LOSS, target=f"{p}t0p1n0:2", direction=pb.B_TO_A, probability=0.5),
    ]


@dataclass
class Ledger:
    """Every acknowledged call, across rounds."""

    live: set[str] = field(default_factory=set)  # acknowledged, not cleared since
    cleared: set[str] = field(default_factory=set)  # whose clear was acknowledged
    ids: set[str] = field(default_factory=set)  # every id ever handed out or listed
    tally: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("injects", "clears", "refused", "in_flight", "lost", "back", "reused", "unexplained", "tables",
         "not_reconciled", "other_errors"), 0))  # fmt: skip
    restart_s: list[float] = field(default_factory=list)


class Round:
    """One round's callers: what they got acknowledged, refused, or had in flight at the kill."""

    def __init__(self, lab: Lab, ledger: Ledger, seed: int) -> None:
        self.lab, self.ledger, self.rng = lab, ledger, random.Random(seed)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.acked: list[tuple[str, str]] = []
        self.in_flight_injects = 0
        self.in_flight_clears: set[str] = set()
        self.refused = 0
        self.other: list[str] = []
        self.reused: list[str] = []

    def caller(self, k: int) -> None:
        rng = random.Random(self.rng.random())
        with self.lock:
            mine = sorted(self.ledger.live)[k::CALLERS]
        menu = specs(self.lab.topo)
        while not self.stop.is_set():  # (at most ~8 faults a caller: the state fits a small disk)
            clear = bool(mine) and (len(mine) > 8 or rng.random() < 0.45)
            fid = mine.pop(rng.randrange(len(mine))) if clear else ""
            try:
                if clear:
                    self.lab.stub.ClearFault(pb.ClearFaultRequest(id=fid), timeout=10)
                    with self.lock:
                        self.acked.append(("clear", fid))
                else:
                    f = self.lab.stub.InjectFault(pb.InjectFaultRequest(spec=rng.choice(menu)), timeout=10)
                    with self.lock:
                        if f.id in self.ledger.ids or any(f.id == i for _, i in self.acked):
                            self.reused.append(f.id)
                        self.acked.append(("fault", f.id))
                    mine.append(f.id)
            except grpc.RpcError as exc:
                details = exc.details() or ""
                if exc.code() == grpc.StatusCode.UNAVAILABLE and STATE in details:
                    with self.lock:
                        self.refused += 1
                    if clear:
                        mine.append(fid)
                    continue
                with self.lock:  # the controller died under the call: its outcome is unknown
                    if clear:
                        self.in_flight_clears.add(fid)
                    else:
                        self.in_flight_injects += 1
                    if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                        self.other.append(f"{exc.code().name}: {details[:120]}")
                return


def filler(disk: Disk, stop: threading.Event, rng: random.Random, full_first: bool = False) -> None:
    """Fill the disk and drain it again, every 50-300 ms, until ``stop`` (full from the
    start if ``full_first``)."""
    full = full_first
    if full:
        disk.fill()
    while not stop.wait(rng.uniform(0.05, 0.3)):
        if full:
            disk.drain()
        else:
            disk.fill()
        full = not full


def one_round(lab: Lab, ledger: Ledger, seed: int, full_first: bool = False) -> dict[str, Any]:
    rng = random.Random(seed)
    r = Round(lab, ledger, seed)
    stop_fill = threading.Event()
    threads = [threading.Thread(target=r.caller, args=(k,)) for k in range(CALLERS)]
    threads.append(threading.Thread(target=filler, args=(lab.disk, stop_fill, rng, full_first)))
    for th in threads:
        th.start()
    time.sleep(rng.uniform(0.5, 1.5))
    lab.kill()
    r.stop.set()
    stop_fill.set()
    for th in threads:
        th.join(timeout=30)
    if rng.random() < 0.5:
        lab.disk.drain()  # (else the next controller starts on a full disk)
    t = ledger.tally
    for op, fid in r.acked:
        if op == "fault":
            ledger.live.add(fid)
            ledger.ids.add(fid)
            t["injects"] += 1
        else:
            ledger.live.discard(fid)
            ledger.cleared.add(fid)
            t["clears"] += 1
    ledger.restart_s.append(lab.start())
    got = set(lab.faults())
    lost = ledger.live - got - r.in_flight_clears
    back = (got & ledger.cleared) - ledger.live
    unexplained = got - ledger.live - ledger.cleared - r.in_flight_clears
    reconciled = lab.reconciled()
    tables = reconciled and lab.tables_match(lab.faults())
    counts = {
        "acked": len(r.acked),
        "refused": r.refused,
        "in_flight": r.in_flight_injects + len(r.in_flight_clears),
        "lost": len(lost),
        "back": len(back),
        "reused": len(r.reused),
        "unexplained": max(0, len(unexplained) - r.in_flight_injects),
        "tables": 0 if tables else 1,
    }
    for k in ("refused", "in_flight", "lost", "back", "reused", "unexplained", "tables"):
        t[k] += counts[k]
    t["not_reconciled"] += 0 if reconciled else 1
    t["other_errors"] += len(r.other)
    ledger.live = got
    ledger.ids |= got
    ledger.cleared -= got
    return {**counts, "examples": sorted(lost)[:3] + sorted(back)[:3] + r.reused[:3] + r.other[:2]}


def kill_loop(lab: Lab, rounds: int, seed: int = 64, say: Any = None, max_rounds: int = 0) -> dict[str, Any]:
    """``rounds`` rounds; the tally over all of them and each round's counts. The first round
    starts on a full disk: a loop that never met one proves nothing about it, and whether a
    later fill lands while a change is written is the scheduler's choice. With ``max_rounds``,
    rounds go on (up to that many) until at least one change was refused."""
    ledger = Ledger()
    lab.disk.drain()
    lab.start()
    if not lab.reconciled():
        raise RuntimeError("the switches did not all come up")
    lab.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=DEADLINE_S)
    per_round = []
    for k in range(max(rounds, max_rounds)):
        if k >= rounds and ledger.tally["refused"]:
            break
        per_round.append(one_round(lab, ledger, seed * 1000 + k, full_first=k == 0))
        if say is not None:
            say(f"  round {k + 1}/{rounds}: {per_round[-1]}")
    lab.disk.drain()
    return {"tally": ledger.tally, "rounds": per_round, "faults_at_end": len(ledger.live),
            "restart_s": {"median": round(statistics.median(ledger.restart_s), 2),
                          "max": round(max(ledger.restart_s), 2)}}  # fmt: skip


def run(kind: str, rounds: int, source: Path | None, seed: int) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix="bcd-"))
    disk: TmpfsDisk | LimitDisk = (
        TmpfsDisk(directory / "state") if kind == "tmpfs" else LimitDisk(directory / "state")
    )
    lab = None
    try:
        lab = Lab(directory, disk, source)
        return kill_loop(lab, rounds, seed, say=lambda line: print(line, flush=True))
    finally:
        if lab is not None:
            lab.close()
        disk.close()
        shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.bench_controller_durability", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--disk", choices=("tmpfs", "limit"), default="tmpfs" if os.geteuid() == 0 else "limit")
    ap.add_argument("--seed", type=int, default=64)
    ap.add_argument(
        "--source", type=Path, action="append", default=[], help="also run this checkout's controller"
    )
    args = ap.parse_args(argv)
    runs = {}
    for source in [None, *args.source]:
        label = "this tree" if source is None else str(source)
        print(f"{label}:", flush=True)
        runs[label] = run(args.disk, args.rounds, source, args.seed)
        print(f"  tally: {runs[label]['tally']}", flush=True)
    path = args.out / "controller_durability.json"
    write_doc(path, "controller kill -9 loop with a filling disk", args, runs)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
