"""A minimal deterministic discrete-event loop (time in integer nanoseconds).

Events are (time, sequence, handler, argument) tuples on a binary heap; the sequence
number breaks ties in scheduling order, so a run is a pure function of its inputs. Playing
an event calls ``handler.fire(argument)``. ``at(t, fn, *args)`` wraps any callable in a
``Call`` handler; the fabric's per-packet events use handlers it keeps (a port is the
handler of the packets arriving at its far end), so an event allocates neither a bound
method nor an argument tuple, and compiled (mypyc) ``fire`` is a direct native call.
The loop stops when the heap is empty, when the next event lies past ``until_ns``, when
``stopped`` is set (by a callback: "everything I was waiting for is done"), when an
optional ``stop()`` predicate holds, or after ``max_events`` (to report progress).
``heap`` and ``seq`` are public so the fabric's per-packet path can push without a call.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Final

# Final aliases: compiled (mypyc), a Final name is a C static, a plain import a dict lookup
# per event
heappop: Final = heapq.heappop
heappush: Final = heapq.heappush


class Handler:
    """What an event calls: ``fire(arg)`` with the argument it was scheduled with."""

    __slots__ = ()

    def fire(self, arg: object) -> None:
        raise NotImplementedError


class Call(Handler):
    """A scheduled call of any callable with fixed arguments (``EventLoop.at``)."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args

    def fire(self, arg: object) -> None:
        self.fn(*self.args)


Event = tuple[int, int, Handler, object]


class EventLoop:
    __slots__ = ("events", "heap", "now", "seq", "stopped")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.heap: list[Event] = []
        self.seq = 0
        self.events = 0
        self.stopped = False

    def at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self.seq = seq = self.seq + 1
        heappush(self.heap, (t_ns if t_ns > self.now else self.now, seq, Call(fn, args), None))

    def push(self, t_ns: int, handler: Handler, arg: object) -> None:
        """Schedule ``handler.fire(arg)`` at ``t_ns`` (not before now)."""
        self.seq = seq = self.seq + 1
        heappush(self.heap, (t_ns if t_ns > self.now else self.now, seq, handler, arg))

    def run(self, until_ns: int, stop: Callable[[], bool] | None = None, max_events: int = 0) -> bool:
        """Play events; True when the run is over (not just paused by ``max_events``)."""
        heap = self.heap
        budget = max_events or -1
        n = 0
        try:
            while heap and not self.stopped:
                if stop is not None and stop():
                    return True
                if n == budget:
                    return False
                event = heappop(heap)
                t = event[0]
                if t > until_ns:
                    heappush(heap, event)
                    self.now = until_ns
                    return True
                self.now = t
                n += 1
                event[2].fire(event[3])
        finally:
            self.events += n
        return True
