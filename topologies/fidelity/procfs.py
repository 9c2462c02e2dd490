"""What the kernel says about CPU time: per thread, per machine, per network namespace.

Everything here reads ``/proc`` and nothing else, so a sample costs file reads, not
subprocesses (a monitor that loads the CPU it judges would judge itself):

- ``/proc/<pid>/task/<tid>/schedstat``: nanoseconds on a CPU, nanoseconds runnable but
  waiting for one (the run queue), and the number of times it was scheduled in. The
  waiting time is the scheduling delay that turns into packet delay in a software switch.
- ``/proc/stat``: the machine's busy and idle time, softirq included (the Linux target
  forwards in softirq, which no process owns).
- ``/proc/net/softnet_stat``: frames the kernel dropped because a CPU's input backlog was
  full (``netdev_max_backlog``) -- what a veth does when the receiving side cannot keep up.
- ``/proc/<node pid>/net/dev``: one network namespace's interface counters.
- ``/proc/pressure/cpu``: the time some runnable task waited for a CPU (PSI), machine-wide.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class TaskTimes:
    """One thread's cumulative schedstat line (nanoseconds, count)."""

    name: str
    cpu_ns: int
    wait_ns: int
    slices: int


def task_times(pid: int, names: dict[int, str] | None = None) -> dict[int, TaskTimes]:
    """Every thread of ``pid``: tid -> its times (empty when the process is gone).

    ``names`` caches thread names (``comm``) by tid, so a long run reads each name once.
    """
    out: dict[int, TaskTimes] = {}
    try:
        tids = os.listdir(PROC / str(pid) / "task")
    except OSError:
        return out
    for entry in tids:
        tid = int(entry)
        base = PROC / str(pid) / "task" / entry
        try:
            run, wait, slices = (int(x) for x in (base / "schedstat").read_text().split()[:3])
        except (OSError, ValueError):
            continue  # the thread ended between listdir and read
        name = names.get(tid) if names is not None else None
        if name is None:
            try:
                name = (base / "comm").read_text().strip()
            except OSError:
                name = "?"
            if names is not None:
                names[tid] = name
        out[tid] = TaskTimes(name, run, wait, slices)
    return out


@dataclass(frozen=True)
class MachineTimes:
    """The machine's cumulative CPU time in clock ticks (all CPUs), and its CPU count."""

    busy: int
    softirq: int
    total: int
    cpus: int


def machine_times() -> MachineTimes:
    """From the ``cpu`` line of /proc/stat: busy = everything but idle and iowait."""
    cpus = 0
    fields: list[int] = []
    for line in (PROC / "stat").read_text().splitlines():
        if line.startswith("cpu "):
            fields = [int(x) for x in line.split()[1:]]
        elif line.startswith("cpu"):
            cpus += 1
    # user nice system idle iowait irq softirq steal guest guest_nice (guest time is in user)
    total = sum(fields[:8])
    idle = fields[3] + fields[4]
    return MachineTimes(total - idle, fields[6], total, max(1, cpus))


def softnet_drops() -> int:
    """Frames dropped for a full per-CPU input backlog, summed over CPUs (machine-wide)."""
    total = 0
    with contextlib.suppress(OSError):
        for line in (PROC / "net" / "softnet_stat").read_text().splitlines():
            parts = line.split()
            if len(parts) > 1:
                total += int(parts[1], 16)
    return total


def cpu_pressure_us() -> int | None:
    """Total microseconds in which some runnable task waited for a CPU (None: no PSI here)."""
    try:
        line = (PROC / "pressure" / "cpu").read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    for part in line.split():
        if part.startswith("total="):
            return int(part[6:])
    return None


@dataclass(frozen=True)
class IfStats:
    """One interface's cumulative counters from ``net/dev``."""

    rx_bytes: int
    rx_packets: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_dropped: int


def interface_stats(node_pid: int | None, wanted: set[str] | None = None) -> dict[str, IfStats]:
    """Interfaces of the network namespace of process ``node_pid`` (None: this process's own).

    ``wanted`` keeps only those names (the root namespace holds everyone's interfaces).
    """
    path = PROC / ("self" if node_pid is None else str(node_pid)) / "net" / "dev"
    out: dict[str, IfStats] = {}
    try:
        lines = path.read_text().splitlines()[2:]
    except OSError:
        return out
    for line in lines:
        name, _, rest = line.partition(":")
        name = name.strip()
        if wanted is not None and name not in wanted:
            continue
        f = rest.split()
        if len(f) < 12:
            continue
        out[name] = IfStats(int(f[0]), int(f[1]), int(f[3]), int(f[8]), int(f[9]), int(f[11]))
    return out
