"""A minimal deterministic discrete-event loop (time in integer nanoseconds).

An event is an ``Event`` object on a binary heap, ordered by one integer ``key``: its time
shifted left by ``SEQ_BITS`` plus a sequence number that breaks ties in scheduling order,
so a run is a pure function of its inputs. Playing an event calls its ``fire()``.

Why objects with an integer key, not ``(time, seq, handler, arg)`` tuples on ``heapq``: each
of the ~20 comparisons a push and a pop make on a heap of a few thousand events was a tuple
comparison (two rich comparisons of Python ints, ~50 ns); compiled (mypyc), comparing two
keys is a native compare of the events' fields, and the heap is sifted by compiled code.
The fabric's per-packet events are objects it keeps: a packet on a wire is itself the event
of its arrival at the far end (``fabric.SimPacket``), a port's wire coming free is the
port's one ``waker``; so an event allocates nothing. ``at(t, fn, *args)`` wraps any
callable, ``push(t, handler, arg)`` any ``Handler`` (timers, pause frames).

Keys stay below 2**62 (mypyc's fast integers) for times below 2**36 ns (68 s); when the
sequence numbers run out, the events waiting are renumbered in their order (``_renumber``),
which keeps every tie as it was. The loop stops when the heap is empty, when the next event
lies past ``until_ns``, when ``stopped`` is set (by a callback: "everything I was waiting for
is done"), when an optional ``stop()`` predicate holds, or after ``max_events`` (to report
progress).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

SEQ_BITS: Final = 26
SEQ_LIMIT: Final = 1 << SEQ_BITS


class Event:
    """Something that happens at a time: ``key`` orders it (``EventLoop.schedule`` sets it)."""

    __slots__ = ("key",)

    def __init__(self) -> None:
        self.key = 0

    def fire(self) -> None:
        raise NotImplementedError

    @property
    def time(self) -> int:
        return self.key >> SEQ_BITS


class Handler:
    """What ``EventLoop.push`` schedules: ``fire(arg)`` with the argument it was pushed with."""

    __slots__ = ()

    def fire(self, arg: object) -> None:
        raise NotImplementedError


class Pushed(Event):
    """A ``Handler`` and its argument, scheduled once (``EventLoop.push``)."""

    __slots__ = ("arg", "handler")

    def __init__(self, handler: Handler, arg: object) -> None:
        self.key = 0
        self.handler = handler
        self.arg = arg

    def fire(self) -> None:
        self.handler.fire(self.arg)


class Call(Event):
    """A scheduled call of any callable with fixed arguments (``EventLoop.at``)."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.key = 0
        self.fn = fn
        self.args = args

    def fire(self) -> None:
        self.fn(*self.args)


def sift_up(heap: list[Event], pos: int) -> None:
    """Move ``heap[pos]`` towards the root while its key is the smaller (heapq's _siftdown)."""
    item = heap[pos]
    key = item.key
    while pos > 0:
        parent_pos = (pos - 1) >> 1
        parent = heap[parent_pos]
        if key < parent.key:
            heap[pos] = parent
            pos = parent_pos
            continue
        break
    heap[pos] = item


def pop_first(heap: list[Event]) -> Event:
    """Remove and return the event of the smallest key (heapq's heappop: the last item goes
    down the path of smaller children to a leaf, then up to its place)."""
    last = heap.pop()
    n = len(heap)
    if not n:
        return last
    first = heap[0]
    pos = 0
    child = 1
    while child < n:
        # each item read once (compiled, a read of a list of events checks the item's type:
        # a subclass's walks its MRO, a third of this loop when the moved child was read twice)
        smaller = heap[child]
        right = child + 1
        if right < n:
            other = heap[right]
            if not smaller.key < other.key:
                child = right
                smaller = other
        heap[pos] = smaller
        pos = child
        child = 2 * pos + 1
    heap[pos] = last
    sift_up(heap, pos)
    return first


class EventLoop:
    __slots__ = ("events", "heap", "now", "seq", "stopped")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.heap: list[Event] = []
        self.seq = 0
        self.events = 0
        self.stopped = False

    def schedule(self, t_ns: int, event: Event) -> None:
        """Play ``event.fire()`` at ``t_ns`` (not before now), after every event already
        scheduled for that time. An event is on the heap at most once at a time."""
        seq = self.seq
        if seq >= SEQ_LIMIT:
            seq = self._renumber()
        self.seq = seq + 1
        event.key = ((t_ns if t_ns > self.now else self.now) << SEQ_BITS) | seq
        heap = self.heap
        heap.append(event)
        sift_up(heap, len(heap) - 1)

    def at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self.schedule(t_ns, Call(fn, args))

    def push(self, t_ns: int, handler: Handler, arg: object) -> None:
        """Schedule ``handler.fire(arg)`` at ``t_ns`` (not before now)."""
        self.schedule(t_ns, Pushed(handler, arg))

    def _renumber(self) -> int:
        """Give the waiting events sequence numbers 0, 1, ... in their order (the times and
        every tie kept): the next free number. A sorted list is a heap."""
        heap = self.heap
        heap.sort(key=_key)
        for i, event in enumerate(heap):
            event.key = (event.key >> SEQ_BITS << SEQ_BITS) | i
        return len(heap)

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
                t = heap[0].key >> SEQ_BITS
                if t > until_ns:
                    self.now = until_ns
                    return True
                event = pop_first(heap)
                self.now = t
                n += 1
                event.fire()
        finally:
            self.events += n
        return True


def _key(event: Event) -> int:
    return event.key
