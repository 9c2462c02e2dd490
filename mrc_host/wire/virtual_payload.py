"""A payload without its bytes: its length and a check value of what it would hold.

Why: a simulated transfer of many gigabytes need not carry them. mrc-sim's ``--payload
virtual`` posts writes whose source is a ``VirtualPayload`` of the whole message; the
sender's segmentation slices it as it slices bytes (``PendingWrite.take``), so every packet
carries a slice: the length the core counts, queues and windows by, and ``check``, a value
of the content that belongs at that place of that message (as a checksum stands for the
bytes it covers). The receiving region holds no memory: it recomputes the check for the
address the packet names and keeps which bytes have been placed (``MemoryRegion``), so a
packet placed at the wrong address, or from another message, is found as the bytes of a
real payload would show it. Nothing here is sent on a wire: the codec refuses it.
"""

from __future__ import annotations

from typing import Final

_MASK: Final = (1 << 61) - 1  # checks stay small ints (compiled: no big-integer arithmetic)
_K1: Final = 0x9E37_79B9
_K2: Final = 0x85EB_CA77


def _times(x: int, k: int) -> int:
    """``x * k`` for ``x`` below 2**30 and ``k`` below 2**32, in halves of ``k``: compiled, a
    factor of 2**30 or more takes the big-integer multiply (~700 instructions), which was
    ~3 % of an 8->1 incast's simulated instructions with virtual payloads."""
    return ((x * (k >> 16)) << 16) + x * (k & 0xFFFF)


def content_check(key: int, offset: int, length: int) -> int:
    """The check value of ``length`` bytes at ``offset`` of the content named ``key``."""
    # every product stays below 2**58; each term is a bijection of its field, so two pieces
    # of one content that differ in offset alone (or in length alone) never share a check
    h = _times(key & 0x3FF_FFFF, _K1) ^ (offset & 0xFF_FFFF_FFFF) * 0x2F ^ _times(length & 0xFFFF, _K2)
    return (h ^ (h >> 29)) & _MASK


class VirtualPayload:
    """``length`` bytes at ``offset`` of the content named ``key``, and their ``check``."""

    __slots__ = ("check", "key", "length", "offset")

    def __init__(self, key: int, offset: int, length: int) -> None:
        if key < 0 or offset < 0 or length < 0:
            raise ValueError(f"virtual payload key {key}, offset {offset}, length {length}: not negative")
        self.key = key
        self.offset = offset
        self.length = length
        self.check = content_check(key, offset, length)

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, s: slice) -> VirtualPayload:
        """A slice, as of bytes (``payload[a:b]``; no step)."""
        if s.step is not None and s.step != 1:
            raise ValueError("a virtual payload is sliced without a step")
        start, stop, _ = s.indices(self.length)
        return VirtualPayload(self.key, self.offset + start, max(stop - start, 0))

    def piece(self, start: int, stop: int) -> VirtualPayload:
        """``self[start:stop]`` for ``0 <= start <= stop <= len(self)``: a native call when
        compiled (a slice goes through ``__getitem__`` as a generic call), once per packet."""
        return VirtualPayload(self.key, self.offset + start, stop - start)

    def __repr__(self) -> str:
        return f"VirtualPayload(key={self.key}, offset={self.offset}, length={self.length})"

    def follows(self, other: VirtualPayload) -> bool:
        """This piece starts where ``other`` ends, in the same content (two can be joined)."""
        return self.key == other.key and self.offset == other.offset + other.length
