"""Where nothing is trimmed or dropped, nothing is resent: a clean permutation in mrc-sim."""

from __future__ import annotations

import random

import pytest

from bench.htsim_xcheck import XFabric
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.traffic import Job, permutation_pairs, point_to_point


@pytest.mark.parametrize("seed", [2, 3])
def test_a_clean_permutation_resends_nothing(seed: int) -> None:
    """32 hosts (4 T0 x 8, 8 T1, one plane, htsim_xcheck's queues), 256 KiB per pair, every
    flow starting at once: queues build on the colliding links and reorder packets, yet none
    is trimmed or dropped, so no packet may be declared lost (these seeds resent 1-2 before
    loss detection timed packets from when they left the NIC)."""
    shape = XFabric(t0=4, t1=8, hosts_per_t0=8).shape()
    net = Network(shape, seed)
    pairs = permutation_pairs(list(range(shape.hosts)), random.Random(seed))
    job = point_to_point(net, Job("perm", "clean", 0), FlowSpec("x", 0, 1), pairs, 256 << 10)
    net.run(50_000_000)
    assert job.completion_ns is not None and all(c.data_ok for c in job.connections)
    ports = net.fabric.ports.values()
    assert sum(p.trimmed for p in ports) == 0 and sum(p.drops_congestion for p in ports) == 0
    counters = [c.sender.counters for c in job.connections]
    assert sum(c.retransmissions for c in counters) == 0
    assert sum(c.spurious_losses + c.losses_gap + c.losses_rto + c.losses_tail for c in counters) == 0
