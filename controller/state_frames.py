"""How every piece of the controller's state sits on disk: a *frame* that stands alone.

A frame is ``<crc32 of the body, 8 hex digits> <length of the body> <body>\\n``; the body is one
JSON object. Why the length and the checksum both: the checksum tells a damaged frame from a
good one, the length tells where a frame ends even when its terminator was hit, and together
they let a reader skip a damaged frame and find the next good one (:func:`scan` looks for the
next place a frame header matches and its checksum holds). One flipped byte, a record cut short
or a torn write then cost the frames they touch, never the ones after them.

The previous release's journal lines (``<crc32> <json>\\n``, no length) are still read.
Pure: bytes in, frames and the damaged ranges out.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

HEAD = re.compile(rb"([0-9a-f]{8}) ([0-9]{1,9}) ")
LEGACY = re.compile(rb"([0-9a-f]{8}) (?=\{)")
MAX_BODY = 64 << 20  # no frame is longer: a length above it is damage


@dataclass(frozen=True)
class Frame:
    start: int  # byte offset of its first byte
    end: int  # one past its last byte (its terminator)
    body: bytes


@dataclass(frozen=True)
class Damage:
    """Bytes ``[start, end)`` that hold no good frame."""

    start: int
    end: int

    def describe(self) -> str:
        return f"bytes {self.start}-{self.end}"


def frame(body: bytes) -> bytes:
    return b"%08x %d %s\n" % (zlib.crc32(body), len(body), body)


def frame_at(data: bytes, pos: int) -> Frame | None:
    """The good frame starting at ``pos``, if one does (a legacy line counts)."""
    m = HEAD.match(data, pos)
    if m is not None:
        length = int(m.group(2))
        body = data[m.end() : m.end() + length]
        if length <= MAX_BODY and len(body) == length and int(m.group(1), 16) == zlib.crc32(body):
            # the byte after the body is its terminator, whatever it became
            return Frame(pos, min(m.end() + length + 1, len(data)), body)
    m = LEGACY.match(data, pos)
    if m is not None:
        nl = data.find(b"\n", m.end())
        end = len(data) if nl < 0 else nl
        body = data[m.end() : end]
        if int(m.group(1), 16) == zlib.crc32(body):
            return Frame(pos, min(end + 1, len(data)), body)
    return None


def scan(data: bytes) -> tuple[list[Frame], list[Damage]]:
    """Every good frame of ``data`` in order, and the ranges between them that hold none."""
    frames: list[Frame] = []
    damage: list[Damage] = []
    pos, bad_from = 0, -1
    while pos < len(data):
        f = frame_at(data, pos)
        if f is not None:
            if bad_from >= 0:
                damage.append(Damage(bad_from, pos))
                bad_from = -1
            frames.append(f)
            pos = f.end
            continue
        if bad_from < 0:
            bad_from = pos
        pos = _next_candidate(data, pos + 1)
    if bad_from >= 0:
        damage.append(Damage(bad_from, len(data)))
    return frames, damage


def _next_candidate(data: bytes, pos: int) -> int:
    """The next offset where a frame header could start (or the end)."""
    m = HEAD.search(data, pos)
    n = LEGACY.search(data, pos)
    found = [x.start() for x in (m, n) if x is not None]
    return min(found) if found else len(data)
