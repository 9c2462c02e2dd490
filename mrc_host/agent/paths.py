"""From the controller's per-host configuration to what the data path needs per packet.

The agent learns paths only from ``<run_dir>/hosts/<host>.json`` (mrc_fabric.hostconfig):
its NIC ports, and per destination a carrier template that each EV specialises. This
module turns that into the values the packet loop looks up, built once per peer:
queue-pair numbers, the core's ``PathSpace``, per-plane ``FrameAddressing`` and a cache
of 16-byte carriers per EV (so no per-packet address arithmetic or scapy).

Queue-pair numbers are derived: both ends compute them from the two host indexes, the
transfer mode and the role (the data sender's end or the data receiver's end). What is
*not* derivable -- the initial PSN, the rkey, the nonce -- is random per connection and
exchanged in the handshake (CONNECT / CONNECT_ACK, docs/agent.md), which is the only way a
receiving end is created.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv6Address, IPv6Network
from typing import Final

from mrc_fabric.addressing import MAX_INDEX, mrc_arrival_prefix
from mrc_fabric.ev import ev_plane
from mrc_fabric.frames import payload_for_mtu
from mrc_fabric.hostconfig import CarrierTemplate, Destination, HostConfig
from mrc_host.core import Mode, PathSpace
from mrc_host.wire.codec import FrameEncoder
from mrc_host.wire.framing import FrameAddressing

# QP number (24 bits) = role(1) | mode(2) | data sender index(10) | data receiver index(10)
ROLE_SHIFT: Final = 22
MODE_SHIFT: Final = 20
SRC_SHIFT: Final = 10
INDEX_MASK: Final = MAX_INDEX - 1
MODE_CODES: Final[dict[Mode, int]] = {Mode.MRC: 0, Mode.SINGLE_PATH: 1, Mode.ECMP: 2}
MODES_BY_CODE: Final = {v: k for k, v in MODE_CODES.items()}
ROLE_SENDER: Final = 1  # the QP end that sends DATA (and receives SACK/NACK)
ROLE_RECEIVER: Final = 0  # the QP end that places DATA in its region


ROUTE_CACHE_MAX: Final = 4096  # EVs whose carrier and route a peer's entry keeps
RX_BASE_VADDR: Final = 0x1_0000_0000  # virtual address of byte 0 of every receive ring


@dataclass(frozen=True, slots=True)
class QpId:
    """A decoded queue-pair number."""

    role: int
    mode: Mode
    src: int  # index of the host that sends DATA on this QP
    dst: int  # index of the host that receives it

    @property
    def value(self) -> int:
        return (
            (self.role << ROLE_SHIFT)
            | (MODE_CODES[self.mode] << MODE_SHIFT)
            | (self.src << SRC_SHIFT)
            | self.dst
        )

    @property
    def peer(self) -> QpId:
        """The other end of the same queue pair."""
        return QpId(1 - self.role, self.mode, self.src, self.dst)

    @classmethod
    def decode(cls, value: int) -> QpId | None:
        """None for a number no agent hands out (unknown mode code or out of 24 bits)."""
        if not 0 <= value < 1 << 24 or value >> (ROLE_SHIFT + 1):
            return None
        mode = MODES_BY_CODE.get((value >> MODE_SHIFT) & 0x3)
        if mode is None:
            return None
        return cls((value >> ROLE_SHIFT) & 1, mode, (value >> SRC_SHIFT) & INDEX_MASK, value & INDEX_MASK)


def payload_mtu(if_mtu: int) -> int:
    """Largest DATA payload whose frame fits an interface MTU (IPv6 packet size)."""
    return payload_for_mtu(if_mtu)


@dataclass
class PeerPaths:
    """Everything the packet loop needs to send to one peer in one mode."""

    name: str
    index: int
    mode: Mode
    planes: int
    template: CarrierTemplate
    block: IPv6Network
    addressing: list[FrameAddressing]  # per plane
    path_space: PathSpace
    encoders: list[FrameEncoder]  # per plane; shared by every connection to this peer
    addresses: frozenset[str] = frozenset()  # the peer's NIC port addresses (inner source)
    _carriers: dict[int, bytes] = field(default_factory=dict)
    _routes: dict[int, tuple[int, FrameEncoder, bytes]] = field(default_factory=dict)

    @property
    def downlink_group(self) -> int | None:
        """The peer's T0 as its carrier names it (the uSID after the T1's, plane bits 0): the
        group whose connections share a downlink (``NicPathHealth``); None when no T1 is
        crossed (the peer is under our own T0)."""
        t = self.template
        if t.t1_slot is None or t.t1_slot + 1 >= len(t.usids):
            return None
        return t.usids[t.t1_slot + 1]

    def carrier(self, ev: int) -> bytes:
        """16-byte outer destination of ``ev`` (cached: the template is applied once per EV)."""
        c = self._carriers.get(ev)
        if c is None:
            if len(self._carriers) >= ROUTE_CACHE_MAX:  # EVs a peer's CONNECTs name are its choice
                self._carriers.clear()
            c = self._carriers[ev] = self.template.carrier(ev, self.block).packed
        return c

    def route(self, ev: int) -> tuple[int, FrameEncoder, bytes]:
        """(plane, that plane's encoder, outer destination) of ``ev``: what sending a frame on
        ``ev`` needs, worked out once per EV rather than once per packet. IndexError for an
        EV whose plane this host has no port in."""
        r = self._routes.get(ev)
        if r is None:
            plane = ev_plane(ev)
            if len(self._routes) >= ROUTE_CACHE_MAX:
                self._routes.clear()
            r = self._routes[ev] = (plane, self.encoders[plane], self.carrier(ev))
        return r


class HostPaths:
    """A host's configuration file, read for the data path."""

    def __init__(self, cfg: HostConfig) -> None:
        if not cfg.ports:
            raise ValueError(f"ports: host {cfg.host} has no NIC port in its configuration")
        planes = sorted(p.plane for p in cfg.ports)
        if planes != list(range(cfg.planes)):
            raise ValueError(f"ports: planes {planes} do not cover 0..{cfg.planes - 1}")
        self.cfg = cfg
        self.ports = sorted(cfg.ports, key=lambda p: p.plane)
        self.by_index: dict[int, Destination] = {d.index: d for d in cfg.destinations.values()}
        self.by_address: dict[str, Destination] = {
            a: d for d in cfg.destinations.values() for a in d.addresses
        }
        self._peers: dict[tuple[str, Mode], PeerPaths] = {}
        self._encoders: dict[str, list[FrameEncoder]] = {}

    @property
    def name(self) -> str:
        return self.cfg.host

    @property
    def index(self) -> int:
        return self.cfg.index

    def nic_prefixes(self) -> list[str]:
        """Where inbound MRC traffic arrives, per NIC port: the /64 of its host uSID alone (plain
        kernel traffic to the same host carries a host function uSID after it, outside these)."""
        return [str(mrc_arrival_prefix(p.address)) for p in self.ports]

    def peer(self, name: str, mode: Mode) -> PeerPaths:
        """Paths to ``name`` in ``mode``; KeyError names a destination the file does not list."""
        key = (name, mode)
        pp = self._peers.get(key)
        if pp is not None:
            return pp
        dest = self.cfg.destinations.get(name)
        if dest is None:
            known = ", ".join(sorted(self.cfg.destinations)) or "none"
            raise KeyError(f"peer: {name!r} is not a destination of {self.name} (known: {known})")
        template = dest.ecmp_template if mode is Mode.ECMP else dest.template
        # the number of distinct paths per plane, from the MRC template (ECMP draws as many EVs)
        t1_count = dest.template.t1_count if dest.template.t1_slot is not None else 1
        addressing = [
            FrameAddressing(
                src_mac=p.mac,
                dst_mac=p.t0_mac,
                outer_src=p.address,
                inner_src=p.address,
                inner_dst=dest.addresses[p.plane],
            )
            for p in self.ports
        ]
        encoders = self._encoders.get(name)
        if encoders is None:  # an encoder per peer, not per mode
            encoders = self._encoders[name] = [FrameEncoder(a) for a in addressing]
        pp = PeerPaths(
            name=name,
            index=dest.index,
            mode=mode,
            planes=self.cfg.planes,
            template=template,
            block=self.cfg.block,
            addressing=addressing,
            path_space=PathSpace(self.cfg.planes, max(1, t1_count)),
            encoders=encoders,
            addresses=frozenset(str(IPv6Address(a)) for a in dest.addresses),
        )
        self._peers[key] = pp
        return pp

    def warm_up(self) -> None:
        """Build every peer's frame templates now, not when its first packet is waiting."""
        for name in self.cfg.destinations:
            for mode in Mode:
                self.peer(name, mode)

    def peer_name_of_index(self, index: int) -> str | None:
        d = self.by_index.get(index)
        return d.name if d else None
