"""Entropy values: the 32-bit path selector every MRC packet carries.

Layout: plane(4) | t1_index(10) | entropy(18). The low 16 bits ride in the
UDP source port, the high 16 bits in the low 16 bits of the outer IPv6 flow
label, so a receiver can echo the exact EV of the packet it acknowledges and
an ECMP switch has something to hash on.
"""

from __future__ import annotations

from dataclasses import dataclass

from mrc_fabric.addressing import MAX_INDEX, MAX_PLANES, AddressingError

ENTROPY_BITS = 18
ENTROPY_MASK = (1 << ENTROPY_BITS) - 1


@dataclass(frozen=True, slots=True, order=True)
class EV:
    """A decoded entropy value."""

    plane: int
    t1: int
    entropy: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.plane < MAX_PLANES:
            raise AddressingError(f"EV plane {self.plane} outside 0..{MAX_PLANES - 1}")
        if not 0 <= self.t1 < MAX_INDEX:
            raise AddressingError(f"EV t1_index {self.t1} outside 0..{MAX_INDEX - 1}")
        if not 0 <= self.entropy <= ENTROPY_MASK:
            raise AddressingError(f"EV entropy {self.entropy} is not {ENTROPY_BITS} bits")

    @property
    def value(self) -> int:
        return (self.plane << 28) | (self.t1 << ENTROPY_BITS) | self.entropy

    @classmethod
    def decode(cls, value: int) -> EV:
        if not 0 <= value <= 0xFFFFFFFF:
            raise AddressingError(f"EV {value:#x} is not 32 bits")
        return cls(value >> 28, (value >> ENTROPY_BITS) & 0x3FF, value & ENTROPY_MASK)

    @property
    def udp_sport(self) -> int:
        return self.value & 0xFFFF

    @property
    def flow_label(self) -> int:
        return self.value >> 16

    def __str__(self) -> str:
        return f"{self.value:08x}"


def ev_value(plane: int, t1: int, entropy: int = 0) -> int:
    return EV(plane, t1, entropy).value


def ev_from_wire(udp_sport: int, flow_label: int) -> int:
    """Reassemble the 32-bit EV from its two halves on the wire."""
    return ((flow_label & 0xFFFF) << 16) | (udp_sport & 0xFFFF)
