"""Sets of integers kept as ranges: PSNs received out of order, PSNs a SACK acknowledges.

A SACK names what arrived as a cumulative PSN and a 64-bit bitmap; both are runs of
consecutive PSNs, so the core handles them as runs (``bitmap_ranges``) instead of bit by
bit, and the receiver keeps what it holds beyond the cumulative point as a ``RangeSet``
(aioquic's ``rangeset.py`` is the model), as the sender keeps what was SACKed beyond its
oldest unacknowledged PSN: adding a PSN, asking for one, dropping the run that has become
contiguous, finding what a SACK adds and reporting a window as a bitmap all cost a binary
search, whatever the number of PSNs held.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right


def bitmap_ranges(base: int, bitmap: int) -> list[tuple[int, int]]:
    """The runs of set bits of ``bitmap`` as ``[start, stop)`` ranges of ``base + bit``, lowest first."""
    out: list[tuple[int, int]] = []
    offset = base
    bits = bitmap
    while bits:
        zeros = (bits & -bits).bit_length() - 1  # clear bits below the next run
        bits >>= zeros
        offset += zeros
        ones = (bits ^ (bits + 1)).bit_length() - 1  # length of the run of set bits
        out.append((offset, offset + ones))
        bits >>= ones
        offset += ones
    return out


class RangeSet:
    """Disjoint, sorted ``[start, stop)`` ranges; touching ranges are merged into one."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._stops: list[int] = []

    def __len__(self) -> int:
        """The number of ranges (not of integers)."""
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __contains__(self, value: int) -> bool:
        i = bisect_right(self._starts, value) - 1
        return i >= 0 and value < self._stops[i]

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._stops, strict=True))

    def add(self, start: int, stop: int | None = None) -> None:
        """Add ``[start, stop)`` (one integer when ``stop`` is None)."""
        if stop is None:
            stop = start + 1
        if stop <= start:
            return
        starts, stops = self._starts, self._stops
        i = bisect_left(stops, start)  # first range ending at or after start: touches or overlaps
        j = bisect_right(starts, stop)  # ranges from i to j - 1 touch or overlap [start, stop)
        if i < j:
            start = min(start, starts[i])
            stop = max(stop, stops[j - 1])
            del starts[i:j]
            del stops[i:j]
        starts.insert(i, start)
        stops.insert(i, stop)

    def uncovered(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The parts of ``[start, stop)`` outside the set, as ranges, lowest first."""
        starts, stops = self._starts, self._stops
        out: list[tuple[int, int]] = []
        i = bisect_right(stops, start)  # first range ending after start
        n = len(starts)
        low = start
        while low < stop:
            if i >= n or starts[i] >= stop:
                out.append((low, stop))
                break
            if starts[i] > low:
                out.append((low, starts[i]))
            low = stops[i]
            i += 1
        return out

    def discard_below(self, floor: int) -> None:
        """Drop every integer below ``floor``."""
        starts, stops = self._starts, self._stops
        i = bisect_right(stops, floor)  # the ranges before i end at or below floor
        if i:
            del starts[:i]
            del stops[:i]
        if starts and starts[0] < floor:
            starts[0] = floor

    def first_start(self) -> int | None:
        return self._starts[0] if self._starts else None

    def pop_first(self) -> tuple[int, int]:
        """Remove and return the lowest range."""
        return self._starts.pop(0), self._stops.pop(0)

    def highest(self) -> int | None:
        """The largest integer in the set."""
        return self._stops[-1] - 1 if self._stops else None

    def bitmap(self, base: int, width: int) -> int:
        """Bit i set when ``base + i`` is in the set, for i in ``0 .. width - 1``."""
        starts, stops = self._starts, self._stops
        top = base + width
        bits = 0
        i = bisect_right(stops, base)  # first range ending after base
        n = len(starts)
        while i < n and starts[i] < top:
            lo = max(starts[i], base)
            hi = min(stops[i], top)
            bits |= ((1 << (hi - lo)) - 1) << (lo - base)
            i += 1
        return bits
