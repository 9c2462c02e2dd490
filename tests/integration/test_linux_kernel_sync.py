"""The shim's tables and the kernel never disagree: mapping, refusals, rollback, restart."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from linux_lab import NetnsLab, leftovers, run, wait_for

from linux_target.p4rt_client import P4RuntimeTestClient
from mrc_fabric.addressing import t0_usid, t1_usid, top48, usid_prefix
from mrc_fabric.time_scale import scaled
from mrc_p4rt.status import update_statuses

pytestmark = pytest.mark.root

NS = "ls-ks"
PORTS = {1: "ls-ks-p1", 2: "ls-ks-p2", 3: "ls-ks-p3"}
DEVICE_ID = 5


@pytest.fixture(scope="session", autouse=True)
def no_ls_leftovers() -> Iterator[None]:
    yield
    assert leftovers("ls") == []


@dataclass
class Switch:
    lab: NetnsLab
    client: P4RuntimeTestClient

    def peer_mac(self, port: int) -> int:
        return self.lab.mac(NS, PORTS[port].replace("-p", "-q"))

    def own_mac(self, port: int) -> int:
        return self.lab.mac(NS, PORTS[port])

    def route_to_t1_via_port_1(self) -> Any:
        """The usid_route entry to T1 (0, 0) out of port 1, to its peer's MAC (a kernel route)."""
        key = {"dst_addr": route_key(t1_usid(0, 0))}
        return self.client.table_entry("usid_route", key, "set_next_hop", port=1, dmac=self.peer_mac(1))


def kernel() -> str:
    """Everything the shim may touch in its namespace, as text."""
    routes = run(["ip", "-6", "route", "show", "proto", "193"], ns=NS).stdout
    neigh = run(["ip", "-6", "neigh", "show", "nud", "permanent"], ns=NS).stdout
    nft = run(["nft", "list", "table", "netdev", "mrc_shim_ls_ks"], ns=NS, check=False).stdout
    return routes + neigh + nft


@pytest.fixture
def switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Switch]:
    with NetnsLab(tmp_path_factory.mktemp("ls-ks")) as lab:
        lab.switch_ns(NS, PORTS, "ls-ks-q")
        address = lab.start_shim(NS, "ls-ks", DEVICE_ID, PORTS)
        c = P4RuntimeTestClient(address, DEVICE_ID, election_id=1)
        try:
            c.arbitrate()
            c.set_pipeline()
            yield Switch(lab, c)
        finally:
            c.close()


def route_key(usid: int) -> tuple[int, int]:
    return int(usid_prefix(usid).network_address), 48


def test_each_table_maps_to_kernel_state_and_back(switch: Switch) -> None:
    c = switch.client
    entries = [
        c.table_entry(
            "my_usid", {"dst_top48": top48(usid_prefix(t0_usid(0, 0)).network_address)}, "usid_shift"
        ),
        c.table_entry(
            "usid_route", {"dst_addr": route_key(t1_usid(0, 0))}, "set_next_hop", port=1, dmac=0x02AA00000001
        ),
        c.table_entry("port_fault", {"port": 2}, "fault_loss", prob=100),
        c.table_entry("ingress_fault", {"port": 3}, "fault_drop"),
    ]
    for e in entries:
        c.insert(e)
    state = kernel()
    assert (
        "fcbb:bb00:4000::/48  encap seg6local action End flavors next-csid lblen 32 nflen 16 dev ls-usid0"
        in state
    )
    assert "fcbb:bb00:8000::/48 via fe80::aa:ff:fe00:1 dev ls-ks-p1" in state
    assert "fe80::aa:ff:fe00:1 dev ls-ks-p1 lladdr 02:aa:00:00:00:01 PERMANENT" in state
    assert 'hook egress device "ls-ks-p2"' in state and "numgen random mod 65536 < 100" in state
    assert 'hook ingress device "ls-ks-p3"' in state
    for e in entries:
        c.delete(e)
    state = kernel()
    assert "fcbb" not in state and "lladdr" not in state and "chain" not in state


def test_kernel_refusal_mid_change_is_rolled_back(switch: Switch) -> None:
    """An ECMP member whose next hop is the switch's own address: the neighbour step succeeds,
    the kernel refuses the multipath route, the neighbour is removed again, nothing changes."""
    c = switch.client
    c.insert(
        c.table_entry(
            "ecmp_member", {"group_id": 1, "member": 0}, "set_next_hop", port=1, dmac=switch.peer_mac(1)
        )
    )
    for usid in (t1_usid(0, 0), t1_usid(0, 1)):
        c.insert(c.table_entry("usid_route", {"dst_addr": route_key(usid)}, "set_ecmp", group_id=1, size=2))
    before_kernel, before_view = kernel(), c.read_table()
    bad = c.table_entry(
        "ecmp_member", {"group_id": 1, "member": 1}, "set_next_hop", port=2, dmac=switch.own_mac(2)
    )
    with pytest.raises(grpc.RpcError) as info:
        c.insert(bad)
    assert info.value.code() == grpc.StatusCode.UNKNOWN  # P4Runtime §12.3: the update's code in details
    assert "kernel refused" in info.value.details() and "local address" in info.value.details()
    assert update_statuses(info.value)[0].canonical_code == grpc.StatusCode.INTERNAL.value[0]
    assert kernel() == before_kernel
    assert c.read_table() == before_view
    good = c.table_entry(
        "ecmp_member", {"group_id": 1, "member": 1}, "set_next_hop", port=2, dmac=switch.peer_mac(2)
    )
    c.insert(good)
    assert kernel().count("nexthop via") == 4  # both routes now spread over two members


def test_refused_route_and_refused_fault_leave_no_trace(switch: Switch) -> None:
    c = switch.client
    run(["sysctl", "-qw", f"net.ipv6.conf.{PORTS[3]}.disable_ipv6=1"], ns=NS)
    route = c.table_entry(
        "usid_route", {"dst_addr": route_key(t1_usid(0, 0))}, "set_next_hop", port=3, dmac=switch.peer_mac(3)
    )
    with pytest.raises(grpc.RpcError) as info:
        c.insert(route)
    assert update_statuses(info.value)[0].canonical_code == grpc.StatusCode.INTERNAL.value[0]
    assert "IPv6 is disabled" in info.value.details()
    assert c.read_table() == [] and "fcbb" not in kernel()
    # nftables refuses a chain in a table that someone else removed behind the shim's back
    run(["nft", "delete", "table", "netdev", "mrc_shim_ls_ks"], ns=NS)
    with pytest.raises(grpc.RpcError) as info:
        c.insert(c.table_entry("port_fault", {"port": 1}, "fault_drop"))
    assert update_statuses(info.value)[0].canonical_code == grpc.StatusCode.INTERNAL.value[0]
    assert "nft refused" in info.value.details()
    assert c.read_table() == []


def test_a_restarted_shim_keeps_the_kernel_forwarding_then_sweeps_what_is_not_rewritten(
    switch: Switch,
) -> None:
    """A crash (SIGKILL) leaves kernel state behind. The next shim of that name keeps the
    routes (the kernel goes on forwarding: no packet meets a missing route while the
    controller re-writes the tables), keeps those the tables take up again, and removes the
    rest once nobody has written for the grace time. A clean stop removes everything."""
    c = switch.client
    to_t1 = switch.route_to_t1_via_port_1()
    c.insert(to_t1)
    other = c.table_entry(
        "usid_route", {"dst_addr": route_key(t1_usid(0, 1))}, "set_next_hop", port=2, dmac=switch.peer_mac(2)
    )
    c.insert(other)
    c.insert(c.table_entry("port_fault", {"port": 1}, "fault_drop"))
    shim = switch.lab.shims.pop()
    shim.send_signal(signal.SIGKILL)
    shim.wait(timeout=scaled(10))
    kept, gone = "fcbb:bb00:8000::/48", "fcbb:bb00:8001::/48"
    assert kept in kernel() and gone in kernel()
    grace = ["--stale-grace", f"{scaled(8):g}"]  # longer than the checks below take on this machine
    address = switch.lab.start_shim(NS, "ls-ks", DEVICE_ID, PORTS, extra_args=grace)
    routes = run(["ip", "-6", "route", "show", "proto", "193"], ns=NS).stdout
    assert kept in routes and gone in routes  # still forwarding on what the old shim left
    assert "chain" not in kernel()  # its fault rules went with its nft table: faults are re-written
    c2 = P4RuntimeTestClient(address, DEVICE_ID, election_id=1)
    try:
        c2.arbitrate()
        c2.set_pipeline()
        c2.insert(to_t1)  # what the controller still wants: written again over the kept route
        wait_for(lambda: gone not in kernel(), 20, "the route nobody wrote again to be swept")
        assert kept in kernel()
    finally:
        c2.close()
    # a clean stop (SIGTERM) removes everything it made, the anchor device included
    shim = switch.lab.shims.pop()
    shim.terminate()
    assert shim.wait(timeout=scaled(10)) == 0
    assert run(["ip", "-6", "route", "show", "proto", "193"], ns=NS).stdout == ""
    assert run(["nft", "list", "tables"], ns=NS).stdout == ""
    assert "ls-usid0" not in run(["ip", "link"], ns=NS).stdout


def test_admin_down_and_up_of_a_port_restores_its_routes(switch: Switch) -> None:
    """The kernel forgets routes and permanent neighbours of an admin-down interface; the shim
    puts them back when the port comes up, as a P4 switch keeps its tables across a flap."""
    c = switch.client
    c.insert(switch.route_to_t1_via_port_1())
    c.insert(
        c.table_entry(
            "my_usid", {"dst_top48": top48(usid_prefix(t0_usid(0, 0)).network_address)}, "usid_shift"
        )
    )
    before = kernel()
    run(["ip", "link", "set", PORTS[1], "down"], ns=NS)
    assert "fcbb:bb00:8000::/48" not in kernel()  # the kernel dropped it
    run(["ip", "link", "set", PORTS[1], "up"], ns=NS)
    wait_for(lambda: kernel() == before, 10, "the route and neighbour of port 1 to come back")
