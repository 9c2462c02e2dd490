"""E10's TCP pair over the hosts' kernel routes (``topologies.kernel_routes``).

The testbed routes plain traffic between every pair of hosts (docs/testbed.md). E10 measures
Linux TCP between the plane-0 NIC addresses of one pair at a 1,400-byte MTU (MSS 1,300), what a
TCP baseline on an Ethernet-sized fabric sees: :func:`connect` (re)installs both hosts' routes
and sets that MTU on the pair's two routes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from topologies.kernel_routes import HASH_POLICY, RouteOptions, nexthops, setup_host

__all__ = ["ADVMSS", "HASH_POLICY", "ROUTE_MTU", "TcpPair", "connect", "ping"]

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


def connect(tb: Any, src: str, dst: str) -> TcpPair:
    """Multipath routes both ways between ``src`` and ``dst``'s plane-0 NIC addresses."""
    topo = tb.topology
    s, d = topo.host(src), topo.host(dst)
    userspace = tb.choice.target.value != "linux"
    for h in (s, d):
        setup_host(tb.net, topo, h, userspace)
    a, b = s.port(0).address, d.port(0).address
    opts = RouteOptions(ROUTE_MTU, ADVMSS).text(ipv6=True)
    fwd, back = nexthops(topo, s, d, ipv6=True), nexthops(topo, d, s, ipv6=True)
    _cmd(tb.net.get(src), f"ip -6 route replace {b}/128 src {a} {opts} {fwd}")
    _cmd(tb.net.get(dst), f"ip -6 route replace {a}/128 src {b} {opts} {back}")
    return TcpPair(src, dst, a, b, fwd.count("nexthop "))


def ping(tb: Any, pair: TcpPair, count: int = 3) -> bool:
    out = tb.net.get(pair.src).cmd(f"ping -6 -c {count} -i 0.2 -W 1 {pair.dst_addr}")
    return f"{count} received" in out or " 0% packet loss" in out
