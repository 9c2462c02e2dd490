"""The one writer of the controller's state file (format: ``state_file.py``).

Why one thread: every API call, expiry and install changes the state, and two writers of
one file are how it tore (a shared temporary name, writes outside any lock). Here callers
hand *records* to :meth:`StateStore.submit`; the writer thread appends every record waiting
to the journal with one fdatasync (a group commit: 16 concurrent calls pay for one flush, not
16) and wakes the callers that asked to wait. A record costs its line, not a rewrite of every
fault, so the thousandth fault is as cheap to save as the first. When the journal has grown
past :data:`COMPACT_RECORDS` (and past twice the faults) the writer folds it into a new
snapshot (written twice: the second copy is the last good state should the first be damaged).

The writer keeps its own copy of the state, built from the same records, so a snapshot it
writes is exactly the journal it replaces. A write that fails (disk full, a directory gone) is
logged and retried with the next record; callers waiting on it get the OSError.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from pathlib import Path
from typing import Any

from controller.state_file import (
    ControllerState,
    journal_line,
    journal_path,
    save_state,
)

log = logging.getLogger(__name__)

COMPACT_RECORDS = 4096  # journal lines before a compaction is considered (and > 2 x faults)
WAIT_TIMEOUT_S = 30.0  # a caller waits at most this long for its record to be durable


class StateStore:
    """Journal and snapshots of one state file; :meth:`submit` from any thread."""

    def __init__(self, path: Path, state: ControllerState, fresh: bool) -> None:
        """``state`` is what the files hold now (as read at start); ``fresh``: start a new
        generation at once (no file yet, or it was unreadable) instead of appending."""
        self.path = path
        self.state = state  # the writer's own copy (only the writer thread changes it)
        self._cond = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._submitted = 0  # records handed in ...
        self._durable = 0  # ... and how many of them are on disk
        self._failures: deque[tuple[int, int, OSError]] = deque(maxlen=64)  # (first, last ticket, why)
        self._stopped = False
        self._journal_lines = 0
        self._fd: int | None = None
        self.writes = 0  # journal flushes (each carries every record that waited)
        self.compactions = 0
        if fresh or not journal_path(path).exists():
            self._compact()
        else:
            self._journal_lines = sum(1 for _ in journal_path(path).open("rb"))
            self._fd = os.open(journal_path(path), os.O_WRONLY | os.O_APPEND)
        self._thread = threading.Thread(target=self._run, name="state-writer", daemon=True)
        self._thread.start()

    def submit(self, record: dict[str, Any]) -> int:
        """Hand in one record; returns its ticket for :meth:`wait`."""
        with self._cond:
            self._queue.append(record)
            self._submitted += 1
            self._cond.notify_all()
            return self._submitted

    def wait(self, ticket: int) -> None:
        """Return once record ``ticket`` is on disk: OSError if its write failed, TimeoutError
        after WAIT_TIMEOUT_S."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._durable >= ticket or self._stopped, WAIT_TIMEOUT_S):
                raise TimeoutError(f"state file {self.path}: not written within {WAIT_TIMEOUT_S:g} s")
            for lo, hi, exc in self._failures:
                if lo <= ticket <= hi:
                    raise exc

    def flush(self) -> None:
        """Wait until every record handed in so far is on disk (or failed)."""
        with self._cond:
            target = self._submitted
            self._cond.wait_for(lambda: self._durable >= target or self._stopped, WAIT_TIMEOUT_S)

    def stop(self) -> None:
        self.flush()
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._stopped)
                if not self._queue and self._stopped:
                    return
                batch, self._queue = self._queue, []
                first, upto = self._durable + 1, self._durable + len(batch)
            try:
                self._append(batch)
            except Exception as exc:  # the writer must outlive anything: report it to the waiters
                log.warning("cannot write the controller state to %s: %r", self.path, exc)
                failure = exc if isinstance(exc, OSError) else OSError(f"state file: {exc!r}")
                with self._cond:
                    self._failures.append((first, upto, failure))
            with self._cond:
                self._durable = upto
                self._cond.notify_all()

    def _append(self, batch: list[dict[str, Any]]) -> None:
        for rec in batch:
            self.state.apply(rec)
        if self._fd is None:
            self._compact()  # the last write failed half way: start clean
            return
        data = b"".join(journal_line(r) for r in batch)
        written = os.write(self._fd, data)
        if written != len(data):
            raise OSError(f"short write to {journal_path(self.path)}: {written} of {len(data)} B")
        os.fdatasync(self._fd)
        self.writes += 1
        self._journal_lines += len(batch)
        if self._journal_lines > max(COMPACT_RECORDS, 2 * len(self.state.faults)):
            self._compact()

    def _compact(self) -> None:
        """A new generation: a snapshot of the state (twice: ``S`` and ``S.prev``), then an
        empty journal after it."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.state.generation += 1
        save_state(self.path, self.state)
        self._fd = os.open(journal_path(self.path), os.O_WRONLY | os.O_APPEND)
        self._journal_lines = 1
        self.compactions += 1
