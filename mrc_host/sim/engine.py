"""A minimal deterministic discrete-event loop (time in integer nanoseconds)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class EventLoop:
    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.events = 0

    def at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(t_ns, self.now), self._seq, fn, args))

    def run(self, until_ns: int, stop: Callable[[], bool]) -> None:
        heap = self._heap
        while heap and not stop():
            t, _, fn, args = heap[0]
            if t > until_ns:
                self.now = until_ns
                return
            heapq.heappop(heap)
            self.now = t
            self.events += 1
            fn(*args)
