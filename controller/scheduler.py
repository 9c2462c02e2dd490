"""One thread runs every timed fault action (a FLAP's toggles, a fault's expiry).

A thread per fault made the controller's thread count grow with its faults (9,186 faults,
9,235 threads); here the timers are entries in one heap, and a cancelled timer is skipped
(and compacted away). A callback's exception is logged and the thread
goes on: a dead scheduler would leave every timed fault in place for good.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(order=True)
class Timer:
    when: float
    seq: int
    action: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Scheduler:
    """``call_at``/``call_later`` from any thread; callbacks run one at a time on its thread."""

    def __init__(self, name: str = "fault-scheduler") -> None:
        self._heap: list[Timer] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._cancelled = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_later(self, delay_s: float, action: Callable[[], None]) -> Timer:
        return self.call_at(time.monotonic() + delay_s, action)

    def call_at(self, when: float, action: Callable[[], None]) -> Timer:
        timer = Timer(when, next(self._seq), action)
        with self._cond:
            heapq.heappush(self._heap, timer)
            if self._heap[0] is timer:
                self._cond.notify()
        return timer

    def cancel(self, timer: Timer) -> None:
        """The timer will not run; the heap is compacted once half of it is cancelled, so
        faults injected and cleared for ever (with week-long expiries) leave no garbage."""
        with self._cond:
            if timer.cancelled:
                return
            timer.cancelled = True
            self._cancelled += 1
            if self._cancelled * 2 > len(self._heap):
                self._heap = [t for t in self._heap if not t.cancelled]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def pending(self) -> int:
        """Timers not yet run or skipped (cancelled ones included until their time)."""
        with self._cond:
            return len(self._heap)

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._heap and self._heap[0].cancelled:
                        heapq.heappop(self._heap)
                        self._cancelled = max(0, self._cancelled - 1)
                        continue
                    wait = self._heap[0].when - time.monotonic() if self._heap else None
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopped:
                    return
                timer = heapq.heappop(self._heap)
            try:
                timer.action()
            except Exception:
                log.exception("scheduled action failed")
