"""Planes slowed inside the fabric (issue 66, item 1: planes in proportion to what they deliver).

The rotation balances bytes in flight, so a plane whose T1 links run at a quarter of the
others' rate held as many bytes as a fast plane and queued the difference, several round
trips deep: 8 planes with one slowed to 25 Gb/s inside reached 0.64 of their capacity, 4
planes at 100/75/50/25 Gb/s 0.70 (the NIC's port rates say nothing of either). Each plane's
weight in the rotation is now held down while its queue stands above the least queued
plane's (``plane_queues.py``). Each test here failed on main before the fix it guards.
"""

from __future__ import annotations

import itertools
import random

import pytest

from mrc_fabric.ev import PLANE_SHIFT
from mrc_host.core import EvSet, PathSpace, TransportConfig
from mrc_host.core.plane_queues import MIN_WEIGHT, QUEUE_GROWTH, PlaneQueueWeights

BASE = 20_000  # ns: every plane's shortest acknowledgement delay


def _warm(q: PlaneQueueWeights, now: int = 0) -> None:
    """One sample of every plane at the base delay: no queue anywhere."""
    for plane in range(len(q.weights)):
        q.heard(plane, BASE, now)


def test_a_plane_whose_queue_stands_above_the_others_is_cut_in_proportion() -> None:
    q = PlaneQueueWeights(4)
    _warm(q)
    for k in range(40):
        q.heard(1, 4 * BASE, 1_000 + k)  # a queue of three base round trips, the others none
    # cut to about what the plane may hold (the base plus half of it) over what it holds: no
    # deeper while the same queue stands, within one of its round trips
    assert q.weights[1] == pytest.approx(1.5 * BASE / q._delay[1], rel=0.25)
    assert 0.35 < q.weights[1] < 0.6
    assert q.held == 1 << 1
    assert q.weights[0] == q.weights[2] == q.weights[3] == 1.0


def test_a_queue_every_plane_has_moves_no_weight() -> None:
    """An incast's last hop: every plane queues alike, and by as much as a round trip."""
    q = PlaneQueueWeights(8)
    _warm(q)
    for k in range(400):
        plane = k % 8
        jitter = (k * 7919) % 9 * 1_000  # the planes' queues differ by up to 8 us
        assert not q.heard(plane, BASE + 30_000 + jitter, 1_000 + 100 * k)
    assert q.weights == [1.0] * 8 and q.held == 0


def test_a_plane_weighed_by_its_slow_port_is_no_reference() -> None:
    """Fuzz seed 5151, draw 1337: an incast over four planes, plane 0 at 10 Gb/s everywhere.
    Weighed by its port, plane 0 held a small share and a short queue, and the fast planes,
    queued alike at the incast's last hop, were cut below it (to 0.57): a T0 failing then cost
    26 packets against a limit of 12. The least queue is now that of a plane at full rate."""
    for slow_ports, cut in ((0, True), (1, False)):
        q = PlaneQueueWeights(4)
        _warm(q)
        for k in range(60):
            q.heard(0, BASE + 500, 1_000 + 10 * k, slow_ports)
            for plane in (1, 2, 3):
                q.heard(plane, BASE + 15_000, 1_000 + 10 * k, slow_ports)
        assert (q.weights[1] < 1.0) is cut
        assert q.weights[1] == q.weights[2] == q.weights[3]


def test_a_plane_slowed_inside_beside_slow_ports_only_is_cut_against_them() -> None:
    """Two planes, one at 5 Gb/s inside, the other at 75 at its port: with no other plane
    outside the slow ports, the slow plane had nothing to measure its queue against, kept
    its full share and held a queue 1.6 ms deep (3.4 x as long as with it dead). The slow
    ports are its reference then; while another plane outside them is still to be timed,
    they are not (a plane cut against a slow port before its sibling was timed had 4 planes
    at 50/25/5/50 Gb/s take 1.29 x as long as with the slow ones dead, against 1.14)."""
    q = PlaneQueueWeights(2)
    _warm(q)
    for k in range(40):
        q.heard(1, BASE, 1_000 + k, 1 << 1)
        q.heard(0, 4 * BASE, 1_000 + k, 1 << 1)
    assert q.weights[0] < 0.6 and q.held == 1
    assert q.weights[1] == 1.0
    q = PlaneQueueWeights(3)  # plane 2, at full rate at its port, not timed yet
    q.heard(0, BASE, 0, 1 << 1)
    q.heard(1, BASE, 0, 1 << 1)
    for k in range(40):
        q.heard(1, BASE, 1_000 + k, 1 << 1)
        q.heard(0, 4 * BASE, 1_000 + k, 1 << 1)
    assert q.weights == [1.0] * 3 and q.held == 0


def test_a_slow_port_is_still_cut_by_a_queue_the_others_lack() -> None:
    """A plane slow at its port and slower still inside: its queue is judged against the
    full-rate planes' like any other's."""
    q = PlaneQueueWeights(3)
    _warm(q)
    for k in range(40):
        q.heard(1, BASE, 1_000 + k, 1 << 2)
        q.heard(2, 4 * BASE, 1_000 + k, 1 << 2)
    assert q.weights[2] < 0.6 and q.weights[0] == q.weights[1] == 1.0


def test_a_cut_plane_comes_back_once_its_queue_is_gone() -> None:
    """Not cut again while its smoothed delay still lags the drained queue (cut on it, a plane
    at 25 Gb/s beside seven at 100 fell to 0.09), then up by ``QUEUE_GROWTH`` a round trip."""
    q = PlaneQueueWeights(2)
    _warm(q)
    for k in range(40):
        q.heard(1, 4 * BASE, 1_000 + k)
    seen = [q.weights[1]]
    now = 1_000_000
    while q.weights[1] < 1.0 and len(seen) < 60:
        q.heard(0, BASE, now)
        q.heard(1, BASE, now)  # its queue drained
        seen.append(q.weights[1])
        now += 5 * BASE  # a round trip and more between samples
    steps = [b / a for a, b in itertools.pairwise(seen)]
    assert min(steps) >= 1.0  # never cut on the lagging estimate
    assert max(steps) <= QUEUE_GROWTH + 1e-9
    assert q.weights[1] == 1.0 and q.held == 0


def test_a_weight_never_falls_below_its_floor() -> None:
    q = PlaneQueueWeights(2)
    _warm(q)
    for k in range(2_000):
        q.heard(1, 50 * BASE, 1_000 + k * 200_000)  # each in a round trip of its own
    assert q.weights[1] == MIN_WEIGHT


def test_the_rotation_gives_a_weighed_down_plane_its_share_of_bytes_in_flight() -> None:
    s = EvSet(TransportConfig(), PathSpace(4, 4), random.Random(3))
    s.weigh_planes([], [1.0, 0.25, 1.0, 1.0])
    for _ in range(130):
        ev = s.next_data_ev(now_ns=0)
        assert ev is not None
        s.plane_load[ev >> PLANE_SHIFT] += 4096
    load = s.plane_load
    assert load[1] * 4 == pytest.approx(load[0], abs=2 * 4096)
    assert load[0] == load[2] == load[3]
    s.weigh_planes([], None)
    assert s.plane_weight is None  # no queue: planes alike, as before


def test_with_every_plane_passed_a_late_held_plane_goes_after_a_backed_up_port() -> None:
    """Every plane passed over (slow ports holding their backlog, a held plane late at the
    tail): the packet went to the least loaded of them, the held plane, whose queue it then
    waited out after the rest. A port's backlog drains in its own time: it goes first."""
    for late, held_plane_picked in ((0, True), (1, False)):
        s = EvSet(TransportConfig(), PathSpace(4, 4), random.Random(3))
        s.plane_load[:] = [0, 8192, 8192, 8192]  # plane 0 the least loaded
        ev = s.next_data_ev(now_ns=0, backed_up=0b1111, late=late)
        assert ev is not None
        assert (ev >> PLANE_SHIFT == 0) is held_plane_picked
