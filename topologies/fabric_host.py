"""The fabric's Mininet host: plan addresses on its NIC ports, and a kernel that stays quiet there.

A Linux host announces itself on every interface that comes up: router solicitations, MLD
reports for the multicast groups of each of its addresses, duplicate address detection. None of
it is routable on the fabric (a switch routes only uSID carriers), so each such frame was a
``no_route`` drop in the switches' counters that read like a routing bug. :class:`FabricHost`
therefore sets its namespace's IPv6 defaults before Mininet creates its ports (a port made in
the namespace takes them: no DAD, no router solicitation, no autoconfiguration), and installs
an nftables table that drops what no sysctl turns off -- MLD reports and neighbour discovery
leaving a NIC port (the gateway's MAC is a permanent neighbour entry, topologies.kernel_routes).
Its counters say how much was kept off the fabric (:func:`noise_counters`).

:func:`configure_host` gives each NIC port its plan address (docs/addressing.md) and the host's
plain IPv4 address to its plane-0 port, where Mininet's ``IP()`` finds it.
"""

from __future__ import annotations

import json
from typing import Any

from mininet.node import Host

from mrc_fabric.addressing import host_ipv4
from mrc_fabric.topology import Topology

HOST_PREFIX_LEN = 48  # a NIC port's /48 is <block>:<host uSID>::/48
IPV4_PREFIX_LEN = 32  # nothing is on-link: every peer is reached through the fabric (kernel_routes)
NOISE_TABLE = "mrc_host_noise"
# the namespace's defaults, set before any port exists, so every port is made with them
QUIET_DEFAULTS = {
    "net.ipv6.conf.default.accept_dad": 0,
    "net.ipv6.conf.default.router_solicitations": 0,
    "net.ipv6.conf.default.accept_ra": 0,
    "net.ipv6.conf.default.autoconf": 0,
    "net.ipv6.conf.all.accept_ra": 0,
}
# ICMPv6 a host sends unasked: router solicitations, neighbour discovery, MLD (v1 and v2)
NOISE_TYPES = (
    "nd-router-solicit",
    "nd-neighbor-solicit",
    "nd-neighbor-advert",
    "nd-redirect",
    "mld-listener-report",
    "mld-listener-done",
    "mld2-listener-report",
)


def noise_script() -> list[str]:
    """The nftables lines (``nft -f``) of the noise filter; replaces an older one."""
    types = ", ".join(NOISE_TYPES)
    t = f"inet {NOISE_TABLE}"
    return [
        f"add table {t}",
        f"delete table {t}",
        f"add table {t}",
        f"add chain {t} out {{ type filter hook output priority filter; policy accept; }}",
        f'add rule {t} out oifname != "lo" icmpv6 type {{ {types} }} counter drop comment "host noise"',
    ]


class FabricHost(Host):  # type: ignore[misc]  # Mininet is untyped
    """A Mininet host whose kernel sends nothing unasked onto the fabric (module docstring)."""

    def __init__(self, name: str, **params: Any) -> None:
        super().__init__(name, **params)
        settings = " ".join(f"{k}={v}" for k, v in QUIET_DEFAULTS.items())
        self.cmd(f"sysctl -qw {settings}")
        quoted = " ".join(f"'{line}'" for line in noise_script())
        out = self.cmd(f"printf '%s\\n' {quoted} | nft -f - && echo nft-ok")
        self.noise_filter = "nft-ok" in out  # nft missing: the sysctls alone (MLD may leak)


def noise_counters(node: Any) -> int:
    """Frames the host's noise filter kept off the fabric so far (0 where there is none)."""
    out = str(node.cmd(f"nft -j list table inet {NOISE_TABLE} 2>/dev/null"))
    try:
        items = json.loads(out).get("nftables", [])
    except ValueError:
        return 0
    return sum(
        int(e["counter"]["packets"])
        for item in items
        if "rule" in item
        for e in item["rule"].get("expr", [])
        if "counter" in e
    )


def configure_host(node: Any, topology: Topology) -> None:
    """Each NIC port its plan address (no DAD, no autoconfiguration: the sysctls again, for a
    host that is not a :class:`FabricHost`), the plane-0 port the host's IPv4 address."""
    host = topology.host(node.name)
    lines = []
    for port in host.ports:
        ifname = port.ifname
        for key, value in (
            ("disable_ipv6", 0),
            ("accept_dad", 0),
            ("router_solicitations", 0),
            ("accept_ra", 0),
            ("autoconf", 0),
        ):
            lines.append(f"net.ipv6.conf.{ifname}.{key}={value}")
    node.cmd("sysctl -qw " + " ".join(lines))
    for port in host.ports:
        node.cmd(f"ip link set dev {port.ifname} up")
        node.cmd(f"ip -6 addr replace {port.address}/{HOST_PREFIX_LEN} dev {port.ifname} nodad")
    first = host.port(min(p.plane for p in host.ports))
    v4 = host_ipv4(host.index)
    node.cmd(f"ip addr replace {v4}/{IPV4_PREFIX_LEN} dev {first.ifname}")
    intf = node.intf(first.ifname)
    intf.ip, intf.prefixLen = str(v4), IPV4_PREFIX_LEN  # what Mininet's IP() and pingall read
