"""A plane slow enough inside the fabric to be taken for dead is weighed by its late copies
(issue 66, item 1: planes in proportion to what they deliver).

Two planes, plane 1's four T1 links at 2.5 Gb/s (10 Gb/s in all), one connection: its first
window, sprayed half on plane 1, queued there for hundreds of microseconds. The plane watch
failed the plane for its silence and resent its packets on plane 0 (13 times in one 11 MB
transfer), so no first copy sent on plane 1 was ever acknowledged first, and the queue
weights (``plane_queues.py``), fed only by first copies acknowledged, never saw the queue
again: plane 1 kept 0.83 of its share of the rotation, its T1 links trimmed, and the
transfer ran at 0.42 of capacity, twice as long as with plane 1 dead. The late first copies
do arrive, and the receiver reports each as a duplicate: that D-SACK now times the plane
too (``PlaneQueueWeights.heard_late_copy``).
"""

from __future__ import annotations

import pytest

from bench import sim_slow_plane


@pytest.mark.parametrize(
    "rates",
    [
        (100, 8),  # on main: 0.53 of capacity, 1.66 x as long as with the slow plane dead
        (100, 10),  # 0.42, 2.04 x
        (100, 12),  # 0.67, 1.26 x
        (100, 100, 5, 100),  # 0.31, 3.00 x
    ],
)
def test_a_plane_slow_enough_inside_to_be_failed_is_weighed_by_its_late_copies(
    rates: tuple[float, ...],
) -> None:
    slow = sim_slow_plane.run(rates, "inside", seed=1)
    dead = sim_slow_plane.run(rates, "inside", seed=1, variant="dead")
    assert slow["completed"]
    assert slow["of_capacity"] >= 0.8
    assert slow["share_error"] <= sim_slow_plane.SHARE_TOL
    assert slow["time_us"] <= 1.1 * dead["time_us"]
