"""A plane's or a path's service gap: the longest wait lately between two of its deliveries
while packets waited on it.

A queue drained at a plane's (or a path's) own rate delivers at about that spacing, so a
plane that has delivered nothing for twice its gap has stopped, where one only slower than
the others has not (``PlaneWatch.delivering``, ``PathWatch``). One rule for both watches,
kept here so that they cannot drift apart.
"""

from __future__ import annotations

from typing import Final

# per sample: a service gap forgets its longest wait over a few dozen deliveries
SERVICE_GAP_DECAY: Final = 1 - 1 / 32


def widened_gap(gap: float, last_ns: int, left_ns: int, now_ns: int) -> float:
    """The service gap ``gap`` after a delivery whose SACK arrived at ``now_ns``, of a copy
    that left at ``left_ns``, the previous delivery having arrived at ``last_ns`` (earlier).
    A copy that had left before that delivery waited behind it, so the time between the two
    is one sample (the largest lately, forgetting by ``SERVICE_GAP_DECAY`` per sample);
    a copy that left after it says nothing of the spacing."""
    if left_ns >= last_ns:
        return gap
    sample = float(now_ns - last_ns)
    kept = gap * SERVICE_GAP_DECAY
    return sample if sample > kept else kept
