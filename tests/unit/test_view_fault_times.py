"""A replay shows each fault from its injection event on (mrc_view.replay.faults_from_injection).

A live recording has the controller's event at the injection and the fault list read at the
collector's next poll, tens of ms later; a jump to the fault's time must show it."""

from __future__ import annotations

from typing import Any

from mrc_view.replay import Replay, faults_from_injection

HEAD: dict[str, Any] = {"k": "header", "t": 0.0}


def fault(fid: str, link: str) -> dict[str, Any]:
    return {"id": fid, "kind": "blackhole", "target": link, "links": [link], "switches": []}


def event(t: float, fid: str) -> dict[str, Any]:
    return {"k": "event", "t": t, "kind": "fault_injected", "fault": fid, "text": fid, "level": "warn"}


def ids(replay: Replay, t: float) -> list[str]:
    return [f["id"] for f in replay.snapshot_at(t).faults]


def test_each_fault_is_in_the_state_at_its_event() -> None:
    a, b = fault("f1", "x-y"), fault("f2", "y-z")
    records = [
        {"k": "sample", "t": 0.0},
        event(1.0, "f1"),
        {"k": "sample", "t": 1.02},
        {"k": "faults", "t": 1.05, "faults": [a]},
        event(2.0, "f2"),
        {"k": "faults", "t": 2.04, "faults": [a, b]},
        {"k": "faults", "t": 3.0, "faults": [b]},  # f1 cleared
        {"k": "faults", "t": 4.0, "faults": []},
    ]
    replay = Replay(HEAD, records)
    assert replay.fault_times() == [1.0, 2.0]
    assert ids(replay, 0.999) == []
    assert ids(replay, 1.0) == ["f1"]  # before the list read at 1.05
    assert ids(replay, 1.03) == ["f1"]
    assert ids(replay, 2.0) == ["f1", "f2"]
    assert ids(replay, 3.0) == ["f2"] and ids(replay, 4.0) == []
    assert replay.times == sorted(replay.times)


def test_records_without_events_or_already_in_step_are_left_alone() -> None:
    a = fault("f1", "x-y")
    plain = [{"k": "faults", "t": 1.0, "faults": [a]}, {"k": "sample", "t": 2.0}]
    assert faults_from_injection(plain) is plain
    same_time = [event(1.0, "f1"), {"k": "faults", "t": 1.0, "faults": [a]}]
    assert faults_from_injection(same_time) is same_time
    unknown = [event(1.0, "f9"), {"k": "faults", "t": 1.1, "faults": [a]}]  # no event names f1
    assert faults_from_injection(unknown) is unknown
