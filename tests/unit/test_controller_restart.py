"""A controller that dies and starts again keeps the switches' tables: routes and faults.

The switches keep their entries when the controller process goes, and a new controller's
first act on each switch is to make its tables match the desired state. Without the state
file that desired state is empty, and the reconnect deletes every route (the control case
below shows it); with it, the new controller takes up the routes, the faults (same ids, the
flap still flapping, the expiry still due) and the fault numbering where the old one left off.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_lab import served_clos
from controller_lab import settled as settled_on

from controller.compiler import compile_routes
from controller.core import ControllerCore
from controller.entries import TableEntry
from controller.faults import Direction, FaultKind, FaultSpec
from controller.state_file import load_state
from controller.state_store import StateUnavailable
from mrc_fabric.topology import Topology

DEADLINE_S = 10.0


@pytest.fixture
def topo(tmp_path: Path) -> Iterator[Topology]:
    """The fabric's topology, its switches served in process while the test runs."""
    with served_clos(tmp_path, "cr") as topo:
        yield topo


def started(topo: Topology, tmp_path: Path, state: Path | None) -> ControllerCore:
    core = ControllerCore(topo, run_dir=tmp_path, state_file=state)
    core.start()
    assert core.wait_ready(DEADLINE_S) == []
    return core


def installed(topo: Topology, tmp_path: Path, state: Path | None) -> ControllerCore:
    """A controller that has installed the routes on every switch."""
    core = started(topo, tmp_path, state)
    core.install_routes()
    return core


def tables(core: ControllerCore) -> dict[str, set[TableEntry]]:
    return {name: set(core.pool[name].read_entries()) for name in core.pool.sessions}


def settled(core: ControllerCore, want: dict[str, set[TableEntry]]) -> dict[str, set[TableEntry]]:
    """The switches' tables once the new controller has reconciled every one (or the deadline)."""
    return settled_on(lambda: tables(core), want)


def persisted_fault_ids(core: ControllerCore, state: Path, want: set[str]) -> set[str]:
    """The fault ids in the state file once ``want`` are there (or the deadline). Adoption hands
    its records to the writer without waiting for the disk, switch by switch, so the file catches
    up with the controller's list a moment later, longer on a loaded machine."""
    assert core.store is not None
    deadline = time.monotonic() + DEADLINE_S
    while True:
        core.store.flush()
        got = {f.id for f in load_state(state).faults}
        if got >= want or time.monotonic() >= deadline:
            return got
        time.sleep(0.05)


def test_a_restarted_controller_keeps_routes_and_faults(topo: Topology, tmp_path: Path) -> None:
    state = tmp_path / "controller-state.json"
    old = installed(topo, tmp_path, state)
    hole = old.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "crt0p0n0-crt1p0n0"))
    flap = old.inject_fault(FaultSpec(FaultKind.FLAP, "crt0p1n0-crt1p1n1", period_s=30))
    timed = old.inject_fault(
        FaultSpec(FaultKind.LOSS, "crt0p0n1-crt1p0n1", Direction.BOTH, 0.5, duration_s=60)
    )
    before = tables(old)
    assert sum(len(v) for v in before.values()) > sum(len(e.entries) for e in compile_routes(topo).values())
    old.stop()  # as if killed: the switches keep their tables

    new = started(topo, tmp_path, state)
    try:
        assert {f.id for f in new.faults()} == {hole.id, flap.id, timed.id}
        restored = {f.id: f for f in new.faults()}[timed.id]
        assert abs(restored.expires_at - timed.expires_at) < 1e-6  # still due when it was
        assert settled(new, before) == before  # routes and fault entries, as they were
        # and nothing was written to get there: each switch already matched (no route deleted
        # and put back, so not one packet met a missing route)
        connected = [e for e in new.events.history if e.kind == "switch_connected"]
        assert len(connected) == len(topo.switches)
        assert all("pipeline kept; 0 updates" in e.message for e in connected), connected
        assert new.inject_fault(FaultSpec(FaultKind.LINK_DOWN, "crt0p1n1-crt1p1n0")).id == "f4"
        assert [f.id for f in load_state(state).faults] == [hole.id, flap.id, timed.id, "f4"]
        new.clear_fault(hole.id)
        assert hole.id not in {f.id for f in load_state(state).faults}
    finally:
        new.stop()


def test_without_the_state_a_new_controller_deletes_the_routes(topo: Topology, tmp_path: Path) -> None:
    """The defect the state file prevents: a fresh controller's desired state is empty."""
    old = installed(topo, tmp_path, None)
    assert all(tables(old).values())
    old.stop()
    new = started(topo, tmp_path, None)
    try:
        assert settled(new, {n: set() for n in new.pool.sessions}) == {n: set() for n in new.pool.sessions}
    finally:
        new.stop()


def test_an_expired_fault_is_not_restored(topo: Topology, tmp_path: Path) -> None:
    state = tmp_path / "controller-state.json"
    old = installed(topo, tmp_path, state)
    old.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "crt0p0n0-crt1p0n0", duration_s=0.3))
    old.stop()
    time.sleep(0.4)  # the fault's time runs out while no controller runs
    new = started(topo, tmp_path, state)
    try:
        assert new.faults() == []
    finally:
        new.stop()


def fault_tables(core: ControllerCore) -> dict[str, set[TableEntry]]:
    return {n: {e for e in es if e.table.endswith("fault")} for n, es in tables(core).items()}


@pytest.mark.parametrize("damage", ["empty", "torn", "garbage", "meteor"])
def test_a_damaged_state_file_starts_from_its_second_copy(
    topo: Topology, tmp_path: Path, damage: str
) -> None:
    state = tmp_path / "controller-state.json"
    old = installed(topo, tmp_path, state)
    faults = [old.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "crt0p0n0-crt1p0n0")),
              old.inject_fault(FaultSpec(FaultKind.FLAP, "crt0p1n0-crt1p1n1", period_s=30))]  # fmt: skip
    before = tables(old)
    old.stop()
    doc = state.read_bytes()
    bad = {"empty": b"", "torn": doc[: len(doc) // 2], "garbage": b"\x00\xff" * 99,
           "meteor": doc.replace(b'"routes_installed"', b'"meteor"')}[damage]  # fmt: skip
    state.write_bytes(bad)
    new = started(topo, tmp_path, state)
    try:
        assert new.recovery.source == "previous", new.recovery.notes
        assert any(e.kind == "state_recovered" for e in new.events.history)
        assert {f.id for f in new.faults()} == {f.id for f in faults}
        assert settled(new, before) == before
        assert (tmp_path / "controller-state.json.unreadable").read_bytes() == bad  # kept for a look
    finally:
        new.stop()


def test_with_no_readable_state_the_switches_tables_are_adopted_and_clear_all_clears_them(
    topo: Topology, tmp_path: Path
) -> None:
    """State file and its copy both gone to garbage: the controller still starts, keeps every
    route, takes the fault entries it finds as faults it can list, and ``clear --all`` takes
    every one of them away."""
    state = tmp_path / "controller-state.json"
    old = installed(topo, tmp_path, state)
    old.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "crt0p0n0-crt1p0n0", Direction.A2B))
    old.inject_fault(FaultSpec(FaultKind.LOSS, "crh0-crt0p0n0", Direction.BOTH, 0.25))
    old.inject_fault(FaultSpec(FaultKind.SWITCH_DOWN, "crt1p1n1"))
    old.inject_fault(FaultSpec(FaultKind.LINK_DOWN, "crt0p1n0-crt1p1n0"))
    before = tables(old)
    old.stop()
    for f in tmp_path.glob("controller-state.json*"):
        f.write_bytes(b"{")
    new = started(topo, tmp_path, state)
    try:
        assert new.recovery.source == "unreadable"
        assert settled(new, before) == before
        connected = [e for e in new.events.history if e.kind == "switch_connected"]
        assert all("0 updates" in e.message for e in connected), connected  # nothing rewritten
        adopted = new.faults()
        assert len(adopted) >= 4 and {e.kind for e in new.events.history} >= {
            "fault_adopted",
            "state_recovered",
        }
        assert {f.spec.kind for f in adopted} >= {FaultKind.BLACKHOLE, FaultKind.LOSS, FaultKind.SWITCH_DOWN}
        on_disk = persisted_fault_ids(new, state, {f.id for f in adopted})
        assert on_disk >= {f.id for f in adopted}  # and they are in the new state file
        new.clear_all()
        assert all(not v for v in fault_tables(new).values())
        assert {n: {e for e in v if not e.table.endswith("fault")} for n, v in before.items()} == tables(new)
    finally:
        new.stop()


def test_a_state_file_it_cannot_write_refuses_changes_until_it_can(topo: Topology, tmp_path: Path) -> None:
    """Its directory does not exist: the controller starts and answers, says so, and refuses
    every change (naming the file) without writing a switch; once the directory is there, the
    next change is made and is on disk."""
    state = tmp_path / "gone" / "controller-state.json"
    core = started(topo, tmp_path, state)
    try:
        assert any(e.kind == "state_unavailable" and str(state) in e.message for e in core.events.history)
        with pytest.raises(StateUnavailable, match=r"gone/controller-state\.json"):
            core.install_routes()
        with pytest.raises(StateUnavailable, match="change not made"):
            core.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "crt0p0n0-crt1p0n0"))
        assert core.faults() == [] and all(not v for v in tables(core).values())  # no switch written
        state.parent.mkdir()
        core.install_routes()
        fault = core.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "crt0p0n0-crt1p0n0"))
        assert [f.id for f in load_state(state).faults] == [fault.id]
        assert any(e.kind == "state_writable" for e in core.events.history)
    finally:
        core.stop()
