"""Each kernel feature a live fabric uses, tried for real in a throwaway namespace.

``topologies.preflight`` runs this module as
``unshare --net --mount --propagation private -- python -m topologies.kernel_probe``: a new
network namespace with nothing in it and a private copy of the mount table, both gone with
the process, so nothing a probe makes (a veth, a route, an nft table, a BPF program, the sysfs
mounted as Mininet's ``mnexec`` mounts it) can outlive it or reach the machine. Each probe
uses the product's own code path (the shim's netlink, nft and egress code, the agent's ring
setup) on a veth pair, so a pass means the fabric's own requests work. It prints one JSON
object: feature name -> null (works) or what the kernel said.

:data:`FEATURES` is also the table docs/linux-target.md lists: what each feature is for, and
the kernel release it arrived in.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv6Network

VETH = ("mrcprobe0", "mrcprobe1")
RATE_BPS = 20_000_000


@dataclass(frozen=True)
class Feature:
    name: str
    what: str  # what the fabric uses it for
    since: str  # the mainline release it arrived in
    targets: tuple[str, ...]  # the data planes that need it ("linux", "bmv2")
    tools: tuple[str, ...] = ()  # commands the probe runs (not tried without them)


FEATURES = (
    Feature("veth", "veth pairs (every link)", "2.6.24", ("linux", "bmv2"), ("ip",)),
    Feature(
        "srv6",
        "seg6local End with flavors next-csid (uSID shift) and multipath routes",
        "6.1",
        ("linux",),
    ),
    Feature(
        "nft_netdev",
        "nftables netdev ingress and egress chains with numgen (faults)",
        "5.16",
        ("linux",),
        ("nft",),
    ),
    Feature(
        "htb", "HTB with two classes and pfifo leaves (link rates)", "2.4.20", ("linux", "bmv2"), ("tc",)
    ),
    Feature(
        "egress_bpf",
        "clsact + cls_bpf egress program with BTF maps, bpf_spin_lock, skb_store_bytes and "
        "skb_change_tail, loaded in a node's mount view (ECN, trimming, priority, tail drop)",
        "5.1",
        ("linux",),
        ("tc", "bpftool"),
    ),
    Feature(
        "packet_rings",
        "AF_PACKET TPACKET_V2 and TPACKET_V3 rings (the agents' NIC ports)",
        "4.11",
        ("linux", "bmv2"),
    ),
)


def _sh(*cmd: str) -> None:
    proc = subprocess.run(list(cmd), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {(proc.stderr or proc.stdout).strip()}")


def probe_veth() -> None:
    _sh("ip", "link", "set", "lo", "up")
    _sh("ip", "link", "add", VETH[0], "type", "veth", "peer", "name", VETH[1])
    for dev in VETH:
        _sh("ip", "link", "set", dev, "up")


def probe_srv6() -> None:
    from linux_target.kernel_state import NextHop, RouteSpec
    from linux_target.netlink_backend import NetlinkBackend

    netlink = NetlinkBackend()
    try:
        netlink.create_anchor(fallback=VETH[0])
        netlink.set_route(IPv6Network("fcbb:bb00:1::/48"), RouteSpec("csid"))
        hops = tuple((NextHop(dev, 0x020000000001 + i), 1) for i, dev in enumerate(VETH))
        netlink.set_route(IPv6Network("fcbb:bb00:2::/48"), RouteSpec("multipath", hops))
    finally:
        netlink.close()


def probe_nft_netdev() -> None:
    from linux_target.kernel_state import FaultSpec
    from linux_target.nft_backend import NftFaults

    nft = NftFaults("mrc_probe")
    nft.start({1: VETH[0]})
    nft.change(
        [
            (("egress", 1), None, FaultSpec("egress", 1, VETH[0], 100)),
            (("ingress", 1), None, FaultSpec("ingress", 1, VETH[0], None)),
        ]
    )


def probe_htb() -> None:
    from linux_target.egress import PortEgress, _tc_batch

    _tc_batch(PortEgress(VETH[1])._htb_setup(RATE_BPS))


def probe_egress_bpf() -> None:
    """The program on a port as the shim puts it there, seen from a node's mount table: a
    fresh sysfs over /sys without the old one unmounted, as ``mnexec`` leaves it."""
    from linux_target.egress import install_ports

    _sh("mount", "-t", "sysfs", "sysfs", "/sys")
    install_ports({VETH[0]: RATE_BPS})


def probe_packet_rings() -> None:
    from mrc_host.agent.rings import TPACKET_V2, TPACKET_V3, RingGeometry, setup_rings

    for version in (TPACKET_V2, TPACKET_V3):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            setup_rings(sock, RingGeometry(version, 9000))
        finally:
            sock.close()


PROBES: dict[str, Callable[[], None]] = {
    "veth": probe_veth,
    "srv6": probe_srv6,
    "nft_netdev": probe_nft_netdev,
    "htb": probe_htb,
    "egress_bpf": probe_egress_bpf,
    "packet_rings": probe_packet_rings,
}


def _error(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, (ImportError, AttributeError, TypeError, NameError)):  # a bug, not the kernel
        text += " | " + traceback.format_exc(limit=3).replace("\n", " ")
    return text[:2000]


def run(names: list[str]) -> dict[str, str | None]:
    """Each probe in ``names`` (veth first: the others need its pair); its error or None."""
    results: dict[str, str | None] = {}
    for name in names:
        if name != "veth" and results.get("veth"):
            results[name] = "not tried: no veth pair"
            continue
        try:
            PROBES[name]()
            results[name] = None
        except Exception as exc:  # every refusal is a result; the next probe still runs
            results[name] = _error(exc)
    return results


def main(argv: list[str] | None = None) -> int:
    names = list(argv if argv is not None else sys.argv[1:]) or list(PROBES)
    unknown = sorted(set(names) - set(PROBES))
    if unknown:
        print(json.dumps({"error": f"unknown probes {unknown}"}))
        return 2
    wanted = ["veth", *(n for n in names if n != "veth")]
    print(json.dumps(run(wanted)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
