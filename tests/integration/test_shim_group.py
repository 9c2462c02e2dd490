"""Switches that share one shim process (a shim group) are each the switch a shim of its own is.

Why: a shim group (``linux_target.shim_group``) serves several switches from one process, to
keep a 128-switch fabric within memory. Each must still be a switch of its own: its own
device and arbitration (a primary on one is nobody's primary on another), its kernel work
in its own node's namespaces (a write to one touches no other's routes or nft rules, nor
the machine's), stopped and restarted alone without its neighbours noticing; killing the
process ends every switch in it while the kernels keep their routes, and starting it again
brings every one back; and when the fabric goes, nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from finsy.proto import p4r, rpc_code

from linux_target.p4rt_client import P4RuntimeTestClient, wait_until_serving
from linux_target.shim_switch import nft_table_name
from mrc_fabric.addressing import usid_prefix
from mrc_fabric.time_scale import scaled
from topologies.clos import start_clos
from topologies.shim_groups import MemberShim
from topologies.teardown import stop_fabric

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (Mininet namespaces)")

PREFIX = "lg"
MAC = 0x020000AA0001


def mounts() -> set[str]:
    return {" ".join(line.split()[3:5]) for line in Path("/proc/self/mountinfo").read_text().splitlines()}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[Any], Path]]:
    """One plane, 2 T0 + 2 T1, the four switches in one shim process; no controller."""
    before = mounts()
    run = tmp_path_factory.mktemp("lg")
    net, topo = start_clos(run, 1, 2, 2, 1, node_prefix=PREFIX, switches_per_shim=4)
    launcher = net.shim_launcher
    try:
        yield net, [net.get(sw.name) for sw in topo.switches], run
    finally:
        stop_fabric(net)
    assert launcher is not None and not launcher.alive()
    assert mounts() == before  # nothing of the switches mounted in the machine's mount table
    assert sorted(run.glob("*.sock")) == []  # P4Runtime and control sockets


def client(node: Any, election_id: int, device_id: int | None = None) -> P4RuntimeTestClient:
    return P4RuntimeTestClient(node.p4rt_address, device_id or node.device_id, election_id)


def kernel_routes(node: Any) -> str:
    """The routes the shims installed in the node's namespace (their protocol number)."""
    return str(node.cmd("ip -6 route show proto 193"))


def fault_chains(node: Any) -> str:
    return str(node.cmd(f"nft list table netdev {nft_table_name(node.name)} | grep chain"))


def route_entry(c: P4RuntimeTestClient, usid: int) -> p4r.TableEntry:
    prefix = usid_prefix(usid)
    key = (int(prefix.network_address), 48)
    return c.table_entry("usid_route", {"dst_addr": key}, "set_next_hop", port=1, dmac=MAC)


def test_one_process_serves_every_switch_each_in_its_own_namespaces(fabric: Any) -> None:
    net, nodes, _run = fabric
    pids = {n.shim.pid for n in nodes}
    assert all(isinstance(n.shim, MemberShim) for n in nodes) and len(pids) == 1
    (pid,) = pids
    assert Path(f"/proc/{pid}/stat").read_text().split()[3] == str(net.shim_launcher.pid)
    tasks = Path(f"/proc/{pid}/task")
    for kind in ("net", "mnt"):
        of_threads = {os.readlink(t / "ns" / kind) for t in tasks.iterdir()}
        of_nodes = {os.readlink(f"/proc/{n.pid}/ns/{kind}") for n in nodes}
        assert of_nodes <= of_threads, kind  # each switch's worker is in its node's namespaces
    # the process's other threads hold a network namespace of their own: not the machine's
    main = os.readlink(f"/proc/{pid}/ns/net")
    assert main != os.readlink("/proc/self/ns/net")
    assert main not in {os.readlink(f"/proc/{n.pid}/ns/net") for n in nodes}


def test_arbitration_is_per_device(fabric: Any) -> None:
    _net, nodes, _run = fabric
    a, b = nodes[0], nodes[1]
    low_a, low_b = client(a, 10), client(b, 5)
    high_a = client(a, 20)
    wrong = None
    try:
        assert low_a.arbitrate().arbitration.status.code == rpc_code.OK
        assert low_b.arbitrate().arbitration.status.code == rpc_code.OK  # primary of its own device
        assert high_a.arbitrate().arbitration.status.code == rpc_code.OK
        assert low_a.next_stream_message().arbitration.status.code == rpc_code.ALREADY_EXISTS  # demoted
        with pytest.raises(grpc.RpcError) as err:
            low_a.set_pipeline()
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        low_b.set_pipeline()  # b's primary is still primary: a's election is a's alone
        wrong = client(a, 30, device_id=b.device_id)
        with pytest.raises(grpc.RpcError) as err:
            wrong.read_table()
        assert err.value.code() == grpc.StatusCode.NOT_FOUND  # a's socket is device a only
    finally:
        for c in (low_a, low_b, high_a, wrong):
            if c is not None:
                c.close()


def test_a_write_to_one_switch_touches_no_other(fabric: Any) -> None:
    _net, nodes, _run = fabric
    a, others = nodes[0], nodes[1:]
    before = {n.name: (kernel_routes(n), fault_chains(n)) for n in others}
    c = client(a, 100)
    try:
        assert c.arbitrate().arbitration.status.code == rpc_code.OK
        c.set_pipeline()
        c.insert(route_entry(c, 0x8100))
        c.insert(c.table_entry("port_fault", {"port": 1}, "fault_drop"))
        assert "fcbb:bb00:8100::/48" in kernel_routes(a)
        assert "out_p1" in fault_chains(a)
        assert {n.name: (kernel_routes(n), fault_chains(n)) for n in others} == before
        mine = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
        assert nft_table_name(a.name) not in mine  # nor the machine's own namespace
    finally:
        c.set_pipeline()  # VERIFY_AND_COMMIT: every entry of a removed again
        c.close()
    assert "fcbb:bb00:8100::/48" not in kernel_routes(a) and "out_p1" not in fault_chains(a)


def test_one_switch_restarted_alone_leaves_its_neighbours_serving(fabric: Any) -> None:
    _net, nodes, run = fabric
    a, b = nodes[0], nodes[1]
    pid = a.shim.pid
    cb = client(b, 100)
    try:
        assert cb.arbitrate().arbitration.status.code == rpc_code.OK
        cb.set_pipeline()
        cb.insert(route_entry(cb, 0x8200))
        a.restart_shim()  # SIGTERM semantics for a alone: its state removed, b's kept
        assert a.shim.pid == pid and a.shim.poll() is None
        wait_until_serving(a.p4rt_address, scaled(10))
        assert "fcbb:bb00:8200::/48" in kernel_routes(b)
        assert len(cb.read_table("usid_route")) == 1  # b's tables and its stream are untouched
        assert b.shim.poll() is None
        assert "stopping" not in (run / f"{b.name}.shim.log").read_text()
        assert "stopping" in (run / f"{a.name}.shim.log").read_text()  # each switch logs apart
    finally:
        cb.close()


def test_killing_the_process_ends_every_switch_and_one_restart_brings_all_back(fabric: Any) -> None:
    _net, nodes, _run = fabric
    b = nodes[1]
    old = nodes[0].shim.pid
    assert "fcbb:bb00:8200::/48" in kernel_routes(b)  # written by the test before
    os.kill(old, signal.SIGKILL)
    for n in nodes:
        assert n.shim.wait(timeout=scaled(10)) == -signal.SIGKILL
    assert "fcbb:bb00:8200::/48" in kernel_routes(b)  # the kernel keeps forwarding on it
    nodes[0].restart_shim()  # the supervisor's restart of one member: the process, every member
    # the new shim of b keeps the route its predecessor left until its controller has had time
    # to write its tables (stale_routes: the shim's grace, scaled to this machine as this
    # test's waits are): no packet meets a missing route meanwhile
    assert "fcbb:bb00:8200::/48" in kernel_routes(b)
    new = nodes[0].shim.pid
    assert new != old
    for n in nodes[1:]:
        n.restart_shim()  # served already: a new handle on the same process
        assert n.shim.pid == new and n.shim.poll() is None
    for n in nodes:
        wait_until_serving(n.p4rt_address, scaled(10))
    assert "fcbb:bb00:8200::/48" in kernel_routes(b)


def test_sigterm_to_the_process_stops_every_switch_removing_its_state(fabric: Any) -> None:
    _net, nodes, run = fabric
    b = nodes[1]
    for n in nodes:
        wait_until_serving(n.p4rt_address, scaled(10))
    cb = client(b, 200)
    try:
        assert cb.arbitrate().arbitration.status.code == rpc_code.OK
        cb.set_pipeline()
        cb.insert(route_entry(cb, 0x8300))
        assert "fcbb:bb00:8300::/48" in kernel_routes(b)
    finally:
        cb.close()
    logs = {n.name: run / f"{n.name}.shim.log" for n in nodes}
    before = {name: len(path.read_bytes()) for name, path in logs.items()}
    os.kill(b.shim.pid, signal.SIGTERM)
    for n in nodes:
        assert n.shim.wait(timeout=scaled(20)) == 0  # each switch stopped as a shim stops on SIGTERM
        # each logged its stop after the signal (among other lines: a stream's close may follow)
        since = logs[n.name].read_bytes()[before[n.name] :].decode(errors="replace")
        assert any("stopping" in line for line in since.splitlines()), since
    assert kernel_routes(b).strip() == ""  # every route the switches installed removed
