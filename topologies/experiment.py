"""Experiment scripts without guessing: typed transfer results and faults at fractions of a transfer.

::

    from topologies.experiment import FaultAt, transfer
    from topologies.testbed import Testbed, TestbedConfig

    with Testbed(TestbedConfig(target="linux", link_rate=20)) as tb:
        r = transfer(tb, "h0", "h3", 8 << 20, faults=[FaultAt(0.25, "blackhole", "t0p0n0-t1p0n0")])
        print(r.ok, r.seconds, r.goodput_mbit_s, r.faults[0].packets_dropped)

:func:`transfer` runs one agent transfer and meanwhile fires each :class:`FaultAt` through
the controller once that share of the bytes is acknowledged (so it lands mid-transfer at any
speed: no thread and ``sleep`` of your own), polls the sender's EV states and records the
agent's progress lines. It returns a :class:`TransferResult`: every field documented here, the
agent's own summary kept whole in ``summary`` (docs/agent.md lists its keys). Each progress
line reaches ``on_progress`` as a :class:`Progress`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from topologies.watch import PlannedFault, TransferWatch

MODES = ("mrc", "single-path", "ecmp")


@dataclass(frozen=True)
class FaultAt:
    """A fault to inject once ``at`` (0 < at < 1) of a transfer's bytes are acknowledged.

    ``kind`` and ``target`` as in the CLI's ``fault`` and ``mrcctl inject``: ``link_down``,
    ``blackhole``, ``loss`` (with ``probability``), ``flap`` (with ``period_s``),
    ``switch_down``, ``nic_port_down``; a link ``a-b`` or ``node:port``, a switch, or a NIC
    port ``host:plane``. It stays until cleared (``tb.controller.clear()``)."""

    at: float
    kind: str
    target: str
    probability: float = 0.0
    period_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.at < 1.0:
            raise ValueError(f"FaultAt.at: {self.at!r} is not a fraction strictly between 0 and 1")


@dataclass(frozen=True)
class FaultOutcome:
    """What became of one :class:`FaultAt`. Times are seconds since the transfer started."""

    at: float  # the fraction it was due at
    kind: str
    target: str
    fault_id: str  # the controller's id ('' if it was never injected)
    injected_s: float | None  # just before the controller's first table write for it
    landed_s: float | None  # when the controller answered: every switch written
    bytes_acked_at_injection: int
    switches: list[str]  # the switches holding its entries
    packets_dropped: int  # by those switches for faults, from its injection to the transfer's end
    error: str  # why it was not injected ('' if it was)


@dataclass(frozen=True)
class Progress:
    """One progress line of the sending agent (every 0.2 s while a transfer runs)."""

    elapsed_s: float  # since the agent took the request
    bytes: int  # the transfer's size
    bytes_acked: int  # cumulatively acknowledged: the bytes the receiver holds in order
    bytes_delivered: int  # acknowledged including out of order (selective acks): what crossed
    retransmissions: int
    evs_retired: int
    queued: bool  # still waiting for a connection to the peer

    @classmethod
    def from_line(cls, line: dict[str, Any]) -> Progress:
        return cls(
            elapsed_s=float(line.get("elapsed_s", 0.0)),
            bytes=int(line.get("bytes", 0)),
            bytes_acked=int(line.get("bytes_acked", 0)),
            bytes_delivered=int(line.get("bytes_delivered", 0)),
            retransmissions=int(line.get("retransmissions", 0)),
            evs_retired=int(line.get("evs_retired", 0)),
            queued=bool(line.get("queued", False)),
        )


@dataclass(frozen=True)
class EvStateChange:
    """One sender EV changing state (GOOD, SKIP, ASSUMED_BAD, DENIED; docs/transport.md)."""

    t_s: float  # seconds since the transfer started
    ev: str  # the EV, 8 hex digits
    plane: int
    t1: int
    old: str
    new: str
    reason: str  # the core's words for it, where the agent kept them


@dataclass(frozen=True)
class TransferResult:
    """One transfer, as the sending agent summarised it, plus what was watched meanwhile."""

    src: str
    dst: str
    mode: str  # mrc | single-path | ecmp
    ok: bool  # every byte acknowledged and verified by the receiver (CRC-32 of the payload)
    verified: bool | None  # the receiver's verdict on the bytes (None: no receipt came back)
    error: str  # why it failed ('' if ok)
    bytes: int  # the size asked for
    bytes_acked: int
    seconds: float  # from the first packet sent to the last byte acknowledged
    goodput_mbit_s: float  # bytes_acked * 8 / seconds / 1e6
    data_packets_sent: int
    retransmissions: int
    evs_retired: int  # EVs retired (ASSUMED_BAD) during the transfer
    evs_restored: int  # retired EVs a probe brought back
    srtt_us: float | None  # the sender's smoothed RTT at the end
    min_rtt_us: float | None
    wall_s: float  # wall-clock seconds the call took
    progress: list[Progress] = field(default_factory=list)
    ev_changes: list[EvStateChange] = field(default_factory=list)
    faults: list[FaultOutcome] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)  # the agent's summary, every key

    @classmethod
    def from_summary(cls, src: str, dst: str, mode: str, s: dict[str, Any], wall_s: float) -> TransferResult:
        """From the agent's transfer summary (``AgentClient.send``, ``Testbed.send``)."""
        return cls(
            src=src,
            dst=dst,
            mode=str(s.get("mode", mode)),
            ok=bool(s.get("ok")),
            verified=s.get("verified"),
            error=str(s.get("error") or ""),
            bytes=int(s.get("bytes", 0)),
            bytes_acked=int(s.get("bytes_acked", 0)),
            seconds=float(s.get("seconds") or 0.0),
            goodput_mbit_s=float(s.get("goodput_mbit_s") or 0.0),
            data_packets_sent=int(s.get("data_packets_sent", 0)),
            retransmissions=int(s.get("retransmissions", 0)),
            evs_retired=int(s.get("evs_retired", 0)),
            evs_restored=int(s.get("evs_restored", 0)),
            srtt_us=s.get("srtt_us"),
            min_rtt_us=s.get("min_rtt_us"),
            wall_s=wall_s,
            summary=dict(s),
        )


def _outcome(f: FaultAt, p: PlannedFault) -> FaultOutcome:
    return FaultOutcome(
        at=f.at,
        kind=f.kind,
        target=f.target,
        fault_id=p.fault_id,
        injected_s=p.injected_at,
        landed_s=p.landed_at,
        bytes_acked_at_injection=p.acked_at_injection,
        switches=list(p.switches),
        packets_dropped=p.switch_drops,
        error=p.error,
    )


def transfer(
    tb: Any,
    src: str,
    dst: str,
    size: int,
    mode: str = "mrc",
    faults: Sequence[FaultAt] = (),
    on_progress: Callable[[Progress], None] | None = None,
) -> TransferResult:
    """Send ``size`` bytes from ``src``'s agent to ``dst`` on a running testbed, firing ``faults``
    at their fractions; returns when the receiver confirmed the bytes or the agent gave up."""
    if mode not in MODES:
        raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
    if size <= 0:
        raise ValueError(f"size: {size} must be > 0")
    progress: list[Progress] = []

    def seen(line: dict[str, Any]) -> None:
        p = Progress.from_line(line)
        progress.append(p)
        if on_progress is not None:
            on_progress(p)

    planned = [
        PlannedFault(f.kind, f.target, f.at, f"{f.kind} {f.target}", f.probability, f.period_s)
        for f in faults
    ]
    watch = TransferWatch(tb, src, dst, size, mode, planned, on_progress=seen)
    w = watch.run()
    return dataclasses.replace(
        TransferResult.from_summary(src, dst, mode, w.summary, w.wall_s),
        progress=progress,
        ev_changes=[EvStateChange(c.t, c.ev, c.plane, c.t1, c.old, c.new, c.reason) for c in w.ev_changes],
        faults=[_outcome(f, p) for f, p in zip(faults, planned, strict=True)],
    )
