"""Shim groups on the testbed's side: how a fabric is cut into groups, and a member's handle.

Why: several switches share one shim process (``topologies.shim_groups``); each switch still
keeps a ``Popen``-like handle the supervisor and the teardown use. Its status must be its own
when it alone stopped or failed, the process's when the process died; SIGTERM must stop that
switch alone, SIGKILL and SIGUSR1 reach the process. In the process, each switch's log gets
its own threads' records and the group's log the rest (``linux_target.shim_group``).
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Any

import pytest

from linux_target.shim_group import ShimGroup, _ThreadsOf
from topologies.shim_groups import MemberShim, groups_of, switches_per_shim


def test_groups_cut_the_switches_in_order_and_leave_a_lone_switch_alone() -> None:
    names = [f"s{i}" for i in range(7)]
    assert groups_of(names, 3) == [["s0", "s1", "s2"], ["s3", "s4", "s5"]]  # s6: a process of its own
    assert groups_of(names, 16) == [names]
    assert groups_of(names, 1) == []


def test_switches_per_shim_from_the_argument_the_environment_or_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MRC_SWITCHES_PER_SHIM", raising=False)
    assert switches_per_shim() == 16
    monkeypatch.setenv("MRC_SWITCHES_PER_SHIM", "4")
    assert switches_per_shim() == 4
    assert switches_per_shim(1) == 1
    with pytest.raises(ValueError):
        switches_per_shim(0)


class FakeProcess:
    pid = 4242

    def __init__(self) -> None:
        self.code: int | None = None
        self.signals: list[int] = []

    def poll(self) -> int | None:
        return self.code

    def wait(self, timeout: float | None = None) -> int:
        assert self.code is not None, "the tests only wait on a process that is gone"
        return self.code

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)


class FakeGroup:
    def __init__(self) -> None:
        self.stopped: list[str] = []

    def stop_member(self, name: str) -> None:
        self.stopped.append(name)


def member(tmp_path: Path) -> tuple[MemberShim, FakeGroup, FakeProcess]:
    group, process = FakeGroup(), FakeProcess()
    handle = MemberShim(group, "sw1", process, tmp_path / "sw1.shim.exit")  # type: ignore[arg-type]
    return handle, group, process


def test_a_member_has_its_own_status_or_the_process_s(tmp_path: Path) -> None:
    handle, _group, process = member(tmp_path)
    assert handle.pid == 4242 and handle.poll() is None
    (tmp_path / "sw1.shim.exit").write_text("2\n")  # it failed to start; the process serves on
    assert handle.poll() == 2 and handle.wait(timeout=0) == 2
    (tmp_path / "sw1.shim.exit").unlink()
    other, _group, process = member(tmp_path)
    process.code = -signal.SIGKILL
    assert other.poll() == -signal.SIGKILL  # the process died: every member with it


def test_sigterm_stops_the_member_alone_and_sigkill_reaches_the_process(tmp_path: Path) -> None:
    handle, group, process = member(tmp_path)
    handle.terminate()
    assert group.stopped == ["sw1"] and process.signals == []
    handle.kill()
    handle.send_signal(signal.SIGUSR1)
    assert process.signals == [signal.SIGKILL, signal.SIGUSR1]
    (tmp_path / "sw1.shim.exit").write_text("0\n")
    handle.terminate()  # stopped already: nothing more is sent
    assert group.stopped == ["sw1"]


def test_each_switch_logs_its_own_threads_records(tmp_path: Path) -> None:
    group = ShimGroup()
    group.members = {"sw1": Any, "sw2": Any}  # type: ignore[dict-item]
    mine, others = _ThreadsOf(group, "sw1"), _ThreadsOf(group, None)

    def record(thread: str) -> logging.LogRecord:
        r = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
        r.threadName = thread
        return r

    assert mine.filter(record("sw1/p4rt_0")) and not others.filter(record("sw1/ns"))
    assert not mine.filter(record("sw2/ns")) and not mine.filter(record("sw1"))
    assert others.filter(record("MainThread")) and others.filter(record("gone/ns"))


def test_a_switch_served_already_is_refused_and_gets_no_second_log(tmp_path: Path) -> None:
    group = ShimGroup()
    group.members = {"sw1": Any}  # type: ignore[dict-item]
    handlers = list(logging.getLogger().handlers)
    argv = ["--name", "sw1", "--device-id", "1", "--listen", f"unix:{tmp_path}/sw1.sock"]
    req = {"argv": argv, "node_pid": 1, "log": str(tmp_path / "sw1.log"), "exit": str(tmp_path / "sw1.exit")}
    assert "served already" in str(group.start(req))
    assert logging.getLogger().handlers == handlers
