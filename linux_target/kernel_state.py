"""What the kernel must hold for a given set of P4Runtime table entries.

This module is pure (no netlink, no nft): it maps the shim's tables to the
routes, neighbours and fault rules the namespace must contain. The programmer
(``kernel_programmer``) then moves the kernel from one such state to the next,
so the mapping is written once and can be unit-tested without root.

Mapping (docs/design.md §2, §5):
- ``my_usid`` top48 → ``<top48>/48 encap seg6local action End flavors next-csid
  lblen 32 nflen 16``. It wins over a ``usid_route`` entry for the same /48,
  as ``my_usid`` is applied first in the P4 pipeline.
- ``usid_route`` → a route for the prefix: ``set_next_hop(port, dmac)`` is a
  route via the EUI-64 link-local address of ``dmac`` out of the port, with a
  permanent neighbour entry for it; ``set_ecmp(group, size)`` is a multipath
  route over the ``ecmp_member`` entries ``member < size`` of the group
  (identical members add weight); a group without members is ``unreachable``
  (dropped and counted as "no route").
- ``port_fault`` / ``ingress_fault`` → one nftables netdev egress / ingress
  chain on that port's interface.
- ``port_policy`` → the port's entry in the egress program's ``mrc_policy`` map
  (``egress.py``): ECN and trim thresholds (packets, converted to bytes there) and
  the last-hop flag. Default actions have no kernel state.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv6Address, IPv6Network
from typing import Literal, TypeVar

from mrc_fabric.fault_tables import FAULT_KEY, FAULT_TABLE, FAULT_TABLES, Hook, PortFault
from mrc_fabric.p4info import P4InfoIndex
from mrc_fabric.p4names import Action, Field, Table

from .table_codec import MatchKey, TableRow

RouteKind = Literal["csid", "unicast", "multipath", "unreachable"]

K = TypeVar("K")
V = TypeVar("V")


def mac_text(mac: int) -> str:
    return ":".join(f"{b:02x}" for b in mac.to_bytes(6, "big"))


def link_local_of_mac(mac: int) -> IPv6Address:
    """The EUI-64 link-local address of a MAC: the next hop we point routes at."""
    b = bytearray(mac.to_bytes(6, "big"))
    b[0] ^= 0x02
    iid = bytes(b[:3]) + b"\xff\xfe" + bytes(b[3:])
    return IPv6Address(b"\xfe\x80" + b"\x00" * 6 + iid)


@dataclass(frozen=True, order=True)
class NextHop:
    """An egress interface plus the neighbour (MAC) the frame is addressed to."""

    ifname: str
    mac: int

    @property
    def gateway(self) -> IPv6Address:
        return link_local_of_mac(self.mac)


@dataclass(frozen=True)
class RouteSpec:
    kind: RouteKind
    nexthops: tuple[tuple[NextHop, int], ...] = ()  # (next hop, weight)


@dataclass(frozen=True)
class FaultSpec:
    """A fault rule on one interface; ``loss`` None means drop everything."""

    hook: Hook
    port: int
    ifname: str
    loss: int | None


@dataclass(frozen=True)
class PolicySpec:
    """A ``port_policy`` entry: thresholds in queued packets, as the P4 program has them."""

    port: int
    ifname: str
    ecn_threshold: int
    trim_threshold: int
    last_hop: bool


@dataclass
class KernelState:
    routes: dict[IPv6Network, RouteSpec] = field(default_factory=dict)
    neighbours: set[NextHop] = field(default_factory=set)
    faults: dict[tuple[Hook, int], FaultSpec] = field(default_factory=dict)
    policies: dict[int, PolicySpec] = field(default_factory=dict)


Tables = dict[str, dict[MatchKey, TableRow]]


def _exact(row: TableRow, name: str, index: P4InfoIndex) -> int:
    return row.field(name, index)[0]  # type: ignore[index]  # exact fields are always present


def route_prefix(row: TableRow, index: P4InfoIndex) -> IPv6Network:
    """The kernel prefix of a ``usid_route`` or ``my_usid`` row."""
    if row.table == Table.MY_USID:
        return IPv6Network((_exact(row, Field.DST_TOP48, index) << 80, 48))
    got = row.field(Field.DST_ADDR, index)
    if got is None:  # LPM field omitted: the /0 entry
        return IPv6Network("::/0")
    return IPv6Network(got)


def _usid_route_key(prefix: IPv6Network, index: P4InfoIndex) -> MatchKey:
    if prefix.prefixlen == 0:
        return ()
    fid = index.table(Table.USID_ROUTE).match_fields[Field.DST_ADDR].id
    return ((fid, int(prefix.network_address), prefix.prefixlen),)


def _my_usid_key(prefix: IPv6Network, index: P4InfoIndex) -> MatchKey | None:
    if prefix.prefixlen != 48:
        return None
    fid = index.table(Table.MY_USID).match_fields[Field.DST_TOP48].id
    return ((fid, int(prefix.network_address) >> 80, -1),)


def ecmp_routes(tables: Tables, group: int) -> list[IPv6Network]:
    """Prefixes whose ``usid_route`` entry points at ECMP group ``group``."""
    return [
        IPv6Network(row.key[0][1:]) if row.key else IPv6Network("::/0")
        for row in tables.get(Table.USID_ROUTE, {}).values()
        if row.action.name == Action.SET_ECMP and row.action.params[Field.GROUP_ID] == group
    ]


def route_for(
    prefix: IPv6Network, tables: Tables, ports: dict[int, str], index: P4InfoIndex
) -> RouteSpec | None:
    """The kernel route ``prefix`` needs, None for no route."""
    mine = _my_usid_key(prefix, index)
    if mine is not None and mine in tables.get(Table.MY_USID, {}):
        return RouteSpec("csid")  # my_usid is applied before usid_route in the pipeline
    row = tables.get(Table.USID_ROUTE, {}).get(_usid_route_key(prefix, index))
    if row is None:
        return None
    params = row.action.params
    if row.action.name == Action.SET_NEXT_HOP:
        return RouteSpec("unicast", ((NextHop(ports[params[Field.PORT]], params[Field.DMAC]), 1),))
    members: dict[int, NextHop] = {}
    for m in tables.get(Table.ECMP_MEMBER, {}).values():
        if _exact(m, Field.GROUP_ID, index) == params[Field.GROUP_ID]:
            members[_exact(m, Field.MEMBER, index)] = NextHop(
                ports[m.action.params[Field.PORT]], m.action.params[Field.DMAC]
            )
    hops = [nh for member, nh in sorted(members.items()) if member < params[Field.SIZE]]
    weights = sorted(Counter(hops).items())
    if not weights:
        return RouteSpec("unreachable")
    if len(weights) == 1:
        return RouteSpec("unicast", ((weights[0][0], 1),))
    return RouteSpec("multipath", tuple(weights))


def fault_for(
    key: tuple[Hook, int], tables: Tables, ports: dict[int, str], index: P4InfoIndex
) -> FaultSpec | None:
    hook, port = key
    table = FAULT_TABLE[hook]
    fid = index.table(table).match_fields[FAULT_KEY].id
    row = tables.get(table, {}).get(((fid, port, -1),))
    if row is None:
        return None
    fault = PortFault.of_action(row.action.name, row.action.params)
    return FaultSpec(hook, port, ports[port], None if fault is None or fault.drop else fault.prob)


def policy_for(port: int, tables: Tables, ports: dict[int, str], index: P4InfoIndex) -> PolicySpec | None:
    fid = index.table(Table.PORT_POLICY).match_fields[Field.PORT].id
    row = tables.get(Table.PORT_POLICY, {}).get(((fid, port, -1),))
    if row is None:
        return None
    p = row.action.params
    return PolicySpec(
        port, ports[port], p[Field.ECN_THRESHOLD], p[Field.TRIM_THRESHOLD], bool(p[Field.LAST_HOP])
    )


def _neighbours(routes: dict[IPv6Network, RouteSpec]) -> set[NextHop]:
    return {nh for spec in routes.values() for nh, _w in spec.nexthops}


def updated_state(
    old: KernelState,
    tables: Tables,
    ports: dict[int, str],
    index: P4InfoIndex,
    prefixes: set[IPv6Network],
    faults: set[tuple[Hook, int]],
    policy_ports: Collection[int] = (),
) -> KernelState:
    """``old`` with the routes of ``prefixes``, the fault rules of ``faults`` and the port
    policies of ``policy_ports`` recomputed.

    A write touches a handful of keys; recomputing only those keeps a write
    O(entries) in cheap set operations instead of rebuilding every route.
    """
    routes = _recomputed(old.routes, prefixes, lambda k: route_for(k, tables, ports, index))
    fault_specs = _recomputed(old.faults, faults, lambda k: fault_for(k, tables, ports, index))
    policies = _recomputed(old.policies, policy_ports, lambda k: policy_for(k, tables, ports, index))
    return KernelState(routes, _neighbours(routes), fault_specs, policies)


def _recomputed(old: Mapping[K, V], keys: Iterable[K], spec_for: Callable[[K], V | None]) -> dict[K, V]:
    """A copy of ``old`` with each of ``keys`` set to ``spec_for(key)``, or dropped where that is None."""
    new = dict(old)
    for key in keys:
        spec = spec_for(key)
        if spec is None:
            new.pop(key, None)
        else:
            new[key] = spec
    return new


def desired_state(tables: Tables, ports: dict[int, str], index: P4InfoIndex) -> KernelState:
    """The kernel state that realises ``tables`` (entries already validated), from scratch."""
    routed = (Table.MY_USID, Table.USID_ROUTE)
    prefixes = {route_prefix(r, index) for t in routed for r in tables.get(t, {}).values()}
    faults = {
        (hook, _exact(r, FAULT_KEY, index))
        for t, hook in FAULT_TABLES.items()
        for r in tables.get(t, {}).values()
    }
    policy_ports = {_exact(r, Field.PORT, index) for r in tables.get(Table.PORT_POLICY, {}).values()}
    return updated_state(KernelState(), tables, ports, index, prefixes, faults, policy_ports)
