"""The simulated multi-plane two-tier Clos: hosts, T0s, T1s and the queues between them.

Each plane is an independent Clos: ``t0`` leaves and ``t1`` spines, every leaf linked to
every spine; host h hangs off leaf h // hosts_per_t0 in every plane through its NIC port
of that plane. Every link direction is an egress port with a rate, a propagation delay,
a drop-tail buffer, an ECN threshold (off on host-facing ports, as in MRC) and a trim
threshold; trimmed and control packets go in a strict-priority queue.

Routing follows DESIGN section 2 without bytes: the EV's plane picks the NIC port and the
plane, its T1 bits pick the leaf's uplink (SRv6 mode). In ECMP mode the source leaf
hashes the whole EV over its uplinks instead. Switches hold no other state.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from mrc_host.wire.messages import DataPacket, Dscp, Ecn, Message

from .engine import EventLoop
from .faults import PASSIVE, Fault, extra_delay, ns_per_byte, rate_hits

DATA_OVERHEAD = 150  # Ether+IPv6+IPv6+UDP+BTH+RETH+MRC data header+ICRC (mrc_host.wire.codec)
CONTROL_BYTES = 150


@dataclass(frozen=True, slots=True)
class FabricShape:
    planes: int = 2
    t0: int = 2
    t1: int = 2
    hosts_per_t0: int = 1
    link_gbps: float = 100.0
    link_delay_ns: int = 200
    buffer_bytes: int = 1 << 20
    ecn_bytes: int = 64 * 1024
    trim_bytes: int = 256 * 1024

    @property
    def hosts(self) -> int:
        return self.t0 * self.hosts_per_t0

    def t0_of(self, host: int) -> int:
        return host // self.hosts_per_t0


@dataclass(slots=True)
class SimPacket:
    msg: Message
    src: int  # host
    dst: int
    plane: int
    t1: int | None  # None: ECMP (the source leaf hashes)
    size: int
    data: bool


class Port:
    """One direction of a link: a two-class egress queue feeding a wire."""

    __slots__ = (
        "buffer_bytes",
        "busy",
        "delay_ns",
        "deliver",
        "drops_congestion",
        "ecn_bytes",
        "faults",
        "hi",
        "link",
        "lo",
        "name",
        "ns_per_byte",
        "queued",
        "trim_bytes",
        "tx_bytes",
        "tx_data_bytes",
        "tx_packets",
    )

    def __init__(self, name: str, link: str, shape: FabricShape, host_facing: bool, host_nic: bool) -> None:
        self.name = name
        self.link = link
        self.ns_per_byte = 8 / shape.link_gbps
        self.delay_ns = shape.link_delay_ns
        self.buffer_bytes = 1 << 40 if host_nic else shape.buffer_bytes  # a NIC queue never drops
        self.ecn_bytes = None if (host_facing or host_nic) else shape.ecn_bytes
        self.trim_bytes = None if host_nic else shape.trim_bytes
        self.hi: deque[SimPacket] = deque()
        self.lo: deque[SimPacket] = deque()
        self.queued = 0
        self.busy = False
        self.faults: list[Fault] = []
        self.deliver: Callable[[SimPacket], None] = lambda p: None
        self.tx_bytes = 0
        self.tx_data_bytes = 0
        self.tx_packets = 0
        self.drops_congestion = 0


class Fabric:
    def __init__(self, shape: FabricShape, loop: EventLoop, rng: random.Random, mode_ecmp: bool) -> None:
        self.shape = shape
        self.loop = loop
        self.rng = rng
        self.ecmp = mode_ecmp
        self.ports: dict[tuple[str, str], Port] = {}
        self.host_rx: dict[int, Callable[[SimPacket, int], None]] = {}
        self.unroutable = 0
        s = shape
        for p in range(s.planes):
            for h in range(s.hosts):
                host, leaf = f"h{h}", f"p{p}-t0_{s.t0_of(h)}"
                link = f"h{h}-p{p}"
                self._port(f"{host}:p{p}", leaf, link, host_facing=False, host_nic=True)
                self._port(leaf, f"{host}:p{p}", link, host_facing=True, host_nic=False)
            for a in range(s.t0):
                for t in range(s.t1):
                    leaf, spine = f"p{p}-t0_{a}", f"p{p}-t1_{t}"
                    link = f"p{p}-t0_{a}-t1_{t}"
                    self._port(leaf, spine, link, host_facing=False, host_nic=False)
                    self._port(spine, leaf, link, host_facing=False, host_nic=False)
        for (src, dst), port in self.ports.items():
            port.deliver = self._forwarder(src, dst)

    def _port(self, src: str, dst: str, link: str, host_facing: bool, host_nic: bool) -> None:
        self.ports[(src, dst)] = Port(f"{src}>{dst}", link, self.shape, host_facing, host_nic)

    # ---- faults -------------------------------------------------------------------------
    def attach(self, fault: Fault) -> None:
        """Hook ``fault`` onto the ports its target names (raises ValueError if none)."""
        target = fault.target
        hit = []
        for port in self.ports.values():
            src, dst = port.name.split(">")
            if (
                target == "all"
                or port.link == target
                or (fault.kind == "switch-down" and target in (src, dst))
                or (fault.kind == "rate" and rate_hits(fault, port.link, src, dst))
            ):
                hit.append(port)
        if not hit:
            raise ValueError(f"fault target {target!r} names no link or switch of this fabric")
        if fault.kind == "switch-down" and not any(target in p.name.split(">") for p in hit):
            raise ValueError(
                f"switch-down needs a switch name (p<plane>-t0_<i>, p<plane>-t1_<j>), got {target!r}"
            )
        for port in hit:
            port.faults.append(fault)

    # ---- forwarding ---------------------------------------------------------------------
    def send_from_host(self, pkt: SimPacket) -> None:
        if pkt.plane >= self.shape.planes or (pkt.t1 is not None and pkt.t1 >= self.shape.t1):
            self.unroutable += 1
            return
        self.enqueue(
            self.ports[(f"h{pkt.src}:p{pkt.plane}", f"p{pkt.plane}-t0_{self.shape.t0_of(pkt.src)}")], pkt
        )

    def _forwarder(self, src: str, node: str) -> Callable[[SimPacket], None]:
        s = self.shape
        if ":" in node:  # a host NIC port
            host = int(node[1 : node.index(":")])

            def to_host(pkt: SimPacket) -> None:
                rx = self.host_rx.get(host)
                if rx is not None:
                    rx(pkt, self.loop.now)

            return to_host
        plane = int(node[1 : node.index("-")])
        kind, index = node.split("-")[1].split("_")
        idx = int(index)
        if kind == "t1":

            def from_spine(pkt: SimPacket) -> None:
                self.enqueue(self.ports[(node, f"p{plane}-t0_{s.t0_of(pkt.dst)}")], pkt)

            return from_spine

        def from_leaf(pkt: SimPacket) -> None:
            if s.t0_of(pkt.dst) == idx:
                self.enqueue(self.ports[(node, f"h{pkt.dst}:p{plane}")], pkt)
                return
            if pkt.t1 is None:  # ECMP: hash the EV (and the switch) over the uplinks
                key = pkt.msg.meta.ev.to_bytes(4, "big") + node.encode()
                t1 = zlib.crc32(key) % s.t1
            else:
                t1 = pkt.t1
            self.enqueue(self.ports[(node, f"p{plane}-t1_{t1}")], pkt)

        return from_leaf

    def enqueue(self, port: Port, pkt: SimPacket) -> None:
        now = self.loop.now
        for fault in port.faults:
            if not fault.active(now):
                continue
            kind = fault.kind
            if kind in PASSIVE:
                continue  # applied when the port sends (_start, _done)
            if kind == "loss":
                if self.rng.random() < (fault.value or 0.0):
                    self._count_drop(fault, pkt)
                    return
            elif kind == "ecn":
                if pkt.data and pkt.msg.meta.ecn in (Ecn.ECT0, Ecn.ECT1):
                    pkt.msg.meta.ecn = Ecn.CE
                    fault.marked += 1
            elif kind == "trim":
                if pkt.data and self.rng.random() < (1.0 if fault.value is None else fault.value):
                    self._trim(pkt, mark=True)
                    fault.trimmed += 1
            else:  # blackhole, down, flap (down phase), switch-down, nic-down
                self._count_drop(fault, pkt)
                return
        msg = pkt.msg
        if pkt.data:
            if (
                port.ecn_bytes is not None
                and port.queued > port.ecn_bytes
                and msg.meta.ecn in (Ecn.ECT0, Ecn.ECT1)
            ):
                msg.meta.ecn = Ecn.CE
            if port.trim_bytes is not None and port.queued > port.trim_bytes:
                self._trim(pkt, mark=False)
        if not pkt.data or not isinstance(pkt.msg, DataPacket) or pkt.msg.trimmed:
            queue = port.hi
        else:
            queue = port.lo
            if port.queued + pkt.size > port.buffer_bytes:
                port.drops_congestion += 1
                return
        queue.append(pkt)
        port.queued += pkt.size
        if not port.busy:
            self._start(port)

    def _trim(self, pkt: SimPacket, mark: bool) -> None:
        msg = pkt.msg
        assert isinstance(msg, DataPacket)
        meta = dataclasses.replace(msg.meta, dscp=Dscp.TRIMMED)
        if mark and meta.ecn in (Ecn.ECT0, Ecn.ECT1):
            meta.ecn = Ecn.CE  # a fabric trim: the queue is also above the ECN threshold
        pkt.msg = dataclasses.replace(msg, payload=b"", trimmed=True, meta=meta)
        pkt.size = DATA_OVERHEAD
        pkt.data = False

    @staticmethod
    def _count_drop(fault: Fault, pkt: SimPacket) -> None:
        if isinstance(pkt.msg, DataPacket):
            fault.data_dropped += 1
        else:
            fault.control_dropped += 1

    def _start(self, port: Port) -> None:
        pkt = port.hi.popleft() if port.hi else port.lo.popleft()
        port.queued -= pkt.size
        port.busy = True
        ns = ns_per_byte(port.faults, self.loop.now, port.ns_per_byte) if port.faults else port.ns_per_byte
        self.loop.at(self.loop.now + int(pkt.size * ns), self._done, port, pkt)

    def _done(self, port: Port, pkt: SimPacket) -> None:
        port.tx_packets += 1
        port.tx_bytes += pkt.size
        if isinstance(pkt.msg, DataPacket):
            port.tx_data_bytes += len(pkt.msg.payload)
        delay = port.delay_ns + (extra_delay(port.faults, self.loop.now, self.rng) if port.faults else 0)
        self.loop.at(self.loop.now + delay, port.deliver, pkt)
        port.busy = False
        if port.hi or port.lo:
            self._start(port)
