"""Many queue pairs on one simulated fabric, each run by two real core endpoints.

``Network`` owns the event loop, the fabric and every ``Connection``. A connection is
one queue pair from host ``src`` to host ``dst`` with its own mode (mrc, single-path,
ecmp), its own ``TransportConfig`` (CC and EV parameters) and its own seeded random
source; all connections share the fabric's queues, so they contend for them exactly as
flows do in a real Clos. RDMA WRITEs are posted on a connection at a time or when an
earlier one completes (``Network.post``), which is what traffic patterns and
collectives are built from. Everything random comes from the seed.

What the writes carry (``payload``): ``real`` bytes (a pattern in which a misplaced packet
shows, placed in a registered region and compared at the end) or ``virtual`` ones (a length
and a check value per packet, ``mrc_host.wire.virtual_payload``; the receiving region holds
no memory, verifies each packet's check and keeps the ranges placed). The transport sees
the same lengths either way, so both give the same results but memory; ``auto`` (the CLI's
and scenario files' default) is real up to ``AUTO_REAL_BYTES`` of regions in all.
"""

from __future__ import annotations

import mmap
import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final, cast

from mrc_fabric.ev import PLANE_SHIFT, T1_MASK, T1_SHIFT
from mrc_host.core import (
    DEFAULT_MAX_EVS,
    Action,
    CcParams,
    Endpoint,
    EvStateChanged,
    MessageReceived,
    MessageSent,
    Mode,
    NicCredits,
    NicPathHealth,
    NicPlaneDelays,
    NsccParams,
    PathHealthChanged,
    PathSpace,
    SetTimer,
    Transmit,
    TransportConfig,
    nic_credits_for,
)
from mrc_host.core.config import reported_departures, split_experimental
from mrc_host.core.records import Segment
from mrc_host.wire.messages import DataFlag, DataPacket, Message, Probe, ProbeAck
from mrc_host.wire.virtual_payload import VirtualPayload

from .draws import packet_key, seed_salt
from .engine import EventLoop, Handler
from .fabric import CONTROL_BYTES, DATA_OVERHEAD, Fabric, FabricShape, HostSink, SimPacket
from .faults import Fault
from .gc_pause import collector_paused
from .payload import pattern_segments

START_NS: Final = 1_000  # time 0 is reserved: a zero timestamp means "none" on the wire
REGION_BASE: Final = 0x7F00_0000_0000
RKEY: Final = 0x1234
_DRAWN: Final = ("loss", "trim")  # fault kinds that draw per packet (from its name: draws.py)
_CONTROL: Final = 0xFF  # the "copy" field of a control packet's name (DATA counts its sends)
_RETX: Final = int(DataFlag.RETRANSMISSION)
PAYLOADS: Final = ("real", "virtual")
AUTO_REAL_BYTES: Final = 1 << 30  # ``auto``: real payloads while every region together is at most this


def choose_payload(requested: str, region_bytes: int) -> str:
    """``real`` or ``virtual`` for a run whose receive regions total ``region_bytes``:
    ``auto`` is real up to ``AUTO_REAL_BYTES``, virtual above (ValueError for a bad name)."""
    if requested == "auto":
        return "real" if region_bytes <= AUTO_REAL_BYTES else "virtual"
    if requested not in PAYLOADS:
        raise ValueError(f"payload {requested!r}: use real, virtual or auto")
    return requested


def content_key(seed: int, index: int) -> int:
    """The name of connection ``index``'s virtual content (its checks): distinct per connection."""
    return (seed * 1_000_003 + index) & 0x3FF_FFFF


def base_rtt_ns(shape: FabricShape, mtu: int, same_t0: bool) -> int:
    hops = 2 if same_t0 else 4
    per_byte = 8 / shape.link_gbps
    return int(hops * (2 * shape.link_delay_ns + (mtu + DATA_OVERHEAD + CONTROL_BYTES) * per_byte))


@dataclass
class FlowSpec:
    """One queue pair: who talks to whom, how, and with which parameters."""

    name: str
    src: int
    dst: int
    mode: Mode = Mode.MRC
    mtu: int = 4096
    max_evs: int = DEFAULT_MAX_EVS
    backup_evs_per_plane: int = 4
    initial_psn: int = 0
    # (plane, t1): the fabric carries every packet of the connection (both directions) on
    # this one path whatever its EV says -- "force a flow onto one EV" in any mode
    pin_path: tuple[int, int] | None = None
    # the window cap in units of this flow's BDP (x1.25 inside the core), whatever the CC
    window_scale: float = 1.0
    transport: dict[str, object] = field(default_factory=dict)  # TransportConfig overrides
    cc: dict[str, object] = field(default_factory=dict)  # CcParams overrides (cc_algorithm "window")
    nscc: dict[str, object] = field(default_factory=dict)  # NsccParams overrides (cc_algorithm "nscc")


# Write and Side are plain classes: a dataclass costs every mrc-sim start a fraction of a
# millisecond to build (generated methods are compiled at import), and these need none.
class Write:
    """One RDMA WRITE posted on a connection, and when it completed at each end."""

    def __init__(
        self,
        conn: Connection,
        size: int,
        posted_ns: int,
        on_received: Callable[[Write], None] | None = None,
        on_sent: Callable[[Write], None] | None = None,
        counted: bool = True,
    ) -> None:
        self.conn = conn
        self.size = size
        self.posted_ns = posted_ns
        self.msg_id = 0
        self.sent_ns: int | None = None  # every packet acknowledged
        self.received_ns: int | None = None  # every packet placed at the receiver
        self.ok: bool | None = None
        self.on_received = on_received
        self.on_sent = on_sent
        self.counted = counted  # the run waits for it (background load does not)

    @property
    def done(self) -> bool:
        return self.sent_ns is not None and self.received_ns is not None


class Side(Handler):
    """One end of a connection as the network drives it: its host, endpoint and timer.

    It is also the handler of its own timer events (``fire``), so arming one allocates no
    bound method, argument tuple or ``Call``.
    """

    def __init__(
        self,
        conn: Connection,
        role: str,
        host: int,
        peer_host: int,
        ep: Endpoint,
        ecmp: bool,
        pin: tuple[int, int] | None,
    ) -> None:
        self.conn = conn
        self.role = role  # "sender" or "receiver"
        self.host = host
        self.peer_host = peer_host
        self.ep = ep
        self.ecmp = ecmp
        self.pin = pin
        self.timer_at: int | None = None  # when the endpoint wants on_timer
        self.copies: dict[int, int] = {}  # PSN -> sends of it after the first (loss draws)
        self.controls = 0  # control packets sent (loss draws)
        self.wake_at: int | None = None  # the earliest timer event on the loop for this side

    def fire(self, arg: object) -> None:
        """A timer event this side armed for time ``arg``."""
        self.conn.net._fire(self, cast(int, arg))


class Connection:
    def __init__(self, net: Network, index: int, spec: FlowSpec, payload_bytes: int) -> None:
        shape = net.shape
        if not (0 <= spec.src < shape.hosts and 0 <= spec.dst < shape.hosts and spec.src != spec.dst):
            raise ValueError(
                f"flow {spec.name!r}: src {spec.src} and dst {spec.dst} must be two different hosts "
                f"of 0..{shape.hosts - 1}"
            )
        self.net = net
        self.index = index
        self.spec = spec
        self.name = spec.name
        same_t0 = shape.t0_of(spec.src) == shape.t0_of(spec.dst)
        self.paths = PathSpace(shape.planes, 1 if same_t0 else shape.t1)
        self.base_rtt_ns = base_rtt_ns(shape, spec.mtu, same_t0)
        planes_used = 1 if spec.mode is Mode.SINGLE_PATH or spec.pin_path is not None else shape.planes
        bdp = int(self.base_rtt_ns * shape.link_gbps * planes_used / 8 * spec.window_scale)
        # UET sizes NSCC's increments for the fabric: its cross-spine RTT at the NIC's rate
        fabric_rtt = base_rtt_ns(shape, spec.mtu, False)
        # a congested last hop delays a packet, and its ACK, by up to a queue's trim threshold
        # each (past it the switch trims: a NACK); the RTO waits that out (4 base RTT did not:
        # an all-to-all's first windows took 25 us on a 1.5 us fabric, and were resent)
        queue_ns = 2 * int(shape.trim_bytes * 8 / shape.link_gbps)
        overrides: dict[str, object] = {
            "rto_min_ns": max(4 * self.base_rtt_ns, self.base_rtt_ns + queue_ns),
            "rto_initial_ns": max(10 * self.base_rtt_ns, self.base_rtt_ns + queue_ns),
            "port_gbps": shape.link_gbps,
            **reported_departures(planes_used),  # (the NIC port reports them: ``Network.departed``)
            "network_rtt": fabric_rtt,
            "network_bdp": int(fabric_rtt * shape.link_gbps * planes_used / 8),
            **spec.transport,
        }
        self.tcfg = TransportConfig.for_rtt(
            self.base_rtt_ns,
            bdp,
            mtu=spec.mtu,
            mode=spec.mode,
            max_evs=spec.max_evs,
            backup_evs_per_plane=spec.backup_evs_per_plane,
            initial_psn=spec.initial_psn,
            **overrides,
        )
        if spec.cc:
            cc = CcParams(**{**_fields(self.tcfg.cc), **spec.cc})  # type: ignore[arg-type]
            self.tcfg = TransportConfig(**{**_fields(self.tcfg), "cc": cc})  # type: ignore[arg-type]
        if spec.nscc:
            # (the experimental switches of NSCC, named in ``nscc`` as in a scenario's table)
            tuned, switches = split_experimental(spec.nscc)
            nscc = NsccParams(**{**_fields(self.tcfg.nscc), **tuned})  # type: ignore[arg-type]
            experimental = replace(self.tcfg.experimental, **switches)  # type: ignore[arg-type]
            self.tcfg = TransportConfig(**{**_fields(self.tcfg), "nscc": nscc, "experimental": experimental})  # type: ignore[arg-type]
        rng = random.Random(net.seed * 1_000_003 + index)
        qp = 2 * index + 1
        self.sender = net.endpoint(spec.src, spec.dst, qp, self.tcfg, self.paths, rng)
        self.receiver = net.endpoint(spec.dst, spec.src, qp + 1, self.tcfg, self.paths, rng)
        # the bytes it writes, as the gather list it posts (views of one source, never joined),
        # or one virtual payload of the whole size, placed in a region without memory
        self.payload_size = max(payload_bytes, 1)
        self.payload: list[Segment]
        if net.payload == "virtual":
            key = content_key(net.seed, index)
            self.payload = [VirtualPayload(key, 0, self.payload_size)]
            self.region = self.receiver.regions.register(REGION_BASE, self.payload_size, RKEY, check_key=key)
        else:
            self.payload = list(pattern_segments(net.seed, index, self.payload_size))
            self.region = self.receiver.register_region(REGION_BASE, self.payload_size, RKEY)
        ecmp = spec.mode is Mode.ECMP
        pin = spec.pin_path
        if pin is not None and not (0 <= pin[0] < shape.planes and 0 <= pin[1] < self.paths.t1_count):
            raise ValueError(f"flow {spec.name!r}: pin_path {pin} is not a path between its hosts")
        self.tx = Side(self, "sender", spec.src, spec.dst, self.sender, ecmp, pin)
        self.rx = Side(self, "receiver", spec.dst, spec.src, self.receiver, ecmp, pin)
        self.writes: list[Write] = []
        self.by_msg: dict[int, Write] = {}  # msg_id -> the write it names
        # per packet placed: when, and the bytes placed so far (``goodput_samples``)
        self.placed_ns = array("q")
        self.placed_bytes = array("q")
        self.ev_timeline: list[dict[str, object]] = []

    @property
    def goodput_samples(self) -> list[tuple[int, int]]:
        """(time, bytes placed so far) per packet placed, in time order. Kept as two arrays of
        64-bit integers: a tuple and two ints a packet were ~120 B, an eighth of a
        permutation's peak memory with virtual payloads."""
        return list(zip(self.placed_ns, self.placed_bytes, strict=True))

    @property
    def data_ok(self) -> bool:
        """The receiver's region holds the bytes of the largest completed write."""
        sizes = [w.size for w in self.writes if w.received_ns is not None]
        if not sizes:
            return not self.writes
        return self.holds(max(sizes))

    def holds(self, n: int) -> bool:
        """The receiver's region holds the first ``n`` bytes of the payload: compared byte for
        byte (real), or every one placed with its check verified (virtual)."""
        if self.region.virtual:
            return self.region.holds(n)
        return same_prefix(self.region.buffer, self.payload, n)

    def throughput_gbps(self, t0_ns: int, t1_ns: int) -> float:
        """Goodput placed at the receiver between two times."""
        before = after = 0
        for t, placed in self.goodput_samples:
            if t <= t0_ns:
                before = placed
            if t <= t1_ns:
                after = placed
            else:
                break
        return (after - before) * 8 / max(t1_ns - t0_ns, 1)


COMPARE_CHUNK: Final = 1 << 18


def prefix(segments: list[Segment], n: int) -> list[Segment]:
    """The gather list of the first ``n`` bytes of ``segments``."""
    out: list[Segment] = []
    for seg in segments:
        if n <= 0:
            break
        out.append(seg[:n] if len(seg) > n else seg)
        n -= len(seg)
    return out


def same_prefix(buffer: bytearray | mmap.mmap, segments: list[Segment], n: int) -> bool:
    """The first ``n`` bytes of ``buffer`` equal those of the gather list ``segments``.

    Why in chunks: a large region is a mapping (``zeroed``), which compares only by
    identity; its memoryview compares item by item (~20 x a memcmp) and its slice copies
    the whole prefix. A chunk at a time copied into one scratch bytearray compares with
    memcmp and holds 256 KiB, whatever kind of region it reads.
    """
    if len(buffer) < n or sum([len(s) for s in segments]) < n:
        return False
    have, scratch = memoryview(buffer), bytearray()
    at = 0  # where the segment starts in the buffer
    for want in prefix(segments, n):
        if isinstance(want, VirtualPayload):
            return False  # no bytes to compare: a virtual region says what it holds
        for a in range(0, len(want), COMPARE_CHUNK):
            end = min(len(want), a + COMPARE_CHUNK)
            scratch[:] = have[at + a : at + end]
            if scratch != want[a:end]:  # type: ignore[comparison-overlap]  # (bytes == bytearray)
                return False
        at += len(want)
    return True


def _fields(obj: object) -> dict[str, object]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}  # type: ignore[attr-defined]


class Network(HostSink):
    def __init__(self, shape: FabricShape, seed: int = 1, payload: str = "real") -> None:
        self.shape = shape
        self.seed = seed
        if payload not in PAYLOADS:
            raise ValueError(f"payload {payload!r}: use real or virtual")
        self.payload = payload  # what every connection's writes carry (module docstring)
        self.loop = EventLoop(START_NS)
        self.fabric = Fabric(shape, self.loop, random.Random(seed + 1))
        self.connections: list[Connection] = []
        self.faults: list[Fault] = []
        self._draws = False  # a fault draws per packet (loss, trim): name each packet copy
        self._salt = seed_salt(seed)
        # a probe's wire size where it is not a control packet's (``FabricShape.probe_bytes``);
        # -1: it is, and a control packet's type is not looked at
        self._probe_bytes = -1 if shape.probe_bytes == CONTROL_BYTES else shape.probe_bytes
        self._sides: dict[tuple[int, int], Side] = {}  # (host, local qp) -> side
        self._on_host: list[list[Side]] = [[] for _ in range(shape.hosts)]  # (NIC verdicts' wakes)
        # [local qp] -> its side (a list, not a dict per host: a native index per packet
        # delivered, where a dict lookup of a QP above 256 compared two int objects)
        self._side_of_qp: list[Side | None] = []
        self._sending = False  # a packet is being handed to its NIC port (``departed``)
        self._nic_ready: list[Side] = []  # senders whose NIC backlog has room again
        self.pending = 0  # writes posted and not yet done at both ends
        self.bytes_posted = 0  # of counted writes (progress)
        self.bytes_done = 0
        self.stop_when_idle = True  # stop the loop once no counted write is pending
        self.keep_goodput = True  # per packet placed (``goodput_samples``); off: none kept
        self._started = False
        self._flow_names: set[str] = set()
        self.fabric.sink = self  # every packet reaching a host comes to ``deliver``
        # one NIC's shared path verdicts per host (used by connections whose config shares them)
        self.path_health = [NicPathHealth() for _ in range(shape.hosts)]
        self.plane_delays = [NicPlaneDelays(shape.planes) for _ in range(shape.hosts)]
        # one NIC's receiver-credit line per host, at all its ports' rate (used where senders
        # ask), made with its first endpoint's configuration (``RcccParams`` nic_gbps, rate_share)
        self.credit_lines: list[NicCredits | None] = [None] * shape.hosts

    # ---- building -----------------------------------------------------------------------
    def endpoint(
        self, host: int, peer: int, qp: int, cfg: TransportConfig, paths: PathSpace, rng: random.Random
    ) -> Endpoint:
        """One end of a queue pair on ``host`` (local QP ``qp``; the peer's is its pair). It
        shares path verdicts with ``host``'s other endpoints (its NIC's), in the group of the
        T0 ``peer`` is under: the downlink its paths end on (none under its own T0), and how
        slow each plane is."""
        shape = self.shape
        group = shape.t0_of(peer)
        line = self.credit_lines[host]
        if line is None:
            line = self.credit_lines[host] = nic_credits_for(cfg, shape.planes, shape.link_gbps)
        endpoint = Endpoint(
            local_qp=qp,
            peer_qp=qp + 1 if qp % 2 else qp - 1,
            config=cfg,
            paths=paths,
            rng=rng,
            nic=self.path_health[host],
            nic_group=None if group == shape.t0_of(host) else group,
            credit_line=line,
        )
        endpoint.share_plane_delays(self.plane_delays[host])
        return endpoint

    def add_flow(self, spec: FlowSpec, payload_bytes: int) -> Connection:
        if spec.name in self._flow_names:  # a set: a 64-host all-to-all adds 4,032 flows
            raise ValueError(f"flow name {spec.name!r} used twice")
        conn = Connection(self, len(self.connections), spec, payload_bytes)
        self.connections.append(conn)
        self._flow_names.add(spec.name)
        self._sides[(conn.tx.host, conn.sender.local_qp)] = conn.tx
        self._sides[(conn.rx.host, conn.receiver.local_qp)] = conn.rx
        self._on_host[conn.tx.host].append(conn.tx)
        self._on_host[conn.rx.host].append(conn.rx)
        by_qp = self._side_of_qp
        for side in (conn.tx, conn.rx):
            qp = side.ep.local_qp
            if qp >= len(by_qp):
                by_qp.extend([None] * (qp + 1 - len(by_qp)))
            by_qp[qp] = side
        if self._started:
            self._arm(conn)
        return conn

    def add_fault(self, fault: Fault) -> None:
        """Attach a fault whose times are relative to the start of the run. Before any traffic
        that starts with the run: a write posted for the start sends its first packets at once,
        and a fault attached after them misses them."""
        fault.start_ns += START_NS
        if fault.end_ns is not None:
            fault.end_ns += START_NS
        self.fabric.attach(fault)
        self.faults.append(fault)
        if fault.kind in _DRAWN:
            self._draws = True
        if fault.kind == "nic-down":
            self._schedule_nic(fault)

    def _schedule_nic(self, fault: Fault) -> None:
        host, plane = fault.target[1:].split("-p")
        h, p = int(host), int(plane)

        def set_ports(up: bool) -> None:
            for (side_host, _), side in sorted(self._sides.items()):
                if side_host != h:
                    continue
                ep = side.ep
                bitmap = ep.evset.local_ports | (1 << p) if up else ep.evset.local_ports & ~(1 << p)
                self._apply(side, ep.set_port_status(bitmap, self.loop.now))

        self.loop.at(fault.start_ns, set_ports, False)
        if fault.end_ns is not None:
            self.loop.at(fault.end_ns, set_ports, True)

    def deny(self, conn: Connection, ev: int) -> None:
        """Operator deny of one of ``conn``'s sender EVs."""
        self._apply(conn.tx, conn.sender.deny(ev, self.loop.now))

    def post(
        self,
        conn: Connection,
        size: int,
        at_ns: int | None = None,
        on_received: Callable[[Write], None] | None = None,
        on_sent: Callable[[Write], None] | None = None,
        counted: bool = True,
    ) -> Write:
        """Post an RDMA WRITE of ``size`` bytes now, or at ``at_ns`` (relative to the start).

        ``counted=False`` (background load): the run does not wait for it.
        """
        if not 1 <= size <= conn.payload_size:
            raise ValueError(f"flow {conn.name!r}: write of {size} B outside 1..{conn.payload_size}")
        w = Write(conn, size, 0, on_received=on_received, on_sent=on_sent, counted=counted)
        if counted:
            self.pending += 1
            self.bytes_posted += size
            self.loop.stopped = False  # posted from a callback just as the last one finished
        if at_ns is None or START_NS + at_ns <= self.loop.now:
            self._post_now(w)
        else:
            self.loop.at(START_NS + at_ns, self._post_now, w)
        return w

    def _post_now(self, w: Write) -> None:
        conn = w.conn
        w.posted_ns = self.loop.now
        data = conn.payload if w.size == conn.payload_size else prefix(conn.payload, w.size)
        msg_id, actions = conn.sender.post_write(data, REGION_BASE, RKEY, self.loop.now)
        w.msg_id = msg_id
        conn.writes.append(w)
        conn.by_msg[msg_id] = w
        self._apply(conn.tx, actions)

    # ---- plumbing -----------------------------------------------------------------------
    def path_of(self, ev: int) -> tuple[int, int]:
        """(plane, T1) of an EV (``mrc_fabric.ev``'s ``ev_plane`` and ``ev_t1``)."""
        return ev >> PLANE_SHIFT, (ev >> T1_SHIFT) & T1_MASK

    def departed(self, pkt: SimPacket, now: int, port_gbps: float) -> None:
        """A DATA packet left its sender's NIC port, running at ``port_gbps``: the sender's core
        hears it (``Endpoint.departed``; no event, no actions), on the plane its EV names (a
        single-path queue pair's port is not its EV's plane: counted there, its copies
        waiting went uncounted and the sender stalled)."""
        msg = cast(DataPacket, pkt.msg)
        qp = msg.qp
        by_qp = self._side_of_qp
        rx = by_qp[qp] if 0 <= qp < len(by_qp) else None
        if rx is not None and rx.host == pkt.dst:
            tx = rx.conn.tx
            plane = msg.meta.ev >> PLANE_SHIFT
            if tx.host == pkt.src and tx.ep.departed(msg.psn, msg.send_ts, now, plane, port_gbps):
                # its NIC backlog has room again: more of its packets go now -- or, when this
                # one left as it was handed over (in ``_apply``), once that has done
                if self._sending:
                    self._nic_ready.append(tx)
                else:
                    self._apply(tx, tx.ep.nic_ready(now))

    def deliver(self, pkt: SimPacket, now: int) -> None:
        qp = pkt.msg.qp
        by_qp = self._side_of_qp
        side = by_qp[qp] if 0 <= qp < len(by_qp) else None
        if side is None or side.host != pkt.dst:
            return
        ep = side.ep
        if side.role == "receiver" and pkt.data:
            conn = side.conn
            before = ep.counters.data_bytes_placed
            self._apply(side, ep.receive(pkt.msg, now))
            placed = ep.counters.data_bytes_placed
            if placed != before and self.keep_goodput:
                conn.placed_ns.append(now)
                conn.placed_bytes.append(placed)
            return
        self._apply(side, ep.receive(pkt.msg, now))

    def _packet_key(self, side: Side, msg: Message) -> int:
        """The name of a packet copy its loss and trim draws come from (``draws.py``): a DATA
        packet by its PSN and how many times this side had sent that PSN (resends and tail
        twins draw afresh), a control packet by how many this side had sent before."""
        if isinstance(msg, DataPacket):
            copy = 0
            flags: int = msg.flags  # (typed: a native AND, not IntFlag.__and__ in Python)
            if flags & _RETX:
                copy = side.copies.get(msg.psn, 0) + 1
                side.copies[msg.psn] = copy
            return packet_key(self._salt, side.host, side.peer_host, msg.qp, msg.psn, copy)
        side.controls += 1
        return packet_key(self._salt, side.host, side.peer_host, msg.qp, side.controls, _CONTROL)

    def _apply(self, side: Side, actions: list[Action]) -> None:
        now = self.loop.now
        fabric = self.fabric
        for a in actions:
            if type(a) is Transmit:
                msg = a.msg
                if side.pin is None:
                    # the EV's path, its bits read in place (mrc_fabric.ev is not compiled: a
                    # call of ev_plane would be a Python call, a cache a dict lookup per packet)
                    ev = msg.meta.ev
                    plane, t1 = ev >> PLANE_SHIFT, (ev >> T1_SHIFT) & T1_MASK
                else:
                    plane, t1 = side.pin
                if isinstance(msg, DataPacket):
                    size, is_data = DATA_OVERHEAD + len(msg.payload), True
                elif self._probe_bytes >= 0 and (type(msg) is Probe or type(msg) is ProbeAck):
                    size, is_data = self._probe_bytes, False
                else:
                    size, is_data = CONTROL_BYTES, False
                pkt = SimPacket(
                    msg, side.host, side.peer_host, plane, None if side.ecmp else t1, size, is_data
                )
                if self._draws:
                    pkt.draw = self._packet_key(side, msg)
                self._sending = True
                fabric.send_from_host(pkt)
                self._sending = False
            elif type(a) is SetTimer:
                at = a.at_ns
                side.timer_at = at
                # a deadline that moved later keeps the earlier event, which re-arms itself
                if at is not None and (side.wake_at is None or at < side.wake_at):
                    side.wake_at = at
                    self.loop.push(at, side, at)
            elif isinstance(a, MessageSent):
                w = side.conn.by_msg.get(a.msg_id)
                if w is not None and w.sent_ns is None:
                    w.sent_ns, w.ok = now, a.ok
                    self._maybe_done(w)
                    if w.on_sent is not None:
                        w.on_sent(w)
            elif isinstance(a, MessageReceived):
                w = side.conn.by_msg.get(a.msg_id)
                if w is not None and w.received_ns is None:
                    w.received_ns = now
                    self._maybe_done(w)
                    if w.on_received is not None:
                        w.on_received(w)
            elif isinstance(a, PathHealthChanged):
                self._wake_nic(side)
            elif isinstance(a, EvStateChanged):
                side.conn.ev_timeline.append(
                    {
                        "t_us": (now - START_NS) / 1e3,
                        "side": side.role,
                        "ev": f"{a.ev:08x}",
                        "old": a.old,
                        "new": a.new,
                        "reason": a.reason,
                    }
                )
        ready = self._nic_ready
        while ready:
            nxt = ready.pop()
            self._apply(nxt, nxt.ep.nic_ready(now))

    def _wake_nic(self, origin: Side) -> None:
        """``origin``'s endpoint changed its host's path verdicts: the host's other endpoints
        read them now (each once per change: ``Endpoint.on_path_health``)."""
        now = self.loop.now
        for side in list(self._on_host[origin.host]):
            if side is not origin:
                self._apply(side, side.ep.on_path_health(now))

    def _maybe_done(self, w: Write) -> None:
        if w.done and w.counted:
            self.pending -= 1
            self.bytes_done += w.size
            if self.pending == 0 and self.stop_when_idle:
                self.loop.stopped = True

    def _fire(self, side: Side, at: int) -> None:
        if at != side.wake_at:
            return  # superseded by an earlier event
        side.wake_at = None
        due = side.timer_at
        if due is None:
            return
        now = self.loop.now
        if due > now:
            side.wake_at = due
            self.loop.push(due, side, due)
            return
        side.timer_at = None
        self._apply(side, side.ep.on_timer(now))

    def _arm(self, conn: Connection) -> None:
        for side in (conn.tx, conn.rx):
            self._apply(side, [SetTimer(side.ep.next_deadline())])

    # ---- running ------------------------------------------------------------------------
    def start(self) -> None:
        if not self._started:
            self._started = True
            for conn in self.connections:
                self._arm(conn)

    def run(self, limit_ns: int, max_events: int = 0) -> bool:
        """Play events until no counted write is pending or ``limit_ns`` after the start.

        With ``max_events`` it pauses after that many events and returns False (call again).
        """
        self.start()
        if self.pending == 0 and self.stop_when_idle and self.bytes_posted:
            return True
        with collector_paused():  # a run makes no cyclic garbage (gc_pause.py)
            return self.loop.run(START_NS + limit_ns, max_events=max_events)

    @property
    def progress(self) -> float:
        """Fraction of the counted bytes placed so far (for progress bars)."""
        if not self.bytes_posted:
            return 0.0
        placed = sum(c.receiver.counters.data_bytes_placed for c in self.connections)
        return min(1.0, placed / self.bytes_posted)

    @property
    def elapsed_ns(self) -> int:
        return self.loop.now - START_NS
