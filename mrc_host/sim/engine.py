"""A minimal deterministic discrete-event loop (time in integer nanoseconds).

Events play in time order, ties in the order they were scheduled, so a run is a pure function
of its inputs. Playing an event calls its ``fire()``.

Where events wait: most of a packet simulation's events (a packet reaching the far end of its
wire, a wire coming free) fall due within a couple of microseconds, many at the same
nanosecond. Those go into a ring of ``RING_NS`` slots, one per nanosecond modulo the ring. The
first event due at a time goes on the binary heap of ``Event`` objects, ordered by one integer
``key`` (the time shifted left by ``SEQ_BITS`` plus a sequence number), and into its slot;
those due after it at that time are appended to the slot's list, and play when it comes off
the heap. Events due ``RING_NS`` or more ahead (timers, later posts) go on the heap
themselves. Why: a push and a pop on the heap read the keys of ~20 events scattered in memory,
a cache miss each (a tenth of the 128-host permutation's CPU), and that run has ~4 events due
at each nanosecond it plays; an event alone at its time costs what it did.

A slot's first event carries the largest sequence number (``_FIRST``), so far events due at
the same time play before it: they were scheduled at least ``RING_NS`` before it, the slot's
less than that. The ring's events all fall due within ``RING_NS`` of now, so a slot never
holds two times; a slot is freed once played.

The fabric's per-packet events are objects it keeps: a packet on a wire is itself the event
of its arrival at the far end (``fabric.SimPacket``), a port's wire coming free is the
port's one ``waker``; so an event allocates nothing. ``at(t, fn, *args)`` wraps any
callable, ``push(t, handler, arg)`` any ``Handler`` (timers, pause frames).

Keys stay below 2**62 (mypyc's fast integers) for times below 2**36 ns (68 s); when the
sequence numbers run out, the events on the heap are renumbered in their order
(``_renumber``), which keeps every tie as it was. The loop stops when nothing waits, when the
next event lies past ``until_ns``, when ``stopped`` is set (by a callback: "everything I was
waiting for is done"), when an optional ``stop()`` predicate holds, or after ``max_events``
(to report progress).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

SEQ_BITS: Final = 26
SEQ_LIMIT: Final = 1 << SEQ_BITS
RING_NS: Final = 4096  # events due sooner than this wait in the ring (a power of two)
_RING_MASK: Final = RING_NS - 1
_FIRST: Final = SEQ_LIMIT - 1  # the sequence number of a ring list's first event on the heap


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
    __slots__ = (
        "_firsts",
        "_more",
        "_open",
        "_pos",
        "_spare",
        "_t_cur",
        "events",
        "heap",
        "now",
        "seq",
        "stopped",
    )

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.heap: list[Event] = []  # far events, and the first event due at each ring time
        self.seq = 0
        self.events = 0
        self.stopped = False
        # per ring slot: its first event (also on the heap), and a list of those due after it
        # at the same time (made only then, and back to ``_spare`` when played)
        self._firsts: list[Event | None] = [None] * RING_NS
        self._more: list[list[Event] | None] = [None] * RING_NS
        self._spare: list[list[Event]] = []
        self._open = False  # the slot of time ``_t_cur`` is playing
        self._pos = 0  # the next of its ``_more`` to play
        self._t_cur = 0

    def schedule(self, t_ns: int, event: Event) -> None:
        """Play ``event.fire()`` at ``t_ns`` (not before now), after every event already
        scheduled for that time. An event waits at most once at a time."""
        now = self.now
        t = t_ns if t_ns > now else now
        if t - now < RING_NS:
            i = t & _RING_MASK
            if self._firsts[i] is not None:
                event.key = t << SEQ_BITS
                more = self._more[i]
                if more is None:
                    spare = self._spare
                    more = self._more[i] = spare.pop() if spare else []
                more.append(event)
                return
            self._firsts[i] = event
            event.key = (t << SEQ_BITS) | _FIRST  # after far events due at t
        else:
            seq = self.seq
            if seq >= _FIRST:
                seq = self._renumber()
            self.seq = seq + 1
            event.key = (t << SEQ_BITS) | seq
        heap = self.heap
        heap.append(event)
        sift_up(heap, len(heap) - 1)

    def at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self.schedule(t_ns, Call(fn, args))

    def push(self, t_ns: int, handler: Handler, arg: object) -> None:
        """Schedule ``handler.fire(arg)`` at ``t_ns`` (not before now)."""
        self.schedule(t_ns, Pushed(handler, arg))

    def waiting(self) -> bool:
        """Whether any event waits."""
        return bool(self.heap) or self._next_more() is not None

    def _renumber(self) -> int:
        """Give the far events on the heap sequence numbers 0, 1, ... in their order (the
        times and every tie kept; a slot's first keeps ``_FIRST``): the next free number.
        A sorted list is a heap."""
        heap = self.heap
        heap.sort(key=_key)
        i = 0
        for event in heap:
            if event.key & _FIRST != _FIRST:
                event.key = (event.key >> SEQ_BITS << SEQ_BITS) | i
                i += 1
        return i

    def _next_more(self) -> Event | None:
        """The next event of the slot playing, if one is left (not taken)."""
        if not self._open:
            return None
        more = self._more[self._t_cur & _RING_MASK]
        if more is None or self._pos >= len(more):
            return None
        return more[self._pos]

    def _close(self) -> None:
        """The slot playing is played: free it (nothing more can fall due at its time)."""
        i = self._t_cur & _RING_MASK
        self._firsts[i] = None
        more = self._more[i]
        if more is not None:
            more.clear()
            self._more[i] = None
            self._spare.append(more)
        self._open = False
        self._pos = 0

    def run(self, until_ns: int, stop: Callable[[], bool] | None = None, max_events: int = 0) -> bool:
        """Play events; True when the run is over (not just paused by ``max_events``)."""
        heap = self.heap
        budget = max_events or -1
        n = 0
        try:
            while not self.stopped:
                event = self._next_more()
                if event is not None:
                    t = self._t_cur
                else:
                    if self._open:
                        self._close()
                    if not heap:
                        break
                    t = heap[0].key >> SEQ_BITS
                if stop is not None and stop():
                    return True
                if n == budget:
                    return False
                if t > until_ns:
                    self.now = until_ns
                    return True
                if event is not None:
                    self._pos += 1
                else:
                    event = pop_first(heap)
                    if event.key & _FIRST == _FIRST:  # a slot's first: its others play next
                        self._open = True
                        self._t_cur = t
                self.now = t
                n += 1
                event.fire()
        finally:
            self.events += n
        return True


def _key(event: Event) -> int:
    return event.key
