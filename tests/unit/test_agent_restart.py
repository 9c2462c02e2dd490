"""A restarted agent's peers notice at once: the first transfer after either side restarts
runs at its normal speed (issue 44, item 4).

The defects: after the *sender* restarted, the receiver sent its receipt over its old
connection to the dead agent (10.1 s, then "no receipt from the receiver" although every byte
arrived); after the *receiver* restarted, the sender's DATA went to a connection nobody had
and the first 1 MiB took 7.7 s of timeouts. Now a CONNECT or ACCEPTED names the incarnation of
its agent, and a proven new one makes its peer drop every connection with the old one; DATA for
a queue pair nobody holds draws a RESET that echoes its rkey and PSN. Agents over real frames on
a simulated clock (agent_duo), so "at once" is measured, not slept.
"""

from __future__ import annotations

import dataclasses

import pytest
from agent_duo import FakeClient, Host, Net

from mrc_host.agent.connection import RecvConnection, SendConnection, control_meta
from mrc_host.agent.paths import ROLE_RECEIVER, QpId
from mrc_host.agent.payload import CHUNK_DATA_BYTES
from mrc_host.core import Mode
from mrc_host.wire.messages import Connect, ConnectAck, ConnectStatus

NORMAL_S = 0.5  # a 1 MiB transfer here takes a few ms of simulated time; the defects took 7-10 s


def restart(net: Net, name: str, seed: int) -> Host:
    """``name``'s agent is killed and started again: nothing known, new random draws."""
    old = net[name]
    net.hosts[name] = Host(old.paths, dataclasses.replace(old.peers.opts, seed=seed))
    net.by_address = {a: h for h in net.hosts.values() for a in (str(p.address) for p in h.paths.ports)}
    return net.hosts[name]


def transfer(net: Net, src: str, dst: str, size: int = 1 << 20) -> tuple[dict[str, object], float]:
    """A verified transfer's summary and its simulated duration (s)."""
    c = FakeClient()
    start = net.now
    net[src].send(dst, size, net.now, client=c)
    net.run(lambda: c.final is not None, max_s=60)
    return c.final, (net.now - start) / 1e9  # type: ignore[return-value]


def both_ways(net: Net) -> None:
    for src, dst in (("uch0", "uch3"), ("uch3", "uch0")):
        final, _s = transfer(net, src, dst, 3 * CHUNK_DATA_BYTES)
        assert final["ok"], final


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_first_transfer_after_the_sender_restarts_gets_its_receipt_at_once(seed: int) -> None:
    net = Net(seed=seed)
    both_ways(net)  # each side holds a connection to the other's agent
    restart(net, "uch0", seed + 100)
    final, took = transfer(net, "uch0", "uch3")
    assert final["ok"] and final["summary"]["verified"], final  # type: ignore[index]
    assert took < NORMAL_S, f"{took:.2f} s"
    assert net["uch3"].peers.handshakes.counts["peer_restarted"] == 1
    # and the other way round, at once too: uch3's connection to the dead agent is gone
    final, took = transfer(net, "uch3", "uch0")
    assert final["ok"] and took < NORMAL_S, (final, took)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_first_transfer_after_the_receiver_restarts_runs_at_once(seed: int) -> None:
    net = Net(seed=seed)
    both_ways(net)
    restart(net, "uch3", seed + 100)
    final, took = transfer(net, "uch0", "uch3")
    assert final["ok"] and final["summary"]["verified"], final  # type: ignore[index]
    assert took < NORMAL_S, f"{took:.2f} s"
    assert net["uch3"].peers.handshakes.counts["reset_sent"] >= 1
    assert net["uch0"].peers.handshakes.counts["reset_received"] == 1
    final, took = transfer(net, "uch3", "uch0")
    assert final["ok"] and took < NORMAL_S, (final, took)


def test_both_restart_and_every_mode_reconnects() -> None:
    net = Net()
    for mode in Mode:
        c = FakeClient()
        net["uch0"].send("uch3", 5000, net.now, mode=mode, client=c)
        net.run(lambda c=c: c.final is not None)
    restart(net, "uch0", 50)
    restart(net, "uch3", 51)
    both_ways(net)
    for mode in Mode:
        c = FakeClient()
        start = net.now
        net["uch0"].send("uch3", 5000, net.now, mode=mode, client=c)
        net.run(lambda c=c: c.final is not None)
        assert c.final["ok"] and (net.now - start) / 1e9 < NORMAL_S  # type: ignore[index]


def test_forged_resets_and_restart_claims_change_nothing() -> None:
    """A RESET needs the connection's rkey and a PSN it sent; a CONNECT naming a new incarnation
    needs a cookie: an off-path host has neither, and the connections stay."""
    net = Net()
    both_ways(net)
    a, b = net["uch0"], net["uch3"]
    tx = next(c for c in a.peers.conns.values() if isinstance(c, SendConnection))
    src = str(b.paths.ports[0].address)
    for rkey, psn in ((tx.rkey ^ 1, tx.endpoint.sender.snd_una), (tx.rkey, tx.initial_psn - 5 & 0xFFFFFF)):
        meta = control_meta(0x1234)
        meta.src = src
        a.peers.on_message(
            ConnectAck(tx.qp.value, psn & 0xFFFFFF, 0, rkey, ConnectStatus.RESET, meta), net.now
        )
    assert a.peers.refused["stale_handshake"] == 2 and a.peers.conns.get(tx.qp.value) is tx
    qp = QpId(ROLE_RECEIVER, Mode.MRC, a.paths.index, b.paths.index).value
    meta = control_meta(0x1234)
    meta.src = str(a.paths.ports[0].address)
    rx = b.peers.conns[qp]
    b.peers.on_message(Connect(qp, 7, (0xBAD << 32) | 7, meta, 0), net.now)  # a new "incarnation"
    assert b.peers.conns[qp] is rx and isinstance(rx, RecvConnection)
    assert b.peers.handshakes.counts["peer_restarted"] == 0
    both_ways(net)
