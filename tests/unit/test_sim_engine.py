"""The event loop: events play in time order, ties in the order they were scheduled, whether
they wait in the ring (due soon) or on the heap (due later)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from mrc_host.sim.engine import RING_NS, SEQ_BITS, Event, EventLoop, pop_first


@pytest.mark.parametrize("seed", range(6))
def test_events_play_by_time_then_by_scheduling_order(seed: int) -> None:
    rng = random.Random(seed)
    loop = EventLoop()
    played: list[tuple[int, int]] = []
    times = [rng.randrange(0, 40) for _ in range(rng.randrange(1, 700))]  # many ties
    for i, t in enumerate(times):
        loop.at(t, lambda i=i: played.append((loop.now, i)))
    loop.run(10**9)
    assert played == sorted(((t, i) for i, t in enumerate(times)), key=lambda p: p[0])


def test_pop_first_takes_the_smallest_key_from_heaps_of_every_size() -> None:
    rng = random.Random(1)
    for n in range(1, 70):
        keys = [rng.randrange(1000) for _ in range(n)]
        loop = EventLoop()
        for k in keys:
            loop.schedule(RING_NS + k, Event())  # (due that late: a bucket of its own on the heap)
        want = sorted(b.key for b in loop.heap)
        got = [pop_first(loop.heap).key for _ in range(n)]
        assert got == want and [k >> SEQ_BITS for k in got] == sorted(RING_NS + k for k in keys)
        assert not loop.heap


_DELAYS = (0, 1, 2, 5, 7, RING_NS - 1, RING_NS, RING_NS + 1, 3 * RING_NS)


def _children(name: int) -> list[tuple[int, int]]:
    """What event ``name`` schedules when it plays: (delay, child's name), up to 4 levels."""
    if name >= 10**4:
        return []
    r = random.Random(name)
    return [(r.choice(_DELAYS), name * 10 + j) for j in range(r.randrange(4))]


def _play(loop: EventLoop, name: int, played: list[tuple[int, int]]) -> None:
    """Event ``name`` plays: it records itself and schedules its ``_children``."""
    played.append((loop.now, name))
    for delay, child in _children(name):
        loop.at(loop.now + delay, _play, loop, child, played)


def _reference(
    first: list[tuple[int, int]], children: Callable[[int], list[tuple[int, int]]] | None = None
) -> list[tuple[int, int]]:
    """The same events played from a heap of (time, scheduling order); each schedules its
    ``children`` (``_children`` unless given)."""
    import heapq

    waiting = [(t, seq, name) for seq, (t, name) in enumerate(first)]
    heapq.heapify(waiting)
    seq = len(first)
    played: list[tuple[int, int]] = []
    while waiting:
        t, _, name = heapq.heappop(waiting)
        played.append((t, name))
        for delay, child in (children or _children)(name):
            heapq.heappush(waiting, (t + delay, seq, child))
            seq += 1
    return played


@pytest.mark.parametrize("seed", range(8))
def test_ring_and_heap_play_in_time_then_scheduling_order(seed: int) -> None:
    """Events schedule others as they play, at now, within the ring, at its edge and beyond
    (the heap), with many ties between the two: the order is a sorted heap's."""
    rng = random.Random(seed)
    first = [(rng.choice([0, 3, RING_NS, RING_NS + 3]), i + 1) for i in range(30)]
    loop = EventLoop()
    played: list[tuple[int, int]] = []
    for t, name in first:
        loop.at(t, _play, loop, name, played)
    want = _reference(first)
    loop.run(10**9)
    assert len(want) > 200 and played == want and not loop.waiting()


def test_near_events_wait_in_the_ring_and_only_far_ones_on_the_heap() -> None:
    """Fails where every event is on the heap (each push and pop reading ~20 scattered keys):
    events due soon wait in the ring, far ones have a heap entry each."""
    loop = EventLoop(1_000)
    for t in (1_000, 1_500, 1_500, 1_500, 1_000 + RING_NS - 1, 1_000 + RING_NS - 1):
        loop.at(t, lambda: None)
    assert len(loop.heap) == 0 and loop.waiting()
    loop.at(1_000 + RING_NS, lambda: None)
    loop.at(1_000 + RING_NS, lambda: None)
    assert len(loop.heap) == 2 and loop.waiting()
    loop.run(10**9)
    assert not loop.waiting() and loop.events == 8


def test_a_run_paused_by_its_limit_resumes_in_order() -> None:
    """``run`` stops before an event past ``until_ns`` and resumes where it left off, with
    events posted in between (at the pause time) played in order."""
    loop = EventLoop()
    played: list[tuple[int, str]] = []
    for t in (5, 10, 10, RING_NS + 10):
        loop.at(t, lambda t=t: played.append((loop.now, f"a{t}")))
    loop.run(7)
    assert played == [(5, "a5")] and loop.now == 7
    loop.at(7, lambda: played.append((loop.now, "b")))
    loop.at(10, lambda: played.append((loop.now, "c")))
    loop.run(10**9)
    assert played == [
        (5, "a5"),
        (7, "b"),
        (10, "a10"),
        (10, "a10"),
        (10, "c"),
        (RING_NS + 10, f"a{RING_NS + 10}"),
    ]


def _spread_children(name: int) -> list[tuple[int, int]]:
    """``_children`` with delays anywhere in and past the ring: sparse blocks, the ring's
    wrap, far events landing before the next ring time found."""
    if name >= 10**4:
        return []
    r = random.Random(name * 7 + 3)
    delays = (0, 1, 63, 64, 65, r.randrange(RING_NS), RING_NS - 1, RING_NS, r.randrange(3 * RING_NS))
    return [(r.choice(delays), name * 10 + j) for j in range(r.randrange(4))]


@pytest.mark.parametrize("seed", range(8))
def test_a_sparse_ring_and_paused_runs_keep_the_heaps_order(seed: int) -> None:
    """Events spread over the whole ring and beyond, played in runs paused at random times
    and event counts: the order is a sorted heap's, and the loop ends empty."""
    rng = random.Random(seed)
    first = [(rng.randrange(2 * RING_NS), i + 1) for i in range(20)]
    want = _reference(first, _spread_children)
    loop = EventLoop()
    played: list[tuple[int, int]] = []

    def play(name: int) -> None:
        played.append((loop.now, name))
        for delay, child in _spread_children(name):
            loop.at(loop.now + delay, play, child)

    for t, name in first:
        loop.at(t, play, name)
    until = 0
    while loop.waiting():
        until += rng.randrange(1, RING_NS)
        loop.run(until, max_events=rng.randrange(0, 40))
    assert len(want) > 100 and played == want and loop.events == len(want)


def _busy_masks(loop: EventLoop) -> list[int]:
    """What each block's mask must be: bit k set where the block's bucket k holds events
    (or plays), read from the buckets themselves."""
    ring = loop._ring
    width = RING_NS // len(loop._blocks)
    return [
        sum(1 << k for k in range(width) if (b := ring[block * width + k]) is not None and b.busy)
        for block in range(len(loop._blocks))
    ]


@pytest.mark.parametrize("seed", range(4))
def test_the_ring_masks_mark_exactly_the_busy_buckets(seed: int) -> None:
    """Fails on a count per block (the scan it served read each bucket after a busy one): the
    next ring time comes from these masks alone, so every busy bucket, and only those, has its
    bit, in 32-bit masks (fast integers compiled), through schedules, plays and the ring's wrap."""
    rng = random.Random(seed)
    loop = EventLoop()
    checked = 0

    def play() -> None:
        nonlocal checked
        for _ in range(rng.randrange(3)):
            loop.at(loop.now + rng.choice((0, 1, 31, 32, 33, rng.randrange(RING_NS + 50))), play)
        if rng.randrange(4) == 0:
            assert [b.mask for b in loop._blocks] == _busy_masks(loop)
            checked += 1

    for _ in range(30):
        loop.at(rng.randrange(3 * RING_NS), play)
    until = 0
    while loop.waiting() and loop.events < 3_000:
        until += rng.randrange(1, RING_NS // 2)
        loop.run(until, max_events=rng.randrange(1, 60))
        assert [b.mask for b in loop._blocks] == _busy_masks(loop)
        checked += 1
    assert checked > 50 and all(b.mask < 1 << 32 for b in loop._blocks) and len(loop._blocks) == RING_NS // 32
