"""One RDMA WRITE across the simulated fabric, run by two real core endpoints.

``Simulation`` is the single-connection run behind the flag CLI: a ``Network`` with one
flow from host ``src`` to host ``dst`` (one registered region of ``size`` bytes), the
faults attached, then ``run()`` posts the write and plays events until both ends report
completion or the time limit passes. Everything random comes from ``seed``.
Multi-connection runs use ``network.Network`` directly, or a scenario file
(``scenario_file``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mrc_host.core import DEFAULT_MAX_EVS, Endpoint, MemoryRegion, Mode, TransportConfig

from .engine import EventLoop
from .fabric import Fabric, FabricShape
from .faults import Fault, parse_fault
from .network import (
    REGION_BASE,
    RKEY,
    START_NS,
    Connection,
    FlowSpec,
    Network,
    Write,
    base_rtt_ns,
    choose_payload,
)

__all__ = ["REGION_BASE", "RKEY", "START_NS", "SimConfig", "Simulation", "base_rtt_ns", "run"]


@dataclass
class SimConfig:
    shape: FabricShape = field(default_factory=FabricShape)
    size: int = 1 << 20
    mode: Mode = Mode.MRC
    mtu: int = 4096
    max_evs: int = DEFAULT_MAX_EVS
    backup_evs_per_plane: int = 4
    faults: list[str] = field(default_factory=list)
    seed: int = 1
    src: int = 0
    dst: int = -1  # -1: the last host (under another T0 when t0 > 1)
    initial_psn: int = 0
    time_limit_ns: int = 0  # 0: 200 x the ideal time + 10 ms
    transport_overrides: dict[str, object] = field(default_factory=dict)
    payload: str = "real"  # real, virtual or auto (network.choose_payload)


class Simulation:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        shape = cfg.shape
        self.dst = cfg.dst if cfg.dst >= 0 else shape.hosts - 1
        self.ideal_ns = int(cfg.size * 8 / (shape.link_gbps * shape.planes)) + 1
        self.net = Network(shape, cfg.seed, choose_payload(cfg.payload, cfg.size))
        spec = FlowSpec(
            "flow",
            cfg.src,
            self.dst,
            mode=cfg.mode,
            mtu=cfg.mtu,
            max_evs=cfg.max_evs,
            backup_evs_per_plane=cfg.backup_evs_per_plane,
            initial_psn=cfg.initial_psn,
            transport=dict(cfg.transport_overrides),
        )
        self.conn: Connection = self.net.add_flow(spec, cfg.size)
        self.faults: list[Fault] = []
        for text in cfg.faults:
            fault = parse_fault(text, self.ideal_ns)
            self.net.add_fault(fault)
            self.faults.append(fault)
        self.write: Write | None = None

    # what the report and the tests read
    @property
    def loop(self) -> EventLoop:
        return self.net.loop

    @property
    def fabric(self) -> Fabric:
        return self.net.fabric

    @property
    def sender(self) -> Endpoint:
        return self.conn.sender

    @property
    def receiver(self) -> Endpoint:
        return self.conn.receiver

    @property
    def tcfg(self) -> TransportConfig:
        return self.conn.tcfg

    @property
    def base_rtt_ns(self) -> int:
        return self.conn.base_rtt_ns

    @property
    def region(self) -> MemoryRegion:
        return self.conn.region

    @property
    def ev_timeline(self) -> list[dict[str, object]]:
        return self.conn.ev_timeline

    @property
    def goodput_samples(self) -> list[tuple[int, int]]:
        return self.conn.goodput_samples

    @property
    def sent_done_ns(self) -> int | None:
        return None if self.write is None else self.write.sent_ns

    @property
    def received_done_ns(self) -> int | None:
        return None if self.write is None else self.write.received_ns

    @property
    def send_ok(self) -> bool | None:
        return None if self.write is None else self.write.ok

    def deny(self, ev: int) -> None:
        """Operator deny on the sender (before ``run``)."""
        self.net.deny(self.conn, ev)

    def run(self) -> dict[str, Any]:
        from .report import summarise

        self.net.start()
        self.write = self.net.post(self.conn, self.cfg.size)
        self.net.run(self.time_limit_ns)
        return summarise(self)

    @property
    def time_limit_ns(self) -> int:
        return self.cfg.time_limit_ns or 200 * self.ideal_ns + 10_000_000


def run(cfg: SimConfig) -> dict[str, Any]:
    return Simulation(cfg).run()
