"""The testbed's supervisor on plain processes (no Mininet): a dead switch process is restarted
and recorded, a dead agent too, failed restarts are retried, a crash loop is given up."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mrc_fabric.health import EventKind, ProcessKind, ProcessState, read_events, read_health
from topologies import supervisor as sup
from topologies.rundir import RunDir, read_records
from topologies.supervisor import Supervisor, exit_status

DEADLINE_S = 10.0


def wait_for(cond: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if value := cond():
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class FakeSwitch:
    """Stands in for a switch node: a process, and a restart that starts the same command again."""

    def __init__(self, procs: list[subprocess.Popen[bytes]]) -> None:
        self.procs = procs
        self.fail_next = 0
        self.proc: subprocess.Popen[bytes] | None = self._spawn()

    def _spawn(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(["sleep", "600"])
        self.procs.append(proc)
        return proc

    def restart(self) -> None:
        if self.proc is not None:
            self.proc.wait()
        if self.fail_next:
            self.fail_next -= 1
            self.proc = None
            raise RuntimeError("the shim did not start: address in use\nmore lines")
        self.proc = self._spawn()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for p in started:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def run(tmp_path: Path) -> RunDir:
    return RunDir.create(tmp_path, latest=False)


def kill9(proc: subprocess.Popen[bytes] | None) -> int:
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    wait_for(lambda: proc.poll() is not None, "the process to die")
    return proc.pid


def test_a_killed_switch_process_is_restarted_recorded_and_reported(
    run: RunDir, procs: list[subprocess.Popen[bytes]]
) -> None:
    sw = FakeSwitch(procs)
    said: list[str] = []
    s = Supervisor(run, say=said.append)
    s.watch(ProcessKind.SHIM, "t1p0n0", lambda: sw.proc, sw.restart)
    s.check()
    assert [h.state for h in s.health()] == [ProcessState.RUNNING]
    old = kill9(sw.proc)
    s.check()
    assert sw.proc is not None and sw.proc.poll() is None and sw.proc.pid != old
    (h,) = s.health()
    assert (h.state, h.pid, h.restarts) == (ProcessState.RUNNING, sw.proc.pid, 1)
    assert read_health(run.path) == s.health()  # the file says the same
    events = read_events(run.path)
    assert [(e.kind, e.pid) for e in events] == [(EventKind.EXITED, old), (EventKind.RESTARTED, sw.proc.pid)]
    assert events[0].detail == "killed by SIGKILL" and events[0].name == "t1p0n0"
    assert [(r.pid, r.kind, r.name) for r in read_records(run.path)] == [(sw.proc.pid, "shim", "t1p0n0")]
    assert any("restarted" in line for line in said)


def test_a_dead_agent_is_restarted_and_reported(run: RunDir, procs: list[subprocess.Popen[bytes]]) -> None:
    agent = FakeSwitch(procs)  # an AgentProcess has the same proc / restart()
    s = Supervisor(run)
    s.watch_agent("h3", agent)
    pid = kill9(agent.proc)
    s.check()
    (h,) = s.health()
    assert agent.proc is not None and agent.proc.poll() is None and agent.proc.pid != pid
    assert (h.state, h.process, h.pid, h.restarts) == (
        ProcessState.RUNNING,
        ProcessKind.AGENT,
        agent.proc.pid,
        1,
    )
    assert [(e.kind, e.process, e.pid) for e in read_events(run.path)] == [
        (EventKind.EXITED, ProcessKind.AGENT, pid),
        (EventKind.RESTARTED, ProcessKind.AGENT, agent.proc.pid),
    ]


def test_a_dead_process_without_a_restart_is_reported_once(
    run: RunDir, procs: list[subprocess.Popen[bytes]]
) -> None:
    class Reported:
        proc: subprocess.Popen[bytes] | None = FakeSwitch(procs).proc

    s = Supervisor(run)
    s.watch_agent("h3", Reported())
    pid = kill9(Reported.proc)
    s.check()
    s.check()  # reported once
    (h,) = s.health()
    assert h.state == ProcessState.DEAD and h.restarts == 0
    assert "killed by SIGKILL" in h.detail and "agents/h3.log" in h.detail
    assert [(e.kind, e.process, e.pid) for e in read_events(run.path)] == [
        (EventKind.EXITED, ProcessKind.AGENT, pid)
    ]
    assert len(procs) == 1  # nothing was started again


def test_a_failed_restart_is_retried_with_backoff(
    run: RunDir, procs: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sup, "RETRY_MIN_S", 0.05)
    sw = FakeSwitch(procs)
    sw.fail_next = 2
    s = Supervisor(run, poll_interval_s=0.01)
    s.watch(ProcessKind.BMV2, "t0p0n0", lambda: sw.proc, sw.restart)
    s.start()
    try:
        kill9(sw.proc)
        wait_for(lambda: s.health()[0].restarts == 1, "the third attempt to succeed")
    finally:
        s.stop()
    kinds = [e.kind for e in read_events(run.path)]
    assert kinds == [
        EventKind.EXITED,
        EventKind.RESTART_FAILED,
        EventKind.RESTART_FAILED,
        EventKind.RESTARTED,
    ]
    failed = read_events(run.path)[1]
    assert failed.detail == "the shim did not start: address in use"  # first line only
    assert s.health()[0].state == ProcessState.RUNNING and sw.proc is not None and sw.proc.poll() is None


def test_a_crash_loop_is_given_up(run: RunDir, procs: list[subprocess.Popen[bytes]]) -> None:
    sw = FakeSwitch(procs)
    s = Supervisor(run, restart_budget=2, restart_window_s=600)
    s.watch(ProcessKind.SHIM, "t1p1n1", lambda: sw.proc, sw.restart)
    for _ in range(2):
        kill9(sw.proc)
        s.check()
    assert s.health()[0].restarts == 2
    last = kill9(sw.proc)
    s.check()
    (h,) = s.health()
    assert h.state == ProcessState.GAVE_UP and "left down" in h.detail
    assert read_events(run.path)[-1].kind == EventKind.GAVE_UP
    s.check()
    assert sw.proc is not None and sw.proc.pid == last  # left down: not started again
    assert len(procs) == 3


def test_a_process_its_owner_restarts_is_followed_not_restarted(
    run: RunDir, procs: list[subprocess.Popen[bytes]]
) -> None:
    sw = FakeSwitch(procs)
    s = Supervisor(run)
    s.watch(ProcessKind.SHIM, "t1p0n1", lambda: sw.proc, sw.restart)
    old = sw.proc
    assert old is not None
    sw.proc = None  # the owner's restart_shim(): stop, then start
    old.kill()
    old.wait()
    s.check()  # mid-restart: nothing to do
    sw.proc = sw._spawn()
    s.check()
    assert read_events(run.path) == []
    assert s.health()[0].pid == sw.proc.pid and len(procs) == 2


def test_stop_ends_watching(run: RunDir, procs: list[subprocess.Popen[bytes]]) -> None:
    sw = FakeSwitch(procs)
    s = Supervisor(run, poll_interval_s=0.01)
    s.watch(ProcessKind.SHIM, "t1p0n0", lambda: sw.proc, sw.restart)
    s.start()
    s.stop()
    kill9(sw.proc)
    s.check()  # a stopped supervisor leaves what the testbed ends on purpose alone
    assert len(procs) == 1 and read_events(run.path) == []


def test_exit_status_text() -> None:
    assert exit_status(-9) == "killed by SIGKILL"
    assert exit_status(3) == "exit status 3"
    assert exit_status(-200) == "killed by signal 200"
