"""Plain Linux TCP over the same SRv6 fabric: kernel ECMP multipath routes on the hosts.

The switches route only uSID carriers (docs/design.md §2): a plain IPv6 packet to a remote NIC
address misses at the first T0. So each host gets, for the peer's plane-0 NIC address,
one kernel *multipath* route whose next hops each encapsulate (``seg6 mode encap.red``,
IPv6-in-IPv6 without an SRH, the MRC wire shape) towards one (plane, T1) carrier
``<block>:<T0>:<T1>:<T0'>:<H'>::`` out of that plane's NIC port. After encapsulating, the
kernel routes the packet again by its outer destination, so each port also gets a route
for its T0's uSID /48 via a link-local gateway ``fe80::1`` whose MAC (the T0 port's) is a
permanent neighbour entry, as a NIC would be configured. The receiving host decapsulates what
reaches its own host uSID
address ``<block>:<H>::`` with a ``seg6local End.DT6`` route that looks the inner
destination up in the local table (255), where the host's own addresses are.

The kernel picks the next hop per flow with its IPv6 multipath hash, set to policy 1
(addresses, ports, next header), what an operator running several TCP streams per host
pair sets: with the default policy 0 (addresses + flow label) every stream between two
hosts takes the same path, because a TCP socket's route is looked up before it has a
flow label. With policy 1 a flow stays on its path whatever TCP does, as on an ECMP
fabric. Routes
carry ``mtu lock 1400 advmss 1300`` because the encapsulation adds 40 bytes. Everything
is done with ``ip`` inside the host namespaces the fabric created; the namespaces go
with the fabric.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mrc_fabric.addressing import carrier, host_usid, path_usids, t0_usid, usid_prefix

GATEWAY = "fe80::1"
HASH_POLICY = 1  # L4: source/destination address and port, next header
ROUTE_MTU = 1400
ADVMSS = 1300


class RouteSetupError(RuntimeError):
    pass


@dataclass(frozen=True)
class TcpPair:
    src: str
    dst: str
    src_addr: str  # plane-0 NIC address of src
    dst_addr: str
    paths: int  # next hops per direction


def _cmd(node: Any, cmd: str) -> str:
    out = node.cmd(cmd + "; echo rc=$?")
    text, _, rc = str(out).rpartition("rc=")
    if rc.strip() != "0":
        raise RouteSetupError(f"{node.name}: `{cmd}` failed: {text.strip()}")
    return text


def _routes_towards(tb: Any, src: str, dst: str) -> list[str]:
    topo = tb.topology
    s, d = topo.host(src), topo.host(dst)
    hops = []
    for port in s.ports:
        p = port.plane
        t1s: list[int | None] = list(range(topo.t1_per_plane)) if s.t0_index != d.t0_index else [None]
        for t1 in t1s:
            segs = carrier(path_usids(p, s.t0_index, d.t0_index, d.index, t1), topo.block)
            hops.append(
                f"nexthop encap seg6 mode encap.red segs {segs} via {GATEWAY} dev {port.ifname} weight 1"
            )
    return hops


def setup_host(tb: Any, host: str) -> None:
    """Gateway neighbours per port, decapsulation of the host's own uSID addresses."""
    topo = tb.topology
    h = topo.host(host)
    node = tb.net.get(host)
    # seg6local only acts on packets the host routes, so the host forwards; forwarding also
    # makes <block>:<H>:: the subnet-router anycast address of the NIC's /48 (local), which
    # would deliver the encapsulated packet to no tunnel: that anycast entry is removed below
    _cmd(node, "sysctl -qw net.ipv6.conf.all.forwarding=1")
    _cmd(node, "sysctl -qw net.ipv6.conf.all.seg6_enabled=1")
    # hash flows over the next hops by addresses and ports: the default (policy 0) hashes
    # addresses and flow label, and a TCP socket's route is chosen before it has a flow label,
    # so every stream between two hosts would take the same path
    _cmd(node, f"sysctl -qw net.ipv6.fib_multipath_hash_policy={HASH_POLICY}")
    userspace_switches = tb.choice.target.value != "linux"
    for port in h.ports:
        _cmd(node, f"sysctl -qw net.ipv6.conf.{port.ifname}.seg6_enabled=1")
        if userspace_switches:
            # a veth leaves TCP's checksum to the next kernel hop (offload); BMv2 reads the
            # frame from user space, so nothing would fill it in and the receiver drops it
            _cmd(node, f"ethtool -K {port.ifname} tx off")
        _cmd(node, f"ip -6 neigh replace {GATEWAY} lladdr {port.t0_mac} dev {port.ifname} nud permanent")
        # after encapsulating, the kernel routes the packet again by its outer (carrier)
        # destination, whose first uSID is this port's T0: send those out of this port
        t0 = usid_prefix(t0_usid(port.plane, h.t0_index), topo.block)
        _cmd(node, f"ip -6 route replace {t0} via {GATEWAY} dev {port.ifname}")
        me = carrier([host_usid(port.plane, h.index)], topo.block)
        node.cmd(f"ip -6 route del anycast {me} table local dev {port.ifname}")
        _cmd(node, f"ip -6 route replace {me}/128 encap seg6local action End.DT6 table 255 dev {port.ifname}")


def connect(tb: Any, src: str, dst: str) -> TcpPair:
    """Multipath routes both ways between ``src`` and ``dst``'s plane-0 NIC addresses."""
    topo = tb.topology
    for h in (src, dst):
        setup_host(tb, h)
    a, b = topo.host(src).port(0).address, topo.host(dst).port(0).address
    opts = f"mtu lock {ROUTE_MTU} advmss {ADVMSS}"
    fwd, back = _routes_towards(tb, src, dst), _routes_towards(tb, dst, src)
    # src: whichever port a flow leaves by, it speaks from the plane-0 address the peer routes back to
    _cmd(tb.net.get(src), f"ip -6 route replace {b}/128 src {a} {opts} {' '.join(fwd)}")
    _cmd(tb.net.get(dst), f"ip -6 route replace {a}/128 src {b} {opts} {' '.join(back)}")
    return TcpPair(src, dst, a, b, len(fwd))


def ping(tb: Any, pair: TcpPair, count: int = 3) -> bool:
    out = tb.net.get(pair.src).cmd(f"ping -6 -c {count} -i 0.2 -W 1 {pair.dst_addr}")
    return f"{count} received" in out or " 0% packet loss" in out
