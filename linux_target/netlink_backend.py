"""Routes and neighbours in the shim's network namespace, through pyroute2 netlink.

pyroute2 0.9 knows seg6local but not its ``SEG6_LOCAL_FLAVORS`` attribute
(kernel ≥ 6.1, needed for ``flavors next-csid``). Rather than shelling out to
``ip -6 route``, :class:`_CsidRouteMsg` extends pyroute2's own route message
with that one nested attribute (values from include/uapi/linux/seg6_local.h),
so every route still goes through netlink.
"""

from __future__ import annotations

import errno
import logging
import os
from dataclasses import dataclass
from ipaddress import IPv6Network
from socket import AF_INET6
from typing import Any

from pyroute2 import IPRoute
from pyroute2.netlink import NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE, NLM_F_REQUEST, nla
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl import RTM_NEWROUTE
from pyroute2.netlink.rtnl.rtmsg import rtmsg

from .kernel_state import NextHop, RouteSpec, mac_text

log = logging.getLogger(__name__)

# Routes the shim installs carry this protocol number, so a restarted shim can
# find and remove what an earlier instance left (values ≥ 192 are unassigned).
RTPROT_MRC_SHIM = 193
NUD_PERMANENT = 0x80
LWTUNNEL_ENCAP_SEG6_LOCAL = 7
SEG6_LOCAL_FLV_OP_NEXT_CSID = 4
CSID_LOCATOR_BLOCK_BITS = 32
CSID_NODE_FUNCTION_BITS = 16


class KernelError(Exception):
    """The kernel refused a change (netlink or nft error)."""


class _Seg6LocalWithFlavors(rtmsg.seg6local_encap_info):  # type: ignore[misc]
    __slots__ = ()
    nla_map = (
        *rtmsg.seg6local_encap_info.nla_map,
        ("SEG6_LOCAL_COUNTERS", "hex"),
        ("SEG6_LOCAL_FLAVORS", "flavors"),
    )

    class flavors(nla):  # type: ignore[misc]
        __slots__ = ()
        nla_flags = NLA_F_NESTED
        nla_map = (
            ("SEG6_LOCAL_FLV_UNSPEC", "none"),
            ("SEG6_LOCAL_FLV_OPERATION", "uint32"),
            ("SEG6_LOCAL_FLV_LCBLOCK_BITS", "uint8"),
            ("SEG6_LOCAL_FLV_LCNODE_FN_BITS", "uint8"),
        )


class _CsidRouteMsg(rtmsg):  # type: ignore[misc]
    __slots__ = ()
    encaps = {**rtmsg.encaps, LWTUNNEL_ENCAP_SEG6_LOCAL: _Seg6LocalWithFlavors}


# pyroute2 compiles a message class's attribute table at its first use and marks it compiled
# with a class attribute, which a subclass inherits: had a seg6local route been decoded (the
# base class compiled) before the first csid route was encoded, the subclass would encode with
# the base's table and drop SEG6_LOCAL_FLAVORS silently (a restarted shim reads the routes
# its predecessor left first). Compiled here, each has a table of its own whatever the order.
for _cls in (_Seg6LocalWithFlavors, _Seg6LocalWithFlavors.flavors):
    _cls().compile_nla_table()


def csid_route_msg(dst: IPv6Network, oif: int) -> _CsidRouteMsg:
    """The seg6local ``End`` route with ``flavors next-csid`` (uSID shift) for ``dst``."""
    msg = _CsidRouteMsg()
    msg["family"] = AF_INET6
    msg["dst_len"] = dst.prefixlen
    msg["table"] = 254
    msg["proto"] = RTPROT_MRC_SHIM
    msg["scope"] = 0
    msg["type"] = 1  # unicast
    msg["attrs"] = [
        ("RTA_DST", str(dst.network_address)),
        ("RTA_OIF", oif),
        ("RTA_ENCAP_TYPE", LWTUNNEL_ENCAP_SEG6_LOCAL),
        (
            "RTA_ENCAP",
            {
                "attrs": [
                    ("SEG6_LOCAL_ACTION", {"value": "End"}),
                    (
                        "SEG6_LOCAL_FLAVORS",
                        {
                            "attrs": [
                                ("SEG6_LOCAL_FLV_OPERATION", 1 << SEG6_LOCAL_FLV_OP_NEXT_CSID),
                                ("SEG6_LOCAL_FLV_LCBLOCK_BITS", CSID_LOCATOR_BLOCK_BITS),
                                ("SEG6_LOCAL_FLV_LCNODE_FN_BITS", CSID_NODE_FUNCTION_BITS),
                            ]
                        },
                    ),
                ]
            },
        ),
    ]
    return msg


@dataclass(frozen=True)
class LinkStats:
    rx_packets: int
    rx_bytes: int
    tx_packets: int
    tx_bytes: int


ANCHOR_IFNAME = "ls-usid0"


class NetlinkBackend:
    """Sets one route or neighbour at a time; every call is idempotent."""

    def __init__(self) -> None:
        self.ipr = IPRoute(ext_ack=True)  # the kernel says why it refused (extended ack)
        # pyroute2 0.9's sync nlm_request reads this key without setting it.
        self.ipr.status["nlm_generator"] = False
        self.anchor = "lo"
        self._own_anchor = False
        # interface indexes by name: a lookup is a full link dump in pyroute2 (60 % of a
        # switch's install time); forgotten whenever a route request fails, in case a port
        # was deleted and made again under a new index
        self._ifindex: dict[str, int] = {}

    def create_anchor(self, fallback: str) -> str:
        """The device seg6local routes hang off.

        It cannot be ``lo``: the kernel turns a non-local route on the loopback
        device into a reject route, and packets would be dropped as "no route".
        A port would do, but an admin-down port takes its routes with it, so
        the shim makes its own always-up ifb device (``fallback``, a port, when
        the ifb driver is missing).
        """
        try:
            if not self.ipr.link_lookup(ifname=ANCHOR_IFNAME):
                self.ipr.link("add", ifname=ANCHOR_IFNAME, kind="ifb")
            self.ipr.link("set", index=self.ifindex(ANCHOR_IFNAME), state="up")
            self.anchor, self._own_anchor = ANCHOR_IFNAME, True
        except NetlinkError as exc:
            log.warning("no ifb device (%s): seg6local routes hang off port %s instead", exc, fallback)
            self.anchor = fallback
        return self.anchor

    def remove_anchor(self) -> None:
        if self._own_anchor and self.ipr.link_lookup(ifname=ANCHOR_IFNAME):
            self.ipr.link("del", index=self.ifindex(ANCHOR_IFNAME))

    def close(self) -> None:
        self.ipr.close()

    def ifindex(self, ifname: str) -> int:
        index = self._ifindex.get(ifname)
        if index is not None:
            return index
        found = self.ipr.link_lookup(ifname=ifname)
        if not found:
            raise KernelError(f"interface {ifname} does not exist in this namespace")
        self._ifindex[ifname] = index = int(found[0])
        return index

    # -- routes -----------------------------------------------------------------
    def set_route(self, dst: IPv6Network, spec: RouteSpec | None) -> None:
        """Make the kernel's route for ``dst`` match ``spec`` (None: no route)."""
        try:
            self._set_route(dst, spec)
        except KernelError:
            if not self._ifindex:
                raise
            self._ifindex.clear()  # a stale interface index, perhaps: once more, looked up afresh
            self._set_route(dst, spec)

    def _set_route(self, dst: IPv6Network, spec: RouteSpec | None) -> None:
        try:
            if spec is None:
                self._delete_route(dst)
            elif spec.kind == "csid":
                self._set_csid_route(dst)
            elif spec.kind == "unreachable":
                self._route("replace", dst, type="unreachable")
            elif spec.kind == "unicast":
                ((nh, _w),) = spec.nexthops
                self._route("replace", dst, gateway=str(nh.gateway), oif=self.ifindex(nh.ifname))
            else:
                hops = [
                    {"gateway": str(nh.gateway), "oif": self.ifindex(nh.ifname), "hops": w - 1}
                    for nh, w in spec.nexthops
                ]
                # NLM_F_REPLACE swaps the whole route atomically on Linux ≥ 4.20 (unicast,
                # multipath, unreachable, seg6local alike), so a refused change leaves the old one.
                self._route("replace", dst, multipath=hops)
        except NetlinkError as exc:
            raise KernelError(f"route {dst} ({spec.kind if spec else 'delete'}): {exc.args[1]}") from exc

    def _route(self, op: str, dst: IPv6Network, **attrs: Any) -> None:
        """One route request (``replace``, ``del``) on ``dst``, marked as the shim's own
        (``RTPROT_MRC_SHIM``) so a restart finds and removes what this shim installed."""
        self.ipr.route(
            op,
            family=AF_INET6,
            dst=str(dst.network_address),
            dst_len=dst.prefixlen,
            proto=RTPROT_MRC_SHIM,
            **attrs,
        )

    def _delete_route(self, dst: IPv6Network) -> None:
        try:
            self._route("del", dst)
        except NetlinkError as exc:
            if exc.code not in (errno.ESRCH, errno.ENOENT):
                raise

    def _set_csid_route(self, dst: IPv6Network) -> None:
        msg = csid_route_msg(dst, self.ifindex(self.anchor))
        self.ipr.nlm_request(
            msg, msg_type=RTM_NEWROUTE, msg_flags=NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE
        )

    def own_routes(self) -> set[IPv6Network]:
        """Every route an instance of the shim installed in this namespace (its ``proto``)."""
        return {
            IPv6Network((route.get_attr("RTA_DST"), route["dst_len"]))
            for route in self.ipr.get_routes(family=AF_INET6, proto=RTPROT_MRC_SHIM)
        }

    def flush_own_routes(self) -> None:
        """Remove every route an instance of the shim installed in this namespace."""
        for route in self.ipr.get_routes(family=AF_INET6, proto=RTPROT_MRC_SHIM):
            try:
                self.ipr.route(
                    "del",
                    family=AF_INET6,
                    dst=route.get_attr("RTA_DST"),
                    dst_len=route["dst_len"],
                    proto=RTPROT_MRC_SHIM,
                )
            except NetlinkError as exc:
                log.warning("could not remove stale route %s: %s", route.get_attr("RTA_DST"), exc)

    # -- neighbours ---------------------------------------------------------------
    def set_neighbour(self, nh: NextHop, present: bool) -> None:
        try:
            self._set_neighbour(nh, present)
        except KernelError:
            if not self._ifindex:
                raise
            self._ifindex.clear()  # as in set_route
            self._set_neighbour(nh, present)

    def _set_neighbour(self, nh: NextHop, present: bool) -> None:
        try:
            if present:
                self.ipr.neigh(
                    "replace",
                    family=AF_INET6,
                    dst=str(nh.gateway),
                    lladdr=mac_text(nh.mac),
                    ifindex=self.ifindex(nh.ifname),
                    state=NUD_PERMANENT,
                )
                return
            try:
                idx = self.ifindex(nh.ifname)
            except KernelError:
                return  # the interface went away and took its neighbours with it
            self.ipr.neigh("del", family=AF_INET6, dst=str(nh.gateway), ifindex=idx)
        except NetlinkError as exc:
            if not present and exc.code in (errno.ENOENT, errno.ESRCH):
                return
            raise KernelError(
                f"neighbour {nh.gateway} lladdr {mac_text(nh.mac)} dev {nh.ifname}: {exc.args[1]}"
            ) from exc

    # -- statistics ---------------------------------------------------------------
    def link_stats(self) -> dict[str, LinkStats]:
        """Packet and byte counters of every interface, by name (one netlink dump)."""
        out: dict[str, LinkStats] = {}
        for link in self.ipr.get_links():
            stats = link.get_attr("IFLA_STATS64") or {}
            out[link.get_attr("IFLA_IFNAME")] = LinkStats(
                stats.get("rx_packets", 0),
                stats.get("rx_bytes", 0),
                stats.get("tx_packets", 0),
                stats.get("tx_bytes", 0),
            )
        return out


def read_snmp6() -> dict[str, int]:
    """The calling thread's network namespace's IPv6 MIB counters (/proc/net is the main
    thread's: in a shim group, each switch's worker thread has a namespace of its own)."""
    out: dict[str, int] = {}
    with open("/proc/thread-self/net/snmp6") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = int(parts[1])
    return out


def write_sysctl(parts: tuple[str, ...], value: str) -> None:
    """Write /proc/sys/<parts...> (parts kept apart: interface names may hold dots)."""
    with open(os.path.join("/proc/sys", *parts), "w") as f:
        f.write(value)
