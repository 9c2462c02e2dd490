"""Receiver credits leave no standing queue at an incast's last hop.

Why: grants paced at the receiving port's rate can only keep a queue as it is; whatever DATA no
grant covered (a sender's speculation, resends) put there stood to the end of the transfer (37-53
packets on every seed of this shape), and a path dying under the incast then took a queue's worth
of packets."""

from __future__ import annotations

import pytest

from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import START_NS, FlowSpec, Network
from mrc_host.sim.traffic import Job, point_to_point

MTU = 4096
LINK_DELAY_NS = 2_000  # (a 21 us round trip across the spine)


def _last_hop_depths(seed: int) -> tuple[list[int], bool]:
    """8 -> 1, 1 MiB each, under nscc+rccc: the receiver's two last-hop queues (packets) every
    10 us from 150 us on (after the first round trips' speculation), and whether all arrived."""
    shape = FabricShape(planes=2, t0=3, t1=4, hosts_per_t0=4, link_delay_ns=LINK_DELAY_NS)
    net = Network(shape, seed)
    transport: dict[str, object] = {"cc_algorithm": "nscc+rccc"}
    job = point_to_point(
        net,
        Job("incast", "incast", 0),
        FlowSpec("x", 0, 0, transport=transport),
        [(s, 0) for s in range(4, 12)],
        1 << 20,
    )
    ports = [net.fabric.ports[(f"p{p}-t0_0", f"h0:p{p}")] for p in (0, 1)]
    depths: list[int] = []
    for t in range(150_000, 300_000, 10_000):
        net.loop.at(START_NS + t, lambda: depths.extend(p.queued // MTU for p in ports))
    net.run(50_000_000)
    return depths, job.completion_ns is not None and all(c.data_ok for c in job.connections)


@pytest.mark.parametrize("seed", [1, 2])
def test_an_incasts_last_hop_drains_under_receiver_credits(seed: int) -> None:
    depths, ok = _last_hop_depths(seed)
    assert ok
    assert max(depths) <= 4, depths  # (the trim threshold is 64 packets)
