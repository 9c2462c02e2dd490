"""The SRv6 uSID addressing plan shared by hosts, switches and the controller.

Every part of the testbed derives addresses from these functions so that a
host's carrier, a switch's ``my_usid`` entry and the controller's routes can
never disagree. See docs/addressing.md for the plan in prose.

uSID value (16 bits) = tier(2) | plane(4) | index(10).
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import Final

DEFAULT_BLOCK = IPv6Network("fcbb:bb00::/32")
USID_BITS = 16
MAX_USIDS = 6  # F3216: a /32 block leaves 96 bits = six 16-bit uSIDs
# uSID = tier(2) | plane(4) | index(10); not to be confused with the EV's plane bits (ev.PLANE_SHIFT).
USID_TIER_SHIFT: Final = 14
USID_PLANE_SHIFT: Final = 10
USID_PLANE_MASK: Final = 0xF
USID_INDEX_MASK: Final = 0x3FF
MAX_PLANES = USID_PLANE_MASK + 1
MAX_INDEX = USID_INDEX_MASK + 1
MRC_UDP_PORT: Final = 4791
# A host's plain IPv4 address (Mininet's ``IP()``): host index + 1 in this network, as mn numbers hosts.
HOST_IPV4_NET: Final = IPv4Network("10.0.0.0/8")
# MRC packets arrive at <block>:<host uSID>:: exactly: the /64 of the host uSID with an empty slot
# after it. A host function uSID in that slot (plain kernel traffic) falls outside it.
MRC_ARRIVAL_PREFIXLEN: Final = 64


class Tier(enum.IntEnum):
    """What kind of node a uSID names."""

    T0 = 1
    T1 = 2
    HOST = 3


class HostFunction(enum.IntEnum):
    """The uSID after a host's own in the carrier of *plain* (kernel) traffic: what the host's
    kernel does with it (RFC 9800's uDT/uDX behaviours). Tier 0, so no switch ever owns one;
    MRC's own carriers end at the host uSID and never carry one."""

    DECAP_IPV4 = 0x0004  # End.DX4: the inner IPv4 packet to its own destination
    DECAP_IPV6 = 0x0006  # End.DT6: the inner IPv6 packet looked up in the host's local table


class AddressingError(ValueError):
    """A value that does not fit the addressing plan."""


@dataclass(frozen=True, slots=True)
class Usid:
    """A decoded 16-bit micro-SID."""

    tier: Tier
    plane: int
    index: int

    def __post_init__(self) -> None:
        if not 0 <= self.plane < MAX_PLANES:
            raise AddressingError(f"plane {self.plane} outside 0..{MAX_PLANES - 1}")
        if not 0 <= self.index < MAX_INDEX:
            raise AddressingError(f"index {self.index} outside 0..{MAX_INDEX - 1}")

    @property
    def value(self) -> int:
        return (int(self.tier) << USID_TIER_SHIFT) | (self.plane << USID_PLANE_SHIFT) | self.index

    @classmethod
    def decode(cls, value: int) -> Usid:
        if not 0 <= value <= 0xFFFF:
            raise AddressingError(f"uSID {value:#x} is not 16 bits")
        tier = value >> USID_TIER_SHIFT
        if tier == 0:
            raise AddressingError(f"uSID {value:#06x} has tier 0 (end of carrier)")
        return cls(Tier(tier), (value >> USID_PLANE_SHIFT) & USID_PLANE_MASK, value & USID_INDEX_MASK)

    def __str__(self) -> str:
        return f"{self.value:04x}"


def t0_usid(plane: int, index: int) -> int:
    return Usid(Tier.T0, plane, index).value


def t1_usid(plane: int, index: int) -> int:
    return Usid(Tier.T1, plane, index).value


def host_usid(plane: int, host: int) -> int:
    return Usid(Tier.HOST, plane, host).value


def _check_block(block: IPv6Network) -> None:
    if block.prefixlen != 32:
        raise AddressingError(f"locator block {block} must be a /32 (F3216 layout)")


def carrier(usids: list[int] | tuple[int, ...], block: IPv6Network = DEFAULT_BLOCK) -> IPv6Address:
    """Outer destination address: block followed by up to six uSIDs, zero-filled."""
    _check_block(block)
    if len(usids) > MAX_USIDS:
        raise AddressingError(f"{len(usids)} uSIDs do not fit one address (max {MAX_USIDS})")
    value = int(block.network_address)
    for pos, u in enumerate(usids):
        if not 0 < u <= 0xFFFF:
            raise AddressingError(f"uSID {u:#x} at position {pos} is not a non-zero 16-bit value")
        value |= u << (96 - USID_BITS * (pos + 1))
    return IPv6Address(value)


def carrier_usids(addr: IPv6Address, block: IPv6Network = DEFAULT_BLOCK) -> list[int]:
    """The uSIDs left in a carrier, up to the first zero (end of carrier)."""
    if addr not in block:
        raise AddressingError(f"{addr} is not in locator block {block}")
    value = int(addr)
    out = []
    for pos in range(MAX_USIDS):
        u = (value >> (96 - USID_BITS * (pos + 1))) & 0xFFFF
        if u == 0:
            break
        out.append(u)
    return out


def shift(addr: IPv6Address, block: IPv6Network = DEFAULT_BLOCK) -> IPv6Address:
    """uN shift-and-forward: the 80 bits after the active uSID move up by 16, zeros enter."""
    value = int(addr)
    block_bits = value & ~((1 << 96) - 1)
    rest = value & ((1 << 80) - 1)  # the bits after the active uSID
    return IPv6Address(block_bits | (rest << 16))


def usid_prefix(usid: int, block: IPv6Network = DEFAULT_BLOCK) -> IPv6Network:
    """The /48 that names a node: block + its uSID (my_usid key, usid_route prefix)."""
    return IPv6Network(f"{carrier([usid], block)}/48")


def top48(addr: IPv6Address) -> int:
    """The 48-bit value matched by ``my_usid`` (block + active uSID)."""
    return int(addr) >> 80


def nic_address(plane: int, host: int, block: IPv6Network = DEFAULT_BLOCK) -> IPv6Address:
    """Inner source/destination of a host NIC port: <block>:<host uSID>::1."""
    return IPv6Address(int(carrier([host_usid(plane, host)], block)) | 1)


def host_function_address(
    plane: int, host: int, function: HostFunction, block: IPv6Network = DEFAULT_BLOCK
) -> IPv6Address:
    """Where a NIC port's kernel decapsulates plain traffic: <block>:<host uSID>:<function>::."""
    return carrier([host_usid(plane, host), int(function)], block)


def mrc_arrival_prefix(address: str | IPv6Address) -> IPv6Network:
    """The /64 MRC packets to the NIC port whose address is ``address`` arrive in."""
    return IPv6Network(f"{address}/{MRC_ARRIVAL_PREFIXLEN}", strict=False)


def host_ipv4(host: int) -> IPv4Address:
    """A host's plain IPv4 address: 10.0.0.1 for host 0, as Mininet numbers its hosts."""
    if not 0 <= host < HOST_IPV4_NET.num_addresses - 2:
        raise AddressingError(f"host {host} has no address in {HOST_IPV4_NET}")
    return HOST_IPV4_NET.network_address + host + 1


def path_usids(plane: int, src_t0: int, dst_t0: int, dst_host: int, t1: int | None) -> list[int]:
    """uSIDs from host under ``src_t0`` to ``dst_host`` under ``dst_t0`` in ``plane``.

    ``t1=None`` leaves the T1 out: the same-T0 path, or the ECMP baseline where
    the source T0 hashes the packet over its uplinks towards ``dst_t0``.
    """
    if src_t0 == dst_t0:
        return [t0_usid(plane, src_t0), host_usid(plane, dst_host)]
    if t1 is None:
        return [t0_usid(plane, src_t0), t0_usid(plane, dst_t0), host_usid(plane, dst_host)]
    return [t0_usid(plane, src_t0), t1_usid(plane, t1), t0_usid(plane, dst_t0), host_usid(plane, dst_host)]


def parse_block(text: str) -> IPv6Network:
    try:
        block = ipaddress.IPv6Network(text)
    except ValueError as exc:
        raise AddressingError(f"bad locator block {text!r}: {exc}") from exc
    _check_block(block)
    return block
