"""No plane at full rate: a plane slowed inside is no overflow for a slow NIC port (issue 66,
item 1: goodput at least 0.9 of capacity with any mix of plane rates).

The rotation passes over a slow NIC port once it holds its part of the NIC's backlog, and
gives the packet to a plane that can take it. With no plane at full rate that plane was the
one slowed inside, already held down by its queue: it got every byte the window had beyond
the port, its weight fell towards its floor and its queue overflowed all the same. Two planes,
60 Gb/s inside beside 10 at the port, reached 0.77 of capacity, 50 inside beside 75 at the
port 0.76. New data now waits while every plane up is such a port or a held plane with more
in flight for its weight than the port (``PlanePassing.full``,
``PlaneQueueWeights.past_ports``). Each case below is under 0.9 on main before the fix.
"""

from __future__ import annotations

import pytest

from bench import sim_slow_plane
from mrc_host.core.plane_queues import PlaneQueueWeights


def _held_plane_0() -> PlaneQueueWeights:
    """Two planes timed at 21 us, plane 0's delay growing 40 us a sample: it is held."""
    q = PlaneQueueWeights(2)
    t = 0
    for i in range(20):
        t += 5_000
        q.heard(1, 21_000, t)
        q.heard(0, 21_000 + i * 40_000, t)
    return q


def test_a_held_plane_is_past_a_backed_up_port_only_with_more_for_its_weight() -> None:
    q = _held_plane_0()
    assert q.held == 0b01
    w = q.weights[0]
    # plane 1 a port at a tenth of the line rate, holding 40 KB: 400 KB for a full weight
    assert q.past_ports([int(400_000 * w) + 4096, 40_000], [w, 0.1], backed=0b10) == 0b01
    assert q.past_ports([int(400_000 * w) - 4096, 40_000], [w, 0.1], backed=0b10) == 0


def test_nothing_is_past_without_a_held_plane_a_backed_up_port_or_weights() -> None:
    q = _held_plane_0()
    assert q.past_ports([1 << 20, 0], [0.5, 0.1], backed=0) == 0  # no port backed up
    assert q.past_ports([1 << 20, 0], None, backed=0b10) == 0  # no weights
    assert PlaneQueueWeights(2).past_ports([1 << 20, 0], [1.0, 0.1], backed=0b10) == 0  # none held
    assert q.past_ports([1 << 20, 0], [0.5, 0.1], backed=0b01) == 0  # the held plane is the port


@pytest.mark.parametrize(
    ("rates", "where"),
    [
        # on main: of capacity, x the time with the slower planes dead
        ((60, 10), ("inside", "nic")),  # 0.77, 1.00 x
        ((50, 75), ("inside", "plane")),  # 0.76, 0.75 x
        ((40, 20), ("inside", "nic")),  # 0.66, 0.82 x
        ((70, 30), ("inside", "plane")),  # 0.74, 0.89 x
        ((90, 25), ("inside", "plane")),  # 0.80, 0.92 x
        ((80, 50), ("inside", "nic")),  # 0.82, 0.71 x
    ],
)
def test_a_plane_slowed_inside_beside_a_slow_port_runs_near_capacity(
    rates: tuple[float, ...], where: sim_slow_plane.Where
) -> None:
    """At 0.9 of capacity or more, shares within 0.05, never slower than with the slower
    plane dead: the bench's own verdict (``bench.sim_slow_plane.case``)."""
    row = sim_slow_plane.case("beside_a_slow_port", rates, where, 1, {})
    assert row["holds"], row
