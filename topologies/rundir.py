"""One directory per testbed run, and the register of every process the run started.

Layout of ``runs/<timestamp>/`` (see docs/testbed.md)::

    topology.json          the fabric model (written when the net is up)
    hosts/<host>.json      agent configs (written by the controller when routes are installed)
    agents/<host>.log      agent logs; agents/<host>.sock their control sockets
    controller.log         mrc-controller's log; controller.sock its northbound API
    <switch>.shim.log      Linux target: P4Runtime shim logs (<switch>.p4rt.sock their sockets)
    <switch>.bmv2.log      BMv2 target: switch logs; pcap/<switch>/ per-port pcaps
    captures/*.pcap        captures taken on demand (CLI ``capture``)
    pids                   one JSON line per process started: pid, start time, kind, name
    run.json               how the run was started (options, target and why)

``runs/latest`` points at the newest run, which is where ``mrcctl`` looks by default.
A run directory is mode 0700: host configurations, logs, pcaps and every control socket in
it are root's alone. ``$MRC_RUN_GROUP`` names a group that may read it as well (0750), e.g.
for users who run ``mrc`` against agents started with ``--control-group``.
The ``pids`` register lets ``python -m topologies.cleanup`` recover from a crashed
run: a pid is only trusted together with its start time (``/proc/<pid>/stat`` field
22), so a recycled pid never gets someone else's process killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

PIDS_FILE = "pids"
RUN_GROUP_ENV = "MRC_RUN_GROUP"
RUN_FILE = "run.json"
LATEST = "latest"


def proc_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 overall


def boot_ticks() -> int:
    """Now, in the unit of :func:`proc_start_time` (clock ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def net_namespace(pid: int) -> str | None:
    """The network namespace of ``pid`` as ``net:[inode]``, or None."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def restrict(path: Path, group: str | None) -> None:
    """0700, or 0750 with ``group`` (a name or a number; KeyError if there is no such group)."""
    if group is None:
        os.chmod(path, 0o700)
        return
    import grp

    gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    os.chown(path, -1, gid)
    os.chmod(path, 0o750)


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    start_time: int
    kind: str  # node, shim, bmv2, controller, agent, capture
    name: str

    def alive(self) -> bool:
        """The very process recorded is still there (same pid and same start time)."""
        return proc_start_time(self.pid) == self.start_time


class RunDir:
    """A run directory and its process register."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        self._lock = threading.Lock()

    @classmethod
    def create(cls, root: Path | str = "runs", latest: bool = True) -> RunDir:
        """A new ``<root>/<UTC timestamp>[-n]/``; ``<root>/latest`` points at it when ``latest``."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        for n in range(1000):
            path = root / (stamp if n == 0 else f"{stamp}-{n}")
            try:
                path.mkdir(mode=0o700)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"{root}: no free run directory name for {stamp}")
        try:
            restrict(path, os.environ.get(RUN_GROUP_ENV) or None)
        except (KeyError, OSError):
            path.rmdir()
            raise
        run = cls(path)
        if latest:
            run.point_latest()
        return run

    def point_latest(self) -> None:
        """Atomically repoint ``<root>/latest`` (a relative symlink) at this run."""
        link = self.path.parent / LATEST
        tmp = self.path.parent / f".{LATEST}.{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.symlink_to(self.path.name)
        os.replace(tmp, link)

    # -- files ---------------------------------------------------------------------------------
    def sub(self, name: str) -> Path:
        path = self.path / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def controller_socket(self) -> Path:
        return self.path / "controller.sock"

    @property
    def controller_log(self) -> Path:
        return self.path / "controller.log"

    def agent_socket(self, host: str) -> Path:
        return self.sub("agents") / f"{host}.sock"

    def agent_log(self, host: str) -> Path:
        return self.sub("agents") / f"{host}.log"

    def host_config(self, host: str) -> Path:
        return self.path / "hosts" / f"{host}.json"

    def write_run_info(self, info: dict[str, Any]) -> None:
        (self.path / RUN_FILE).write_text(json.dumps(info, indent=2, default=str) + "\n")

    # -- process register ----------------------------------------------------------------------
    def record(self, pid: int, kind: str, name: str) -> ProcessRecord | None:
        """Append a process to ``pids``; None if it already exited (nothing to record)."""
        start = proc_start_time(pid)
        if start is None:
            return None
        rec = ProcessRecord(pid, start, kind, name)
        with self._lock, open(self.path / PIDS_FILE, "a") as f:
            f.write(json.dumps(asdict(rec)) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return rec

    def records(self) -> list[ProcessRecord]:
        return read_records(self.path)


def read_records(run_dir: Path) -> list[ProcessRecord]:
    """Every well-formed line of ``<run_dir>/pids`` (a torn last line from a crash is skipped)."""
    out: list[ProcessRecord] = []
    try:
        lines = (run_dir / PIDS_FILE).read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            d = json.loads(line)
            out.append(ProcessRecord(int(d["pid"]), int(d["start_time"]), str(d["kind"]), str(d["name"])))
        except (ValueError, KeyError, TypeError):
            continue
    return out
