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


def bisect_left(a: list[int], x: int) -> int:
    """The first index of ``a`` (sorted) whose item is not below ``x`` (``bisect.bisect_left``).

    Written out: compiled, it is a native loop over native ints; the ``bisect`` module's
    functions are generic calls that box their arguments, several per packet."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def bisect_right(a: list[int], x: int) -> int:
    """The first index of ``a`` (sorted) whose item is above ``x`` (``bisect.bisect_right``)."""
    lo, hi = 0, len(a)
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


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
        starts = self._starts
        if not starts or value < starts[0] or value >= self._stops[-1]:
            return False  # (asked per packet, mostly of PSNs outside every range: no search)
        return value < self._stops[bisect_right(starts, value) - 1]

    def ranges(self) -> list[tuple[int, int]]:
        return list(zip(self._starts, self._stops, strict=True))

    def add(self, start: int, stop: int | None = None) -> None:
        """Add ``[start, stop)`` (one integer when ``stop`` is None)."""
        if stop is None:
            stop = start + 1
        if stop <= start:
            return
        starts, stops = self._starts, self._stops
        n = len(stops)
        # PSNs come mostly in order: past the last range, or touching it, needs no search
        if not n or start > stops[n - 1]:
            starts.append(start)
            stops.append(stop)
            return
        if start == stops[n - 1]:
            stops[n - 1] = stop
            return
        i = bisect_left(stops, start)  # first range ending at or after start: touches or overlaps
        j = bisect_right(starts, stop)  # ranges from i to j - 1 touch or overlap [start, stop)
        if i < j:  # merged into range i
            starts[i] = min(start, starts[i])
            stops[i] = max(stop, stops[j - 1])
            del starts[i + 1 : j]
            del stops[i + 1 : j]
            return
        starts.insert(i, start)
        stops.insert(i, stop)

    def uncovered(self, start: int, stop: int) -> list[tuple[int, int]]:
        """The parts of ``[start, stop)`` outside the set, as ranges, lowest first."""
        starts, stops = self._starts, self._stops
        if start >= stop:
            return []
        if not starts or start >= stops[-1] or stop <= starts[0]:
            return [(start, stop)]  # clear of every range
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
        if not starts or floor <= starts[0]:
            return
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
        # first range ending after base: the first one, when the window starts at the cumulative point
        i = 0 if not stops or stops[0] > base else bisect_right(stops, base)
        n = len(starts)
        while i < n and starts[i] < top:
            lo = max(starts[i], base)
            hi = min(stops[i], top)
            bits |= ((1 << (hi - lo)) - 1) << (lo - base)
            i += 1
        return bits
