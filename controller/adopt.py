"""What a switch's own tables say about the routes and faults in force, for a controller whose
state file was unreadable (``state_file.recover_state`` found nothing).

Why: the switches are the one record of the fabric that no crash of the controller can tear.
Reading them back (P4Runtime Read) and *adopting* what they hold keeps every route and makes
every fault entry a fault the operator can list and clear (``mrcctl clear --all``) -- where a
controller that started empty would delete the routes, and one that refused to start would
leave a black hole in place for good.

Pure: entries in, what they mean out. A fault comes back as the narrowest spec that writes
exactly its entry (``node:port`` with a direction), a switch black-holed on every side as one
``switch_down``; durations and flap periods are not in the tables, so an adopted fault stays
until cleared. Entries no fault of this controller writes are left out (the reconcile that
follows removes them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.entries import Exact, SwitchEntries, TableEntry
from controller.faults import Direction, FaultKind, FaultSpec
from mrc_fabric.fault_tables import FAULT_KEY, FAULT_TABLES, LOSS_SCALE, PortFault
from mrc_fabric.topology import Topology


@dataclass
class Adopted:
    routes_installed: bool = False
    faults: list[FaultSpec] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # entries no fault writes (described)


def adopt_entries(topo: Topology, switch: str, routes: SwitchEntries, held: list[TableEntry]) -> Adopted:
    """What ``held`` (read from ``switch``) says: routes installed, and one fault per fault entry."""
    compiled = {e.key for e in routes.entries}
    out = Adopted(routes_installed=any(e.key in compiled for e in held))
    faults = [e for e in held if e.table in FAULT_TABLES]
    if any(FAULT_TABLES[e.table] == "ingress" and _switch_side(topo, switch, e) for e in faults):
        out.faults.append(FaultSpec(FaultKind.SWITCH_DOWN, switch))  # drops on every side: subsumes
        return out
    for e in faults:
        spec = _port_spec(topo, switch, e)
        if spec is None:
            out.ignored.append(e.describe())
        else:
            out.faults.append(spec)
    return out


def _port(e: TableEntry) -> int:
    v = e.field(FAULT_KEY)
    return v.value if isinstance(v, Exact) else -1


def _switch_side(topo: Topology, switch: str, e: TableEntry) -> bool:
    """An ingress drop on a port towards another switch: only ``switch_down`` writes one."""
    link, fault = topo.link_at(switch, _port(e)), _fault(e)
    return link is not None and fault is not None and fault.drop and topo.has_switch(link.a.node)


def _fault(e: TableEntry) -> PortFault | None:
    return PortFault.of_action(e.action, dict(e.params))


def _port_spec(topo: Topology, switch: str, e: TableEntry) -> FaultSpec | None:
    port = _port(e)
    link = topo.link_at(switch, port)
    if link is None:
        return None
    if FAULT_TABLES[e.table] == "egress":
        direction = Direction.A2B if link.a.node == switch else Direction.B2A
    elif link.b.node == switch and not topo.has_switch(link.a.node):
        direction = Direction.A2B  # traffic from a host, dropped where it enters the T0
    else:
        return None
    target, fault = f"{switch}:{port}", _fault(e)
    if fault is not None and fault.drop:
        return FaultSpec(FaultKind.BLACKHOLE, target, direction)
    if fault is not None and 1 <= fault.prob <= LOSS_SCALE:
        return FaultSpec(FaultKind.LOSS, target, direction, fault.loss)
    return None
