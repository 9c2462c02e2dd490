"""Registered memory regions: where incoming RDMA WRITEs land, bounds-checked.

A region spans ``length`` bytes from its virtual address ``base``. Its memory is either
allocated when it is registered, or -- ``lazy`` -- as writes land in it, in steps of
``GROW_BYTES``: a peer that registers a region and never writes costs nothing (the agent's
receive rings; a handshake must not reserve megabytes before any data arrives).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mrc_host.wire.messages import NackReason

GROW_BYTES: Final = 1 << 20  # a lazy region's buffer grows by whole steps of this


@dataclass(slots=True)
class MemoryRegion:
    base: int  # virtual address of byte 0
    rkey: int
    buffer: bytearray  # bytes [0, len(buffer)) of the region; the rest reads as zeros
    length: int = -1  # bytes the region spans (-1: the buffer's length, set at registration)

    def __post_init__(self) -> None:
        if self.length < 0:
            self.length = len(self.buffer)

    def grow(self, end: int) -> None:
        """Make the buffer cover [0, end) (whole steps, never past the region's end)."""
        have = len(self.buffer)
        if end > have:
            want = min(self.length, -(-end // GROW_BYTES) * GROW_BYTES)
            self.buffer.extend(bytes(want - have))

    def read(self, vaddr: int, length: int) -> bytes:
        off = vaddr - self.base
        if off < 0 or length < 0 or off + length > self.length:
            raise ValueError(f"[{vaddr:#x}, +{length}) is outside region {self.base:#x}+{self.length}")
        got = bytes(self.buffer[off : off + length])
        return got + bytes(length - len(got))


class RegionTable:
    """rkey -> region. ``write`` refuses anything not wholly inside the region the rkey names."""

    def __init__(self) -> None:
        self._by_rkey: dict[int, MemoryRegion] = {}

    def register(self, base: int, length: int, rkey: int, lazy: bool = False) -> MemoryRegion:
        if rkey in self._by_rkey:
            raise ValueError(f"rkey {rkey:#x} is already registered")
        if not (base >= 0 and length > 0 and base + length <= 1 << 64):
            raise ValueError(f"region {base:#x}+{length} does not fit a 64-bit address space")
        if not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError(f"rkey {rkey:#x} is not 32 bits")
        region = MemoryRegion(base, rkey, bytearray() if lazy else bytearray(length), length)
        self._by_rkey[rkey] = region
        return region

    def get(self, rkey: int) -> MemoryRegion | None:
        return self._by_rkey.get(rkey)

    def write(self, vaddr: int, rkey: int, payload: bytes) -> NackReason | None:
        """Place ``payload`` at ``vaddr``; return why not (nothing is written then)."""
        region = self._by_rkey.get(rkey)
        if region is None:
            return NackReason.BAD_RKEY
        off = vaddr - region.base
        end = off + len(payload)
        if off < 0 or end > region.length:
            return NackReason.BAD_ADDRESS
        buf = region.buffer
        if end > len(buf) and payload:
            region.grow(end)
        buf[off:end] = payload
        return None
