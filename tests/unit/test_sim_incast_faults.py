"""Failures found under congestion (issue 45 item 2): a dead path under an incast."""

from __future__ import annotations

import pytest

from bench.sim_transport import link_delay_for_rtt
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.faults import parse_fault
from mrc_host.sim.network import START_NS, FlowSpec, Network
from mrc_host.sim.traffic import Job, point_to_point


@pytest.mark.parametrize("seed", [1, 2])
def test_a_dead_path_under_an_incast_is_retired_at_its_first_losses(seed: int) -> None:
    """Defect: an 8->1 incast (21 us RTT) with a black hole on one of the receiver T0's
    uplinks lost 65-84 packets against a floor of 12-19 (3.5-5.4 x), 22-43 of them more than
    5 RTT after the fault, with up to 8 RTOs: while the receiver's last hop trims (or a path
    was marked lately) a gap loss retired nothing. A path that delivers nothing (no packet, no
    trimmed header) while others deliver packets sent a reorder window later is retired."""
    shape = FabricShape(planes=2, t0=3, t1=4, hosts_per_t0=4, link_delay_ns=link_delay_for_rtt(21.0))
    net = Network(shape, seed)
    pairs = [(s, 0) for s in range(4, 12)]
    job = point_to_point(net, Job("incast", "incast", 0), FlowSpec("x", 0, 0), pairs, 1 << 20)
    at = 150_000
    net.add_fault(parse_fault(f"blackhole:p0-t0_0-t1_1@{at}ns", 0))
    link = net.fabric.ports[("p0-t1_1", "p0-t0_0")]
    rtt = job.connections[0].base_rtt_ns
    seen: list[int] = []
    for t in (at - rtt, at):  # the floor: the data that entered the link in the RTT before
        net.loop.at(START_NS + t, lambda: seen.append(link.tx_data_bytes))
    net.run(100_000_000)
    assert job.completion_ns is not None and all(c.data_ok for c in job.connections)
    floor = (seen[1] - seen[0]) / 4096
    lost = net.faults[0].data_dropped
    senders = [c.sender.counters for c in job.connections]
    assert sum(c.rto_fired for c in senders) == 0
    assert lost <= 3 * floor + 1, (lost, floor)  # 1.3 x floor + 1 is the aim: see results.md
    for c in job.connections:  # every connection retired the dead path
        dead = [e for e in c.sender.evset.entries.values() if (e.plane, e.t1) == (0, 1)]
        assert all(e.state.value == "ASSUMED_BAD" for e in dead), [(e.state.value, e.active) for e in dead]


def _incast(seed: int, fault: str | None) -> tuple[int, int]:
    """(completion, RTOs) of an 8 -> 1 incast of 4 MiB each at 21 us, with ``fault``."""
    shape = FabricShape(planes=2, t0=3, t1=4, hosts_per_t0=4, link_delay_ns=link_delay_for_rtt(21.0))
    net = Network(shape, seed)
    pairs = [(s, 0) for s in range(4, 12)]
    job = point_to_point(net, Job("incast", "incast", 0), FlowSpec("x", 0, 0), pairs, 4 << 20)
    if fault:
        net.add_fault(parse_fault(fault, 0))
    net.run(100_000_000)
    assert job.completion_ns is not None and all(c.data_ok for c in job.connections)
    return job.completion_ns, sum(c.sender.counters.rto_fired for c in job.connections)


@pytest.mark.parametrize(("seed", "at_ns", "bound"), [(5, 40_000, 1.15), (4, 20_000, 1.15), (3, 20_000, 1.8)])
def test_a_path_that_dies_while_the_incast_trims_does_not_stall_a_sender(
    seed: int, at_ns: int, bound: float
) -> None:
    """Defect: the receiver T0's uplink black-holed 40 us into the incast, while trims put
    every path in SKIP: losses there were excused as congestion, the path sat out its penalty
    carrying nothing (so nothing showed it dead), and two senders' windows filled with its
    packets. Their RTOs freed one packet per expiry, doubling each time: 33 RTOs, the job
    3.0 x as long (at 20 us, seed 4, a connection ended in RETRY_EXCEEDED). An excused guess
    is judged again a round trip later (the path proved nothing, others delivered), and a
    retired path's overdue packets are resent at once; at an RTO, so are those on paths
    retired before it that RACK would call lost. (At 20 us, seed 3 was 3.0 x with the window
    full of resends sent after every delivered packet: 1.7 x now, the bound; see the
    transport doc.)"""
    clean, _ = _incast(seed, None)
    faulted, rtos = _incast(seed, f"blackhole:p0-t0_0-t1_1@{at_ns}ns")
    assert faulted <= bound * clean, (faulted, clean)
    assert rtos <= 16, rtos
