"""The one writer of the controller's state files (format: ``state_file.py``).

Why one thread: every API call, expiry and install changes the state, and two writers of one
file are how it tore. Callers hand *records* to :meth:`StateStore.submit`; the writer thread
appends every record waiting to the journal with one fdatasync (a group commit: 16 concurrent
calls pay for one flush, not 16), writes the mark (``state_mark``) and wakes the callers; the
mark is flushed when the writer is idle. A record costs its frame, not a rewrite of every fault.
When the journal has grown past :data:`COMPACT_RECORDS` (and past twice the faults), or past
:data:`COMPACT_FACTOR` times the snapshot's size, the writer folds it into a new snapshot; a
write the disk refuses for want of space tries that first (on a small disk the journal is what
filled it).

Durable or refused: a caller that waits (:meth:`commit`) learns its record is on disk, or gets
:class:`StateUnavailable` naming the file and why -- and then the record is *not* on disk: a
failed write is cut off again (``ftruncate`` back to the last acknowledged byte, which needs no
space) before anything else is written, so writing resumes on a clean record boundary once the
disk has room, and nothing refused comes back at a restart. Records nobody waits for (an expiry,
a fault adopted from a switch, a roll-back) are kept and written with the next batch instead.
The writer's own copy of the state changes only once a record is durable, so a snapshot it
writes never holds a refused change.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.atomic_files import NO_SPACE
from controller.state_file import Recovered, journal_entry, journal_path, save_state
from controller.state_mark import MarkWriter
from controller.state_records import ControllerState, record_ids

log = logging.getLogger(__name__)

COMPACT_RECORDS = 4096  # journal records before a compaction is considered (and > 2 x faults)
COMPACT_FACTOR = 4  # ... or journal bytes past this many snapshots' (plus COMPACT_SLACK)
COMPACT_SLACK = 16 << 10
ROOM_SLACK = 4096  # beyond the journal's size, kept free so that it can always be folded
WAIT_TIMEOUT_S = 30.0  # a caller waits at most this long for its record to be durable
RETRY_S = 1.0  # records nobody waits for are tried again this often while the disk refuses
MAX_KEPT_RECORDS = 100_000  # of those, at most this many are held
MARK_IDLE_S = 0.05  # the mark is flushed once the writer has had nothing to do this long ...
MARK_SYNC_S = 0.2  # ... or, under a steady load, this long after its last flush
PENDING = object()


class StateUnavailable(OSError):
    """A change that could not be made durable: refused (the message names the file and why)."""


@dataclass
class _Pending:
    record: dict[str, Any]
    ticket: int
    kept: bool  # nobody waits: written with a later batch if this one fails


class StateStore:
    """Journal, mark and snapshots of one state file; :meth:`submit` from any thread."""

    def __init__(self, path: Path, found: Recovered, on_error: Callable[[str], None] | None = None) -> None:
        """``found`` is what the files hold now (``recover_state``): appended to where it is
        clean, else a new snapshot is written first (tried again before every write until it
        succeeds: until then every change is refused). ``on_error`` hears each change of
        :attr:`error` (from the writer thread; "" once writing works again)."""
        self.path = path
        self._on_error = on_error
        self.state = found.state or ControllerState()  # the writer's copy (the writer thread's)
        self.state.next_id = max(self.state.next_id, found.next_id)
        self._n = self.state.upto  # the last record number used (appending: the last acknowledged)
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._kept: list[_Pending] = []  # records nobody waits for whose write failed
        self._submitted = 0  # tickets handed out ...
        self._done = 0  # ... and how many of them are written or failed
        self._results: dict[int, object] = {}  # a waited-for ticket: PENDING, None (written) or why not
        self._stopped = False
        self._fd: int | None = None
        self._offset = 0  # the journal's acknowledged length: every write starts here
        self._cut = False  # a failed write may have left bytes past _offset
        self._since_compaction = 0
        self._snapshot_bytes = _size(path)  # the size of the last snapshot written
        self._mark_synced = 0.0
        self._retry_compaction = 0.0  # (after a failed one, the next is tried no sooner)
        self._marks = MarkWriter(path, found.mark)
        self.error = ""  # why the last write failed ("" once one has succeeded since)
        self.writes = 0  # journal flushes (each carries every record that waited)
        self.compactions = 0
        if found.clean and found.append_at is not None:
            try:
                self._open_journal(found.append_at)
            except OSError as exc:
                self._failed(exc)
        if self._fd is None:  # a new snapshot: it includes every record number any file names
            self._n = self.state.upto = max(found.last_n, self.state.upto)
            try:
                self._compact()
            except OSError as exc:  # said now; tried again before the next write
                self._failed(exc)
        self._thread = threading.Thread(target=self._run, name="state-writer", daemon=True)
        self._thread.start()

    # -- callers ----------------------------------------------------------------------------------
    def submit(self, record: dict[str, Any], kept: bool = False) -> int:
        """Hand in one record; returns its ticket for :meth:`wait`. ``kept``: nobody will wait
        for it, so a failed write keeps it for the next one instead of dropping it."""
        with self._cond:
            self._submitted += 1
            self._queue.append(_Pending(record, self._submitted, kept))
            if not kept:
                self._results[self._submitted] = PENDING
            self._cond.notify_all()
            return self._submitted

    def wait(self, ticket: int) -> None:
        """Return once record ``ticket`` is on disk; StateUnavailable if it is not (refused).
        A record still queued after WAIT_TIMEOUT_S (the writer is stuck on an earlier write) is
        taken back and refused; one being written is waited for, so a refusal is never undone
        by a write that lands later."""

        def settled() -> bool:
            return self._results.get(ticket) is not PENDING or self._stopped

        with self._cond:
            if not self._cond.wait_for(settled, WAIT_TIMEOUT_S):
                queued = [p for p in self._queue if p.ticket == ticket]
                if queued:
                    self._queue.remove(queued[0])
                    self._results.pop(ticket, None)
                    raise self._unavailable(f"not written within {WAIT_TIMEOUT_S:g} s")
                self._cond.wait_for(settled)
            result = self._results.pop(ticket, None)
        if result is PENDING:
            raise self._unavailable("the controller is stopping")
        if isinstance(result, StateUnavailable):
            raise result

    def commit(self, record: dict[str, Any]) -> None:
        """Durable on return, or StateUnavailable (and then it is on no disk)."""
        self.wait(self.submit(record))

    def flush(self) -> None:
        """Wait until every record handed in so far is written (or failed)."""
        with self._cond:
            target = self._submitted
            self._cond.wait_for(lambda: self._done >= target or self._stopped, WAIT_TIMEOUT_S)

    def stop(self) -> None:
        self.flush()
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=5)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._marks.close()

    # -- the writer thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                timeout = MARK_IDLE_S if self._marks.dirty else RETRY_S if self._kept else None
                self._cond.wait_for(lambda: bool(self._queue) or self._stopped, timeout)
                if self._stopped and not self._queue:
                    break
                fresh, self._queue = self._queue, []
                batch: list[_Pending] = []
                if fresh or not self._marks.dirty:  # (idle with a dirty mark: flush it first)
                    batch, self._kept = self._kept + fresh, []
            if not batch or time.monotonic() - self._mark_synced > MARK_SYNC_S:
                self._sync_mark()
            if batch:
                self._write(batch, fresh)
        self._sync_mark()
        kept, self._kept = self._kept, []
        if kept:  # one last try for what nobody waits for
            self._write(kept, [])

    def _sync_mark(self) -> None:
        """The marks written so far, made durable (see ``state_mark``): when the writer is idle,
        and at least every MARK_SYNC_S under load (a flush per batch would double the wait of
        every call that follows another)."""
        self._mark_synced = time.monotonic()
        try:
            self._marks.sync()
        except OSError as exc:
            log.warning("state file %s: the mark could not be flushed: %s", self.path, exc)

    def _write(self, batch: list[_Pending], fresh: list[_Pending]) -> None:
        try:
            self._append(batch)
            self._set_error("")
        except Exception as exc:  # the writer must outlive anything: refuse, keep the rest
            failure = self._failed(exc)
            kept = [p for p in batch if p.kept][:MAX_KEPT_RECORDS]
            with self._cond:
                self._kept = kept + self._kept
                self._settle(fresh, failure)
        with self._cond:
            self._settle(fresh, None)
            if fresh:
                self._done = fresh[-1].ticket
            self._cond.notify_all()

    def _settle(self, fresh: list[_Pending], result: StateUnavailable | None) -> None:
        """Tell the waiters of ``fresh`` (those still waiting) how their records fared."""
        for p in fresh:
            if self._results.get(p.ticket) is PENDING:
                self._results[p.ticket] = result

    def _append(self, batch: list[_Pending]) -> None:
        if self._fd is None:
            self._compact()
        try:
            self._write_batch(batch)
        except OSError as exc:
            if exc.errno not in NO_SPACE or not self._offset:
                raise
            try:  # the journal may be what filled the disk: fold it away, then try again
                self._compact()
            except OSError:
                raise exc from None
            self._write_batch(batch)
        self._since_compaction += len(batch)
        too_long = self._offset > COMPACT_FACTOR * self._snapshot_bytes + COMPACT_SLACK
        too_many = self._since_compaction > max(COMPACT_RECORDS, 2 * len(self.state.faults))
        if (too_long or too_many or self._short_of_space()) and time.monotonic() > self._retry_compaction:
            try:
                self._compact()
            except OSError as exc:  # the journal goes on; tried again a second later
                self._retry_compaction = time.monotonic() + RETRY_S
                log.warning("state file %s: compaction failed (the journal goes on): %s", self.path, exc)

    def _write_batch(self, batch: list[_Pending]) -> None:
        """Journal and mark, or neither (what was written of a failed batch is cut off again)."""
        assert self._fd is not None
        if self._cut:
            os.ftruncate(self._fd, self._offset)
            self._cut = False
        data = b"".join(journal_entry(p.record, self._n + 1 + i) for i, p in enumerate(batch))
        next_id = max([self.state.next_id, *(i + 1 for p in batch for i in record_ids(p.record))])
        self._keep_room(len(data))
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(self._fd, data[written:], self._offset + written)
            os.fdatasync(self._fd)
            self._marks.write(self._n + len(batch), next_id)
        except BaseException:
            self._cut = True
            try:
                os.ftruncate(self._fd, self._offset)  # never append behind a torn record
                self._cut = False
            except OSError:
                pass
            raise
        self._offset += len(data)
        self._n += len(batch)
        for p in batch:
            self.state.apply(p.record)
        self.state.upto = self._n
        self.writes += 1

    def _keep_room(self, size: int) -> None:
        """ENOSPC unless, after ``size`` more bytes, the disk still has room to fold the journal
        away (a journal that took the last byte could never be folded: every change refused for
        good, though the state itself fits)."""
        if not self._offset:
            return
        try:
            st = os.statvfs(self.path.parent)
        except OSError:
            return
        free, need = st.f_bavail * st.f_frsize, self._offset + 2 * size + ROOM_SLACK
        if free < need:
            raise OSError(errno.ENOSPC, f"{free} B free, {need} B kept to fold the journal")

    def _short_of_space(self) -> bool:
        """Little room left and a journal worth folding: fold it while a new snapshot still fits."""
        if self._offset < COMPACT_SLACK // 4:
            return False
        try:
            st = os.statvfs(self.path.parent)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < 2 * self._snapshot_bytes + COMPACT_SLACK

    def _compact(self) -> None:
        """A new snapshot of the state (and its copy), then an empty journal after it. A failure
        part way leaves every file consistent, and the journal in use unchanged."""
        self._snapshot_bytes = save_state(self.path, self.state)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._open_journal(0)
        self._marks.write(self._n, self.state.next_id)
        self._marks.sync()
        self._since_compaction = 0
        self.compactions += 1

    def _open_journal(self, offset: int) -> None:
        """Append from ``offset`` on (what lies past it was never acknowledged: cut off)."""
        fd = os.open(journal_path(self.path), os.O_RDWR)
        try:
            os.ftruncate(fd, offset)
        except OSError:
            os.close(fd)
            raise
        self._fd, self._offset, self._cut = fd, offset, False

    def _failed(self, exc: BaseException) -> StateUnavailable:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else repr(exc)
        failure = self._unavailable(why, exc.errno if isinstance(exc, OSError) else None)
        self._set_error(failure.strerror or why)
        return failure

    def _set_error(self, error: str) -> None:
        if error == self.error:
            return
        if error:
            log.error("%s", error)
        else:
            log.warning("state file %s: writing again", self.path)
        self.error = error
        if self._on_error is not None:
            self._on_error(error)

    def _unavailable(self, why: str, code: int | None = None) -> StateUnavailable:
        return StateUnavailable(
            code or errno.EIO, f"state file {self.path}: {why}{free_space(self.path)}: change not made"
        )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def free_space(path: Path) -> str:
    """`` (N B free)`` on the state file's filesystem, when it can be told."""
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return ""
    return f" ({st.f_bavail * st.f_frsize} B free of {st.f_blocks * st.f_frsize} B)"
