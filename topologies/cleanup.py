"""``python -m topologies.cleanup`` (``make clean``): recover from a crashed testbed run.

For every run directory under ``runs/`` whose owner (the process that started it) is
gone, and for a given ``--run-dir`` whatever its state:

1. the processes in its ``pids`` register that still run — checked by pid *and* start
   time, so a recycled pid is never someone else's process killed — in the order
   captures, agents, controller, switches, Mininet node shells (their namespaces go
   with the last process in them);
2. stray ``simple_switch_grpc``, P4Runtime shims, agents, controllers and tcpdumps
   whose command line names a path inside that run directory;
3. the run's interfaces still in the root namespace (BMv2 switch ports), by the names
   in its ``topology.json``;
4. stale unix sockets in the run directory.

Then it prunes old run directories, keeping the newest ``--keep N`` (default
``$MRC_KEEP_RUNS``, else 10; ``all`` keeps every one) and then as many as fit ``--max-mb``
(default ``$MRC_RUNS_MAX_MB``, else 1024), never one still in use (``topologies.prune``).
It touches nothing that does not belong to one of our runs. ``--mininet`` additionally runs
Mininet's own ``mn -c`` cleanup, which removes *every* Mininet leftover on the
machine (other users' too): only for a machine of your own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from topologies import listener_guard
from topologies.rundir import LATEST, RUN_FILE, ProcessRecord, proc_cmdline, proc_start_time, read_records

KILL_ORDER = ("capture", "agent", "controller", "shim", "launcher", "bmv2", "node")
STRAY_MARKERS = (
    "simple_switch_grpc",
    "linux_target.shim_main",
    "mrc_host.agent",
    "controller.server",
    "tcpdump",
)
TERM_TIMEOUT = 5.0


@dataclass
class Report:
    killed: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    sockets: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    guards: list[int] = field(default_factory=list)  # Thrift ports whose nftables guard went

    def lines(self) -> list[str]:
        out = [f"killed {k}" for k in self.killed]
        out += [f"deleted link {link}" for link in self.links]
        out += [f"removed socket {s}" for s in self.sockets]
        out += [f"removed the Thrift guard of port {p} (nothing listens there)" for p in self.guards]
        out += [f"skipped {s}" for s in self.skipped]
        return out or ["nothing to clean"]


def owner_alive(run_dir: Path) -> bool:
    """Is the process that started this run still running (same pid and start time)?"""
    try:
        info = json.loads((run_dir / RUN_FILE).read_text())
        pid, start = int(info["pid"]), info.get("pid_start_time")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if pid == os.getpid():
        return False
    now = proc_start_time(pid)
    return now is not None and (start is None or now == start)


def _terminate_all(pids: Sequence[tuple[int, int | None, str]], report: Report, dry_run: bool) -> None:
    """SIGTERM each (pid, start time, label) still the same process, then SIGKILL what remains."""
    live = [(pid, st, label) for pid, st, label in pids if st is None or proc_start_time(pid) == st]
    live = [x for x in live if x[0] not in (os.getpid(), os.getppid())]
    for pid, _st, label in live:
        report.killed.append(f"{label} (pid {pid})")
        if not dry_run:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    if dry_run:
        return
    deadline = time.monotonic() + TERM_TIMEOUT
    while time.monotonic() < deadline:
        if all(proc_start_time(pid) != st for pid, st, _ in live if st is not None):
            break
        time.sleep(0.05)  # poll interval; the deadline bounds the wait
    for pid, st, _label in live:
        if st is None or proc_start_time(pid) == st:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def stray_processes(run_dir: Path) -> list[tuple[int, int | None, str]]:
    """Our kind of process whose command line names a path inside ``run_dir``."""
    needle = str(run_dir.resolve()) + "/"
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        cmd = proc_cmdline(pid)
        text = " ".join(cmd)
        if needle in text + "/" and any(m in text for m in STRAY_MARKERS):
            out.append((pid, proc_start_time(pid), f"stray {Path(cmd[0]).name} {text[:80]}"))
    return out


def root_links() -> set[str]:
    res = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    names = set()
    for line in res.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 2:
            names.add(parts[1].strip().split("@")[0])
    return names


def run_ifnames(run_dir: Path) -> set[str]:
    try:
        data = json.loads((run_dir / "topology.json").read_text())
    except (OSError, ValueError):
        return set()
    names = set()
    for link in data.get("links", []):
        for end in ("a", "b"):
            with contextlib.suppress(KeyError, TypeError):
                names.add(link[end]["ifname"])
    return names


def clean_run(run_dir: Path, report: Report, dry_run: bool = False) -> None:
    records: list[ProcessRecord] = read_records(run_dir)
    ordered = sorted(records, key=lambda r: KILL_ORDER.index(r.kind) if r.kind in KILL_ORDER else 99)
    for kind in KILL_ORDER:
        batch = [(r.pid, r.start_time, f"{r.kind} {r.name}") for r in ordered if r.kind == kind]
        if batch:
            _terminate_all(batch, report, dry_run)
    _terminate_all(stray_processes(run_dir), report, dry_run)
    for ifname in sorted(run_ifnames(run_dir) & root_links()):
        report.links.append(ifname)
        if not dry_run:
            subprocess.run(["ip", "link", "del", ifname], capture_output=True, check=False)
    for sock in run_dir.rglob("*.sock"):
        report.sockets.append(str(sock))
        if not dry_run:
            sock.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    from topologies.prune import (
        DEFAULT_KEEP_RUNS,
        KEEP_RUNS_ENV,
        PruneReport,
        keep_runs_from_env,
        parse_keep,
        prune_runs,
        runs_max_bytes_from_env,
    )

    ap = argparse.ArgumentParser(prog="python -m topologies.cleanup", description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("runs"), help="parent of the run directories")
    ap.add_argument("--run-dir", type=Path, action="append", default=[], help="clean this run even if live")
    ap.add_argument("--dry-run", action="store_true", help="say what would be done")
    ap.add_argument("--mininet", action="store_true", help="also Mininet's machine-wide `mn -c`")
    ap.add_argument(
        "--keep",
        metavar="N",
        help=f"then delete all but the newest N run directories (default ${KEEP_RUNS_ENV} or "
        f"{DEFAULT_KEEP_RUNS}; 'all' keeps every one); never one still in use",
    )
    ap.add_argument(
        "--max-mb",
        type=float,
        default=None,
        help="then delete the oldest run directories until all of them hold at most MB "
        "(default $MRC_RUNS_MAX_MB or 1024); never the newest, nor one still in use",
    )
    args = ap.parse_args(argv)
    try:
        keep = keep_runs_from_env() if args.keep is None else parse_keep(args.keep)
        max_bytes = runs_max_bytes_from_env() if args.max_mb is None else int(args.max_mb * (1 << 20))
    except ValueError as exc:
        ap.error(str(exc))
    if os.geteuid() != 0 and not args.dry_run:
        print("topologies.cleanup: needs root to end processes and delete links", file=sys.stderr)
        return 2
    report = Report()
    runs = [d.resolve() for d in args.run_dir]
    if not runs and args.runs.is_dir():
        for d in sorted(args.runs.iterdir()):
            if d.name == LATEST or d.is_symlink() or not d.is_dir():
                continue
            if owner_alive(d):
                report.skipped.append(f"{d} (its testbed is still running)")
                continue
            runs.append(d.resolve())
    for d in runs:
        clean_run(d, report, args.dry_run)
    report.guards = listener_guard.sweep(args.dry_run)
    pruned = PruneReport()
    if not args.run_dir:
        # after a dry run the leftovers are still there: say what pruning would find in use
        pruned = prune_runs(args.runs, keep, args.dry_run, max_bytes)
    if args.mininet and not args.dry_run:
        from mininet.clean import cleanup

        cleanup()
    for line in report.lines() + pruned.lines():
        print(("(dry run) " if args.dry_run else "") + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
