"""The Mininet node (topologies.bmv2_switch.Bmv2Switch) in a real Mininet: start, program, pcaps, stop."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from bmv2_lab import wait_for
from bmv2_p4rt import P4RuntimeClient
from conftest import CompiledProgram
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from mrc_fabric.addressing import carrier, host_usid, t0_usid, top48, usid_prefix
from mrc_fabric.frames import FABRIC_MTU
from mrc_fabric.p4info import load_p4info
from topologies.bmv2_switch import REALTIME_PRIORITY, Bmv2Error, Bmv2Switch, realtime_prefix

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

ETHER_HEADER = 14

SEND = (
    "import socket,sys; s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW); s.bind((sys.argv[1],0)); "
    "[s.send(bytes.fromhex(sys.argv[2])) for _ in range(int(sys.argv[3]))]"
)


@pytest.fixture
def net(tmp_path: Path, compiled: CompiledProgram) -> Iterator:
    from mininet.net import Mininet

    mn = Mininet(topo=None, build=False, controller=None, autoSetMacs=True)
    try:
        h1, h2 = mn.addHost("pbh1", ip=None), mn.addHost("pbh2", ip=None)
        sw = mn.addSwitch(
            "pbs1", cls=Bmv2Switch, device_id=7, run_dir=tmp_path, pipeline_json=compiled.json_path
        )
        mn.addLink(h1, sw)
        mn.addLink(h2, sw)
        mn.build()
        mn.start()
        yield mn
    finally:
        mn.stop()


def test_node_starts_programs_forwards_captures_and_stops(net, tmp_path: Path) -> None:
    sw: Bmv2Switch = net.get("pbs1")
    h1, h2 = net.get("pbh1"), net.get("pbh2")
    assert sw.p4rt_address == f"unix:{sw.run_dir / 'pbs1.p4rt.sock'}" and sw.device_id == 7
    if realtime_prefix(REALTIME_PRIORITY):  # every switch thread round-robin real-time, where allowed
        pid = sw.process.proc.pid  # type: ignore[union-attr]
        threads = os.listdir(f"/proc/{pid}/task")
        assert len(threads) > 4 and {os.sched_getscheduler(int(t)) for t in threads} == {os.SCHED_RR}
    port_h1, port_h2 = sw.port_of("pbs1-eth1"), sw.port_of(h2.intf().link.intf2)
    assert (port_h1, port_h2) == (1, 2)

    own, dst = t0_usid(0, 0), host_usid(0, 1)
    with P4RuntimeClient(sw.p4rt_address, sw.device_id) as p4rt:
        p4rt.arbitrate()
        p4rt.set_pipeline(load_p4info(), sw.pipeline_json.read_bytes())
        p4rt.insert(
            p4rt.table_entry("my_usid", {"dst_top48": top48(usid_prefix(own).network_address)}, "usid_shift")
        )
        dmac = int(h2.intf().MAC().replace(":", ""), 16)
        prefix = usid_prefix(dst)
        p4rt.insert(
            p4rt.table_entry(
                "usid_route", {"dst_addr": (int(prefix.network_address), 48)}, "set_next_hop",
                port=port_h2, dmac=dmac,
            )
        )  # fmt: skip

        def frame_of(payload: bytes) -> bytes:
            return bytes(
                Ether(src=h1.intf().MAC(), dst="02:00:00:00:00:fe")
                / IPv6(src="fcbb:bb00:c000::1", dst=str(carrier([own, dst])), nh=41)
                / IPv6(src="fcbb:bb00:c000::1", dst="fcbb:bb00:c001::1", nh=17)
                / UDP(sport=7, dport=4791)
                / Raw(payload)
            )

        frame = frame_of(b"pb-mininet-node")
        h1.cmd(f"{sys.executable} -c '{SEND}' {h1.intf().name} {frame.hex()} 5")
        wait_for(lambda: p4rt.read_counter("port_tx", port_h2).packets == 5, 10, "5 frames out of port 2")
        # at least ours: the host's kernel may add IPv6 ND/MLD frames (dropped: no route)
        assert p4rt.read_counter("port_rx", port_h1).packets >= 5

        # A RoCE-sized frame (the fabric's MTU, 4 KiB of payload) passes too: the node set its
        # ports' MTU before BMv2 opened them (libpcap sizes its capture then; BMv2 drops any
        # frame captured short). The links were made at Mininet's default MTU of 1500.
        for h in (h1, h2):
            h.cmd(f"ip link set dev {h.intf().name} mtu {FABRIC_MTU}")
        big = frame_of(bytes(FABRIC_MTU + ETHER_HEADER - len(frame_of(b""))))
        assert len(big) == FABRIC_MTU + ETHER_HEADER
        before = p4rt.read_counter("port_tx", port_h2)
        big_hex = tmp_path / "big.hex"  # a shell line through Mininet's pty holds < 4096 characters
        big_hex.write_text(big.hex())
        h1.cmd(f"{sys.executable} -c '{SEND}' {h1.intf().name} $(cat {big_hex}) 3")
        wait_for(lambda: p4rt.read_counter("port_tx", port_h2).packets == 8, 10, "3 big frames out of port 2")
        assert p4rt.read_counter("port_tx", port_h2).bytes - before.bytes == 3 * len(big)

    sw.set_queue_rate(port_h2, 1000)
    sw.set_queue_depth(port_h2, 32, priority=7)
    with pytest.raises(Bmv2Error):
        sw.set_queue_depth(port_h2, 32, priority=9)  # only 8 priority queues

    pcaps = sorted(p.name for p in (tmp_path / "pcap" / "pbs1").iterdir())
    assert any("pbs1-eth2" in n and "out" in n for n in pcaps), pcaps
    assert sw.switch_log.exists()

    old_pid = sw.process.proc.pid  # type: ignore[union-attr]
    sw.restart_switch()  # a switch "reboot": back without a pipeline
    with P4RuntimeClient(sw.p4rt_address, sw.device_id) as p4rt:
        p4rt.arbitrate()
        with pytest.raises(grpc.RpcError) as err:
            p4rt.read_counter("port_tx", port_h2)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert not Path(f"/proc/{old_pid}").exists()
    assert sw.process is not None
    pid = sw.process.proc.pid  # type: ignore[union-attr]
    sw.stop_switch()
    assert not Path(f"/proc/{pid}").exists()
