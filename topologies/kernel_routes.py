"""Plain IPv6 and IPv4 between the hosts, routed over the fabric by the hosts' own kernels.

The switches route only uSID carriers (docs/addressing.md): a plain packet to a peer's address
misses at the first T0. So every host gets, for each address of every peer (its NIC port
addresses and its IPv4 address), one kernel *multipath* route whose next hops each encapsulate
(``seg6 mode encap.red``: IPv6-in-IPv6 or IPv4-in-IPv6 without an SRH, the MRC wire shape)
towards one (plane, T1) carrier out of that plane's NIC port. The carrier is MRC's path to the
peer plus one more uSID, a host function (``mrc_fabric.addressing.HostFunction``): the peer's
kernel decapsulates what reaches ``<block>:<H>:<function>::`` (``seg6local End.DT6`` into its
local table for IPv6, ``End.DX4`` to the inner destination for IPv4), while MRC's own packets
arrive at ``<block>:<H>::`` alone, which the agent reads and the kernel leaves alone. After
encapsulating, the kernel routes the packet again by its outer destination, so each port also
gets a route for its T0's uSID /48 via a link-local gateway ``fe80::1`` whose MAC (the T0
port's) is a permanent neighbour entry, as a NIC would be configured.

The kernel picks the next hop per flow with its multipath hash, set to policy 1 (addresses,
ports, next header), what an operator running several TCP streams per host pair sets: with the
default policy 0 (addresses + flow label) every stream between two hosts takes the same path,
because a TCP socket's route is looked up before it has a flow label. Routes carry ``mtu lock``
and ``advmss`` because the encapsulation adds 40 bytes to what the fabric's links carry. On
BMv2, whose switches read frames from user space, the hosts' ports compute checksums in
software (``ethtool -K tx off``): a veth leaves them to the next kernel hop, and there is none.

Everything is done with ``ip -batch`` inside the host namespaces the fabric created, one batch
per host, all hosts at once; the namespaces take it all with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from ipaddress import IPv6Address
from typing import Any

from mrc_fabric.addressing import (
    HostFunction,
    carrier,
    host_function_address,
    host_ipv4,
    path_usids,
    t0_usid,
    usid_prefix,
)
from mrc_fabric.frames import FABRIC_MTU
from mrc_fabric.topology import Host, Topology
from topologies.node_cmd import ip_batch
from topologies.procs import in_parallel

GATEWAY = "fe80::1"
HASH_POLICY = 1  # L4: source/destination address and port, next header
ENCAP_OVERHEAD = 40  # the outer IPv6 header
ROUTE_MTU = FABRIC_MTU - ENCAP_OVERHEAD  # the inner packet, so that the outer one fits a link
TCP_IPV6_HEADERS, TCP_IPV4_HEADERS = 60, 40


@dataclass(frozen=True)
class RouteOptions:
    """``mtu lock`` and ``advmss`` of one route (an experiment may want smaller packets)."""

    mtu: int = ROUTE_MTU
    advmss: int | None = None  # None: what fits the MTU

    def text(self, ipv6: bool) -> str:
        advmss = self.advmss or self.mtu - (TCP_IPV6_HEADERS if ipv6 else TCP_IPV4_HEADERS)
        return f"mtu lock {self.mtu} advmss {advmss}"


def carriers(topo: Topology, src: Host, dst: Host, function: HostFunction) -> list[tuple[str, IPv6Address]]:
    """(src's NIC port, carrier) for every (plane, T1) path from ``src`` to ``dst``'s kernel."""
    out = []
    for port in src.ports:
        p = port.plane
        t1s: list[int | None] = list(range(topo.t1_per_plane)) if src.t0_index != dst.t0_index else [None]
        for t1 in t1s:
            usids = [*path_usids(p, src.t0_index, dst.t0_index, dst.index, t1), int(function)]
            out.append((port.ifname, carrier(usids, topo.block)))
    return out


def nexthops(topo: Topology, src: Host, dst: Host, ipv6: bool) -> str:
    """The ``nexthop ...`` list of a route from ``src`` to an address of ``dst``: one per path.
    IPv6 next hops name the gateway (the kernel balances IPv6 only over next hops that have one)."""
    function = HostFunction.DECAP_IPV6 if ipv6 else HostFunction.DECAP_IPV4
    via = f"via {GATEWAY} " if ipv6 else ""
    return " ".join(
        f"nexthop encap seg6 mode encap.red segs {segs} {via}dev {ifname} weight 1"
        for ifname, segs in carriers(topo, src, dst, function)
    )


def port_lines(topo: Topology, host: Host) -> list[str]:
    """Per NIC port: the gateway neighbour, the route to its T0, decapsulation of the host's own
    function addresses (``ip -batch`` lines)."""
    lines = []
    for port in host.ports:
        dev = f"dev {port.ifname}"
        t0 = usid_prefix(t0_usid(port.plane, host.t0_index), topo.block)
        dt6 = host_function_address(port.plane, host.index, HostFunction.DECAP_IPV6, topo.block)
        dx4 = host_function_address(port.plane, host.index, HostFunction.DECAP_IPV4, topo.block)
        lines += [
            f"neigh replace {GATEWAY} lladdr {port.t0_mac} {dev} nud permanent",
            f"route replace {t0} via {GATEWAY} {dev}",
            f"route replace {dt6}/128 encap seg6local action End.DT6 table 255 {dev}",
            f"route replace {dx4}/128 encap seg6local action End.DX4 nh4 0.0.0.0 {dev}",
        ]
    return lines


def peer_lines(topo: Topology, src: Host, dst: Host, opts: RouteOptions = RouteOptions()) -> list[str]:
    """Routes from ``src`` to every address of ``dst``: its IPv4 address and each NIC port's
    address (answered from ``src``'s port of the same plane)."""
    v4 = f"route replace {host_ipv4(dst.index)}/32 src {host_ipv4(src.index)} {opts.text(False)}"
    lines = [f"{v4} {nexthops(topo, src, dst, ipv6=False)}"]
    hops6 = nexthops(topo, src, dst, ipv6=True)
    for port in dst.ports:
        mine = src.port(port.plane).address
        lines.append(f"route replace {port.address}/128 src {mine} {opts.text(True)} {hops6}")
    return lines


def sysctls(host: Host) -> str:
    """Flows hashed by addresses and ports; no reverse-path check on a source the kernel reaches
    through an encapsulating route."""
    keys = {
        "net.ipv6.fib_multipath_hash_policy": HASH_POLICY,
        "net.ipv4.fib_multipath_hash_policy": HASH_POLICY,
        "net.ipv4.conf.all.rp_filter": 0,
        **{f"net.ipv4.conf.{p.ifname}.rp_filter": 0 for p in host.ports},
    }
    return "sysctl -qw " + " ".join(f"{k}={v}" for k, v in keys.items())


def setup_host(net: Any, topo: Topology, host: Host, userspace_switches: bool) -> None:
    """One host: sysctls, checksums in software where switches are user-space programs, its ports'
    gateway, T0 route and decapsulation, a route to every peer. RuntimeError if the kernel refuses."""
    node = net.get(host.name)
    out = node.cmd(sysctls(host) + "; echo rc=$?")
    if "rc=0" not in out:
        raise RuntimeError(f"{host.name}: {out.strip()}")
    if userspace_switches:
        for port in host.ports:
            node.cmd(f"ethtool -K {port.ifname} tx off >/dev/null 2>&1")
    lines = port_lines(topo, host)
    for peer in topo.hosts:
        if peer.name != host.name:
            lines += peer_lines(topo, host, peer)
    ip_batch(node, lines)


def install(net: Any, topo: Topology, userspace_switches: bool) -> int:
    """Routes between every pair of hosts, every host at once; returns the routes installed."""
    in_parallel([partial(setup_host, net, topo, h, userspace_switches) for h in topo.hosts])
    planes = len(topo.hosts[0].ports) if topo.hosts else 0
    return len(topo.hosts) * (len(topo.hosts) - 1) * (planes + 1)


def route_plain(net: Any, topo: Topology, userspace_switches: bool, enabled: bool = True) -> str:
    """:func:`install` unless ``enabled`` is False; the line a testbed's summary shows, which says
    why plain traffic is not routed when it is not (a kernel without seg6: MRC still works)."""
    if not enabled:
        return "not routed (kernel_routes=False)"
    try:
        n = install(net, topo, userspace_switches)
    except RuntimeError as exc:
        return f"not routed: {exc}"
    return f"{n} kernel routes over every (plane, T1) path (ping, iperf work)"
