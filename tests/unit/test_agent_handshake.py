"""The handshake costs its receiver nothing until the peer proves it receives at its address:
a CONNECT without a valid cookie gets a stateless RETRY (at most so many a second per claimed
queue pair); forged CONNECTs (any nonce, any claimed source) create no connection and allocate
no ring; a peer's half-open and total receiving ends are capped; and a flood of CONNECTs forged
in a peer's name does not stop that peer connecting (issue 44: it did in 6 of 9 tries). Agents
over real frames (agent_duo)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from agent_duo import FakeClient, Net

from mrc_host.agent.admission import RETRY_BURST, RETRY_RATE_PER_S
from mrc_host.agent.connection import RecvConnection, control_meta
from mrc_host.agent.cookies import COOKIE_EPOCH_NS, CookieJar
from mrc_host.agent.handshake import MAX_HALF_OPEN_PER_PEER
from mrc_host.agent.paths import ROLE_RECEIVER, QpId
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
    assert not _recv_ends(net, "uch3") and net["uch3"].peers.handshakes.counts["retry_sent"] == 2
    answers = [decode_frame(f) for _p, f in net["uch3"].out]
    assert all(isinstance(a, ConnectAck) and a.status is ConnectStatus.RETRY and a.cookie for a in answers)
    net.run(lambda: c.final is not None)
    assert c.final["ok"]  # type: ignore[index]
    hs_tx, hs_rx = net["uch0"].peers.handshakes.counts, net["uch3"].peers.handshakes.counts
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
    # per queue pair (three modes), at most the burst plus RETRY_RATE_PER_S answers a second go
    # back (to the real uch0)
    sent = victim.peers.handshakes.counts["retry_sent"]
    assert sent == len(victim.out) and RETRY_BURST <= sent <= 3 * (RETRY_BURST + 3 * RETRY_RATE_PER_S + 1)
    assert victim.peers.refused["retry_rate"] == 3000 - sent
    net.now += 3000 * ms
    # a guessed cookie is refused, and answered like no cookie at all (tokens allowing)
    net.now += 10 * 10**9
    victim.peers.on_message(_connect(net, "uch0", "uch3", Mode.MRC, 7, 7, cookie=0xDEADBEEF), net.now)
    assert victim.peers.refused["bad_cookie"] == 1 and not _recv_ends(net, "uch3")
    assert victim.peers.handshakes.counts["retry_sent"] == sent + 1
    # the real uch0 gets the RETRYs it never asked for: refused, nothing changes there either
    net.step()
    assert net["uch0"].peers.refused["no_connection"] == sent + 1 and not net["uch0"].peers.conns
    # and a real transfer afterwards works as ever
    c = FakeClient()
    net["uch0"].send("uch3", 5000, net.now, client=c)
    net.run(lambda: c.final is not None)
    assert c.final["ok"]  # type: ignore[index]


def test_a_cookie_is_good_for_one_queue_pair_and_a_while() -> None:
    jar = CookieJar(b"k" * 32)
    now = 10 * COOKIE_EPOCH_NS + 5
    c = jar.mint(now, 3)
    assert c and jar.check(c, now, 3)
    assert jar.check(c, now + COOKIE_EPOCH_NS, 3)  # the next epoch too
    assert not jar.check(c, now + 2 * COOKIE_EPOCH_NS, 3)  # then it expires
    assert not jar.check(c, now, 4)  # another queue pair
    assert not CookieJar(b"j" * 32).check(c, now, 3)  # another agent's secret
    assert not jar.check(0, now, 3)


def test_half_open_and_total_receiving_ends_are_capped_per_peer() -> None:
    """A peer that does get cookies (it receives at its address) still cannot open receiving
    ends without limit: those no DATA has proven are capped, and so are all of them."""
    net = Net()
    victim = net["uch3"].peers
    jar = victim.handshakes.cookies
    made = 0
    for i in range(20):
        mode = list(Mode)[i % 3]
        msg = _connect(net, "uch0", "uch3", mode, 1000 + i, i)
        msg.cookie = jar.mint(net.now, msg.qp)
        victim.on_message(msg, net.now)
        made = len(_recv_ends(net, "uch3"))
        assert made <= MAX_HALF_OPEN_PER_PEER
    assert made == MAX_HALF_OPEN_PER_PEER and victim.refused["half_open_cap"] > 0
    # no ring memory is taken by any of them until data lands
    assert all(len(c.region.buffer) == 0 for c in _recv_ends(net, "uch3"))
    # a pending end that replaces another of the same QP does not count twice
    assert len(victim.pending) <= 3


def _flooded(net: Net, until: Callable[[], bool], rate: float, rng: random.Random, max_s: float = 20.0,
             claim: str = "uch0", victim: str = "uch3", modes: list[Mode] | None = None) -> None:  # fmt: skip
    """Run the net while an off-path host sends ``victim`` ``rate`` forged CONNECTs a second
    claiming ``claim`` (any nonce, any initial PSN; by default each of the claimed peer's modes)."""
    sent_until = net.now
    end = net.now + int(max_s * 1e9)
    while not until():
        assert net.now < end, "did not happen under the flood"
        due = int((net.now - sent_until) * rate / 1e9)
        for _ in range(due):
            mode = rng.choice(modes or list(Mode))
            msg = _connect(net, claim, victim, mode, rng.getrandbits(64), rng.getrandbits(24))
            net[victim].peers.on_message(msg, net.now)
        sent_until += int(due * 1e9 / rate)
        if not net.step():
            net.advance()


@pytest.mark.parametrize("rate", [2_000, 20_000])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_forged_connects_claiming_a_peer_do_not_stop_that_peer_connecting(rate: int, seed: int) -> None:
    """A third host floods uch3 with CONNECTs in uch0's name (uch0's own queue pairs) while
    uch0 opens its connection: the RETRYs the flood draws go to uch0 and carry the cookie of
    its queue pair, so uch0 connects within a round or two and its transfer completes."""
    net = Net(("uch0", "uch1", "uch3"), seed=seed)
    rng = random.Random(seed)
    _flooded(net, lambda: net.now > 1_500_000_000, rate, rng)  # the flood is on before uch0 starts
    start = net.now
    c = FakeClient()
    net["uch0"].send("uch3", 5000, net.now, client=c)
    _flooded(net, lambda: c.final is not None, rate, rng)
    assert c.final["ok"], c.final  # type: ignore[index]
    assert (net.now - start) / 1e9 < 1.0, "the handshake waited for rounds of CONNECTs"
    assert net["uch3"].peers.refused["retry_rate"] > 0  # the flood was rate-limited all along
    assert not any(isinstance(x, RecvConnection) and x.qp.src != 0 for x in net["uch3"].peers.conns.values())


def test_a_peer_flooded_with_bogus_retries_as_well_still_connects() -> None:
    """The forger also sends uch0 RETRYs in uch3's name with cookies of its own: uch0 tries
    each offered cookie once, the most offered first, and still gets through."""
    net = Net(("uch0", "uch1", "uch3"), seed=4)
    rng = random.Random(4)
    a = net["uch0"]
    qp = QpId(ROLE_RECEIVER, Mode.MRC, a.paths.index, net["uch3"].paths.index)
    c = FakeClient()
    a.send("uch3", 5000, net.now, client=c)
    conn = a.peers.send_connections()[0]
    src = str(net["uch3"].paths.ports[0].address)

    def poison() -> bool:
        for _ in range(20):
            meta = control_meta(0x1234)
            meta.src = src
            cookie, isn, nonce = rng.getrandbits(32) or 1, rng.getrandbits(24), rng.getrandbits(64)
            bogus = ConnectAck(qp.peer.value, isn, nonce, 0, ConnectStatus.RETRY, meta, cookie)
            a.peers.on_message(bogus, net.now)
        return c.final is not None

    _flooded(net, poison, 20_000, rng, modes=[Mode.MRC])
    assert c.final["ok"], c.final  # type: ignore[index]
    assert a.peers.handshakes.counts["offer_tried"] >= 1 and len(conn.offers) <= 16
