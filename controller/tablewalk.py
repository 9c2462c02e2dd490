"""Table walker: follow one carrier through the compiled tables, switch by switch.

Pure and deterministic. It applies the same rules as the data plane (docs/design.md §2, §5):
``ingress_fault`` on the arrival port, hop limit decrement (0 → drop), ``my_usid`` match
on the top 48 bits → uN shift (``mrc_fabric.addressing.shift``), ``usid_route`` longest
prefix match (miss → drop), ``set_ecmp`` → ``ecmp_member``, then ``port_fault`` on the
egress port, and the cable to the next node. It answers "where does this packet go, or
where and why is it dropped", which the controller's ListPaths and the tests use.

Random loss (``fault_loss``) does not stop the walk: the packet goes on and the walk
records the probability that it survives. The ECMP hash of the real pipeline is not
modelled bit for bit; the walker picks member ``entropy mod size`` unless told otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv6Address

from controller.compiler import int_to_mac
from controller.entries import Exact, Lpm, SwitchEntries, TableEntry
from mrc_fabric.addressing import shift, top48
from mrc_fabric.drop_reasons import DropReason
from mrc_fabric.ev import ENTROPY_MASK
from mrc_fabric.fault_tables import FAULT_KEY, FAULT_TABLES, Hook, PortFault
from mrc_fabric.p4names import Action, Field, Table
from mrc_fabric.topology import Topology

DEFAULT_HOP_LIMIT = 64


@dataclass(frozen=True)
class Hop:
    """One switch on the way: where the packet came in and went out, and its destination on arrival."""

    node: str
    in_port: int
    out_port: int | None
    dst: IPv6Address
    note: str = ""  # e.g. "shift", "ecmp member 1", "loss 0.200 egress"


@dataclass
class Walk:
    hops: list[Hop] = field(default_factory=list)
    delivered_to: tuple[str, int] | None = None  # (host, plane of the NIC port)
    dropped: DropReason | None = None
    dropped_at: str = ""  # "node:port"
    survival: float = 1.0  # probability of getting through the random-loss faults on the way
    faults: list[str] = field(default_factory=list)  # faults passed or hit, "node:port kind"

    @property
    def ok(self) -> bool:
        return self.delivered_to is not None

    @property
    def switches(self) -> list[str]:
        return [h.node for h in self.hops]


def default_ecmp_select(ev: int, size: int) -> int:
    return (ev & ENTROPY_MASK) % size


class TableView:
    """Fast lookups over one switch's entries."""

    def __init__(self, entries: Iterable[TableEntry]):
        self.my_usid: set[int] = set()
        self.routes: list[tuple[int, int, TableEntry]] = []  # (prefix_len, value, entry)
        self.ecmp: dict[tuple[int, int], TableEntry] = {}
        self.faults: dict[Hook, dict[int, TableEntry]] = {"ingress": {}, "egress": {}}  # by port
        for e in entries:
            if e.table == Table.MY_USID:
                self.my_usid.add(_exact(e, Field.DST_TOP48))
            elif e.table == Table.USID_ROUTE:
                m = e.field(Field.DST_ADDR)
                assert isinstance(m, Lpm)
                self.routes.append((m.prefix_len, m.value, e))
            elif e.table == Table.ECMP_MEMBER:
                self.ecmp[(_exact(e, Field.GROUP_ID), _exact(e, Field.MEMBER))] = e
            elif e.table in FAULT_TABLES:
                self.faults[FAULT_TABLES[e.table]][_exact(e, FAULT_KEY)] = e
        self.routes.sort(key=lambda r: -r[0])

    def route(self, dst: IPv6Address) -> TableEntry | None:
        value = int(dst)
        for plen, prefix, entry in self.routes:
            shift_bits = 128 - plen
            if (value >> shift_bits) == (prefix >> shift_bits):
                return entry
        return None


def _exact(e: TableEntry, name: str) -> int:
    m = e.field(name)
    assert isinstance(m, Exact)
    return m.value


def build_views(tables: Mapping[str, SwitchEntries | Iterable[TableEntry]]) -> dict[str, TableView]:
    return {name: TableView(t.entries if isinstance(t, SwitchEntries) else t) for name, t in tables.items()}


def _fault(entry: TableEntry | None) -> tuple[bool, float]:
    """(black hole?, drop probability) of a fault entry."""
    fault = None if entry is None else PortFault.of_action(entry.action, dict(entry.params))
    if fault is None:
        return False, 0.0
    return fault.drop, fault.loss


def _fault_drop(result: Walk, hop: Hop, where: str, hook: str, reason: DropReason) -> Walk:
    """``result`` ended at ``where`` (``node:port``) by a black-hole fault on its ``hook``."""
    result.hops.append(hop)
    result.faults.append(f"{where} {hook} drop")
    result.dropped, result.dropped_at = reason, where
    return result


def _fault_loss(result: Walk, notes: list[str], where: str, hook: str, loss: float) -> None:
    """A loss fault on ``where``'s ``hook``: the walk goes on, surviving with ``1 - loss``."""
    result.survival *= 1 - loss
    result.faults.append(f"{where} {hook} loss {loss:.3f}")
    notes.append(f"{hook} loss {loss:.3f}")


def walk(
    topo: Topology,
    views: Mapping[str, TableView],
    src_host: str,
    plane: int,
    dst: IPv6Address,
    ev: int = 0,
    hop_limit: int = DEFAULT_HOP_LIMIT,
    ecmp_select: Callable[[int, int], int] = default_ecmp_select,
) -> Walk:
    """Send a packet with outer destination ``dst`` from ``src_host``'s NIC port in ``plane``."""
    result = Walk()
    nic = topo.host(src_host).port(plane)
    node, in_port = nic.t0, nic.t0_port
    seen: set[tuple[str, int, IPv6Address]] = set()
    while True:
        if (node, in_port, dst) in seen:
            result.dropped, result.dropped_at = DropReason.LOOP, f"{node}:{in_port}"
            return result
        seen.add((node, in_port, dst))
        view = views.get(node)
        if view is None:
            result.dropped, result.dropped_at = DropReason.NOT_A_SWITCH, f"{node}:{in_port}"
            return result
        arrival = dst
        notes: list[str] = []
        hole, loss = _fault(view.faults["ingress"].get(in_port))
        if hole:
            hop = Hop(node, in_port, None, arrival, "ingress fault: drop")
            return _fault_drop(result, hop, f"{node}:{in_port}", "ingress", DropReason.INGRESS_FAULT)
        if loss:
            _fault_loss(result, notes, f"{node}:{in_port}", "ingress", loss)
        hop_limit -= 1
        if hop_limit <= 0:
            result.hops.append(Hop(node, in_port, None, arrival, "hop limit"))
            result.dropped, result.dropped_at = DropReason.HOP_LIMIT, f"{node}:{in_port}"
            return result
        if top48(dst) in view.my_usid:
            dst = shift(dst)
            notes.append("shift")
        entry = view.route(dst)
        if entry is not None and entry.action == Action.SET_ECMP:
            group, size = entry.param(Field.GROUP_ID), entry.param(Field.SIZE)
            member = ecmp_select(ev, size) if size else 0
            notes.append(f"ecmp group {group} member {member}")
            entry = view.ecmp.get((group, member))
        if entry is None or entry.action != Action.SET_NEXT_HOP:
            result.hops.append(Hop(node, in_port, None, arrival, ", ".join([*notes, "no route"])))
            result.dropped, result.dropped_at = DropReason.NO_ROUTE, f"{node}:{in_port}"
            return result
        out_port, dmac = entry.param(Field.PORT), int_to_mac(entry.param(Field.DMAC))
        hole, loss = _fault(view.faults["egress"].get(out_port))
        if hole:
            hop = Hop(node, in_port, out_port, arrival, ", ".join([*notes, "egress fault: drop"]))
            return _fault_drop(result, hop, f"{node}:{out_port}", "egress", DropReason.EGRESS_FAULT)
        if loss:
            _fault_loss(result, notes, f"{node}:{out_port}", "egress", loss)
        result.hops.append(Hop(node, in_port, out_port, arrival, ", ".join(notes)))
        peer = topo.peer(node, out_port)
        if peer is None:
            result.dropped, result.dropped_at = DropReason.NOT_CABLED, f"{node}:{out_port}"
            return result
        if peer.mac != dmac:
            result.dropped, result.dropped_at = DropReason.WRONG_MAC, f"{node}:{out_port}"
            return result
        if topo.has_host(peer.node):
            result.delivered_to = (peer.node, peer.port)  # host-side port number = plane
            return result
        node, in_port = peer.node, peer.port
