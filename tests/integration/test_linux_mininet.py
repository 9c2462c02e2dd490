"""The Mininet node class: two LinuxSrv6Switch nodes between two Mininet hosts.

lsh1 — ls1 (T0 uSID 4000) — ls2 (T0 uSID 4001) — lsh2 (host uSID c001).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from linux_lab import Sniffer, leftovers, send_frames
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from linux_target.kernel_state import mac_text
from linux_target.p4rt_client import P4RuntimeTestClient
from mrc_fabric.addressing import MRC_UDP_PORT, carrier, host_usid, nic_address, t0_usid, top48, usid_prefix

pytestmark = pytest.mark.root

mininet_net = pytest.importorskip("mininet.net")


@pytest.fixture(scope="session", autouse=True)
def no_ls_leftovers() -> Iterator[None]:
    yield
    assert leftovers("ls") == []


@pytest.fixture
def net(tmp_path):
    from mininet.log import setLogLevel

    from topologies.linux_switch import LinuxSrv6Switch

    setLogLevel("warning")
    n = mininet_net.Mininet(controller=None, build=False, autoSetMacs=False)
    try:
        s1 = n.addSwitch("ls1", cls=LinuxSrv6Switch, device_id=11, run_dir=tmp_path)
        s2 = n.addSwitch("ls2", cls=LinuxSrv6Switch, device_id=12, run_dir=tmp_path)
        h1 = n.addHost("lsh1")
        h2 = n.addHost("lsh2")
        n.addLink(h1, s1)
        n.addLink(s1, s2)
        n.addLink(s2, h2)
        n.build()
        n.start()
        yield n
    finally:
        n.stop()


def mac_of(intf) -> int:
    return int(intf.MAC().replace(":", ""), 16)


def test_node_attributes_and_forwarding_through_two_switches(net, tmp_path) -> None:
    s1, s2, h1, h2 = net.get("ls1", "ls2", "lsh1", "lsh2")
    assert s1.p4rt_address == f"unix:{tmp_path / 'ls1.p4rt.sock'}" and s1.device_id == 11
    assert (tmp_path / "ls1.shim.log").exists()
    assert s1.port_map() == {1: "ls1-eth1", 2: "ls1-eth2"}
    assert s1.port_of("ls1-eth2") == 2 and s2.port_of(s2.intf("ls2-eth2")) == 2
    h1_if, s1_in = h1.intf("lsh1-eth0"), s1.intf("ls1-eth1")
    s2_in, h2_if = s2.intf("ls2-eth1"), h2.intf("lsh2-eth0")

    clients = []
    for sw in (s1, s2):
        c = P4RuntimeTestClient(sw.p4rt_address, sw.device_id, election_id=1)
        c.arbitrate()
        c.set_pipeline()
        clients.append(c)
    c1, c2 = clients
    try:
        T0A, T0B, H = t0_usid(0, 0), t0_usid(0, 1), host_usid(0, 1)

        def program(c: P4RuntimeTestClient, own: int, nxt: int, port: int, dmac: int) -> None:
            c.insert(
                c.table_entry("my_usid", {"dst_top48": top48(usid_prefix(own).network_address)}, "usid_shift")
            )
            c.insert(
                c.table_entry(
                    "usid_route",
                    {"dst_addr": (int(usid_prefix(nxt).network_address), 48)},
                    "set_next_hop",
                    port=port,
                    dmac=dmac,
                )
            )

        program(c1, T0A, T0B, s1.port_of("ls1-eth2"), mac_of(s2_in))
        program(c2, T0B, H, s2.port_of("ls2-eth2"), mac_of(h2_if))
        marker = b"MRC-mininet"
        frame = bytes(
            Ether(src=mac_text(mac_of(h1_if)), dst=mac_text(mac_of(s1_in)))
            / IPv6(src=str(nic_address(0, 0)), dst=str(carrier([T0A, T0B, H])), nh=41, hlim=64)
            / IPv6(src=str(nic_address(0, 0)), dst=str(nic_address(0, 1)), nh=17)
            / UDP(sport=1, dport=MRC_UDP_PORT)
            / Raw(marker)
        )
        tap = Sniffer("", "lsh2-eth0", marker, prefix=["mnexec", "-a", str(h2.pid)])
        try:
            send_frames("", "lsh1-eth0", [frame], count=3, prefix=["mnexec", "-a", str(h1.pid)])
            got = tap.wait_count(3)
        finally:
            tap.close()
        assert Ether(got[0])[IPv6].dst == "fcbb:bb00:c001::" and Ether(got[0])[IPv6].hlim == 62
    finally:
        for c in clients:
            c.close()

    # restart: a fresh shim with empty tables, answering on the same address
    old_pid = s1.shim.pid
    s1.restart_shim()
    assert s1.shim.pid != old_pid
    c = P4RuntimeTestClient(s1.p4rt_address, s1.device_id, election_id=1)
    try:
        c.arbitrate()
        c.set_pipeline()
        assert c.read_table() == []
    finally:
        c.close()


def test_stop_kills_the_shim_and_removes_the_socket(tmp_path) -> None:
    from topologies.linux_switch import LinuxSrv6Switch

    n = mininet_net.Mininet(controller=None, build=False)
    try:
        sw = n.addSwitch("ls3", cls=LinuxSrv6Switch, device_id=13, run_dir=tmp_path)
        n.addLink(n.addHost("lsh3"), sw)
        n.build()
        n.start()
        pid = sw.shim.pid
        assert os.path.exists(sw.socket_path)
    finally:
        n.stop()
    assert not os.path.exists(tmp_path / "ls3.p4rt.sock")
    status = Path(f"/proc/{pid}/status")
    assert not status.exists() or "zombie" in status.read_text().lower()
