"""The lossless (PFC) fabric: pause and resume at the thresholds, pauses spreading hop by hop."""

from __future__ import annotations

from mrc_host.core import Mode
from mrc_host.sim.fabric import FabricShape, SimPacket
from mrc_host.sim.faults import parse_fault
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.report import summarise_network
from mrc_host.sim.traffic import Job, point_to_point
from mrc_host.wire.messages import DataPacket, PathMeta

SIZE = 4096 + 150


def test_a_queue_pauses_its_feeder_past_xoff_and_resumes_it_at_xon() -> None:
    shape = FabricShape(
        planes=1, t0=2, t1=1, hosts_per_t0=1, pfc=True, pfc_xoff_bytes=5 * SIZE, pfc_xon_bytes=2 * SIZE
    )
    net = Network(shape, seed=1)
    fab, loop = net.fabric, net.loop
    out = fab.leaf_down[0][0]  # leaf 0 -> host 0: the congested egress
    feeder = fab.spine_down[0][0][0]  # spine -> leaf 0: the ingress those bytes came in through
    msg = DataPacket(1, 2, 3, 4, b"x" * 4096, meta=PathMeta())
    t0 = loop.now
    for _ in range(10):  # a burst: one goes on the wire, nine wait at the egress
        pkt = SimPacket(msg, 1, 0, 0, 0, SIZE, True)
        pkt.ingress = feeder
        fab.enqueue(out, pkt)
    assert feeder.pfc_in == 9 * SIZE and feeder.pfc_xoff_sent
    assert not feeder.paused  # the XOFF frame is still on the wire back to the spine
    loop.run(t0 + feeder.delay_ns)
    assert feeder.paused and feeder.pauses == 1
    drain = int(SIZE * out.ns_per_byte)
    # it stays paused until the egress has drained below XON (2 packets), then resumes
    loop.run(t0 + feeder.delay_ns + 5 * drain)
    assert feeder.paused and feeder.pfc_in > shape.pfc_xon_bytes
    loop.run(t0 + 10 * drain + 2 * feeder.delay_ns)
    assert not feeder.paused and feeder.pfc_in == 0 and not out.lo
    assert feeder.pause_ns >= 6 * drain  # the per-port pause-time counter
    assert feeder.pfc_overflow == 0


def test_a_paused_port_holds_data_but_sends_control_packets() -> None:
    shape = FabricShape(planes=1, t0=2, t1=1, hosts_per_t0=1, pfc=True)
    net = Network(shape, seed=1)
    fab = net.fabric
    port = fab.leaf_up[0][1][0]
    t0 = net.loop.now
    fab._set_pause(port, True)
    msg = DataPacket(1, 2, 3, 4, b"x" * 4096, meta=PathMeta())
    fab.enqueue(port, SimPacket(msg, 1, 0, 0, 0, SIZE, True))
    assert len(port.lo) == 1 and port.tx_packets == 0
    fab.enqueue(port, SimPacket(msg, 1, 0, 0, 0, 150, False))  # a header: its own priority
    assert port.tx_packets == 1 and len(port.lo) == 1
    net.loop.push(t0 + 1_000, port.pauser, False)  # the XON frame arrives
    net.loop.run(t0 + 10_000)
    assert port.tx_packets == 2 and not port.lo and fab.pause_ns(port) == 1_000


def incast(pfc: bool) -> tuple[Network, dict[str, object]]:
    """Hosts 1, 2, 3 (beside host 0) and 4 (across the spine) write to host 0.

    Only host 0's port is overloaded; the remote sender's path (leaf 1 -> spine -> leaf 0)
    is not, so any pause on it has spread back from the victim's port.
    """
    net = Network(
        FabricShape(
            planes=1, t0=2, t1=1, hosts_per_t0=4, pfc=pfc, pfc_xoff_bytes=32 << 10, pfc_xon_bytes=16 << 10
        ),
        seed=2,
    )
    spec = FlowSpec("x", 0, 0, mode=Mode.SINGLE_PATH, window_scale=4)
    job = point_to_point(net, Job("incast", "incast", 0), spec, [(s, 0) for s in (1, 2, 3, 4)], 1 << 20)
    net.run(200_000_000)
    return net, summarise_network(net, [job], "single-path")


def test_an_incast_pause_spreads_two_hops_back_without_loss() -> None:
    net, r = incast(pfc=True)
    assert r["completed"] and r["data_ok"]
    assert r["switch_trims"] == 0 and r["congestion_drops"] == 0
    fab = net.fabric
    pfc = r["pfc"]
    assert isinstance(pfc, dict) and pfc["headroom_drops"] == 0
    one_back = fab.spine_down[0][0][0]  # spine -> victim's leaf
    two_back = fab.leaf_up[0][1][0]  # senders' leaf -> spine
    assert fab.pause_ns(one_back) > 0 and fab.pause_ns(two_back) > 0
    assert fab.pause_ns(fab.nic_up[4][0]) > 0  # and on to the remote sender's NIC
    by_port = pfc["pause_us_by_port"]
    assert isinstance(by_port, dict) and by_port[two_back.name] > 0
    # the lossy fabric carries the same traffic with trimming and no pause at all
    _, lossy = incast(pfc=False)
    trims = lossy["switch_trims"]
    assert lossy["pfc"] is None and isinstance(trims, int) and trims > 0


def bystander(incast: bool) -> tuple[Network, Job]:
    """Host 4 writes 1 MiB to host 1 on a lossless fabric; with ``incast``, hosts 5, 6, 7 write
    to host 0 beside it, whose port a fault slows to 25 Gb/s. Every flow crosses the one
    spine -> leaf 0 link; the bystander's own port (to host 1) stays idle."""
    net = Network(FabricShape(planes=1, t0=2, t1=1, hosts_per_t0=4, pfc=True), seed=3)
    net.add_fault(parse_fault("rate=25:h0-p0", 0))
    cfg = {"cc_algorithm": "fixed"}  # no CC of its own: PFC is what holds a RoCE sender back
    spec = FlowSpec("x", 0, 0, mode=Mode.SINGLE_PATH, transport=cfg)
    if incast:
        point_to_point(net, Job("incast", "incast", 0), spec, [(s, 0) for s in (5, 6, 7)], 1 << 20)
    job = point_to_point(net, Job("bystander", "flow", 0), spec, [(4, 1)], 1 << 20)
    net.run(200_000_000)
    return net, job


def test_a_pause_stalls_every_flow_on_the_paused_link() -> None:
    """Head-of-line blocking: PFC pauses the shared link's whole data class, so the bystander,
    bound for an idle port, waits while the victim's port drains (and loses nothing)."""
    net, job = bystander(incast=True)
    _, alone = bystander(incast=False)
    took, alone_took = job.completion_ns, alone.completion_ns
    assert took is not None and alone_took is not None
    assert took > 3 * alone_took
    shared = net.fabric.spine_down[0][0][0]
    assert net.fabric.pause_ns(shared) > took // 2  # paused for most of the bystander's life
    assert job.connections[0].sender.counters.retransmissions == 0  # it only waited
