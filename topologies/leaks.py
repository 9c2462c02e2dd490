"""What a finished run left behind: processes, network namespaces, links, sockets.

Used by the tests after every teardown and by ``python -m topologies.leaks <run_dir>``.
Only things that belong to the run are looked at: the processes in its ``pids``
register (same pid *and* start time), processes whose command line names the run
directory, the namespaces its nodes had, root-namespace links with the run's names.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from topologies.cleanup import run_ifnames, stray_processes
from topologies.rundir import proc_start_time, read_records


def live_namespaces(wanted: Iterable[str], started_before: int | None = None) -> set[str]:
    """Which of the ``net:[inode]`` namespaces some process on the machine is still in.

    The kernel reuses a namespace's inode number once the namespace is gone, so another
    Mininet user's new node may show up under one of ours. With ``started_before`` (clock
    ticks since boot, :func:`topologies.rundir.boot_ticks` taken when the teardown began)
    a namespace only counts when a process in it started before then: every process we
    put in our namespaces did, and none of a namespace made after ours died can have.
    """
    wanted = set(wanted)
    found: set[str] = set()
    if not wanted:
        return found
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ns = os.readlink(entry / "ns" / "net")
        except OSError:
            continue
        if ns in wanted and ns not in found:
            if started_before is not None:
                start = proc_start_time(int(entry.name))
                if start is None or start >= started_before:
                    continue
            found.add(ns)
    return found


def root_links_with_prefix(prefix: str) -> list[str]:
    res = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    out = []
    for line in res.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 2:
            name = parts[1].strip().split("@")[0]
            if prefix and name.startswith(prefix):
                out.append(name)
    return out


def leftovers(
    run_dir: Path, namespaces: Iterable[str] = (), prefix: str = "", started_before: int | None = None
) -> list[str]:
    """Everything of the run still around, described; empty when the teardown was clean.

    ``started_before``: see :func:`live_namespaces` (pass it whenever other Mininet users may
    be creating namespaces on this machine).
    """
    run_dir = Path(run_dir).resolve()
    out = [f"process {r.kind} {r.name} pid {r.pid}" for r in read_records(run_dir) if r.alive()]
    out += [f"process {label} pid {pid}" for pid, _st, label in stray_processes(run_dir)]
    out += [f"namespace {ns}" for ns in sorted(live_namespaces(namespaces, started_before))]
    links = set(root_links_with_prefix(prefix)) if prefix else set()
    names = run_ifnames(run_dir)
    res = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    for line in res.stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 2 and parts[1].strip().split("@")[0] in names:
            links.add(parts[1].strip().split("@")[0])
    out += [f"link {name}" for name in sorted(links)]
    out += [f"socket {s}" for s in sorted(run_dir.rglob("*.sock"))]
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m topologies.leaks RUN_DIR [PREFIX]", file=sys.stderr)
        return 2
    found = leftovers(Path(args[0]), prefix=args[1] if len(args) > 1 else "")
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
