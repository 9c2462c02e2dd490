"""The state's *mark*: how far the journal reached, and the next fault id.

Why a file of its own: the journal alone cannot tell its last records cut off (a truncated
file) from a journal that simply ended there, and a lost record could take the highest fault id
with it, so a restart would hand that id out again. The writer updates the mark after each
journal write and before any caller is answered:

- ``n``: the number of the last record written. A journal whose records stop short of it lost
  some: said as damage, never silently;
- ``next_id``: above every id handed out, whatever becomes of the journal and the snapshot.

The mark is written into the page cache before the answer (a killed controller leaves it whole)
and made durable when the writer is idle, at least every 0.2 s (a second flush in each caller's
wait would double every change's cost); after a power cut it may be a little behind, which only
makes its bounds weaker, never wrong. Two fixed slots (each a checksummed frame, 128 bytes)
written in turn and in place -- no new block is needed, so a full disk cannot refuse it once the
file exists -- and read back as the good slot with the highest sequence number: a torn or
damaged slot leaves the other.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from controller.atomic_files import fsync_dir
from controller.state_frames import frame, frame_at
from controller.state_records import MAX_ID, StateFileError

SLOT = 128
BLANK = b" " * SLOT
MARK = ".mark"


@dataclass(frozen=True)
class Mark:
    seq: int
    n: int
    next_id: int

    def encode(self) -> bytes:
        body = json.dumps(
            {"seq": self.seq, "n": self.n, "next_id": self.next_id},
            separators=(",", ":"),
        ).encode()
        data = frame(body)
        return data + b" " * (SLOT - len(data))


def mark_path(path: Path) -> Path:
    return path.with_name(path.name + MARK)


def read_mark(path: Path) -> tuple[Mark | None, str]:
    """The newest good slot of ``path``'s mark (None if none), and what was wrong ("" if
    nothing)."""
    try:
        data = mark_path(path).read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"{mark_path(path)}: {exc}"
    marks, bad = [], []
    for slot in (0, 1):
        chunk = data[slot * SLOT : (slot + 1) * SLOT]
        if chunk == BLANK:
            continue  # never written yet
        try:
            marks.append(_decode(chunk))
        except (StateFileError, ValueError, RecursionError) as exc:
            bad.append(f"slot {slot}: {exc}"[:120])
    if not marks:
        return None, f"{mark_path(path)}: no good slot ({'; '.join(bad) or 'empty'})"
    why = f"{mark_path(path)}: {'; '.join(bad)} (the other slot is used)" if bad else ""
    return max(marks, key=lambda m: m.seq), why


def _decode(chunk: bytes) -> Mark:
    f = frame_at(chunk, 0)
    if f is None:
        raise StateFileError("checksum")
    doc = json.loads(f.body)
    if not isinstance(doc, dict):
        raise StateFileError("not an object")
    values = []
    for key, hi in (("seq", 2**62), ("n", 2**62), ("next_id", MAX_ID + 1)):
        v = doc.get(key)
        if type(v) is not int or not 0 <= v <= hi:
            raise StateFileError(f"{key}: {str(v)[:20]!r} is out of range")
        values.append(v)
    return Mark(*values)


class MarkWriter:
    """Writes the mark's slots in turn (the state store's writer thread owns it)."""

    def __init__(self, path: Path, last: Mark | None) -> None:
        self.path = mark_path(path)
        self.last = last
        self._fd: int | None = None
        self._dirty = False

    def write(self, n: int, next_id: int) -> None:
        """In the page cache on return (OSError otherwise): :meth:`sync` makes it durable."""
        seq = self.last.seq + 1 if self.last is not None else 1
        mark = Mark(seq, n, next_id)
        if self._fd is None:
            self._fd = self._open()
        if os.pwrite(self._fd, mark.encode(), (seq % 2) * SLOT) != SLOT:
            raise OSError(f"{self.path}: short write")
        self.last = mark
        self._dirty = True

    @property
    def dirty(self) -> bool:
        return self._dirty

    def sync(self) -> None:
        if self._dirty and self._fd is not None:
            self._dirty = False
            os.fdatasync(self._fd)

    def _open(self) -> int:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < 2 * SLOT:  # both slots' blocks now: no allocation later
                blank = self.last.encode() if self.last is not None else BLANK
                if os.pwrite(fd, blank * 2, 0) != 2 * SLOT:
                    raise OSError(f"{self.path}: short write")
                os.fsync(fd)
                fsync_dir(self.path.parent)
        except OSError:
            os.close(fd)
            raise
        return fd

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
