"""A fault-free all-to-all: no timeout, no resend that no trim explains.

Every host starts a write to every other host at once, so each NIC port carries several queue
pairs. Served first in first out, each connection's window left whole, one after another: every
host began with the same peer (an incast) and the last queue pairs' first packets waited several
windows at their own port, past the first timeout (23 timeouts and 730 resends on 8 hosts)."""

from __future__ import annotations

from mrc_host.sim.fabric import DATA_OVERHEAD, FabricShape, PacketQueue, SimPacket
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.traffic import Job, point_to_point
from mrc_host.wire.messages import DataPacket

PKT = 4096 + DATA_OVERHEAD


def test_a_fault_free_all_to_all_fires_no_timeout_and_resends_only_trimmed_packets() -> None:
    shape = FabricShape(
        planes=1, t0=2, t1=2, hosts_per_t0=4, link_delay_ns=1000,
        ecn_bytes=14 * PKT, trim_bytes=28 * PKT, buffer_bytes=200 * PKT,
    )  # fmt: skip
    net = Network(shape, 1, "virtual")
    pairs = [(a, b) for a in range(shape.hosts) for b in range(shape.hosts) if a != b]
    job = point_to_point(net, Job("a2a", "all-to-all", 0), FlowSpec("a2a", 0, 1), pairs, 128 << 10)
    net.run(10_000_000_000)
    assert job.done and all(c.data_ok for c in job.connections)
    counters = [c.sender.counters for c in job.connections]
    trims = sum(p.trimmed for p in net.fabric.ports.values())
    resent = sum(c.retransmissions for c in counters)
    assert sum(c.rto_fired for c in counters) == 0
    assert sum(c.spurious_losses for c in counters) == 0
    assert resent <= trims <= 0.02 * sum(c.data_packets_sent for c in counters)


def data(qp: int) -> SimPacket:
    msg = DataPacket(qp, 0, 0, 0, b"")
    return SimPacket(msg, 0, 1, 0, 0, PKT, True)


def test_a_nic_port_serves_its_queue_pairs_a_packet_each_in_turn() -> None:
    q = PacketQueue(per_qp=True)
    pkts = [data(1) for _ in range(3)] + [data(2) for _ in range(2)] + [data(3)]
    for p in pkts:
        q.push(p)
    assert len(q) == 6 and q.bytes_of(data(1), 0) == 3 * PKT and q.bytes_of(data(9), 0) == 0
    assert [q.take().msg.qp for _ in range(6)] == [1, 2, 3, 1, 2, 1]
    assert not q and not q.waiting() and q.bytes_of(data(1), 0) == 0
