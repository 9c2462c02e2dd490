"""Supervisor: watch the processes a testbed started and restart the ones that die: switches,
the controller and the host agents.

A switch process (the Linux target's P4Runtime shim, or ``simple_switch_grpc``) that dies —
``kill -9``, a crash — would otherwise leave its switch without a control plane for the rest
of the run: faults on it fail and nobody says why. The supervisor polls every watched
process (``Popen.poll``, :data:`POLL_INTERVAL_S`); a dead switch process is restarted
through its node (``restart_shim`` / ``restart_switch``: the same command line, the same
socket or ports), its new pid goes into the run's ``pids`` register (so ``make clean``
finds it after a crash), and the controller, which reconnects to a switch whose stream
broke, then re-installs its pipeline and entries. Switches that share a shim process
(``topologies.shim_groups``) die with it together and are each restarted: the first restart
starts the process again with all of them, the kernels keeping their routes meanwhile. A
dead controller is started again the same way (``Testbed.restart_controller``); it reads the
routes and faults its predecessor saved (``controller/state_file.py``), so the switches it
reconnects to already match it. A dead agent is started again with its command
(``AgentProcess.restart``: it reads the host configuration the controller wrote); the
transfers it was running are lost with it, and their senders see the peer go quiet.

Every change is written to the run directory (``mrc_fabric.health``: ``events.jsonl`` and
``health.json``) and said on the console. A process that needs more than
:data:`RESTART_BUDGET` restarts within :data:`RESTART_WINDOW_S` is given up on (left down,
reported) rather than restarted in a tight loop; a restart that fails is retried with
backoff within the same budget.

The poll sleeps in ``select`` on each watched process's pidfd (Linux ≥ 5.3), so a death is
seen the moment it happens rather than up to a poll interval later: a killed controller is
answering again within about half a second.

Processes restarted on purpose by their owner (``sw.restart_shim()`` in a test) are left
alone: the supervisor only acts on a process object that is still the node's current one.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mrc_fabric.health import (
    EVENTS_FILE,
    EventKind,
    ProcessEvent,
    ProcessHealth,
    ProcessKind,
    ProcessState,
    append_event,
    write_health,
)
from topologies.procs import ChildProcess
from topologies.rundir import RunDir

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.2
EXIT_SETTLE_S = 0.01  # after a wake-up, before the check: never a busy loop
RESTART_BUDGET = 5  # restarts allowed per process within RESTART_WINDOW_S
RESTART_WINDOW_S = 60.0
RETRY_MIN_S = 0.5  # first retry after a failed restart; doubles up to RETRY_MAX_S
RETRY_MAX_S = 8.0
DETAIL_MAX = 300  # characters of an error kept in events and health

Process = ChildProcess


def exit_status(returncode: int) -> str:
    """``killed by SIGKILL`` / ``exit status 3``."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


@dataclass
class Watched:
    """One process under watch: how to find its current Popen and, for switches, restart it."""

    kind: ProcessKind
    name: str
    current: Callable[[], Process | None]
    restart: Callable[[], None] | None  # None: report only (agents)
    pid: int | None = None
    state: ProcessState = ProcessState.RUNNING
    restarts: int = 0
    since: float = field(default_factory=time.time)
    detail: str = ""
    attempts: list[float] = field(default_factory=list)  # monotonic times of restart attempts
    retry_at: float = 0.0  # monotonic: when to try again after a failed restart
    died_at: float = 0.0  # monotonic: when it was found dead (for the downtime)

    def health(self) -> ProcessHealth:
        return ProcessHealth(
            self.kind, self.name, self.pid, self.state, self.restarts, self.since, self.detail
        )


class Supervisor:
    """Polls watched processes in a thread of its own; see the module doc."""

    def __init__(
        self,
        run: RunDir,
        say: Callable[[str], None] = lambda _m: None,
        poll_interval_s: float = POLL_INTERVAL_S,
        restart_budget: int = RESTART_BUDGET,
        restart_window_s: float = RESTART_WINDOW_S,
    ) -> None:
        self.run = run
        self.say = say
        self.poll_interval_s = poll_interval_s
        self.restart_budget = restart_budget
        self.restart_window_s = restart_window_s
        self._watched: list[Watched] = []
        self._lock = threading.Lock()  # one check at a time (the thread, or a caller of check())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pidfds: dict[int, int] = {}  # pid -> its pidfd (the supervisor thread's own)
        self._wake_r, self._wake_w = os.pipe()  # stop() wakes the select

    # -- what to watch -----------------------------------------------------------------------------
    def watch(
        self,
        kind: ProcessKind,
        name: str,
        current: Callable[[], Process | None],
        restart: Callable[[], None] | None = None,
    ) -> Watched:
        proc = current()
        w = Watched(kind, name, current, restart, pid=None if proc is None else proc.pid)
        with self._lock:
            self._watched.append(w)
            self._write_health()
        return w

    def watch_switch(self, node: Any) -> Watched | None:
        """A Mininet switch node of either target (by what it has); None for other nodes."""
        if hasattr(node, "restart_shim"):  # topologies.linux_switch.LinuxSrv6Switch

            def shim() -> Process | None:
                proc: Process | None = getattr(node, "shim", None)
                return proc

            return self.watch(ProcessKind.SHIM, node.name, shim, node.restart_shim)
        if hasattr(node, "restart_switch"):  # topologies.bmv2_switch.Bmv2Switch

            def bmv2() -> Process | None:
                process = getattr(node, "process", None)
                proc: Process | None = None if process is None else process.proc
                return proc

            return self.watch(ProcessKind.BMV2, node.name, bmv2, node.restart_switch)
        return None

    def watch_agent(self, name: str, agent: Any) -> Watched:
        """A ``topologies.agents.AgentProcess``: restarted when it dies (``agent.restart``), or
        only reported when the object has no restart."""

        def proc() -> Process | None:
            p: Process | None = agent.proc
            return p

        return self.watch(ProcessKind.AGENT, name, proc, getattr(agent, "restart", None))

    # -- life cycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        (self.run.path / EVENTS_FILE).touch()  # there from the start (empty: nothing happened yet)
        self._thread = threading.Thread(target=self._loop, name="mrc-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (before the testbed ends the processes on purpose); waits for a restart
        under way to finish, so nothing is left half started."""
        self._stop.set()
        os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for fd in self._pidfds.values():
            os.close(fd)
        self._pidfds.clear()
        os.read(self._wake_r, 4096)

    def _loop(self) -> None:
        while True:
            self._wait_for_exit(self.poll_interval_s)
            if self._stop.is_set():
                return
            try:
                self.check()
            except Exception:  # a bug here must not end supervision silently
                log.exception("supervisor check failed")

    def _wait_for_exit(self, timeout: float) -> None:
        """Sleep until a watched process exits, stop() is called or ``timeout`` passes."""
        fds = [self._wake_r]
        live: set[int] = set()
        for w in list(self._watched):
            proc = w.current()
            if proc is None or w.state != ProcessState.RUNNING:
                continue
            live.add(proc.pid)
            if proc.pid not in self._pidfds:
                try:
                    self._pidfds[proc.pid] = os.pidfd_open(proc.pid)
                except (OSError, AttributeError):  # gone already (check() sees it), or no pidfd
                    return
            fds.append(self._pidfds[proc.pid])
        for pid in [p for p in self._pidfds if p not in live]:
            os.close(self._pidfds.pop(pid))
        if select.select(fds, [], [], timeout)[0]:
            # a process gone but not reaped yet by its owner would keep its pidfd readable
            self._stop.wait(EXIT_SETTLE_S)

    def health(self) -> list[ProcessHealth]:
        """Each watched process now (without waiting for a restart under way)."""
        return [w.health() for w in list(self._watched)]

    # -- one pass -----------------------------------------------------------------------------------
    def check(self) -> None:
        """Look at every watched process once; restart or report what died."""
        with self._lock:
            for w in self._watched:
                if self._stop.is_set():
                    return
                if w.state in (ProcessState.DEAD, ProcessState.GAVE_UP):
                    continue
                if w.state == ProcessState.RESTARTING:
                    if time.monotonic() >= w.retry_at:
                        self._restart(w)
                    continue
                proc = w.current()
                if proc is None:
                    continue  # its owner is starting or stopping it right now
                returncode = proc.poll()
                if returncode is None:
                    if proc.pid != w.pid:  # restarted by its owner: follow the new process
                        w.pid = proc.pid
                    continue
                if w.current() is not proc:
                    continue  # its owner replaced it meanwhile
                self._died(w, proc, returncode)

    def _died(self, w: Watched, proc: Process, returncode: int) -> None:
        status = exit_status(returncode)
        w.died_at = time.monotonic()
        self._event(EventKind.EXITED, w, proc.pid, status)
        if w.restart is None:
            where = f"; log: {self.run.agent_log(w.name)}" if w.kind == ProcessKind.AGENT else ""
            self._set(w, ProcessState.DEAD, f"{status} (not restarted){where}")
            self.say(f"{w.kind} {w.name} (pid {proc.pid}) {status}: reported, not restarted{where}")
            return
        self.say(f"{w.kind} {w.name} (pid {proc.pid}) {status}: restarting it")
        self._restart(w)

    def _restart(self, w: Watched) -> None:
        assert w.restart is not None
        now = time.monotonic()
        w.attempts = [t for t in w.attempts if now - t < self.restart_window_s]
        if len(w.attempts) >= self.restart_budget:
            why = f"{len(w.attempts)} restarts within {self.restart_window_s:.0f} s; left down"
            self._event(EventKind.GAVE_UP, w, None, why)
            self._set(w, ProcessState.GAVE_UP, why)
            self.say(f"{w.kind} {w.name}: {why}")
            return
        w.attempts.append(now)
        self._set(w, ProcessState.RESTARTING, "restarting")
        try:
            w.restart()
            proc = w.current()
            if proc is None or proc.poll() is not None:
                raise RuntimeError("it exited again while starting")
        except Exception as exc:  # reported, retried with backoff within the budget
            why = str(exc).strip().splitlines()[0][:DETAIL_MAX] if str(exc).strip() else type(exc).__name__
            failures = len(w.attempts)
            w.retry_at = time.monotonic() + min(RETRY_MIN_S * 2 ** (failures - 1), RETRY_MAX_S)
            self._event(EventKind.RESTART_FAILED, w, None, why)
            self._set(w, ProcessState.RESTARTING, f"restart failed: {why}")
            self.say(f"{w.kind} {w.name}: restart failed: {why}")
            return
        w.pid = proc.pid
        w.restarts += 1
        self.run.record(proc.pid, str(w.kind), w.name)
        down = time.monotonic() - w.died_at
        self._event(EventKind.RESTARTED, w, proc.pid, f"restart {w.restarts}, down {down:.2f} s")
        self._set(w, ProcessState.RUNNING, "")
        self.say(f"{w.kind} {w.name} restarted (pid {proc.pid}, down {down:.2f} s)")

    def _set(self, w: Watched, state: ProcessState, detail: str) -> None:
        w.state, w.detail, w.since = state, detail, time.time()
        self._write_health()

    def _event(self, kind: EventKind, w: Watched, pid: int | None, detail: str) -> None:
        event = ProcessEvent(time.time(), kind, w.kind, w.name, pid, detail)
        try:
            append_event(self.run.path, event)
        except OSError as exc:
            log.warning("cannot record %s: %s", event, exc)

    def _write_health(self) -> None:
        try:
            write_health(self.run.path, [w.health() for w in self._watched])
        except OSError as exc:
            log.warning("cannot write health: %s", exc)
