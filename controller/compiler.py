"""Route compiler: topology → every switch's static table entries and every host's templates.

Pure: no I/O, no P4Runtime. The output is what the controller installs once; faults
never change it (docs/design.md §1: no routing anywhere, hosts route around failures).

Per switch (docs/design.md §2, §5):

- ``my_usid``: its own block+uSID (top 48 bits) → ``usid_shift``.
- ``usid_route`` (/48 LPM) → ``set_next_hop(port, dmac)``:
  T0: every T1 of its plane (uplink), every host NIC port below it (downlink);
  T1: every T0 of its plane.
- ECMP baseline at T0s: every *remote* T0 uSID → ``set_ecmp(group_id=1, size=S)`` and
  ``ecmp_member(1, m)`` → ``set_next_hop`` of uplink ``m``: one group of all uplinks
  serves every remote T0, since every uplink reaches every T0 of the plane.
- ``port_policy`` on every cabled port: ECN and trim thresholds, ``last_hop=1`` on
  host-facing ports (no ECN marking towards hosts, as in production MRC).
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Network

from controller.entries import Exact, Lpm, SwitchEntries, TableEntry
from mrc_fabric.addressing import host_usid, nic_address, t0_usid, t1_usid, top48, usid_prefix
from mrc_fabric.hostconfig import CarrierTemplate, Destination, HostConfig, HostPort
from mrc_fabric.p4names import Action, Field, Table
from mrc_fabric.topology import Role, Switch, Topology

ECMP_GROUP = 1


@dataclass(frozen=True)
class CompileOptions:
    ecn_threshold: int = 20  # queue depth (packets) above which ECT packets get CE
    trim_threshold: int = 64  # queue depth (packets) above which trimmable data is trimmed
    ecmp: bool = True  # install the ECMP baseline entries at T0s


def _route(block: IPv6Network, usid: int, port: int, dmac: str) -> TableEntry:
    prefix = usid_prefix(usid, block)
    return TableEntry(
        Table.USID_ROUTE,
        ((Field.DST_ADDR, Lpm(int(prefix.network_address), prefix.prefixlen)),),
        Action.SET_NEXT_HOP,
        ((Field.PORT, port), (Field.DMAC, mac_to_int(dmac))),
    )


def mac_to_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


def int_to_mac(value: int) -> str:
    return ":".join(f"{(value >> s) & 0xFF:02x}" for s in range(40, -8, -8))


def my_usid_entry(topo: Topology, sw: Switch) -> TableEntry:
    prefix = usid_prefix(sw.usid, topo.block)
    return TableEntry(
        Table.MY_USID, ((Field.DST_TOP48, Exact(top48(prefix.network_address))),), Action.USID_SHIFT
    )


def compile_switch(topo: Topology, sw: Switch, options: CompileOptions = CompileOptions()) -> SwitchEntries:
    out = SwitchEntries(sw.name, [my_usid_entry(topo, sw)])
    uplinks: list[tuple[int, int, str]] = []  # (T1 index, port, dmac)
    host_ports: set[int] = set()
    for end in topo.ports_of(sw.name):
        peer = topo.peer(sw.name, end.port)
        assert peer is not None
        if topo.has_host(peer.node):
            host = topo.host(peer.node)
            out.entries.append(_route(topo.block, host_usid(sw.plane, host.index), end.port, peer.mac))
            host_ports.add(end.port)
        else:
            other = topo.switch(peer.node)
            out.entries.append(_route(topo.block, other.usid, end.port, peer.mac))
            if sw.role == Role.T0:
                uplinks.append((other.index, end.port, peer.mac))
    if sw.role == Role.T0 and options.ecmp and topo.t0_per_plane > 1:
        uplinks.sort()
        size = len(uplinks)
        for t0_index in range(topo.t0_per_plane):
            if t0_index == sw.index:
                continue
            prefix = usid_prefix(t0_usid(sw.plane, t0_index), topo.block)
            out.entries.append(
                TableEntry(
                    Table.USID_ROUTE,
                    ((Field.DST_ADDR, Lpm(int(prefix.network_address), prefix.prefixlen)),),
                    Action.SET_ECMP,
                    ((Field.GROUP_ID, ECMP_GROUP), (Field.SIZE, size)),
                )
            )
        for member, (_t1, port, dmac) in enumerate(uplinks):
            out.entries.append(
                TableEntry(
                    Table.ECMP_MEMBER,
                    ((Field.GROUP_ID, Exact(ECMP_GROUP)), (Field.MEMBER, Exact(member))),
                    Action.SET_NEXT_HOP,
                    ((Field.PORT, port), (Field.DMAC, mac_to_int(dmac))),
                )
            )
    for end in topo.ports_of(sw.name):
        out.entries.append(
            TableEntry(
                Table.PORT_POLICY,
                ((Field.PORT, Exact(end.port)),),
                Action.SET_PORT_POLICY,
                (
                    (Field.ECN_THRESHOLD, options.ecn_threshold),
                    (Field.TRIM_THRESHOLD, options.trim_threshold),
                    (Field.LAST_HOP, 1 if end.port in host_ports else 0),
                ),
            )
        )
    return out


def compile_routes(topo: Topology, options: CompileOptions = CompileOptions()) -> dict[str, SwitchEntries]:
    """Every switch's entries, keyed by switch name."""
    return {sw.name: compile_switch(topo, sw, options) for sw in topo.switches}


def path_template(topo: Topology, src_t0: int, dst_t0: int, dst_host: int) -> CarrierTemplate:
    """The SRv6 template from a host under ``src_t0`` to host ``dst_host`` under ``dst_t0``."""
    if src_t0 == dst_t0:
        return CarrierTemplate((t0_usid(0, src_t0), host_usid(0, dst_host)))
    return CarrierTemplate(
        (t0_usid(0, src_t0), t1_usid(0, 0), t0_usid(0, dst_t0), host_usid(0, dst_host)),
        t1_slot=1,
        t1_count=topo.t1_per_plane,
    )


def ecmp_template(src_t0: int, dst_t0: int, dst_host: int) -> CarrierTemplate:
    if src_t0 == dst_t0:
        return CarrierTemplate((t0_usid(0, src_t0), host_usid(0, dst_host)))
    return CarrierTemplate((t0_usid(0, src_t0), t0_usid(0, dst_t0), host_usid(0, dst_host)))


def compile_host_configs(topo: Topology) -> dict[str, HostConfig]:
    """Per host: its NIC ports and, per other host, the carrier templates (see mrc_fabric.hostconfig)."""
    configs = {}
    for h in topo.hosts:
        cfg = HostConfig(h.name, h.index, topo.block, topo.planes, topo.t1_per_plane)
        for p in sorted(h.ports, key=lambda p: p.plane):
            cfg.ports.append(HostPort(p.plane, p.ifname, p.mac, p.address, p.t0, p.t0_mac))
        for d in topo.hosts:
            if d.name == h.name:
                continue
            cfg.destinations[d.name] = Destination(
                d.name,
                d.index,
                tuple(str(nic_address(p, d.index, topo.block)) for p in range(topo.planes)),
                path_template(topo, h.t0_index, d.t0_index, d.index),
                ecmp_template(h.t0_index, d.t0_index, d.index),
            )
        configs[h.name] = cfg
    return configs
