"""Fault model: what an operator asks for, checked, and turned into fault-table entries.

Pure. A fault names a target in the topology and becomes *port actions*: a black hole
or a loss probability on one port of one switch, on its egress side (``port_fault``)
or its ingress side (``ingress_fault``). Several faults on the same port combine
(a black hole wins; losses multiply their survival), so clearing one fault leaves the
others in force.

Targets and directions (a link's ``a`` end is its lower tier: host below T0, T0 below T1):

- LINK_DOWN, BLACKHOLE, LOSS, FLAP: a link ``a-b`` (either order) or ``node:port``.
  ``a2b`` drops traffic sent from a to b: egress of a when a is a switch, otherwise
  (a host) ingress of b; ``b2a`` is egress of b. LINK_DOWN is always both directions.
- SWITCH_DOWN: a switch; every cabled port black-holed both ways (ingress and egress).
- NIC_PORT_DOWN: a host NIC port ``host:plane`` or its interface name; the T0 port it
  plugs into black-holed both ways.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass

from controller.entries import Exact, TableEntry
from mrc_fabric.fault_tables import FAULT_KEY, FAULT_TABLE, LOSS_SCALE, PortFault
from mrc_fabric.topology import Link, Topology

# Bounds on every fault parameter (documented in docs/controller.md). A FLAP toggles its
# entries with one P4Runtime write per switch every period, so the period has a floor.
MIN_LOSS_PROBABILITY = 1 / LOSS_SCALE  # the smallest loss the fault_loss action can express
MIN_FLAP_PERIOD_S = 0.05
MAX_FLAP_PERIOD_S = 3600.0
MIN_DURATION_S = 0.01  # shorter than a few P4Runtime writes' time is no fault at all
MAX_DURATION_S = 7 * 86400.0
MAX_TARGET_CHARS = 128
MAX_ACTIVE_FAULTS = 4096  # faults kept at once; one more is RESOURCE_EXHAUSTED
QUOTE_CHARS = 64  # at most this much of a bad input is quoted back in an error


class FaultKind(enum.StrEnum):
    LINK_DOWN = "link_down"
    BLACKHOLE = "blackhole"
    LOSS = "loss"
    FLAP = "flap"
    SWITCH_DOWN = "switch_down"
    NIC_PORT_DOWN = "nic_port_down"


class Direction(enum.StrEnum):
    BOTH = "both"
    A2B = "a2b"
    B2A = "b2a"


LINK_KINDS = {FaultKind.LINK_DOWN, FaultKind.BLACKHOLE, FaultKind.LOSS, FaultKind.FLAP}


class FaultError(ValueError):
    """A fault request with a bad field; ``field`` is its path (``spec.probability``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class FaultCapacityError(Exception):
    """A fault refused because MAX_ACTIVE_FAULTS are active (RESOURCE_EXHAUSTED)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class FaultTargetNotFound(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class FaultSpec:
    kind: FaultKind
    target: str
    direction: Direction = Direction.BOTH
    probability: float = 0.0
    period_s: float = 0.0
    duration_s: float = 0.0


@dataclass(frozen=True)
class PortAction:
    switch: str
    table: str  # a fault table (mrc_fabric.fault_tables.FAULT_TABLE: egress or ingress)
    port: int
    drop: bool
    loss: float = 0.0

    def describe(self) -> str:
        what = "drop" if self.drop else f"loss {self.loss:g}"
        return f"{self.switch}:{self.table}:{self.port} {what}"


def quote(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` for an error message: repr'd, at most ``limit`` characters of it (a request
    is untrusted input, and echoing all of a huge one would overflow the status message)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"


def _finite(field: str, value: float) -> None:
    if not math.isfinite(value):
        raise FaultError(field, f"must be a finite number, got {value}")


def check_spec(spec: FaultSpec) -> None:
    """Field checks that need no topology; every number and string is bounded."""
    if not isinstance(spec.kind, FaultKind):
        raise FaultError(
            "spec.kind", f"{spec.kind!r} is not a fault kind ({', '.join(k.value for k in FaultKind)})"
        )
    if not spec.target:
        raise FaultError("spec.target", "empty")
    if len(spec.target) > MAX_TARGET_CHARS:
        raise FaultError("spec.target", f"{quote(spec.target)} is longer than {MAX_TARGET_CHARS} characters")
    for name in ("probability", "period_s", "duration_s"):
        _finite(f"spec.{name}", getattr(spec, name))
    if spec.kind == FaultKind.LOSS and not MIN_LOSS_PROBABILITY <= spec.probability <= 1.0:
        raise FaultError(
            "spec.probability",
            f"{spec.probability!r} is outside [{MIN_LOSS_PROBABILITY:.3g}, 1] "
            f"(the switch drops in steps of 1/{LOSS_SCALE}; smaller would install no loss)",
        )
    if spec.kind != FaultKind.LOSS and spec.probability:
        raise FaultError("spec.probability", f"only a LOSS fault takes a probability, not {spec.kind.value}")
    if spec.kind == FaultKind.FLAP and not MIN_FLAP_PERIOD_S <= spec.period_s <= MAX_FLAP_PERIOD_S:
        raise FaultError(
            "spec.period_s",
            f"a FLAP needs a period in [{MIN_FLAP_PERIOD_S:g}, {MAX_FLAP_PERIOD_S:g}] s, "
            f"got {spec.period_s!r}",
        )
    if spec.kind != FaultKind.FLAP and spec.period_s:
        raise FaultError("spec.period_s", f"only a FLAP fault takes a period, not {spec.kind.value}")
    if spec.duration_s and not MIN_DURATION_S <= spec.duration_s <= MAX_DURATION_S:
        raise FaultError(
            "spec.duration_s",
            f"must be 0 (until cleared) or in [{MIN_DURATION_S:g}, {MAX_DURATION_S:g}] s, "
            f"got {spec.duration_s!r}",
        )
    if spec.kind not in LINK_KINDS - {FaultKind.LINK_DOWN} and spec.direction != Direction.BOTH:
        raise FaultError("spec.direction", f"a {spec.kind.value} fault is always both directions")


def _link_actions(
    topo: Topology, link: Link, direction: Direction, drop: bool, loss: float
) -> list[PortAction]:
    out = []
    if direction in (Direction.BOTH, Direction.A2B):
        if topo.has_switch(link.a.node):
            out.append(PortAction(link.a.node, FAULT_TABLE["egress"], link.a.port, drop, loss))
        else:
            out.append(PortAction(link.b.node, FAULT_TABLE["ingress"], link.b.port, drop, loss))
    if direction in (Direction.BOTH, Direction.B2A):
        out.append(PortAction(link.b.node, FAULT_TABLE["egress"], link.b.port, drop, loss))
    return out


def find_nic_link(topo: Topology, target: str) -> Link:
    """A host NIC port by ``host:plane`` or interface name."""
    for h in topo.hosts:
        for p in h.ports:
            if target in (f"{h.name}:{p.plane}", p.ifname):
                link = topo.link_at(p.t0, p.t0_port)
                assert link is not None
                return link
    raise FaultTargetNotFound(
        f"spec.target: no host NIC port {quote(target)} (use host:plane or its interface name)"
    )


def resolve(topo: Topology, spec: FaultSpec) -> list[PortAction]:
    """The port actions of a fault; raises FaultError or FaultTargetNotFound naming the field."""
    check_spec(spec)
    if spec.kind in LINK_KINDS:
        try:
            link = topo.find_link(spec.target)
        except KeyError:
            raise FaultTargetNotFound(
                f"spec.target: no link {quote(spec.target)} (use a-b or node:port)"
            ) from None
        if spec.kind == FaultKind.LOSS:
            return _link_actions(topo, link, spec.direction, False, spec.probability)
        return _link_actions(topo, link, spec.direction, True, 0.0)
    if spec.kind == FaultKind.SWITCH_DOWN:
        if not topo.has_switch(spec.target):
            raise FaultTargetNotFound(f"spec.target: no switch {quote(spec.target)}")
        out = []
        for end in topo.ports_of(spec.target):
            out.append(PortAction(spec.target, FAULT_TABLE["ingress"], end.port, True))
            out.append(PortAction(spec.target, FAULT_TABLE["egress"], end.port, True))
        return out
    link = find_nic_link(topo, spec.target)
    return _link_actions(topo, link, Direction.BOTH, True, 0.0)


def fault_entries(actions: Iterable[PortAction]) -> dict[str, list[TableEntry]]:
    """Combine port actions into one fault entry per (switch, table, port)."""
    combined: dict[tuple[str, str, int], tuple[bool, float]] = {}
    for a in actions:
        drop, survive = combined.get((a.switch, a.table, a.port), (False, 1.0))
        combined[(a.switch, a.table, a.port)] = (drop or a.drop, survive * (1.0 - a.loss))
    out: dict[str, list[TableEntry]] = {}
    for (switch, table, port), (drop, survive) in sorted(combined.items()):
        entry = port_entry(table, port, drop, survive)
        if entry is not None:
            out.setdefault(switch, []).append(entry)
    return out


def port_entry(table: str, port: int, drop: bool, survive: float) -> TableEntry | None:
    """The one entry of a port whose faults drop (any of them) or let ``survive`` through."""
    fault = PortFault.combined(drop, survive)
    if fault is None:
        return None  # a 0 % loss is no entry at all
    return TableEntry(table, ((FAULT_KEY, Exact(port)),), fault.action, fault.params)
