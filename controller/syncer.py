"""Pushes the desired state to the switches that timed faults changed, off the scheduler's thread.

Why: a flap's toggle or a fault's expiry only has to change the desired state and say which
switches it touched; writing them is this thread's job. The scheduler then keeps time however
slow a switch answers, and toggles that land while a write is under way are carried by the
next write to that switch (300 flaps at 50 ms are a few writes per switch per period, not one
per toggle; rounds start at most every :data:`MIN_ROUND_GAP_S`, so a busy fabric's writes
carry many changes each while an isolated expiry is written at once). A failed write is
reported and left to the switch's session: on reconnect it reconciles with the desired state,
which already holds the change.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

MIN_ROUND_GAP_S = 0.01  # between the starts of two write rounds (a flap's period is >= 50 ms)

SyncMany = Callable[[set[str]], object]  # raises the first failure after trying every switch
OnError = Callable[[str, Exception], None]  # (a fault id that caused the sync, the failure)


class Syncer:
    def __init__(self, sync: SyncMany, on_error: OnError, name: str = "fault-sync") -> None:
        self._sync = sync
        self._on_error = on_error
        self._cond = threading.Condition()
        self._dirty: dict[str, str] = {}  # switch -> the fault id that last touched it
        self._busy = False
        self._stopped = False
        self.rounds = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def mark(self, switches: set[str], fault_id: str) -> None:
        with self._cond:
            for s in switches:
                self._dirty[s] = fault_id
            self._cond.notify_all()

    def idle(self, timeout: float) -> bool:
        """Wait until nothing is marked and no write is under way (tests, shutdown)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._dirty and not self._busy, timeout)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        started = 0.0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._dirty) or self._stopped)
                if self._stopped:
                    return
                self._busy = True
            gap = started + MIN_ROUND_GAP_S - time.monotonic()
            if gap > 0:
                time.sleep(gap)  # more changes join this round meanwhile
            started = time.monotonic()
            with self._cond:
                batch, self._dirty = self._dirty, {}
            try:
                self._sync(set(batch))
            except Exception as exc:  # reported; the session reconciles on reconnect
                cause = next(iter(batch.values()), "")
                try:
                    self._on_error(cause, exc)
                except Exception:
                    log.exception("reporting a sync failure")
            finally:
                with self._cond:
                    self._busy = False
                    self.rounds += 1
                    self._cond.notify_all()
