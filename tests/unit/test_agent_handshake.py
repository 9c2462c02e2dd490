"""The handshake costs its receiver nothing until the peer proves it receives at its address:
a CONNECT without a valid cookie gets a stateless RETRY (at most so many a second per claimed
peer); forged CONNECTs (any nonce, any claimed source) create no connection and allocate no
ring; a peer's half-open and total receiving ends are capped. Two agents over real frames
(agent_duo)."""

from __future__ import annotations

import random

from agent_duo import FakeClient, Net

from mrc_host.agent.connection import RecvConnection, control_meta
from mrc_host.agent.cookies import COOKIE_EPOCH_NS, CookieJar
from mrc_host.agent.paths import ROLE_RECEIVER, QpId
from mrc_host.agent.peers import MAX_HALF_OPEN_PER_PEER, RETRY_BURST, RETRY_RATE_PER_S
from mrc_host.core import Mode
from mrc_host.wire.codec import decode_frame
from mrc_host.wire.messages import Connect, ConnectAck, ConnectStatus


def _recv_ends(net: Net, host: str) -> list[RecvConnection]:
    peers = net[host].peers
    return [c for c in [*peers.conns.values(), *peers.pending.values()] if isinstance(c, RecvConnection)]


def _connect(net: Net, src: str, dst: str, mode: Mode, nonce: int, isn: int, cookie: int = 0) -> Connect:
    a, b = net[src].paths, net[dst].paths
    qp = QpId(ROLE_RECEIVER, mode, a.index, b.index).value
    meta = control_meta(0x0000_1234)
    meta.src = str(a.ports[0].address)
    return Connect(qp, isn, nonce, meta, cookie)


def test_the_first_connect_gets_a_retry_and_the_echo_opens_the_connection() -> None:
    net = Net()
    c = FakeClient()
    net["uch0"].send("uch3", 1000, net.now, client=c)
    net.step()  # the CONNECTs (no cookie) reach the receiver ...
    assert not _recv_ends(net, "uch3") and net["uch3"].peers.handshake["retry_sent"] == 2
    answers = [decode_frame(f) for _p, f in net["uch3"].out]
    assert all(isinstance(a, ConnectAck) and a.status is ConnectStatus.RETRY and a.cookie for a in answers)
    net.run(lambda: c.final is not None)
    assert c.final["ok"]  # type: ignore[index]
    hs_tx, hs_rx = net["uch0"].peers.handshake, net["uch3"].peers.handshake
    assert hs_tx["retry_received"] == 1 and hs_tx["connected"] == 1  # the second RETRY changed nothing
    assert hs_rx["connect_accepted"] == 1 and len(_recv_ends(net, "uch3")) == 1


def test_forged_connects_create_nothing_and_cost_one_retry_each() -> None:
    net = Net(("uch0", "uch1", "uch3"))
    victim = net["uch3"]
    rng = random.Random(5)
    ms = 1_000_000
    for i in range(3000):  # 1,000 a second "from" uch0, any nonce, any mode, for 3 s
        msg = _connect(net, "uch0", "uch3", rng.choice(list(Mode)), rng.getrandbits(64), rng.getrandbits(24))
        victim.peers.on_message(msg, net.now + i * ms)
    assert not _recv_ends(net, "uch3") and not victim.peers.pending
    # at most the burst plus RETRY_RATE_PER_S answers a second go back (to the real uch0)
    sent = victim.peers.handshake["retry_sent"]
    assert sent == len(victim.out) and RETRY_BURST <= sent <= RETRY_BURST + 3 * RETRY_RATE_PER_S + 1
    assert victim.peers.refused["retry_rate"] == 3000 - sent
    net.now += 3000 * ms
    # a guessed cookie is refused, and answered like no cookie at all (tokens allowing)
    net.now += 10 * 10**9
    victim.peers.on_message(_connect(net, "uch0", "uch3", Mode.MRC, 7, 7, cookie=0xDEADBEEF), net.now)
    assert victim.peers.refused["bad_cookie"] == 1 and not _recv_ends(net, "uch3")
    assert victim.peers.handshake["retry_sent"] == sent + 1
    # the real uch0 gets the RETRYs it never asked for: refused, nothing changes there either
    net.step()
    assert net["uch0"].peers.refused["no_connection"] == sent + 1 and not net["uch0"].peers.conns
    # and a real transfer afterwards works as ever
    c = FakeClient()
    net["uch0"].send("uch3", 5000, net.now, client=c)
    net.run(lambda: c.final is not None)
    assert c.final["ok"]  # type: ignore[index]


def test_a_cookie_is_good_for_one_connect_and_a_while() -> None:
    jar = CookieJar(b"k" * 32)
    now = 10 * COOKIE_EPOCH_NS + 5
    c = jar.mint(now, 3, 100, 42)
    assert c and jar.check(c, now, 3, 100, 42)
    assert jar.check(c, now + COOKIE_EPOCH_NS, 3, 100, 42)  # the next epoch too
    assert not jar.check(c, now + 2 * COOKIE_EPOCH_NS, 3, 100, 42)  # then it expires
    for other in ((4, 100, 42), (3, 101, 42), (3, 100, 43)):
        assert not jar.check(c, now, *other)
    assert not CookieJar(b"j" * 32).check(c, now, 3, 100, 42)  # another agent's secret
    assert not jar.check(0, now, 3, 100, 42)


def test_half_open_and_total_receiving_ends_are_capped_per_peer() -> None:
    """A peer that does get cookies (it receives at its address) still cannot open receiving
    ends without limit: those no DATA has proven are capped, and so are all of them."""
    net = Net()
    victim = net["uch3"].peers
    jar = victim.cookies
    made = 0
    for i in range(20):
        mode = list(Mode)[i % 3]
        msg = _connect(net, "uch0", "uch3", mode, 1000 + i, i)
        msg.cookie = jar.mint(net.now, msg.qp, msg.initial_psn, msg.nonce)
        victim.on_message(msg, net.now)
        made = len(_recv_ends(net, "uch3"))
        assert made <= MAX_HALF_OPEN_PER_PEER
    assert made == MAX_HALF_OPEN_PER_PEER and victim.refused["half_open_cap"] > 0
    # no ring memory is taken by any of them until data lands
    assert all(len(c.region.buffer) == 0 for c in _recv_ends(net, "uch3"))
    # a pending end that replaces another of the same QP does not count twice
    assert len(victim.pending) <= 3
