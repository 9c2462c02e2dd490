"""Entropy values: the 32-bit path selector every MRC packet carries.

Layout: plane(4) | t1_index(10) | entropy(18). On the wire the EV is split in two
(docs/design.md §3): its low 14 bits ride in the UDP source port, which is always
``0xC000 | (EV & 0x3FFF)`` -- the range Linux RoCE draws its source ports from, so no EV
makes a frame look like VXLAN, DHCPv6 or any other well-known port -- and its high 18
bits in the outer (and inner) IPv6 flow label (``EV >> 14``, a 20-bit field whose top two
bits stay 0). A receiver reassembles the exact EV of the packet it acknowledges, and an
ECMP switch has both fields to hash on.

This module is the one place that knows the layout: the codec, the scapy layers, the
agent and the tools decode EV bits through it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mrc_fabric.addressing import MAX_INDEX, MAX_PLANES, AddressingError

ENTROPY_BITS: Final = 18
ENTROPY_MASK: Final = (1 << ENTROPY_BITS) - 1
PLANE_SHIFT: Final = 28
T1_SHIFT: Final = ENTROPY_BITS
T1_MASK: Final = 0x3FF

SPORT_EV_BITS: Final = 14  # low EV bits carried in the UDP source port
SPORT_EV_MASK: Final = (1 << SPORT_EV_BITS) - 1  # 0x3FFF
SPORT_BASE: Final = 0xC000  # every MRC source port is in 0xC000..0xFFFF
FLOW_LABEL_BITS: Final = 32 - SPORT_EV_BITS  # 18 high EV bits in the 20-bit flow label
FLOW_LABEL_EV_MASK: Final = (1 << FLOW_LABEL_BITS) - 1

MAX_PEER_EV_ROWS: Final = 131_072
"""Rows a receiver keeps of the peer's EVs it has seen DATA on (its per-EV counters); DATA on
any further EV is still placed, counted only in one overflow counter. An EV arrives from the
wire, where 2**32 values pass the ICRC: without a cap a forged stream grows one connection's
counters without bound. A peer's EV set is drawn once and never grows: retired EVs are
replaced from backups drawn with it, and restored ones come back as the same values. Its
largest is OCP's largest profile, 65,536 EVs, plus the most backups a host is configured
with, 256 for each of 16 planes: 69,632 values over the whole life of a connection. The cap
is about twice that: at most 8.4 MB of rows and table a connection (compiled)."""


class EvWireError(ValueError):
    """A UDP source port / flow label pair that no EV produces."""


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
        return (self.plane << PLANE_SHIFT) | (self.t1 << T1_SHIFT) | self.entropy

    @classmethod
    def decode(cls, value: int) -> EV:
        if not 0 <= value <= 0xFFFFFFFF:
            raise AddressingError(f"EV {value:#x} is not 32 bits")
        return cls(value >> PLANE_SHIFT, (value >> T1_SHIFT) & T1_MASK, value & ENTROPY_MASK)

    @property
    def udp_sport(self) -> int:
        return udp_sport(self.value)

    @property
    def flow_label(self) -> int:
        return flow_label(self.value)

    def __str__(self) -> str:
        return f"{self.value:08x}"


def ev_value(plane: int, t1: int, entropy: int = 0) -> int:
    return EV(plane, t1, entropy).value


# Plain-int helpers for the packet path (no object per packet); same layout as EV.
def ev_plane(value: int) -> int:
    """Plane bits of a 32-bit EV (selects the NIC port)."""
    return value >> PLANE_SHIFT


def ev_t1(value: int) -> int:
    """T1 index bits of a 32-bit EV."""
    return (value >> T1_SHIFT) & T1_MASK


def ev_compose(plane: int, t1: int, entropy: int) -> int:
    """``ev_value`` without its checks, for callers that have checked the ranges already
    (drawing a million EVs for a big simulation)."""
    return (plane << PLANE_SHIFT) | (t1 << T1_SHIFT) | entropy


def udp_sport(value: int) -> int:
    """UDP source port that carries the low 14 bits of ``value``: 0xC000 | (EV & 0x3FFF)."""
    return SPORT_BASE | (value & SPORT_EV_MASK)


def flow_label(value: int) -> int:
    """Flow label that carries the high 18 bits of ``value`` (EV >> 14)."""
    return (value >> SPORT_EV_BITS) & FLOW_LABEL_EV_MASK


def ev_from_wire(udp_sport: int, flow_label: int) -> int:
    """Reassemble the 32-bit EV from its two halves on the wire (no validity check)."""
    return ((flow_label & FLOW_LABEL_EV_MASK) << SPORT_EV_BITS) | (udp_sport & SPORT_EV_MASK)


def check_wire(udp_sport: int, flow_label: int) -> None:
    """Raise EvWireError unless the pair is one an MRC sender writes (decoders: untrusted input)."""
    if udp_sport & ~SPORT_EV_MASK != SPORT_BASE:
        raise EvWireError(f"UDP source port {udp_sport:#06x} outside 0xc000..0xffff")
    if flow_label >> FLOW_LABEL_BITS:
        raise EvWireError(f"flow label {flow_label:#07x} has bits above the 18 EV bits")
