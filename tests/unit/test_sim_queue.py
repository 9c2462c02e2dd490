"""A port's packet queue: first in, first out, through drains and the list's compaction."""

from __future__ import annotations

import random

from mrc_host.sim.fabric import PacketQueue, SimPacket
from mrc_host.wire.messages import Sack


def packet(n: int) -> SimPacket:
    return SimPacket(Sack(1, 0, 0, 0, 0), 0, 1, 0, None, n, False)


def test_packets_leave_in_the_order_they_came_whatever_the_mix_of_pushes_and_takes() -> None:
    rng = random.Random(5)
    q = PacketQueue()
    model: list[SimPacket] = []
    n = 0
    for _ in range(20_000):
        if model and rng.random() < 0.5 - 0.3 * (len(model) < 2000 and rng.random() < 0.5):
            assert q.take() is model.pop(0)
        else:
            pkt = packet(n)
            n += 1
            q.push(pkt)
            model.append(pkt)
        assert len(q) == len(model) and q.waiting() == bool(model) == bool(q)
    assert list(q) == model
    while model:
        assert q.take() is model.pop(0)
    assert not q.waiting() and len(q) == 0 and list(q) == []
