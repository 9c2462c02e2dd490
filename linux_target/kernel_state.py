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

from mrc_fabric.p4info import P4InfoIndex

from .table_codec import MatchKey, TableRow

RouteKind = Literal["csid", "unicast", "multipath", "unreachable"]
Hook = Literal["ingress", "egress"]

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


FAULT_TABLES: dict[str, Hook] = {"port_fault": "egress", "ingress_fault": "ingress"}


def _exact(row: TableRow, name: str, index: P4InfoIndex) -> int:
    return row.field(name, index)[0]  # type: ignore[index]  # exact fields are always present


def route_prefix(row: TableRow, index: P4InfoIndex) -> IPv6Network:
    """The kernel prefix of a ``usid_route`` or ``my_usid`` row."""
    if row.table == "my_usid":
        return IPv6Network((_exact(row, "dst_top48", index) << 80, 48))
    got = row.field("dst_addr", index)
    if got is None:  # LPM field omitted: the /0 entry
        return IPv6Network("::/0")
    return IPv6Network(got)


def _usid_route_key(prefix: IPv6Network, index: P4InfoIndex) -> MatchKey:
    if prefix.prefixlen == 0:
        return ()
    fid = index.table("usid_route").match_fields["dst_addr"].id
    return ((fid, int(prefix.network_address), prefix.prefixlen),)


def _my_usid_key(prefix: IPv6Network, index: P4InfoIndex) -> MatchKey | None:
    if prefix.prefixlen != 48:
        return None
    fid = index.table("my_usid").match_fields["dst_top48"].id
    return ((fid, int(prefix.network_address) >> 80, -1),)


def ecmp_routes(tables: Tables, group: int) -> list[IPv6Network]:
    """Prefixes whose ``usid_route`` entry points at ECMP group ``group``."""
    return [
        IPv6Network(row.key[0][1:]) if row.key else IPv6Network("::/0")
        for row in tables.get("usid_route", {}).values()
        if row.action.name == "set_ecmp" and row.action.params["group_id"] == group
    ]


def route_for(
    prefix: IPv6Network, tables: Tables, ports: dict[int, str], index: P4InfoIndex
) -> RouteSpec | None:
    """The kernel route ``prefix`` needs, None for no route."""
    mine = _my_usid_key(prefix, index)
    if mine is not None and mine in tables.get("my_usid", {}):
        return RouteSpec("csid")  # my_usid is applied before usid_route in the pipeline
    row = tables.get("usid_route", {}).get(_usid_route_key(prefix, index))
    if row is None:
        return None
    params = row.action.params
    if row.action.name == "set_next_hop":
        return RouteSpec("unicast", ((NextHop(ports[params["port"]], params["dmac"]), 1),))
    members: dict[int, NextHop] = {}
    for m in tables.get("ecmp_member", {}).values():
        if _exact(m, "group_id", index) == params["group_id"]:
            members[_exact(m, "member", index)] = NextHop(
                ports[m.action.params["port"]], m.action.params["dmac"]
            )
    hops = [nh for member, nh in sorted(members.items()) if member < params["size"]]
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
    table = next(t for t, h in FAULT_TABLES.items() if h == hook)
    fid = index.table(table).match_fields["port"].id
    row = tables.get(table, {}).get(((fid, port, -1),))
    if row is None:
        return None
    loss = row.action.params["prob"] if row.action.name == "fault_loss" else None
    return FaultSpec(hook, port, ports[port], loss)


def policy_for(port: int, tables: Tables, ports: dict[int, str], index: P4InfoIndex) -> PolicySpec | None:
    fid = index.table("port_policy").match_fields["port"].id
    row = tables.get("port_policy", {}).get(((fid, port, -1),))
    if row is None:
        return None
    p = row.action.params
    return PolicySpec(port, ports[port], p["ecn_threshold"], p["trim_threshold"], bool(p["last_hop"]))


def _hops(routes: Mapping[IPv6Network, RouteSpec], prefixes: Iterable[IPv6Network]) -> set[NextHop]:
    return {nh for p in prefixes if p in routes for nh, _w in routes[p].nexthops}


def _neighbours(
    old: KernelState, routes: dict[IPv6Network, RouteSpec], prefixes: set[IPv6Network]
) -> set[NextHop]:
    """The neighbours ``routes`` use, given that only ``prefixes`` changed since ``old``: what
    they add joins at once; what they drop goes only if no other route still uses it (looked
    for route by route, stopping at the first), so a bulk insert stays linear."""
    added, before = _hops(routes, prefixes), _hops(old.routes, prefixes)
    gone = before - added
    for spec in routes.values():
        if not gone:
            break
        gone -= {nh for nh, _w in spec.nexthops}
    return (old.neighbours - gone) | added


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
    return KernelState(routes, _neighbours(old, routes, prefixes), fault_specs, policies)


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
    prefixes = {route_prefix(r, index) for t in ("my_usid", "usid_route") for r in tables.get(t, {}).values()}
    faults = {
        (hook, _exact(r, "port", index))
        for t, hook in FAULT_TABLES.items()
        for r in tables.get(t, {}).values()
    }
    policy_ports = {_exact(r, "port", index) for r in tables.get("port_policy", {}).values()}
    return updated_state(KernelState(), tables, ports, index, prefixes, faults, policy_ports)
