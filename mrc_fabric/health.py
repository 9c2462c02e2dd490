"""Health of a run's processes, as the testbed's supervisor records it in the run directory.

The testbed (``topologies.supervisor``) watches the switch processes (P4Runtime shims,
``simple_switch_grpc``) and the host agents it started. What it sees goes into two files
of the run directory, which anyone may read without talking to the testbed (``mrcctl
health``, the CLI, a test):

- ``events.jsonl``: one :class:`ProcessEvent` per line, appended as things happen
  (a process exited, was restarted, could not be restarted, or restarted too often);
- ``health.json``: a list of :class:`ProcessHealth`, one per watched process, replaced
  atomically on every change (a reader never sees half a file).

A switch process that dies is restarted with the same command line; the controller then
finds the switch reachable again and re-installs its pipeline and entries. A dead agent
is reported, not restarted (its transfers died with it).
"""

from __future__ import annotations

import enum
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"
HEALTH_FILE = "health.json"


class ProcessKind(enum.StrEnum):
    SHIM = "shim"  # Linux target: linux_target.shim_main in the switch's namespace
    BMV2 = "bmv2"  # BMv2 target: simple_switch_grpc
    AGENT = "agent"  # mrc serve in a host
    CONTROLLER = "controller"  # mrc-controller (controller.server)
    TESTBED = "testbed"  # the testbed process itself (topologies.testbed)


class ProcessState(enum.StrEnum):
    RUNNING = "running"
    RESTARTING = "restarting"  # it died; a new one is starting
    DEAD = "dead"  # it died and is not restarted (agents)
    GAVE_UP = "gave_up"  # it died too often, or would not start again: left down


class EventKind(enum.StrEnum):
    EXITED = "process_exited"
    RESTARTED = "process_restarted"
    RESTART_FAILED = "restart_failed"
    GAVE_UP = "restarts_given_up"
    THREAD_ERROR = "thread_error"  # an exception ended a background thread (mrc_fabric.thread_errors)


@dataclass(frozen=True)
class ProcessEvent:
    time: float  # Unix time
    kind: EventKind
    process: ProcessKind
    name: str  # the switch or host it belongs to
    pid: int | None  # the process the event is about (for RESTARTED: the new one)
    detail: str  # exit status, downtime, the error

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessEvent:
        pid = data.get("pid")
        return cls(
            float(data["time"]),
            EventKind(data["kind"]),
            ProcessKind(data["process"]),
            str(data["name"]),
            None if pid is None else int(pid),
            str(data.get("detail", "")),
        )


@dataclass(frozen=True)
class ProcessHealth:
    process: ProcessKind
    name: str
    pid: int | None
    state: ProcessState
    restarts: int  # how many times it was restarted in this run
    since: float  # Unix time of the last change of state
    detail: str = ""  # why it is in this state (for anything but RUNNING)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProcessHealth:
        pid = data.get("pid")
        return cls(
            ProcessKind(data["process"]),
            str(data["name"]),
            None if pid is None else int(pid),
            ProcessState(data["state"]),
            int(data["restarts"]),
            float(data["since"]),
            str(data.get("detail", "")),
        )


def append_event(run_dir: Path, event: ProcessEvent) -> None:
    """One line onto ``events.jsonl``, flushed to disk (it is read after crashes too)."""
    with open(run_dir / EVENTS_FILE, "a") as f:
        f.write(json.dumps(asdict(event)) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_events(run_dir: Path) -> list[ProcessEvent]:
    """Every well-formed line of ``events.jsonl`` (a torn last line from a crash is skipped)."""
    try:
        lines = (run_dir / EVENTS_FILE).read_text().splitlines()
    except OSError:
        return []
    out: list[ProcessEvent] = []
    for line in lines:
        try:
            out.append(ProcessEvent.from_json(json.loads(line)))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def write_health(run_dir: Path, entries: list[ProcessHealth]) -> None:
    """Replace ``health.json`` atomically (write a temporary file, then rename it)."""
    tmp = run_dir / f".{HEALTH_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps([asdict(e) for e in entries], indent=1) + "\n")
    os.replace(tmp, run_dir / HEALTH_FILE)


def read_health(run_dir: Path) -> list[ProcessHealth]:
    """The last snapshot the supervisor wrote; empty when there is none (or it is unreadable)."""
    try:
        data = json.loads((run_dir / HEALTH_FILE).read_text())
        return [ProcessHealth.from_json(d) for d in data]
    except (OSError, ValueError, KeyError, TypeError):
        return []
