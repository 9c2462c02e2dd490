"""An endpoint's queues and echo books are made at first use, not with the endpoint.

Each connection has an endpoint at both ends and each holds a Sender and a Receiver; in a
one-way transfer the receiving end's Sender never queues a write, a resend or an echo, and the
sending end's Receiver never sends a SACK. Their empty deques (~0.6-0.8 kB each) and the 2 kB
echo bitmap were ~0.8 MB of the 128-host permutation's peak. Until first use they are shared
empty stand-ins; these tests check that the stand-ins are shared, that nothing is ever added to
them, and that the ends that do use them get their own."""

from __future__ import annotations

from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.scenario import SimConfig, Simulation


def _run(faults: list[str], seed: int = 1) -> Simulation:
    shape = FabricShape(planes=2, t1=4)
    cfg = SimConfig(shape=shape, size=1 << 20, max_evs=64, payload="virtual", faults=faults, seed=seed)
    sim = Simulation(cfg)
    assert sim.run()["completed"]
    return sim


def test_the_unused_ends_share_one_empty_queue_each_and_the_used_ends_own_theirs() -> None:
    a, b = _run([]), _run(["loss=0.02:all"], seed=3)
    for sim in (a, b):
        rx_only, tx_only = sim.conn.receiver, sim.conn.sender
        # the receiving end never wrote, resent or echoed; the sending end never sent a SACK
        assert not rx_only.sender.writes and not rx_only.sender.packets.retx
        assert rx_only.receiver.echoes._known is not tx_only.receiver.echoes._known
    # shared across endpoints of different runs (on main each endpoint made its own)
    x, y = a.conn.receiver.sender, b.conn.receiver.sender
    assert (
        x.writes.queue is y.writes.queue
        and x.packets.retx is y.packets.retx
        and x.echo._pending is y.echo._pending
    )
    assert a.conn.sender.receiver.echoes._known is b.conn.sender.receiver.echoes._known
    assert not any(a.conn.sender.receiver.echoes._known)  # only ever read: all zeros
    # the ends that used them own theirs: the writer's queue, the lossy sender's resends
    assert a.conn.sender.sender.writes.queue is not a.conn.receiver.sender.writes.queue
    assert b.conn.sender.counters.retransmissions > 0
    assert b.conn.sender.sender.packets.retx is not b.conn.receiver.sender.packets.retx
    assert a.conn.sender.sender.echo._pending is not a.conn.receiver.sender.echo._pending
    # and nothing was ever added to the shared ones (maxlen 0 would drop it: must stay unused;
    # the echo queue's is a list, which must stay empty)
    shared = a.conn.receiver.sender
    assert shared.writes.queue.maxlen == 0 and shared.packets.retx.maxlen == 0 and shared.echo._pending == []
