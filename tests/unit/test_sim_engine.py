"""The event loop's heap: events play in time order, ties in the order they were scheduled."""

from __future__ import annotations

import random

import pytest

from mrc_host.sim.engine import Event, EventLoop, pop_first


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
        events: list[Event] = []
        for k in keys:
            ev = Event()
            loop.schedule(k, ev)
            events.append(ev)
        got = [pop_first(loop.heap).key for _ in range(n)]
        assert got == sorted(e.key for e in events) and not loop.heap
