"""One RDMA WRITE across the simulated fabric, run by two real core endpoints.

``Simulation`` builds the fabric, the sender endpoint (host ``src``) and the receiver
endpoint (host ``dst``, one registered region of ``size`` bytes), attaches the faults,
then ``run()`` posts the write and plays events until both ends report completion or
the time limit passes. Everything random comes from ``seed``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mrc_fabric.ev import EV
from mrc_host.core import (
    Endpoint,
    EvStateChanged,
    MessageReceived,
    MessageSent,
    Mode,
    PathSpace,
    SetTimer,
    Transmit,
    TransportConfig,
)
from mrc_host.wire.messages import DataPacket

from .engine import EventLoop
from .fabric import CONTROL_BYTES, DATA_OVERHEAD, Fabric, FabricShape, SimPacket
from .faults import Fault, parse_fault

START_NS = 1_000  # time 0 is reserved: a zero timestamp means "none" on the wire
REGION_BASE = 0x7F00_0000_0000
RKEY = 0x1234


@dataclass
class SimConfig:
    shape: FabricShape = field(default_factory=FabricShape)
    size: int = 1 << 20
    mode: Mode = Mode.MRC
    mtu: int = 4096
    max_evs: int = 64
    backup_evs_per_plane: int = 4
    faults: list[str] = field(default_factory=list)
    seed: int = 1
    src: int = 0
    dst: int = -1  # -1: the last host (under another T0 when t0 > 1)
    initial_psn: int = 0
    time_limit_ns: int = 0  # 0: 200 x the ideal time + 10 ms
    transport_overrides: dict[str, object] = field(default_factory=dict)


def base_rtt_ns(shape: FabricShape, mtu: int, same_t0: bool) -> int:
    hops = 2 if same_t0 else 4
    per_byte = 8 / shape.link_gbps
    return int(hops * (2 * shape.link_delay_ns + (mtu + DATA_OVERHEAD + CONTROL_BYTES) * per_byte))


@dataclass
class _Side:
    name: str
    host: int
    ep: Endpoint
    timer_at: int | None = None
    timer_gen: int = 0


class Simulation:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        shape = cfg.shape
        self.dst = cfg.dst if cfg.dst >= 0 else shape.hosts - 1
        if not (0 <= cfg.src < shape.hosts and 0 <= self.dst < shape.hosts and cfg.src != self.dst):
            raise ValueError(f"src {cfg.src} and dst {self.dst} must be two hosts of 0..{shape.hosts - 1}")
        same_t0 = shape.t0_of(cfg.src) == shape.t0_of(self.dst)
        self.paths = PathSpace(shape.planes, 1 if same_t0 else shape.t1)
        self.ideal_ns = int(cfg.size * 8 / (shape.link_gbps * shape.planes)) + 1
        self.base_rtt_ns = base_rtt_ns(shape, cfg.mtu, same_t0)
        planes_used = 1 if cfg.mode is Mode.SINGLE_PATH else shape.planes
        bdp = int(self.base_rtt_ns * shape.link_gbps * planes_used / 8)
        overrides = dict(cfg.transport_overrides)
        self.tcfg = TransportConfig.for_rtt(
            self.base_rtt_ns,
            bdp,
            mtu=cfg.mtu,
            mode=cfg.mode,
            max_evs=cfg.max_evs,
            backup_evs_per_plane=cfg.backup_evs_per_plane,
            initial_psn=cfg.initial_psn,
            **overrides,
        )
        self.loop = EventLoop(START_NS)
        rng = random.Random(cfg.seed)
        self.fabric = Fabric(shape, self.loop, random.Random(cfg.seed + 1), cfg.mode is Mode.ECMP)
        # randbytes(n) builds one n*8-bit integer: above 256 MiB that overflows a C int, so
        # draw in 64 MiB chunks (identical bytes for any size up to one chunk)
        data_rng = random.Random(cfg.seed + 2)
        chunk = 64 << 20
        self.data = b"".join(data_rng.randbytes(min(chunk, cfg.size - o)) for o in range(0, cfg.size, chunk))
        self.faults: list[Fault] = []
        for spec in cfg.faults:
            fault = parse_fault(spec, self.ideal_ns)
            fault.start_ns += START_NS
            if fault.end_ns is not None:
                fault.end_ns += START_NS
            self.fabric.attach(fault)
            self.faults.append(fault)
        self.sender = Endpoint(local_qp=1, peer_qp=2, config=self.tcfg, paths=self.paths, rng=rng)
        self.receiver = Endpoint(local_qp=2, peer_qp=1, config=self.tcfg, paths=self.paths, rng=rng)
        self.region = self.receiver.register_region(REGION_BASE, max(cfg.size, 1), RKEY)
        self.sides = {
            1: _Side("sender", cfg.src, self.sender),
            2: _Side("receiver", self.dst, self.receiver),
        }
        self.peer_host = {cfg.src: self.dst, self.dst: cfg.src}
        self.fabric.host_rx[cfg.src] = self._rx
        self.fabric.host_rx[self.dst] = self._rx
        self.sent_done_ns: int | None = None
        self.received_done_ns: int | None = None
        self.send_ok: bool | None = None
        self.ev_timeline: list[dict[str, object]] = []
        self.goodput_samples: list[tuple[int, int]] = []
        for fault in self.faults:
            if fault.kind == "nic-down":
                self._schedule_nic(fault)

    # ---- plumbing -----------------------------------------------------------------------
    def _schedule_nic(self, fault: Fault) -> None:
        host, plane = fault.target[1:].split("-p")
        h, p = int(host), int(plane)
        for side in self.sides.values():
            if side.host != h:
                continue
            ep = side.ep

            def set_ports(up: bool, ep: Endpoint = ep, side: _Side = side) -> None:
                bitmap = ep.evset.local_ports | (1 << p) if up else ep.evset.local_ports & ~(1 << p)
                self._apply(side, ep.set_port_status(bitmap, self.loop.now))

            self.loop.at(fault.start_ns, set_ports, False)
            if fault.end_ns is not None:
                self.loop.at(fault.end_ns, set_ports, True)

    def _rx(self, pkt: SimPacket, now: int) -> None:
        side = self.sides.get(pkt.msg.qp)
        if side is None or side.host != pkt.dst:
            return
        before = self.receiver.counters.data_bytes_placed
        self._apply(side, side.ep.receive(pkt.msg, now))
        placed = self.receiver.counters.data_bytes_placed
        if placed != before:
            self.goodput_samples.append((now, placed))

    def _apply(self, side: _Side, actions: list) -> None:
        now = self.loop.now
        for a in actions:
            if isinstance(a, Transmit):
                msg = a.msg
                ev = EV.decode(msg.meta.ev)
                is_data = isinstance(msg, DataPacket)
                size = DATA_OVERHEAD + len(msg.payload) if is_data else CONTROL_BYTES
                t1 = None if self.cfg.mode is Mode.ECMP else ev.t1
                pkt = SimPacket(msg, side.host, self.peer_host[side.host], ev.plane, t1, size, is_data)
                self.fabric.send_from_host(pkt)
            elif isinstance(a, SetTimer):
                if a.at_ns != side.timer_at:
                    side.timer_at = a.at_ns
                    side.timer_gen += 1
                    if a.at_ns is not None:
                        self.loop.at(a.at_ns, self._fire, side, side.timer_gen)
            elif isinstance(a, MessageSent):
                self.sent_done_ns = now
                self.send_ok = a.ok
            elif isinstance(a, MessageReceived):
                self.received_done_ns = now
            elif isinstance(a, EvStateChanged):
                self.ev_timeline.append(
                    {
                        "t_us": (now - START_NS) / 1e3,
                        "side": side.name,
                        "ev": f"{a.ev:08x}",
                        "old": a.old,
                        "new": a.new,
                        "reason": a.reason,
                    }
                )

    def _fire(self, side: _Side, gen: int) -> None:
        if gen != side.timer_gen:
            return
        side.timer_at = None
        self._apply(side, side.ep.on_timer(self.loop.now))

    # ---- running ------------------------------------------------------------------------
    def deny(self, ev: int) -> None:
        """Operator deny on the sender (before ``run``)."""
        self._apply(self.sides[1], self.sender.deny(ev, self.loop.now))

    def run(self) -> dict[str, object]:
        from .report import summarise

        for side in self.sides.values():
            self._apply(side, [SetTimer(side.ep.next_deadline())])
        _, actions = self.sender.post_write(self.data, REGION_BASE, RKEY, self.loop.now)
        self._apply(self.sides[1], actions)
        limit = self.cfg.time_limit_ns or 200 * self.ideal_ns + 10_000_000
        self.loop.run(
            START_NS + limit, lambda: self.sent_done_ns is not None and self.received_done_ns is not None
        )
        return summarise(self)


def run(cfg: SimConfig) -> dict[str, object]:
    return Simulation(cfg).run()
