"""Event bus: fault and switch events, fanned out to every WatchEvents stream."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass

QUEUE_LIMIT = 10000
HISTORY = 1000


@dataclass(frozen=True)
class Event:
    timestamp: float
    kind: str
    switch: str = ""
    fault_id: str = ""
    message: str = ""


class EventBus:
    """Publish/subscribe with a bounded queue per subscriber (a slow reader loses old events)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: list[queue.Queue[Event | None]] = []
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

    def unsubscribe(self, q: queue.Queue[Event | None]) -> None:
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
