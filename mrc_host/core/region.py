"""Registered memory regions: where incoming RDMA WRITEs land, bounds-checked."""

from __future__ import annotations

from dataclasses import dataclass

from mrc_host.wire.messages import NackReason


@dataclass(slots=True)
class MemoryRegion:
    base: int  # virtual address of byte 0
    rkey: int
    buffer: bytearray

    @property
    def length(self) -> int:
        return len(self.buffer)

    def read(self, vaddr: int, length: int) -> bytes:
        off = vaddr - self.base
        if off < 0 or length < 0 or off + length > self.length:
            raise ValueError(f"[{vaddr:#x}, +{length}) is outside region {self.base:#x}+{self.length}")
        return bytes(self.buffer[off : off + length])


class RegionTable:
    """rkey -> region. ``write`` refuses anything not wholly inside the region the rkey names."""

    def __init__(self) -> None:
        self._by_rkey: dict[int, MemoryRegion] = {}

    def register(self, base: int, length: int, rkey: int) -> MemoryRegion:
        if rkey in self._by_rkey:
            raise ValueError(f"rkey {rkey:#x} is already registered")
        if not (base >= 0 and length > 0 and base + length <= 1 << 64):
            raise ValueError(f"region {base:#x}+{length} does not fit a 64-bit address space")
        if not 0 <= rkey <= 0xFFFFFFFF:
            raise ValueError(f"rkey {rkey:#x} is not 32 bits")
        region = MemoryRegion(base, rkey, bytearray(length))
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
        if off < 0 or end > len(region.buffer):
            return NackReason.BAD_ADDRESS
        region.buffer[off:end] = payload
        return None
