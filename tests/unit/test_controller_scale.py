"""Timed faults keep time with thousands active (issue 44, item 2).

The defect: one thread ran every expiry and flap and rewrote the whole state file each time, so
faults ran late in proportion to how many were active (2,256 faults of 50 ms still active 75 s
later). Here 4,000 faults are active (taken up from a state file, as after a restart), a
thousand of them expire together, and each is gone from the switches and from the state file
within seconds of its time even on a loaded 2-core machine; a 50 ms fault injected among them,
and 300 flaps at 50 ms, keep time as well. Bounds are generous on purpose (this machine is
shared): the defect misses them by tens of seconds. The figures themselves are
``bench/bench_controller_faults.py``'s.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_lab import served_clos

from controller.core import ControllerCore
from controller.entries import Exact, TableEntry
from controller.faults import Direction, FaultKind, FaultSpec
from controller.state_file import load_state, save_state
from controller.state_records import ControllerState, SavedFault
from mrc_fabric.topology import Topology

DEADLINE_S = 20.0
# how late an expiry may be seen on the switch: 0.15-0.34 s here at load 11 on 2 cores, 2.6 s at
# load 17 (the defect: tens of seconds); the bench measures the lateness itself
LATE_BOUND_S = 4.0
SHORT, LONG = 1000, 3000
START_ALLOWANCE_S = 6.0  # taking up 4,000 faults at load 6 on 2 cores took over 2 s


@pytest.fixture
def topo(tmp_path: Path) -> Iterator[Topology]:
    with served_clos(tmp_path, "sc") as topo:
        yield topo


def fault_ports(core: ControllerCore, switch: str) -> set[int]:
    """Ports of ``switch`` holding a fault entry, read back from the switch."""
    out = set()
    for e in core.pool[switch].read_entries():
        if isinstance(e, TableEntry) and e.table.endswith("fault"):
            port = e.field("port")
            out.add(port.value if isinstance(port, Exact) else -1)
    return out


def wait_until(cond: object, what: str, timeout: float = DEADLINE_S) -> float:
    """Seconds until ``cond()`` held (AssertionError after ``timeout``)."""
    t0 = time.monotonic()
    while not cond():  # type: ignore[operator]
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)
    return time.monotonic() - t0


def test_a_thousand_expiries_among_4000_active_faults_are_on_time(topo: Topology, tmp_path: Path) -> None:
    state = tmp_path / "controller-state.json"
    now = time.time()
    due = now + START_ALLOWANCE_S
    short_target = "sct0p0n0-sct1p0n0"  # port 2 of sct0p0n0: only the short faults are there
    faults = [
        SavedFault(f"f{i + 1}", FaultSpec(FaultKind.BLACKHOLE, short_target, Direction.A2B), now, due)
        for i in range(SHORT)
    ]
    faults += [
        SavedFault(
            f"f{SHORT + i + 1}",
            FaultSpec(FaultKind.LOSS, "sct0p1n1-sct1p1n0", Direction.BOTH, 0.001),
            now,
            now + 600 + i,
        )
        for i in range(LONG)
    ]
    save_state(state, ControllerState([s.name for s in topo.switches], faults, SHORT + LONG + 1))
    core = ControllerCore(topo, run_dir=tmp_path, state_file=state)
    core.start()
    try:
        assert core.wait_ready(DEADLINE_S) == []
        remaining = due - time.time()
        assert remaining > 0, "the start took longer than the faults' duration: nothing to measure"
        assert len(core.faults()) == SHORT + LONG
        assert 2 in fault_ports(core, "sct0p0n0")
        late = wait_until(lambda: 2 not in fault_ports(core, "sct0p0n0"), "the short faults to expire")
        assert late - remaining < LATE_BOUND_S, f"expired {late - remaining:.2f} s late"
        assert len(core.faults()) == LONG
        assert core.store is not None and core.store.compactions <= 2  # not a rewrite per expiry
        core.store.flush()
        assert len(load_state(state).faults) == LONG

        # and a 50 ms fault injected now, with 3,000 others active, is gone on time too
        t0 = time.monotonic()
        core.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "sct0p0n1-sct1p0n1", Direction.A2B, duration_s=0.05))
        wait_until(lambda: not fault_ports(core, "sct0p0n1"), "the 50 ms fault to expire")
        assert time.monotonic() - t0 - 0.05 < LATE_BOUND_S
    finally:
        core.stop()


def test_300_flaps_at_50_ms_keep_flapping_and_leave_expiries_on_time(topo: Topology, tmp_path: Path) -> None:
    core = ControllerCore(topo, run_dir=tmp_path, state_file=tmp_path / "controller-state.json")
    core.start()
    try:
        assert core.wait_ready(DEADLINE_S) == []
        core.install_routes()
        links = [lk.name for lk in topo.links if topo.has_switch(lk.a.node)]
        flaps = [core.inject_fault(FaultSpec(FaultKind.FLAP, links[i % len(links)], period_s=0.05))
                 for i in range(300)]  # fmt: skip
        time.sleep(0.3)
        core.syncer.idle(DEADLINE_S)
        toggles = {f.id: 0 for f in flaps}

        def count() -> None:
            for e in list(core.events.history):
                if e.kind in ("flap_up", "flap_down") and e.fault_id in toggles:
                    toggles[e.fault_id] += 1

        t0 = time.monotonic()
        core.inject_fault(FaultSpec(FaultKind.BLACKHOLE, "sch0-sct0p0n0", Direction.A2B, duration_s=0.05))
        wait_until(lambda: 1 not in fault_ports(core, "sct0p0n0"), "the 50 ms fault to expire")
        assert time.monotonic() - t0 - 0.05 < LATE_BOUND_S
        time.sleep(0.5)
        count()
        # every flap still toggles (the history keeps the last 1,000 events: ~0.5 s of them)
        assert sum(1 for n in toggles.values() if n) > 250, sorted(toggles.values())[:10]
    finally:
        core.stop()
