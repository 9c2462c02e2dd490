"""Forwarding through Linux SRv6 switches programmed over P4Runtime.

Chain: ls-h1 → T0 a (uSID 4000) → T1 (8000) → T0 b (4001) → ls-h2 (host uSID c001),
one namespace each, veth links, one shim per switch. Packets are built with
scapy, sent from a raw socket inside ls-h1 and captured with raw sockets on
the links and in ls-h2.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv6Address
from pathlib import Path

import pytest
from finsy.proto import p4r
from linux_lab import NetnsLab, Sniffer, leftovers, run, send_frames, wait_for
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from linux_target.kernel_state import mac_text
from linux_target.p4rt_client import P4RuntimeTestClient
from mrc_fabric.addressing import (
    MRC_UDP_PORT,
    carrier,
    host_usid,
    nic_address,
    t0_usid,
    t1_usid,
    top48,
    usid_prefix,
)
from mrc_fabric.drop_reasons import DropReason

pytestmark = pytest.mark.root

T0A, T1, T0B, H2 = t0_usid(0, 0), t1_usid(0, 0), t0_usid(0, 1), host_usid(0, 1)
PATH = [T0A, T1, T0B, H2]
DROP_NO_ROUTE, DROP_HOP_LIMIT, DROP_FAULT = (
    r.cell for r in (DropReason.NO_ROUTE, DropReason.HOP_LIMIT, DropReason.FAULT)
)


@pytest.fixture(scope="session", autouse=True)
def no_ls_leftovers() -> Iterator[None]:
    yield
    assert leftovers("ls") == []


@dataclass
class Fabric:
    lab: NetnsLab
    t0a: P4RuntimeTestClient
    t1: P4RuntimeTestClient
    t0b: P4RuntimeTestClient
    h1_mac: int
    t0a_in_mac: int

    def frame(self, usids: list[int], marker: bytes, hlim: int = 64, fl: int = 0xBEEF) -> bytes:
        pkt = (
            Ether(src=mac_text(self.h1_mac), dst=mac_text(self.t0a_in_mac))
            / IPv6(src=str(nic_address(0, 0)), dst=str(carrier(usids)), hlim=hlim, nh=41, fl=fl)
            / IPv6(src=str(nic_address(0, 0)), dst=str(nic_address(0, 1)), nh=17)
            / UDP(sport=0x1234, dport=MRC_UDP_PORT)
            / Raw(marker)
        )
        return bytes(pkt)


def route(c: P4RuntimeTestClient, usid: int, port: int, dmac: int) -> p4r.TableEntry:
    prefix = usid_prefix(usid)
    return c.table_entry(
        "usid_route", {"dst_addr": (int(prefix.network_address), 48)}, "set_next_hop", port=port, dmac=dmac
    )


def my_usid(c: P4RuntimeTestClient, usid: int) -> p4r.TableEntry:
    return c.table_entry("my_usid", {"dst_top48": top48(usid_prefix(usid).network_address)}, "usid_shift")


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fabric]:
    run_dir: Path = tmp_path_factory.mktemp("ls-fwd")
    with NetnsLab(run_dir) as lab:
        for ns in ("ls-h1", "ls-t0a", "ls-t1", "ls-t0b", "ls-h2"):
            lab.add_ns(ns)
        lab.veth("ls-h1", "ls-h1-e0", "ls-t0a", "ls-t0a-p1")
        lab.veth("ls-t0a", "ls-t0a-p2", "ls-t1", "ls-t1-p1")
        lab.veth("ls-t1", "ls-t1-p2", "ls-t0b", "ls-t0b-p2")
        lab.veth("ls-t0b", "ls-t0b-p1", "ls-h2", "ls-h2-e0")
        clients = []
        for dev, (ns, ports) in enumerate(
            [
                ("ls-t0a", {1: "ls-t0a-p1", 2: "ls-t0a-p2"}),
                ("ls-t1", {1: "ls-t1-p1", 2: "ls-t1-p2"}),
                ("ls-t0b", {1: "ls-t0b-p1", 2: "ls-t0b-p2"}),
            ],
            start=1,
        ):
            address = lab.start_shim(ns, ns, dev, ports)
            c = P4RuntimeTestClient(address, dev, election_id=1)
            c.arbitrate()
            c.set_pipeline()
            clients.append(c)
        t0a, t1, t0b = clients
        t0a.insert(my_usid(t0a, T0A))
        t0a.insert(route(t0a, T1, 2, lab.mac("ls-t1", "ls-t1-p1")))
        t1.insert(my_usid(t1, T1))
        t1.insert(route(t1, T0B, 2, lab.mac("ls-t0b", "ls-t0b-p2")))
        t0b.insert(my_usid(t0b, T0B))
        t0b.insert(route(t0b, H2, 1, lab.mac("ls-h2", "ls-h2-e0")))
        try:
            yield Fabric(lab, t0a, t1, t0b, lab.mac("ls-h1", "ls-h1-e0"), lab.mac("ls-t0a", "ls-t0a-p1"))
        finally:
            for c in clients:
                c.close()


def outer(frame: bytes) -> IPv6:
    return Ether(frame)[IPv6]


def test_usid_shift_at_each_switch_and_delivery_with_hop_limit_61(fabric: Fabric) -> None:
    marker = b"MRC-shift-test"
    taps = {
        "t0a→t1": Sniffer("ls-t1", "ls-t1-p1", marker),
        "t1→t0b": Sniffer("ls-t0b", "ls-t0b-p2", marker),
        "t0b→h2": Sniffer("ls-h2", "ls-h2-e0", marker),
    }
    rx_before = fabric.t1.read_counter("port_rx", 1)[0]
    try:
        send_frames("ls-h1", "ls-h1-e0", [fabric.frame(PATH, marker)], count=3)
        got = {name: tap.wait_count(3) for name, tap in taps.items()}
    finally:
        for tap in taps.values():
            tap.close()
    expect = {
        "t0a→t1": ("fcbb:bb00:8000:4001:c001::", 63),
        "t1→t0b": ("fcbb:bb00:4001:c001::", 62),
        "t0b→h2": ("fcbb:bb00:c001::", 61),
    }
    for name, (dst, hlim) in expect.items():
        for frame in got[name]:
            ip = outer(frame)
            assert (ip.dst, ip.hlim) == (dst, hlim), name
            assert ip.fl == 0xBEEF  # the flow label (half the EV) survives every hop
            assert ip[IPv6].payload.dst == str(nic_address(0, 1))  # inner header untouched
    # the frame reaching h2 is addressed to h2's MAC, the one the controller gave as dmac
    assert Ether(got["t0b→h2"][0]).dst == mac_text(fabric.lab.mac("ls-h2", "ls-h2-e0"))
    assert fabric.t1.read_counter("port_rx", 1)[0] >= rx_before + 3


def assert_dropped_on_t1(
    fabric: Fabric, marker: bytes, frame: bytes, count: int, reason: int, what: str
) -> None:
    """``count`` copies of ``frame`` sent from h1 raise T1's ``reason`` drop counter by ``count``
    and none reaches h2."""
    tap = Sniffer("ls-h2", "ls-h2-e0", marker)
    before = fabric.t1.read_counter("drop_reason", reason)[0]
    try:
        send_frames("ls-h1", "ls-h1-e0", [frame], count=count)
        wait_for(lambda: fabric.t1.read_counter("drop_reason", reason)[0] >= before + count, 10, what)
    finally:
        tap.close()
    assert tap.frames == []


def test_unknown_next_usid_is_dropped_and_counted(fabric: Fabric) -> None:
    marker = b"MRC-unknown-usid"
    unknown = t0_usid(0, 5)
    frame = fabric.frame([T0A, T1, unknown, H2], marker)
    assert_dropped_on_t1(fabric, marker, frame, 5, DROP_NO_ROUTE, "5 no-route drops on T1")


def test_hop_limit_expiry_is_dropped_and_counted(fabric: Fabric) -> None:
    marker = b"MRC-hop-limit"
    frame = fabric.frame(PATH, marker, hlim=2)
    assert_dropped_on_t1(fabric, marker, frame, 4, DROP_HOP_LIMIT, "4 hop-limit drops on T1")


@pytest.mark.parametrize("table,switch,port", [("port_fault", "t1", 2), ("ingress_fault", "t0b", 2)])
def test_black_hole_drops_everything_and_removal_restores(
    fabric: Fabric, table: str, switch: str, port: int
) -> None:
    client: P4RuntimeTestClient = getattr(fabric, switch)
    fault = client.table_entry(table, {"port": port}, "fault_drop")
    marker = f"MRC-black-hole-{table}".encode()
    frame = fabric.frame(PATH, marker)
    before = client.read_counter("drop_reason", DROP_FAULT)[0]
    tap = Sniffer("ls-h2", "ls-h2-e0", marker)
    try:
        client.insert(fault)
        send_frames("ls-h1", "ls-h1-e0", [frame], count=20)
        wait_for(
            lambda: client.read_counter("drop_reason", DROP_FAULT)[0] >= before + 20, 10, "20 fault drops"
        )
        assert tap.frames == []
        client.delete(fault)
        send_frames("ls-h1", "ls-h1-e0", [frame], count=5)
        assert len(tap.wait_count(5)) == 5
    finally:
        tap.close()
        if client.read(p4r.Entity(table_entry=client.table_entry(table, {"port": port}))):
            client.delete(fault)


def test_twenty_percent_loss_drops_between_10_and_30_percent(fabric: Fabric) -> None:
    sent = 2000
    fault = fabric.t1.table_entry("port_fault", {"port": 2}, "fault_loss", prob=round(0.2 * 65536))
    marker = b"MRC-random-loss"
    before = fabric.t1.read_counter("drop_reason", DROP_FAULT)[0]
    tap = Sniffer("ls-h2", "ls-h2-e0", marker)
    try:
        fabric.t1.insert(fault)
        send_frames("ls-h1", "ls-h1-e0", [fabric.frame(PATH, marker)], count=sent)

        def dropped() -> int:
            return fabric.t1.read_counter("drop_reason", DROP_FAULT)[0] - before

        wait_for(lambda: len(tap.frames) + dropped() >= sent, 30, "every packet delivered or dropped")
    finally:
        tap.close()
        fabric.t1.delete(fault)
    assert len(tap.frames) + dropped() == sent
    assert 0.10 * sent <= dropped() <= 0.30 * sent, dropped()


def test_ecmp_group_spreads_over_members_by_flow_label(fabric: Fabric) -> None:
    """set_ecmp on T0 a is a multipath route; the kernel's hash covers the flow label (half the EV)."""
    c = fabric.t0a
    t1_mac = fabric.lab.mac("ls-t1", "ls-t1-p1")
    members = [
        c.table_entry("ecmp_member", {"group_id": 7, "member": 0}, "set_next_hop", port=2, dmac=t1_mac),
        c.table_entry(
            "ecmp_member", {"group_id": 7, "member": 1}, "set_next_hop", port=1, dmac=fabric.h1_mac
        ),
    ]
    ecmp_route = c.table_entry(
        "usid_route",
        {"dst_addr": (int(usid_prefix(T0B).network_address), 48)},
        "set_ecmp",
        group_id=7,
        size=2,
    )
    marker = b"MRC-ecmp"
    taps = [Sniffer("ls-t1", "ls-t1-p1", marker), Sniffer("ls-h1", "ls-h1-e0", marker)]
    try:
        for m in members:
            c.insert(m)
        c.insert(ecmp_route)
        routes = run(["ip", "-6", "route", "show", str(usid_prefix(T0B))], ns="ls-t0a").stdout
        assert "nexthop via" in routes and "dev ls-t0a-p2" in routes and "dev ls-t0a-p1" in routes
        frames = [fabric.frame([T0A, T0B, H2], marker, fl=fl) for fl in range(1, 65)]
        send_frames("ls-h1", "ls-h1-e0", frames)
        wait_for(lambda: sum(len(t.frames) for t in taps) >= 64, 10, "64 frames over both members")
        assert all(t.frames for t in taps), [len(t.frames) for t in taps]
        c.delete(members[1])  # one member left: a plain route
        routes = run(["ip", "-6", "route", "show", str(usid_prefix(T0B))], ns="ls-t0a").stdout
        assert "nexthop" not in routes and "dev ls-t0a-p2" in routes
    finally:
        for tap in taps:
            tap.close()
        for entry in (ecmp_route, *members):
            if c.read(p4r.Entity(table_entry=entry)):
                c.delete(entry)


def test_addresses_used_match_the_design_example() -> None:
    assert carrier(PATH) == IPv6Address("fcbb:bb00:4000:8000:4001:c001::")
