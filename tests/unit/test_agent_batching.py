"""Frames handled a batch at a time (``peers.on_messages``, ``Endpoint.receive_many``) do
exactly what one ``on_message`` per frame does: the same frames leave, byte for byte, in the
same order, with losses, several transfers and connections, handshakes and a restart in the
batches -- two or three agents' logic over real frames on a simulated clock (agent_duo)."""

from __future__ import annotations

import random

import pytest
from agent_duo import FakeClient, Net
from test_agent_restart import restart

from mrc_host.agent.payload import CHUNK_DATA_BYTES
from mrc_host.core import Mode

S = 1_000_000_000


def _lossy(seed: int, rate: float) -> object:
    rng = random.Random(seed)
    return lambda _src, _dst, _frame: rng.random() < rate


def _run(batch: int, seed: int, loss: float) -> tuple[Net, list[FakeClient]]:
    net = Net(("uch0", "uch1", "uch3"), seed=seed, batch=batch)
    net.drop = _lossy(seed, loss)  # type: ignore[assignment]
    clients = []
    pairs = [("uch0", "uch3", Mode.MRC), ("uch3", "uch0", Mode.MRC), ("uch0", "uch1", Mode.SINGLE_PATH),
             ("uch0", "uch3", Mode.MRC), ("uch1", "uch3", Mode.ECMP)]  # fmt: skip
    for i, (src, dst, mode) in enumerate(pairs):
        c = FakeClient()
        net[src].send(dst, CHUNK_DATA_BYTES + 4096 * i + 7, net.now, mode=mode, client=c)
        clients.append(c)
    net.run(lambda: all(c.final is not None for c in clients), limit=3_000_000)
    return net, clients


@pytest.mark.parametrize(("seed", "loss"), [(1, 0.0), (2, 0.02), (3, 0.1)])
def test_batches_send_exactly_the_frames_one_by_one_sends(seed: int, loss: float) -> None:
    one, one_clients = _run(1, seed, loss)
    many, many_clients = _run(16, seed, loss)
    assert all(c.final is not None and c.final["ok"] for c in many_clients), [c.final for c in many_clients]
    assert [c.final for c in many_clients] == [c.final for c in one_clients]
    assert len(many.log) == len(one.log) > 1000
    assert many.log == one.log  # (time, sender, frame): every frame, byte for byte, in order
    for name in one.hosts:
        assert many[name].peers.refused == one[name].peers.refused
        ones = {c.qp.value: c.endpoint.counters.as_dict() for c in one[name].peers}
        assert {c.qp.value: c.endpoint.counters.as_dict() for c in many[name].peers} == ones


def test_a_batch_across_a_restart_and_forged_frames_matches_one_by_one() -> None:
    """A receiver that restarts mid-run: DATA for connections it no longer has, RESETs and new
    handshakes arrive inside batches; refusals and outcomes are those of frame-by-frame."""
    outcomes = []
    for batch in (1, 16):
        net = Net(seed=5, batch=batch)
        c = FakeClient()
        net["uch0"].send("uch3", 3 * CHUNK_DATA_BYTES, net.now, client=c)
        net.run(lambda: net["uch3"].transfers.inbound.in_progress() > 0)  # noqa: B023
        restart(net, "uch3", seed=9)
        net.run(lambda: c.final is not None)  # noqa: B023
        outcomes.append((c.final, net.log, dict(net["uch0"].peers.refused), dict(net["uch3"].peers.refused)))
    assert outcomes[0][0] is not None and outcomes[0][0]["ok"]
    assert outcomes[1] == outcomes[0]
