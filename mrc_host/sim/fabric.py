"""The simulated multi-plane two-tier Clos: hosts, T0s, T1s and the queues between them.

Each plane is an independent Clos: ``t0`` leaves and ``t1`` spines, every leaf linked to
every spine; host h hangs off leaf h // hosts_per_t0 in every plane through its NIC port
of that plane. Every link direction is an egress ``Port`` with a rate, a propagation
delay and two queues: a strict-priority queue for trimmed headers and control packets,
and a data queue with an ECN threshold (off on host-facing ports, as in MRC), a trim
threshold and a drop-tail buffer. A host's NIC port serves its queue pairs' data in turn, a
packet each, and bounds each one's queue: past ``nic_buffer_bytes`` of its own a data packet
is trimmed to its header (the core then sees a trim NACK and backs off) instead of growing a
standing queue without end.

Any number of connections share these queues: the fabric only sees packets, each
routed from its own fields. Routing follows docs/design.md §2 without bytes: the EV's
plane picks the NIC port and the plane, its T1 bits pick the leaf's uplink (SRv6 mode).
A packet with ``t1 is None`` (the ECMP baseline) is hashed by the source leaf over its
uplinks instead. Switches hold no other state.

Faults hook onto ports (``attach``). A failure (blackhole, down, flap, switch-down,
nic-down) takes with it the packets queued for the port when it fails and the packets
on the wire while it is down; a ``rate`` fault changes the port's line rate.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, cast, final

from mrc_host.wire.messages import DataPacket, Dscp, Ecn, Message, Nack, Sack

from .draws import hop_salt, unit
from .engine import Event, EventLoop, Handler
from .fault_state import Drop, Fault, extra_delay, ns_per_byte
from .faults import KILLING_KINDS, PASSIVE, rate_hits

DATA_OVERHEAD: Final = 150  # Ether+IPv6+IPv6+UDP+BTH+RETH+MRC data header+ICRC (mrc_host.wire.codec)
CONTROL_BYTES: Final = 150
PROBE_BYTES_MAX: Final = 9000  # ``FabricShape.probe_bytes`` at most (a jumbo frame)
# ECN-capable code points as plain ints: compiled, ``ecn == _ECT0`` is a native compare
_ECT0: Final = int(Ecn.ECT0)
_ECT1: Final = int(Ecn.ECT1)

# what a port's far end is
_TRIM_SALT: Final = 0x5851_F42D  # a trim draw is independent of the loss draw at the same hop
NIC_TO_LEAF: Final = 0
LEAF_TO_SPINE: Final = 1
SPINE_TO_LEAF: Final = 2
LEAF_TO_HOST: Final = 3


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
    nic_buffer_bytes: int = 1 << 20  # a NIC port's queue bound; past it data packets are trimmed
    # lossless (PFC) mode, the RoCE baseline: no trimming and no drop-tail on data; a switch
    # pauses the data priority of the port feeding an ingress once that ingress holds more
    # than ``pfc_xoff_bytes`` in the switch, and resumes it at ``pfc_xon_bytes``
    pfc: bool = False
    pfc_xoff_bytes: int = 96 * 1024
    pfc_xon_bytes: int = 64 * 1024
    pfc_headroom_bytes: int = 64 * 1024  # above XOFF for what is in flight; past it: a counted drop
    # what a PROBE or PROBE_ACK takes on the wire: a what-if knob. Probes ride the control class,
    # ahead of queued data, so each one delays the data behind it by its own wire time; 0
    # prices probing out of a run and shows what MRC's path probing costs (bench.sim_transport)
    probe_bytes: int = CONTROL_BYTES

    @property
    def hosts(self) -> int:
        return self.t0 * self.hosts_per_t0

    def t0_of(self, host: int) -> int:
        return host // self.hosts_per_t0


# ``init=False`` + a spelled-out ``__init__``: mypyc compiles it (see mrc_host/wire/messages.py).
# A packet on a wire is the event of its own arrival at the far end (``fire``): no event
# object, tuple or bound method per hop.
@dataclass(slots=True, init=False)
class SimPacket(Event):
    msg: Message
    src: int  # host
    dst: int
    plane: int
    t1: int | None  # None: ECMP (the source leaf hashes)
    size: int
    data: bool  # an untrimmed DATA packet (goes in the data queue)
    tx_start: int = 0  # when it started onto the wire of its current port
    ingress: Port | None = None  # PFC: the port it came in through (its bytes count there)
    draw: int = 0  # the packet copy's name for loss and trim draws (draws.packet_key)
    wire: Port | None = None  # the port whose wire it is on (its arrival is at that port's far end)

    def __init__(
        self,
        msg: Message,
        src: int,
        dst: int,
        plane: int,
        t1: int | None,
        size: int,
        data: bool,
        tx_start: int = 0,
        ingress: Port | None = None,
        draw: int = 0,
        wire: Port | None = None,
    ) -> None:
        Event.__init__(self)  # (not super(): slots=True makes a new class, the cell names the old)
        self.msg = msg
        self.src = src
        self.dst = dst
        self.plane = plane
        self.t1 = t1
        self.size = size
        self.data = data
        self.tx_start = tx_start
        self.ingress = ingress
        self.draw = draw
        self.wire = wire

    def fire(self) -> None:
        """It reached the far end of its wire."""
        port = cast(Port, self.wire)
        port.fabric._arrive(port, self)


@final
class PacketQueue:
    """One class of a port's egress queue: packets first in, first out.

    The packets are linked through their own ``nxt``, the link of the event loop's buckets (a
    packet waits in one queue, or on the loop, at a time), not held in a list or a ``deque``:
    compiled, a list's append, its read-back (a type check) and emptying it when the queue
    drains (a slice deletion) were generic calls, one of each per packet per hop; a native
    attribute is a load and a store.

    ``per_qp`` (a NIC port's data queue): one such queue per queue pair, served a packet each
    in turn, as a NIC's transmit scheduler (and htsim's UEC NIC) arbitrates between its queue
    pairs. One FIFO for all of them sent each connection's window whole, one after another: an
    all-to-all's hosts all began with the same peer (a 15-to-1 incast), and the last queue
    pairs' first packets waited 15 windows, past the first timeout. The queue pairs waiting
    are linked in turn through their queues' ``_turn``. (One class with a flag, not a
    subclass: compiled, a final class's methods are direct calls on every port.)"""

    __slots__ = ("_head", "_n", "_queues", "_tail", "_turn", "_turns", "_turns_tail", "bytes", "per_qp")

    def __init__(self, per_qp: bool = False) -> None:
        self._head: SimPacket | None = None
        self._tail: SimPacket | None = None
        self._n = 0  # packets waiting
        self.bytes = 0  # a queue pair's queue: its bytes waiting
        self.per_qp = per_qp
        # per_qp: each queue pair's queue (else a shared empty dict: a queue pair's own
        # queue allocates nothing more), and those with packets waiting, in turn
        self._queues: dict[int, PacketQueue] = {} if per_qp else _NO_QUEUES
        self._turns: PacketQueue | None = None
        self._turns_tail: PacketQueue | None = None
        self._turn: PacketQueue | None = None  # a queue pair's queue: the next in turn after it

    def push(self, pkt: SimPacket) -> None:
        self._n += 1
        if self.per_qp:
            qp = pkt.msg.qp
            q = self._queues.get(qp)
            if q is None:
                q = self._queues[qp] = PacketQueue()
            if not q._n:
                self._last_turn(q)
            q.push(pkt)
            q.bytes += pkt.size
            return
        tail_pkt = self._tail
        if tail_pkt is None:
            self._head = pkt
        else:
            last: Event = tail_pkt  # (``nxt`` is Event's slot: mypy reads a dataclass's own)
            last.nxt = pkt
        self._tail = pkt

    def _last_turn(self, q: PacketQueue) -> None:
        """Queue pair ``q`` takes the last turn, after every other one waiting."""
        tail = self._turns_tail
        if tail is None:
            self._turns = q
        else:
            tail._turn = q
        self._turns_tail = q

    def waiting(self) -> bool:
        """Whether a packet waits (``bool(queue)``, as a native call)."""
        return self._n > 0

    def take(self) -> SimPacket:
        """The oldest packet (per_qp: of the queue pair whose turn it is), removed (the queue
        must not be empty)."""
        self._n -= 1
        if self.per_qp:
            q = self._turns
            assert q is not None
            nxt = q._turn
            self._turns = nxt
            if nxt is None:
                self._turns_tail = None
            else:
                q._turn = None
            got = q.take()
            q.bytes -= got.size
            if q._n:  # its next turn: after every other queue pair waiting
                self._last_turn(q)
            return got
        pkt = self._head
        assert pkt is not None
        behind = cast(SimPacket | None, pkt.nxt)
        self._head = behind
        if behind is None:
            self._tail = None
        else:
            taken: Event = pkt
            taken.nxt = None
        return pkt

    def bytes_of(self, pkt: SimPacket, total: int) -> int:
        """The bytes waiting that count against ``pkt``'s bound: per_qp, its queue pair's own;
        else all of them (``total``)."""
        if not self.per_qp:
            return total
        q = self._queues.get(pkt.msg.qp)
        return 0 if q is None else q.bytes

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def __iter__(self) -> Iterator[SimPacket]:
        """The packets waiting, oldest first (per_qp: each queue pair's in turn)."""
        if self.per_qp:
            for q in self._queues.values():
                yield from q
            return
        pkt = self._head
        while pkt is not None:
            yield pkt
            pkt = cast(SimPacket | None, pkt.nxt)


_NO_QUEUES: Final[dict[int, PacketQueue]] = {}


class Port:
    """One direction of a link: a two-class egress queue feeding a wire.

    ``waker`` is the event of its wire coming free (one at a time: ``waking``), so the
    per-packet events carry no closures and allocate nothing.
    """

    __slots__ = (
        "buffer_bytes",
        "busy_until",
        "delay_ns",
        "draw_salt",
        "drops_congestion",
        "ecn_bytes",
        "entry_faults",
        "fabric",
        "faults",
        "hash_salt",
        "hi",
        "host",
        "kill_faults",
        "kind",
        "leaf",
        "link",
        "lo",
        "name",
        "next_by_dst",
        "nic",
        "ns_per_byte",
        "passive_faults",
        "pause_ns",
        "pause_since",
        "paused",
        "pauser",
        "pauses",
        "peak_queued",
        "pfc_in",
        "pfc_overflow",
        "pfc_xoff_sent",
        "plane",
        "queued",
        "spine",
        "trim_bytes",
        "trimmed",
        "tx_bytes",
        "tx_data_bytes",
        "tx_packets",
        "waker",
        "waking",
    )

    def __init__(
        self,
        fabric: Fabric,
        name: str,
        link: str,
        shape: FabricShape,
        kind: int,
        plane: int,
        leaf: int,
        spine: int,
        host: int,
    ) -> None:
        self.fabric = fabric
        self.waker = _PortWake(self)
        self.name = name
        self.link = link
        self.kind = kind
        self.plane = plane
        self.leaf = leaf
        self.spine = spine
        self.host = host
        self.nic = kind == NIC_TO_LEAF
        self.ns_per_byte = 8 / shape.link_gbps
        self.delay_ns = shape.link_delay_ns
        # a NIC never drops its own packets: past its bound it trims them (the core backs off)
        # (below 2**62: compiled, a compare with a larger int leaves the fast path)
        self.buffer_bytes = 1 << 60 if self.nic else shape.buffer_bytes
        # ECN is off on the last hop (and at the NIC): a mark means in-fabric imbalance
        self.ecn_bytes = None if kind in (NIC_TO_LEAF, LEAF_TO_HOST) else shape.ecn_bytes
        self.trim_bytes = shape.nic_buffer_bytes if self.nic else shape.trim_bytes
        self.hash_salt = name.split(">")[1].encode() if kind == NIC_TO_LEAF else b""  # the source leaf
        self.draw_salt = hop_salt(kind)  # the hop's share of a packet copy's loss draw (draws.py)
        self.next_by_dst: list[Port | None] = []  # filled by Fabric._route_tables
        self.hi = PacketQueue()  # control packets and trimmed headers: served first
        self.lo = PacketQueue(per_qp=self.nic)  # untrimmed DATA (a NIC's: per queue pair, in turn)
        self.queued = 0  # bytes waiting (not counting the packet on the wire)
        self.peak_queued = 0
        self.busy_until = 0  # the wire is free from this time on
        self.waking = False  # a wake-up is scheduled for busy_until
        self.faults: list[Fault] = []  # checked on enqueue (loss, ecn, trim, and failures)
        self.kill_faults: list[Fault] = []  # failures: also kill queued and in-flight packets
        self.passive_faults: list[Fault] = []  # rate, jitter, stall: act when the port sends
        self.entry_faults: list[Fault] = []  # failures whose element a packet enters here (counted)
        self.tx_bytes = 0
        self.tx_data_bytes = 0
        self.tx_packets = 0
        self.drops_congestion = 0
        self.trimmed = 0
        # PFC: this port's data class is paused by its far end (``paused``); as the ingress
        # of its far-end switch, ``pfc_in`` bytes it delivered still sit in that switch
        self.pauser = _PortPause(self)
        self.paused = False
        self.pause_since = 0
        self.pause_ns = 0  # total time paused (the per-port pause-time counter)
        self.pauses = 0  # XOFF frames received
        self.pfc_in = 0
        self.pfc_xoff_sent = False
        self.pfc_overflow = 0  # data dropped past XOFF + headroom (0 when headroom suffices)


class _PortWake(Event):
    """The event of a port's wire coming free (``Fabric._wake``)."""

    __slots__ = ("port",)

    def __init__(self, port: Port) -> None:
        self.nxt = None
        self.port = port

    def fire(self) -> None:
        self.port.fabric._wake(self.port)


class _PortPause(Handler):
    """A PFC frame reaching the port it pauses (arg True: XOFF, False: XON)."""

    __slots__ = ("port",)

    def __init__(self, port: Port) -> None:
        self.port = port

    def fire(self, arg: object) -> None:
        self.port.fabric._set_pause(self.port, bool(arg))


class HostSink:
    """Where packets that reach a host go (``Network``): compiled, a native call per packet,
    not a dictionary lookup and a call through a bound method."""

    def deliver(self, pkt: SimPacket, now: int) -> None:
        raise NotImplementedError

    def departed(self, pkt: SimPacket, now: int, port_gbps: float) -> None:
        """The DATA packet ``pkt`` left its host's NIC port now (onto the wire, or dropped
        there), the port running at ``port_gbps``: the NIC's transmit completion, which the
        sender's loss timers run from."""


class Fabric:
    def __init__(self, shape: FabricShape, loop: EventLoop, rng: random.Random) -> None:
        self.shape = shape
        self.pfc = shape.pfc
        self.loop = loop
        self.rng = rng  # jitter; loss and trim draw from each packet's name (draws.py)
        self.ports: dict[tuple[str, str], Port] = {}
        self.host_rx: dict[int, Callable[[SimPacket, int], None]] = {}  # per host, without a sink
        self.sink: HostSink | None = None  # takes every packet that reaches a host
        self.unroutable = 0
        # read-only observations: per destination QP (so per connection and direction), the
        # packets the fabric dropped (congestion, PFC headroom, faults) and trimmed
        self.drops_by_qp: dict[int, int] = {}
        self.trims_by_qp: dict[int, int] = {}
        s = shape
        P, H = s.planes, s.hosts
        self.nic_up: list[list[Port]] = [[] for _ in range(H)]  # [host][plane]
        self.leaf_down: list[list[Port]] = [[] for _ in range(P)]  # [plane][host]
        self.leaf_up: list[list[list[Port]]] = [[[] for _ in range(s.t0)] for _ in range(P)]  # [p][t0][t1]
        self.spine_down: list[list[list[Port]]] = [[[] for _ in range(s.t1)] for _ in range(P)]  # [p][t1][t0]
        for p in range(P):
            for h in range(H):
                host, leaf = f"h{h}:p{p}", f"p{p}-t0_{s.t0_of(h)}"
                link = f"h{h}-p{p}"
                self.nic_up[h].append(self._port(host, leaf, link, NIC_TO_LEAF, p, s.t0_of(h), -1, h))
                self.leaf_down[p].append(self._port(leaf, host, link, LEAF_TO_HOST, p, s.t0_of(h), -1, h))
            for a in range(s.t0):
                for t in range(s.t1):
                    leaf, spine = f"p{p}-t0_{a}", f"p{p}-t1_{t}"
                    link = f"p{p}-t0_{a}-t1_{t}"
                    self.leaf_up[p][a].append(self._port(leaf, spine, link, LEAF_TO_SPINE, p, a, t, -1))
            for t in range(s.t1):
                for a in range(s.t0):
                    leaf, spine = f"p{p}-t0_{a}", f"p{p}-t1_{t}"
                    link = f"p{p}-t0_{a}-t1_{t}"
                    self.spine_down[p][t].append(self._port(spine, leaf, link, SPINE_TO_LEAF, p, a, t, -1))
        self._route_tables()

    def _route_tables(self) -> None:
        """Per port, the next port for each destination host (None: decided per packet).

        Ports that forward alike share one table, read-only: every spine port of a plane, the
        uplinks of a plane to one spine, a leaf's NIC ports, every host-facing port. One table
        each was hosts x ports entries: 33 MB on a 1,024-host fabric, and a cache miss per hop."""
        s = self.shape
        hosts = range(s.hosts)
        shared: dict[tuple[int, int, int], list[Port | None]] = {}
        for port in self.ports.values():
            p = port.plane
            kind = port.kind
            # what the table depends on besides the plane: nothing, the spine or the leaf
            at = port.spine if kind == LEAF_TO_SPINE else port.leaf if kind == NIC_TO_LEAF else -1
            table = shared.get((kind, p, at))
            if table is None:
                if kind == SPINE_TO_LEAF:
                    table = [self.leaf_down[p][h] for h in hosts]
                elif kind == LEAF_TO_SPINE:
                    table = [self.spine_down[p][at][s.t0_of(h)] for h in hosts]
                elif kind == NIC_TO_LEAF:
                    table = [self.leaf_down[p][h] if s.t0_of(h) == at else None for h in hosts]
                else:
                    table = [None] * s.hosts
                shared[(kind, p, at)] = table
            port.next_by_dst = table

    def _port(
        self, src: str, dst: str, link: str, kind: int, plane: int, leaf: int, spine: int, host: int
    ) -> Port:
        port = Port(self, f"{src}>{dst}", link, self.shape, kind, plane, leaf, spine, host)
        self.ports[(src, dst)] = port
        return port

    # ---- faults -------------------------------------------------------------------------
    def attach(self, fault: Fault) -> None:
        """Hook ``fault`` onto the ports its target names (raises ValueError if none).

        Targets: a link (both directions), a switch (every port in or out of it), a plane
        ``p<N>`` (every port of the plane) or ``all`` (every port).
        """
        target = fault.target
        hit = []
        for port in self.ports.values():
            src, dst = port.name.split(">")
            if (
                target == "all"
                or port.link == target
                or (fault.kind == "switch-down" and target in (src, dst))
                or (fault.kind in ("rate", "stall") and rate_hits(fault, port.link, src, dst))
            ):
                hit.append(port)
        if not hit:
            raise ValueError(f"fault target {target!r} names no link or switch of this fabric")
        if fault.kind == "switch-down" and not any(target in p.name.split(">") for p in hit):
            raise ValueError(
                f"switch-down needs a switch name (p<plane>-t0_<i>, p<plane>-t1_<j>), got {target!r}"
            )
        for port in hit:
            if fault.kind in PASSIVE:
                port.passive_faults.append(fault)
                continue
            port.faults.append(fault)
            if fault.kind in KILLING_KINDS:
                port.kill_faults.append(fault)
                # a packet enters a link on either of its ports, a switch on the ports into it
                if fault.kind != "switch-down" or port.name.split(">")[1] == target:
                    port.entry_faults.append(fault)

    # ---- forwarding ---------------------------------------------------------------------
    def send_from_host(self, pkt: SimPacket) -> None:
        if pkt.plane >= self.shape.planes or (pkt.t1 is not None and pkt.t1 >= self.shape.t1):
            self.unroutable += 1
            self._dropped(pkt)
            self._left_nic(pkt, self.loop.now)
            return
        port = self.nic_up[pkt.src][pkt.plane]
        queued = port.queued
        self.enqueue(port, pkt)
        if port.queued == queued:
            self._left_nic(pkt, self.loop.now)  # not queued: on the wire (or dropped) at once

    def _left_nic(self, pkt: SimPacket, now: int) -> None:
        """``pkt`` left its host's NIC port (the sink hears of DATA packets: ``departed``, with
        the port's rate now, as a NIC knows its link's speed)."""
        sink = self.sink
        if sink is not None and type(pkt.msg) is DataPacket:
            gbps = 0.0
            if pkt.plane < self.shape.planes:
                port = self.nic_up[pkt.src][pkt.plane]
                passive = port.passive_faults
                gbps = 8 / (ns_per_byte(passive, now, port.ns_per_byte) if passive else port.ns_per_byte)
            sink.departed(pkt, now, gbps)

    def _arrive(self, port: Port, pkt: SimPacket) -> None:
        """``pkt`` reached the far end of ``port``: forward it (or drop it, if the link died)."""
        if port.kill_faults:
            for fault in port.kill_faults:
                if fault.down_between(pkt.tx_start, self.loop.now):
                    fault.in_flight_dropped += 1
                    self._count_drop(fault, pkt)
                    return
        nxt = port.next_by_dst[pkt.dst]
        if self.pfc and pkt.data:
            pkt.ingress = port
        if nxt is None:
            if port.kind == LEAF_TO_HOST:
                sink = self.sink
                if sink is not None:
                    sink.deliver(pkt, self.loop.now)
                    return
                rx = self.host_rx.get(pkt.dst)
                if rx is not None:
                    rx(pkt, self.loop.now)
                return
            # the source leaf towards another leaf: the EV's T1 (SRv6) or a hash of it (ECMP)
            t1 = pkt.t1
            if t1 is None:
                t1 = zlib.crc32(pkt.msg.meta.ev.to_bytes(4, "big") + port.hash_salt) % self.shape.t1
            nxt = self.leaf_up[port.plane][port.leaf][t1]
        self.enqueue(nxt, pkt)

    def enqueue(self, port: Port, pkt: SimPacket) -> None:
        if port.faults:
            now = self.loop.now
            for fault in port.faults:
                if not fault.active(now):
                    continue
                kind = fault.kind
                if kind == "loss":
                    if unit(pkt.draw ^ port.draw_salt) < (fault.value or 0.0):
                        self._count_drop(fault, pkt)
                        return
                elif kind == "ecn":
                    if pkt.data and pkt.msg.meta.ecn in (_ECT0, _ECT1):
                        pkt.msg.meta.ecn = Ecn.CE
                        fault.marked += 1
                elif kind == "trim":
                    if pkt.data and unit(pkt.draw ^ port.draw_salt ^ _TRIM_SALT) < (
                        1.0 if fault.value is None else fault.value
                    ):
                        self._trim(pkt, mark=True)
                        fault.trimmed += 1
                else:  # blackhole, down, flap (down phase), switch-down, nic-down
                    self._count_drop(fault, pkt)
                    return
            if port.entry_faults:
                self._entered(port, pkt)
        if pkt.data:
            queued = port.queued
            ecn_bytes = port.ecn_bytes
            if ecn_bytes is not None and queued > ecn_bytes:
                meta = pkt.msg.meta
                ecn = meta.ecn
                if ecn in (_ECT0, _ECT1):
                    meta.ecn = Ecn.CE
            if self.pfc:
                ing = pkt.ingress
                if ing is not None and ing.pfc_in + pkt.size > (
                    self.shape.pfc_xoff_bytes + self.shape.pfc_headroom_bytes
                ):
                    self._dropped(pkt, ing)
                    return
            elif (port.lo.bytes_of(pkt, queued) if port.nic else queued) > port.trim_bytes:
                self._trim(pkt, mark=False)
                port.trimmed += 1
            elif queued + pkt.size > port.buffer_bytes:
                self._dropped(pkt, None, port)
                return
        loop = self.loop
        now = loop.now
        if port.busy_until <= now and not port.waking and not port.passive_faults and not port.paused:
            # idle wire (the common case, inlined): straight onto it, one event at the far end
            size = pkt.size
            end = now + int(size * port.ns_per_byte)
            port.busy_until = end
            port.tx_packets += 1
            port.tx_bytes += size
            if pkt.data:
                port.tx_data_bytes += size - DATA_OVERHEAD
            pkt.tx_start = now
            pkt.wire = port
            loop.schedule(end + port.delay_ns, pkt)
            return
        if port.busy_until <= now and not port.waking and not (port.paused and pkt.data):
            self._transmit(port, pkt, now)
            return
        if pkt.data:
            port.lo.push(pkt)
            if pkt.ingress is not None:
                self._ingress_add(pkt.ingress, pkt.size)
        else:
            port.hi.push(pkt)
        port.queued += pkt.size
        if port.queued > port.peak_queued:
            port.peak_queued = port.queued
        if port.paused and not port.hi.waiting():
            return  # only the paused data class waits: the XON wakes the port
        if not port.waking:
            port.waking = True
            self.loop.schedule(port.busy_until, port.waker)

    def _trim(self, pkt: SimPacket, mark: bool) -> None:
        msg = pkt.msg
        assert isinstance(msg, DataPacket)
        self.trims_by_qp[msg.qp] = self.trims_by_qp.get(msg.qp, 0) + 1
        meta = dataclasses.replace(msg.meta, dscp=Dscp.TRIMMED)
        if mark and meta.ecn in (_ECT0, _ECT1):
            meta.ecn = Ecn.CE  # a fabric trim: the queue is also above the ECN threshold
        pkt.msg = dataclasses.replace(msg, payload=b"", trimmed=True, meta=meta)
        pkt.size = DATA_OVERHEAD
        pkt.data = False

    def _count_drop(self, fault: Fault, pkt: SimPacket) -> None:
        msg = pkt.msg
        data = isinstance(msg, DataPacket)
        if data:
            fault.data_dropped += 1
        else:
            fault.control_dropped += 1
            if isinstance(msg, (Sack, Nack)):
                fault.acks_dropped += 1
        sent = msg.send_ts if isinstance(msg, DataPacket) else -1
        t1 = -1 if pkt.t1 is None else pkt.t1
        fault.drops.append(Drop(self.loop.now, msg.qp, data, pkt.plane, t1, sent))
        self._dropped(pkt)

    def _dropped(self, pkt: SimPacket, overflow: Port | None = None, full: Port | None = None) -> None:
        """Count a drop against the packet's connection; ``overflow``: the ingress whose PFC
        headroom it overran, ``full``: the port whose buffer was full (congestion)."""
        if overflow is not None:
            overflow.pfc_overflow += 1
        if full is not None:
            full.drops_congestion += 1
        qp = pkt.msg.qp
        self.drops_by_qp[qp] = self.drops_by_qp.get(qp, 0) + 1

    @staticmethod
    def _entered(port: Port, pkt: SimPacket) -> None:
        """A DATA packet entered the element of each failure in ``port.entry_faults`` (read-only
        reporting: the fuzzer's floors)."""
        msg = pkt.msg
        if isinstance(msg, DataPacket):
            qp = msg.qp
            for fault in port.entry_faults:
                fault.entered[qp] = fault.entered.get(qp, 0) + 1

    def _transmit(self, port: Port, pkt: SimPacket, now: int) -> None:
        """Put ``pkt`` on the wire now: it arrives after serialisation plus propagation."""
        passive = port.passive_faults
        per_byte = ns_per_byte(passive, now, port.ns_per_byte) if passive else port.ns_per_byte
        size = pkt.size
        end = now + int(size * per_byte)
        port.busy_until = end
        port.tx_packets += 1
        port.tx_bytes += size
        if pkt.data:
            port.tx_data_bytes += size - DATA_OVERHEAD
        pkt.tx_start = now
        pkt.wire = port
        delay = port.delay_ns + (extra_delay(passive, now, self.rng) if passive else 0)
        self.loop.schedule(end + delay, pkt)

    def _wake(self, port: Port) -> None:
        """The wire is free: send the next queued packet (priority class first). A NIC's port
        reports what left it (``_left_nic``) once its own state is settled: the sender may
        hand the port its next packet at once."""
        port.waking = False
        loop = self.loop
        now = loop.now
        hi, lo = port.hi, port.lo
        killed: list[SimPacket] | None = None  # (allocated only when a failure kills one)
        while True:
            # (each class asked once a packet: this runs at nearly half of all events)
            if hi.waiting():
                pkt = hi.take()
            elif not port.paused and lo.waiting():
                pkt = lo.take()
            else:
                break
            size = pkt.size
            port.queued -= size
            if pkt.ingress is not None and pkt.data:
                self._ingress_sub(pkt.ingress, size)
            if port.kill_faults and self._killed_in_queue(port, pkt, now):
                if port.nic:
                    if killed is None:
                        killed = []
                    killed.append(pkt)  # (it leaves the NIC too, to nowhere)
                continue
            self._transmit(port, pkt, now)
            if hi.waiting() or (not port.paused and lo.waiting()):
                port.waking = True
                loop.schedule(port.busy_until, port.waker)
            if port.nic:
                self._left_nic(pkt, now)
            break
        if killed is not None:
            for pkt in killed:
                self._left_nic(pkt, now)

    def _killed_in_queue(self, port: Port, pkt: SimPacket, now: int) -> bool:
        for fault in port.kill_faults:
            if fault.active(now):
                fault.queued_dropped += 1
                self._count_drop(fault, pkt)
                return True
        return False

    # ---- PFC ----------------------------------------------------------------------------
    def _ingress_add(self, ing: Port, size: int) -> None:
        """Bytes that came in through ``ing`` wait in this switch: XOFF past the threshold."""
        ing.pfc_in += size
        if ing.pfc_in > self.shape.pfc_xoff_bytes and not ing.pfc_xoff_sent:
            ing.pfc_xoff_sent = True
            self.loop.push(self.loop.now + ing.delay_ns, ing.pauser, True)

    def _ingress_sub(self, ing: Port, size: int) -> None:
        """Bytes that came in through ``ing`` left this switch: XON at the lower threshold."""
        ing.pfc_in -= size
        if ing.pfc_xoff_sent and ing.pfc_in <= self.shape.pfc_xon_bytes:
            ing.pfc_xoff_sent = False
            self.loop.push(self.loop.now + ing.delay_ns, ing.pauser, False)

    def _set_pause(self, port: Port, on: bool) -> None:
        """A PFC frame arrived (one link delay after it was sent): stop or restart data."""
        now = self.loop.now
        if on and not port.paused:
            port.paused = True
            port.pause_since = now
            port.pauses += 1
        elif not on and port.paused:
            port.paused = False
            port.pause_ns += now - port.pause_since
            if port.lo.waiting() and not port.waking:
                port.waking = True
                self.loop.schedule(port.busy_until, port.waker)

    def pause_ns(self, port: Port) -> int:
        """Time ``port`` has been paused so far (counting a pause still on)."""
        return port.pause_ns + (self.loop.now - port.pause_since if port.paused else 0)
