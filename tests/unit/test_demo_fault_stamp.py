"""The demo's fault stamp: taken before the controller's first table write, so EVs the first
switch's entry retires while the other writes are still landing count as the fault's, not as
"elsewhere" (topologies.watch._inject, topologies.demo's summary)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from mrc_fabric.ev import EV
from topologies.demo import changes_by_fault, print_summary
from topologies.watch import EvChange, PlannedFault, TransferWatch

EV_HIT = str(EV(plane=0, t1=0, entropy=1))
EV_OTHER = str(EV(plane=1, t1=1, entropy=2))


class FakeController:
    """Writes the fault's first entry at once, the rest later (as BMv2 does, switch by switch)."""

    def __init__(self) -> None:
        self.watch: TransferWatch | None = None
        self.first_write: float | None = None

    def inject(self, kind: str, target: str) -> Any:
        assert self.watch is not None
        self.first_write = self.watch._now()  # the first switch drops from here on
        while self.watch._now() <= self.first_write:  # the other switches' writes take time
            pass
        return SimpleNamespace(id="f1", entries=["t0a:fault:1 drop", "t1a:fault:2 drop"])


def injected(controller: FakeController) -> PlannedFault:
    rows = [{"ev": EV_HIT, "peer": "h3", "conn": "send", "state": "GOOD", "lost": 0, "plane": 0, "t1": 0}]
    client = SimpleNamespace(evs=lambda: rows)
    tb = SimpleNamespace(controller=controller, agent=lambda _name: SimpleNamespace(client=client))
    fault = PlannedFault("blackhole", "t0a-t1a", 0.0, label="black hole t0a-t1a")
    watch = TransferWatch(tb, "h0", "h3", 1000, faults=[fault])
    watch._t0 = time.monotonic() - 1.0
    controller.watch = watch
    watch._inject()
    return fault


def summary_input(fault: PlannedFault, changes: list[EvChange]) -> dict[str, Any]:
    row = {
        "label": fault.label,
        "injected_at": fault.injected_at,
        "landed_at": fault.landed_at,
        "acked_at_injection": 500,
        "data_packets_lost": 4,
        "switch_fault_drops": 6,
        "evs_through_it": [EV_HIT],
        "ev_states_at_injection": {EV_HIT: "GOOD"},
        "error": "",
    }
    summary = {"ok": True, "verified": True, "seconds": 2.0, "retransmissions": 4}
    run = {"summary": summary, "wall_s": 2.0, "bytes_per_plane": {"0": 1}, "bytes_per_t1": {"t1a": 1}}
    faulted = {
        **run,
        "faults": [row],
        "ev_changes": [vars(c) for c in changes],
        "evs": [{"ev": EV_HIT, "final_state": "ASSUMED_BAD"}],
    }
    return {
        "target": "bmv2",
        "target_reason": "test",
        "src": "h0",
        "dst": "h3",
        "size": 1000,
        "mode": "mrc",
        "clean": {**run, "faults": [], "ev_changes": [], "evs": []},
        "faulted": faulted,
        "recovery_after_clear_s": 0.5,
        "ev_states_after_clear": {EV_HIT: "GOOD"},
    }


def test_the_stamp_is_taken_before_the_first_write_and_the_landing_after_the_last() -> None:
    ctl = FakeController()
    fault = injected(ctl)
    assert ctl.first_write is not None and fault.injected_at is not None and fault.landed_at is not None
    assert fault.injected_at <= ctl.first_write < fault.landed_at
    assert fault.fault_id == "f1" and fault.switches == ["t0a", "t1a"]


def test_an_ev_retired_by_the_first_write_is_the_faults_not_elsewhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ctl = FakeController()
    fault = injected(ctl)
    assert ctl.first_write is not None
    retired = EvChange(ctl.first_write, EV_HIT, 0, 0, "GOOD", "ASSUMED_BAD", reason="loss")
    unrelated = EvChange(ctl.first_write, EV_OTHER, 1, 1, "GOOD", "ASSUMED_BAD", reason="loss")
    r = summary_input(fault, [retired, unrelated])
    by_fault, others = changes_by_fault(r["faulted"]["ev_changes"], r["faulted"]["faults"])
    assert [[e["ev"] for e in mine] for _f, mine in by_fault] == [[EV_HIT]]
    assert [e["ev"] for e in others] == [EV_OTHER]
    print_summary(r)
    out = capsys.readouterr().out
    assert "no change recorded after the fault" not in out
    assert f"EV {EV_HIT} (plane 0, T1 0)" in out and "elsewhere: 1 retirements" in out
    assert f"tables written by {fault.landed_at:.2f} s" in out


def test_a_change_before_the_request_stays_elsewhere() -> None:
    fault = injected(FakeController())
    assert fault.injected_at is not None
    before = EvChange(fault.injected_at - 0.01, EV_HIT, 0, 0, "GOOD", "ASSUMED_BAD")
    r = summary_input(fault, [before])
    by_fault, others = changes_by_fault(r["faulted"]["ev_changes"], r["faulted"]["faults"])
    assert by_fault[0][1] == [] and [e["ev"] for e in others] == [EV_HIT]


def test_a_fault_the_controller_refused_has_no_stamp() -> None:
    class Refusing(FakeController):
        def inject(self, kind: str, target: str) -> Any:
            raise RuntimeError("no such link")

    fault = injected(Refusing())
    assert fault.injected_at is None and fault.landed_at is None and "no such link" in fault.error
