"""SACK ranges handled as ranges: runs of a bitmap, and the receiver's set of held PSNs."""

from __future__ import annotations

import random

from mrc_host.core.rangeset import RangeSet, bitmap_ranges


def bits_of(base: int, bitmap: int) -> list[int]:
    return [base + i for i in range(bitmap.bit_length()) if bitmap >> i & 1]


def test_bitmap_ranges_are_the_runs_of_set_bits() -> None:
    assert bitmap_ranges(100, 0) == []
    assert bitmap_ranges(100, 0b1) == [(100, 101)]
    assert bitmap_ranges(100, 0b1101_1100) == [(102, 105), (106, 108)]
    assert bitmap_ranges(7, (1 << 64) - 1) == [(7, 71)]
    assert bitmap_ranges(0, 1 << 63 | 1) == [(0, 1), (63, 64)]


def test_bitmap_ranges_match_a_bit_by_bit_walk() -> None:
    rng = random.Random(5)
    for _ in range(2000):
        bitmap = rng.getrandbits(64) & rng.getrandbits(64)  # runs of every length
        base = rng.randrange(1 << 30)
        covered = [s for lo, hi in bitmap_ranges(base, bitmap) for s in range(lo, hi)]
        assert covered == bits_of(base, bitmap)


def test_rangeset_merges_touching_and_overlapping_ranges() -> None:
    r = RangeSet()
    assert not r and len(r) == 0 and r.highest() is None and r.first_start() is None
    r.add(5)
    r.add(7)
    assert r.ranges() == [(5, 6), (7, 8)]
    r.add(6)  # fills the hole: one range
    assert r.ranges() == [(5, 8)]
    r.add(20, 30)
    r.add(8, 20)  # touches both neighbours
    assert r.ranges() == [(5, 30)]
    r.add(1, 2)
    r.add(40, 41)
    assert r.ranges() == [(1, 2), (5, 30), (40, 41)] and r.highest() == 40
    assert 1 in r and 29 in r and 30 not in r and 0 not in r and 40 in r
    assert r.pop_first() == (1, 2) and r.first_start() == 5 and len(r) == 2


def test_rangeset_matches_a_python_set_and_its_bitmap_window() -> None:
    rng = random.Random(9)
    r = RangeSet()
    ref: set[int] = set()
    for _ in range(3000):
        lo = rng.randrange(500)
        hi = lo + rng.randrange(1, 6)
        r.add(lo, hi)
        ref.update(range(lo, hi))
        probe = rng.randrange(-5, 510)
        assert (probe in r) == (probe in ref)
        base = rng.randrange(-10, 500)
        want = sum(1 << i for i in range(64) if base + i in ref)
        assert r.bitmap(base, 64) == want
    flat = [s for lo, hi in r.ranges() for s in range(lo, hi)]
    assert flat == sorted(ref)
    assert all(a[1] < b[0] for a, b in zip(r.ranges(), r.ranges()[1:], strict=False))  # never touching


def test_uncovered_and_discard_below_match_a_python_set() -> None:
    rng = random.Random(13)
    r = RangeSet()
    ref: set[int] = set()
    floor = 0
    for _ in range(3000):
        lo = floor + rng.randrange(200)
        hi = lo + rng.randrange(1, 6)
        r.add(lo, hi)
        ref.update(range(lo, hi))
        start = floor + rng.randrange(-5, 205)
        stop = start + rng.randrange(0, 40)
        missing = [s for lo2, hi2 in r.uncovered(start, stop) for s in range(lo2, hi2)]
        assert missing == [s for s in range(start, stop) if s not in ref]
        assert all(
            a[1] < b[0] for a, b in zip(r.uncovered(start, stop), r.uncovered(start, stop)[1:], strict=False)
        )
        if rng.random() < 0.1:
            floor += rng.randrange(20)
            r.discard_below(floor)
            ref = {s for s in ref if s >= floor}
            assert [s for lo2, hi2 in r.ranges() for s in range(lo2, hi2)] == sorted(ref)
    r.discard_below(1 << 40)
    assert not r and r.uncovered(3, 5) == [(3, 5)] and r.uncovered(5, 5) == []


def test_rangeset_in_order_arrivals_match_a_python_set() -> None:
    """PSNs that arrive mostly in order: appended past the last range, touching it, or
    filling a hole just behind it."""
    rng = random.Random(17)
    r = RangeSet()
    ref: set[int] = set()
    top = 0
    for _ in range(3000):
        top += rng.choice((0, 1, 1, 2, 3))
        lo = top - rng.choice((0, 0, 0, 1, 5))
        hi = lo + rng.randrange(1, 3)
        r.add(lo, hi)
        ref.update(range(lo, hi))
        probe = top - rng.randrange(-2, 8)
        assert (probe in r) == (probe in ref)
    assert [s for lo, hi in r.ranges() for s in range(lo, hi)] == sorted(ref)
    assert all(a[1] < b[0] for a, b in zip(r.ranges(), r.ranges()[1:], strict=False))
