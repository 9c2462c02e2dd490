"""Event bus: fault and switch events, fanned out to every WatchEvents stream.

Events are published from any thread (API calls, the scheduler, switch sessions). A subscriber
is a thread's ``queue.Queue`` or, for the gRPC server's streams, an :class:`AsyncSubscriber`
that hands each event to its event loop: a stream then costs no thread while it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

QUEUE_LIMIT = 10000
HISTORY = 1000


@dataclass(frozen=True)
class Event:
    timestamp: float
    kind: str
    switch: str = ""
    fault_id: str = ""
    message: str = ""


class Sink(Protocol):
    def put_nowait(self, item: Event | None) -> None: ...
    def get_nowait(self) -> Event | None: ...


class AsyncSubscriber:
    """A subscriber on an asyncio loop: :meth:`get` awaits the next event (None: the bus closed).
    Bounded like the others: when full, the oldest event makes room."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue(maxsize=QUEUE_LIMIT)

    def put_nowait(self, item: Event | None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
            self._loop.call_soon_threadsafe(self._put, item)

    def get_nowait(self) -> Event | None:
        return self._queue.get_nowait()

    def _put(self, item: Event | None) -> None:
        if self._queue.full():
            self._queue.get_nowait()
        self._queue.put_nowait(item)

    async def get(self) -> Event | None:
        return await self._queue.get()


class EventBus:
    """Publish/subscribe with a bounded queue per subscriber (a slow reader loses old events)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[Sink] = []
        self.history: deque[Event] = deque(maxlen=HISTORY)

    def publish(self, kind: str, switch: str = "", fault_id: str = "", message: str = "") -> Event:
        event = Event(time.time(), kind, switch, fault_id, message)
        with self._lock:
            self.history.append(event)
            subscribers = list(self._subscribers)
        for q in subscribers:
            try:
                q.put_nowait(event)
            except queue.Full:
                try:
                    q.get_nowait()
                    q.put_nowait(event)
                except (queue.Empty, queue.Full):
                    pass
        return event

    def subscribe(self) -> queue.Queue[Event | None]:
        q: queue.Queue[Event | None] = queue.Queue(maxsize=QUEUE_LIMIT)
        with self._lock:
            self._subscribers.append(q)
        return q

    def subscribe_async(self, loop: asyncio.AbstractEventLoop) -> AsyncSubscriber:
        sub = AsyncSubscriber(loop)
        with self._lock:
            self._subscribers.append(sub)
        return sub

    def unsubscribe(self, q: Sink) -> None:
        with self._lock:
            if q in self._subscribers:
                self._subscribers.remove(q)

    def close(self) -> None:
        """Wake every subscriber with an end marker."""
        with self._lock:
            subscribers = list(self._subscribers)
        for q in subscribers:
            with contextlib.suppress(queue.Full):
                q.put_nowait(None)
