"""Near the end of a transfer, no packet goes onto a plane whose queue would hold it past the
others' last (issue 66, item 1: never slower than the same plane dead).

Four planes, two of them at 5 Gb/s inside the fabric (each T1 link at 1.25 Gb/s), one
connection: the queue weights (``plane_queues.py``) cut the slow planes to their floor, but
the rotation still gave them their share of the last window. Those packets waited out queues
700 us deep while the fast planes had nothing left to carry: the transfer ran at 0.41 of
capacity, 2.2 x as long as with the slow planes dead. A slow NIC port was already passed over
near the tail (``NicClock.late_at_tail``); a plane the queue weights hold now is too
(``PlaneQueueWeights.late_at_tail``).
"""

from __future__ import annotations

import pytest

from bench import sim_slow_plane
from mrc_host.core.plane_queues import PlaneQueueWeights


def _held_plane_1() -> PlaneQueueWeights:
    """Four planes timed at 21 us, plane 1's delay growing 40 us a sample: it is held."""
    q = PlaneQueueWeights(4)
    t = 0
    for i in range(20):
        t += 5_000
        for p in (0, 2, 3):
            q.heard(p, 21_000, t)
        q.heard(1, 21_000 + i * 40_000, t)
    return q


def _near_capacity_and_never_slower_than_dead(
    rates: tuple[float, ...], where: sim_slow_plane.Where, share_tol: float
) -> None:
    """At 0.8 of capacity or more, shares within ``share_tol``, within 5 % of the time the
    transfer takes with the slower planes dead."""
    slow = sim_slow_plane.run(rates, where, seed=1)
    dead = sim_slow_plane.run(rates, where, seed=1, variant="dead")
    assert slow["completed"]
    assert slow["of_capacity"] >= 0.8
    assert slow["share_error"] <= share_tol
    assert slow["time_us"] <= 1.05 * dead["time_us"]


def test_a_held_plane_is_late_only_when_the_others_would_finish_first() -> None:
    q = _held_plane_1()
    assert q.held == 0b10
    # a 1 MiB window, all but 1/193 of it on the three planes at 21 us: 50 GB/s
    assert q.late_at_tail(64 << 10, 1 << 20) == 0b10  # 64 KiB left: 1.3 us
    assert q.late_at_tail(64 << 20, 1 << 20) == 0  # 64 MiB left: 1.35 ms, plane 1's 0.52 ms is sooner


def test_slow_ports_finish_first_when_every_other_plane_is_one() -> None:
    """A plane slowed inside beside slow ports only: they carry the tail (two planes, 5 Gb/s
    inside and 75 at the port, took 3.4 x as long as with the slow one dead)."""
    q = _held_plane_1()
    assert q.late_at_tail(64 << 10, 1 << 20, slow_ports=0b1101) == 0b10
    assert q.late_at_tail(64 << 20, 1 << 20, slow_ports=0b1101) == 0


def test_no_plane_is_late_without_a_plane_to_finish_first() -> None:
    q = _held_plane_1()
    assert q.late_at_tail(64 << 10, 0) == 0  # no window yet
    assert PlaneQueueWeights(4).late_at_tail(0, 1 << 20) == 0  # no plane held


@pytest.mark.parametrize(
    ("rates", "where"),
    [
        # on main: of capacity, x the time with the slower planes dead
        ((5, 75), ("inside", "plane")),  # 0.26, 3.46 x
        ((10, 75), ("inside", "plane")),  # 0.71, 1.18 x
        ((5, 10, 75, 50), ("inside", "nic", "nic", "plane")),  # 0.30, 1.72 x
        ((10, 25, 50, 75), ("inside", "nic", "nic", "plane")),  # 0.41, 1.08 x
    ],
)
def test_a_plane_slow_inside_beside_slow_ports_only_is_weighed_and_passed_at_the_tail(
    rates: tuple[float, ...], where: sim_slow_plane.Where
) -> None:
    """No plane at full rate, every plane but those slowed inside at a slow port (shares
    within twice the bench's tolerance: 5 beside 75 is off by 0.068)."""
    _near_capacity_and_never_slower_than_dead(rates, where, 2 * sim_slow_plane.SHARE_TOL)


@pytest.mark.parametrize(
    ("rates", "where"),
    [
        # on main: of capacity, x the time with the slow planes dead
        ((100, 5, 5, 100), ("plane", "inside", "inside", "plane")),  # 0.41, 2.19 x
        ((5, 5, 100, 5), ("plane", "inside", "plane", "inside")),  # 0.66, 1.26 x
        ((100, 5, 5, 5), ("plane", "plane", "plane", "inside")),  # 0.57, 1.44 x
        (  # 0.73, 1.19 x
            (100, 25, 10, 100, 100, 5, 100, 100),
            ("plane",) * 2 + ("inside",) + ("plane",) * 2 + ("inside",) + ("plane",) * 2,
        ),
    ],
)
def test_a_plane_slow_inside_takes_no_packet_that_would_come_last(
    rates: tuple[float, ...], where: sim_slow_plane.Where
) -> None:
    _near_capacity_and_never_slower_than_dead(rates, where, sim_slow_plane.SHARE_TOL)
