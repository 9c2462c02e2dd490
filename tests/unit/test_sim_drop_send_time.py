"""A fault's drop log says when each dropped DATA packet was sent, and "lost once known" is
judged by it.

Why: ``bench.sim_knowledge`` counted a packet as sent onto a path its sender knew dead when the
link dropped it more than two hops after the verdict. Under receiver credits a packet sent 33 ns
before the verdict waited in its NIC's queue and reached the dead link 5.95 us later: counted,
though the sender chose the path before it knew."""

from __future__ import annotations

from bench.sim_knowledge import sent_once_known
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.fault_state import Drop
from mrc_host.sim.faults import parse_fault
from mrc_host.sim.network import START_NS, FlowSpec, Network
from mrc_host.sim.traffic import Job, point_to_point

QP, OTHER = 7, 9
VERDICT = START_NS + 209_704


def test_a_packet_sent_before_the_verdict_is_not_lost_once_known_however_late_it_drops() -> None:
    drops = [
        Drop(VERDICT + 5_950, QP, True, 0, 1, VERDICT - 33),  # queued at its NIC: chosen before
        Drop(VERDICT + 1_000, QP, True, 0, 1, VERDICT + 1),  # chosen after: counted
        Drop(VERDICT + 2_000, OTHER, True, 0, 1, VERDICT + 1),  # another connection's
        Drop(VERDICT + 3_000, QP, False, 0, 1, -1),  # a control packet
    ]
    assert sent_once_known(drops, QP, VERDICT) == [VERDICT + 1_000]
    assert sent_once_known(drops, OTHER, VERDICT) == [VERDICT + 2_000]
    assert sent_once_known(drops, QP, VERDICT + 1) == []


def test_the_fabric_logs_each_dropped_data_packets_send_time_and_none_for_control() -> None:
    shape = FabricShape(planes=2, t0=3, t1=4, hosts_per_t0=4, link_delay_ns=2_000)
    net = Network(shape, 1, payload="virtual")
    job = point_to_point(
        net, Job("incast", "incast", 0), FlowSpec("x", 0, 0), [(s, 0) for s in range(4, 8)], 256 << 10
    )
    net.add_fault(parse_fault("blackhole:p0-t0_0-t1_1@20us", 0))
    net.run(50_000_000)
    assert job.completion_ns is not None and all(c.data_ok for c in job.connections)
    drops = net.faults[0].drops
    data = [d for d in drops if d.data]
    assert data, "the black hole took no DATA: the test shape no longer loads that link"
    for d in data:
        assert START_NS <= d.sent_ns <= d.at_ns
    assert all(d.sent_ns == -1 for d in drops if not d.data)
