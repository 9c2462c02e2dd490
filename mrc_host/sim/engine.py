"""A minimal deterministic discrete-event loop (time in integer nanoseconds).

Events play in time order, ties in the order they were scheduled, so a run is a pure function
of its inputs. Playing an event calls its ``fire()``.

Where events wait: in ``Bucket``s, each the events due at one time, first in first out,
linked through the events' own ``nxt`` (an event waits at most once at a time). Most of a
packet simulation's events (a packet reaching the far end of its wire, a wire coming free)
fall due within a couple of microseconds, many at the same nanosecond: those go into a ring
of ``RING_NS`` buckets, one per nanosecond modulo the ring (each made at its first use).
The next of them is found from the last time found (``_next_ring``) by a bit mask per block
of 32 buckets (bit k: the block's bucket k is busy): one read per 32 ns passed, at most 129.
Why masks, not a read of each bucket: an 8->1 incast has an event every ~30 ns, and reading
the buckets in between was ~8 % of its simulated instructions. An event due ``RING_NS`` or more ahead
(timers, later posts) gets a bucket of its own on a binary heap, ordered by one integer
``key`` (the time shifted left by ``SEQ_BITS`` plus a sequence number). Why: the 128-host
permutation has a ring bucket due every ~2.4 ns and ~9 events in each; a heap entry per
bucket cost ~1,400 instructions a pop (~10 levels of scattered reads), the masks a few
reads. Why linked events and a final bucket class:
compiled, appending an event to a list, reading it back and emptying the list were a list
call, a type check walking the event subclass's MRO and a slice deletion each; a native
attribute is a load and a store.

Far events due at a ring bucket's time play before it: they were scheduled at least
``RING_NS`` before any of its events. The ring's events all fall due within ``RING_NS`` of
now, so a bucket never holds two times; it is free again once played. Events scheduled for
now while its bucket plays join that bucket and play in the same pass.

The fabric's per-packet events are objects it keeps: a packet on a wire is itself the event
of its arrival at the far end (``fabric.SimPacket``), a port's wire coming free is the
port's one ``waker``; so an event allocates nothing. ``at(t, fn, *args)`` wraps any
callable, ``push(t, handler, arg)`` any ``Handler`` (timers, pause frames).

Keys stay below 2**62 (mypyc's fast integers) for times below 2**36 ns (68 s); when the
sequence numbers run out, the buckets on the heap are renumbered in their order
(``_renumber``), which keeps every tie as it was. The loop stops when nothing waits, when the
next event lies past ``until_ns``, when ``stopped`` is set (by a callback: "everything I was
waiting for is done"), when an optional ``stop()`` predicate holds, or after ``max_events``
(to report progress).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, final

SEQ_BITS: Final = 26
SEQ_LIMIT: Final = 1 << SEQ_BITS
RING_NS: Final = 4096  # events due sooner than this wait in the ring (a power of two)
_RING_MASK: Final = RING_NS - 1
_SEQ_MAX: Final = SEQ_LIMIT - 1  # sequence numbers run below it
_BLOCK_BITS: Final = 5  # the ring's buckets in blocks of 32, a mask each (``_next_ring``)
_BLOCK: Final = 1 << _BLOCK_BITS


class Event:
    """Something that happens at a time; ``nxt`` links it to the next event of its bucket
    while it waits (``EventLoop.schedule`` sets it)."""

    __slots__ = ("nxt",)

    def __init__(self) -> None:
        self.nxt: Event | None = None

    def fire(self) -> None:
        raise NotImplementedError


@final
class Bucket:
    """The events due at one time, first in first out (``head`` to ``tail`` through ``nxt``);
    ``key`` orders a far one on the heap; ``busy``: a ring bucket holding events or playing."""

    __slots__ = ("busy", "head", "key", "ring", "tail")

    def __init__(self, ring: bool = False) -> None:
        self.key = 0
        self.head: Event | None = None
        self.tail: Event | None = None
        self.busy = False
        self.ring = ring

    @property
    def time(self) -> int:
        return self.key >> SEQ_BITS


@final
class Block:
    """The busy buckets of 32 in the ring: bit k set while the block's bucket k holds events
    (or plays). A native attribute, because in a list a mask above 256 is a new int object
    at each change (an allocation and a free), which cost an incast ~2/3 of what masks save."""

    __slots__ = ("mask",)

    def __init__(self) -> None:
        self.mask = 0


class Handler:
    """What ``EventLoop.push`` schedules: ``fire(arg)`` with the argument it was pushed with."""

    __slots__ = ()

    def fire(self, arg: object) -> None:
        raise NotImplementedError


class Pushed(Event):
    """A ``Handler`` and its argument, scheduled once (``EventLoop.push``)."""

    __slots__ = ("arg", "handler")

    def __init__(self, handler: Handler, arg: object) -> None:
        self.nxt = None
        self.handler = handler
        self.arg = arg

    def fire(self) -> None:
        self.handler.fire(self.arg)


class Call(Event):
    """A scheduled call of any callable with fixed arguments (``EventLoop.at``)."""

    __slots__ = ("args", "fn")

    def __init__(self, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.nxt = None
        self.fn = fn
        self.args = args

    def fire(self) -> None:
        self.fn(*self.args)


def sift_up(heap: list[Bucket], pos: int) -> None:
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


def pop_first(heap: list[Bucket]) -> Bucket:
    """Remove and return the bucket of the smallest key (heapq's heappop: the last item goes
    down the path of smaller children to a leaf, then up to its place)."""
    last = heap.pop()
    n = len(heap)
    if not n:
        return last
    first = heap[0]
    pos = 0
    child = 1
    while child < n:
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
    __slots__ = ("_blocks", "_cur", "_ring", "_ring_n", "_scan", "events", "heap", "now", "seq", "stopped")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = start_ns
        self.heap: list[Bucket] = []  # far events' buckets
        self.seq = 0
        self.events = 0
        self.stopped = False
        # (each made at its first use: 4,096 at once were ~1.5 M instructions, 0.5 % of a small run)
        self._ring: list[Bucket | None] = [None] * RING_NS
        self._ring_n = 0  # ring buckets busy
        # per block of the ring, its busy buckets (32 bits: a mask stays a fast integer)
        self._blocks = [Block() for _ in range(RING_NS >> _BLOCK_BITS)]
        self._scan = start_ns  # no ring bucket is due from now until this time
        self._cur: Bucket | None = None  # the bucket playing (its time is now)

    def schedule(self, t_ns: int, event: Event) -> None:
        """Play ``event.fire()`` at ``t_ns`` (not before now), after every event already
        scheduled for that time. An event waits at most once at a time."""
        now = self.now
        t = t_ns if t_ns > now else now
        if t - now < RING_NS:
            i = t & _RING_MASK
            b = self._ring[i]
            if b is None:
                b = self._ring[i] = Bucket(ring=True)
            tail = b.tail
            if tail is not None:
                tail.nxt = event
                b.tail = event
                return
            b.head = event
            b.tail = event
            if b.busy:
                return  # the bucket playing, drained: the loop plays this next
            b.busy = True
            self._ring_n += 1
            self._blocks[i >> _BLOCK_BITS].mask |= 1 << (i & (_BLOCK - 1))
            if t < self._scan:
                self._scan = t
            return
        seq = self.seq
        if seq >= _SEQ_MAX:
            seq = self._renumber()
        self.seq = seq + 1
        b = Bucket()
        b.head = event
        b.tail = event
        b.key = (t << SEQ_BITS) | seq
        heap = self.heap
        heap.append(b)
        sift_up(heap, len(heap) - 1)

    def at(self, t_ns: int, fn: Callable[..., None], *args: Any) -> None:
        self.schedule(t_ns, Call(fn, args))

    def push(self, t_ns: int, handler: Handler, arg: object) -> None:
        """Schedule ``handler.fire(arg)`` at ``t_ns`` (not before now)."""
        self.schedule(t_ns, Pushed(handler, arg))

    def waiting(self) -> bool:
        """Whether any event waits."""
        cur = self._cur
        if cur is None:
            return bool(self.heap) or self._ring_n > 0
        playing = 1 if cur.ring else 0  # (counted busy until closed)
        return cur.head is not None or bool(self.heap) or self._ring_n > playing

    def _renumber(self) -> int:
        """Give the buckets on the heap sequence numbers 0, 1, ... in their order (the times
        and every tie kept): the next free number. A sorted list is a heap."""
        heap = self.heap
        heap.sort(key=_key)
        for i, b in enumerate(heap):
            b.key = (b.key >> SEQ_BITS << SEQ_BITS) | i
        return len(heap)

    def _next_ring(self) -> int:
        """The time of the next busy ring bucket (one must be), from ``_scan`` on: the lowest
        bit set in the masks from there."""
        now = self.now
        t = self._scan if self._scan > now else now
        blocks = self._blocks
        i = t & _RING_MASK
        while True:
            m = blocks[i >> _BLOCK_BITS].mask >> (i & (_BLOCK - 1))  # busy from i to its block's end
            if m:
                t += (m & -m).bit_length() - 1  # the lowest bit set
                self._scan = t
                return t
            end = (i | (_BLOCK - 1)) + 1  # the end of i's block
            t += end - i
            i = end if end < RING_NS else 0

    def _close(self, cur: Bucket) -> None:
        """The bucket playing is played: free it (nothing more can fall due at its time)."""
        self._cur = None
        if cur.ring:
            cur.busy = False
            self._ring_n -= 1
            i = self.now & _RING_MASK
            self._blocks[i >> _BLOCK_BITS].mask ^= 1 << (i & (_BLOCK - 1))  # (its bit is set)

    def _next(self) -> Bucket | None:
        """The bucket that plays next (not taken), or None when nothing waits; far events
        due at a ring bucket's time play before it."""
        heap = self.heap
        if self._ring_n:
            t = self._next_ring()
            if heap and heap[0].key >> SEQ_BITS <= t:
                return heap[0]
            return self._ring[t & _RING_MASK]  # (busy: made)
        return heap[0] if heap else None

    def run(self, until_ns: int, stop: Callable[[], bool] | None = None, max_events: int = 0) -> bool:
        """Play events; True when the run is over (not just paused by ``max_events``)."""
        budget = max_events or -1
        n = 0
        try:
            while not self.stopped:
                cur = self._cur
                event = cur.head if cur is not None else None
                nxt_b: Bucket | None = None
                if event is not None:
                    t = self.now
                else:
                    if cur is not None:
                        self._close(cur)
                    nxt_b = self._next()
                    if nxt_b is None:
                        break
                    t = self._scan if nxt_b.ring else nxt_b.key >> SEQ_BITS
                if stop is not None and stop():
                    return True
                if n == budget:
                    return False
                if t > until_ns:
                    self.now = until_ns
                    return True
                if nxt_b is not None:
                    cur = self._cur = nxt_b if nxt_b.ring else pop_first(self.heap)
                    event = nxt_b.head
                assert cur is not None and event is not None  # (a waiting bucket holds an event)
                nxt = event.nxt
                cur.head = nxt
                if nxt is None:
                    cur.tail = None
                else:
                    event.nxt = None
                self.now = t
                n += 1
                event.fire()
        finally:
            self.events += n
        return True


def _key(b: Bucket) -> int:
    return b.key
