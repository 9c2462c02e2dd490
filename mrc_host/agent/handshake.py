"""How the agent's connections are opened (docs/agent.md, "The handshake"), and what it
remembers to open them: the cookie secret, the admission buckets, this agent's incarnation
and its peers', and the cookies that opened our sending ends.

The data sender sends CONNECTs; the receiver keeps nothing for a CONNECT without a valid
cookie and answers RETRY with one (``cookies.py``, at a rate ``admission.py`` bounds per
queue pair); a CONNECT that echoes it creates the receiving end (its ring allocated when data
arrives), within a cap of half-open and of all connections per peer, and is answered ACCEPTED
with the rkey. A CONNECT with a new nonce while a connection exists makes a *pending*
connection that replaces the live one only when DATA with its rkey arrives (``Peers``' binding
promotes it), so a CONNECT cannot tear a working connection down -- unless it names a new
*incarnation* of the peer's agent (its nonce's top 32 bits, drawn at the agent's start; an
ACCEPTED names the answerer's the same way) and is proven (a valid cookie; an ACCEPTED echoes
our nonce): then the peer restarted, and every connection with its old incarnation goes at
once (their transfers start again on new connections). DATA for a queue pair that has no
connection here (this agent restarted) is answered RESET, echoing its rkey and PSN, so its
sender connects anew instead of waiting for timeouts.

The connections themselves are ``Peers``' (peers.py): this class asks it to add, drop and
transmit.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import TYPE_CHECKING, Final

from mrc_fabric.ev import EV
from mrc_host.core import Mode
from mrc_host.core.psn import psn_of
from mrc_host.wire.messages import Connect, ConnectAck, ConnectStatus, DataPacket

from .admission import reset_buckets, retry_buckets
from .connection import HandshakeError, RecvConnection, SendConnection, control_meta
from .cookies import COOKIE_EPOCH_NS, CookieJar
from .paths import ROLE_RECEIVER, ROLE_SENDER, PeerPaths, QpId

if TYPE_CHECKING:
    from .peers import Peers

log = logging.getLogger("mrc.agent")

CONNECT_INTERVAL_NS: Final = 200_000_000  # a CONNECT is repeated this often until answered
MAX_HALF_OPEN_PER_PEER: Final = 3  # receiving ends a peer opened that no DATA has proven yet
MAX_CONNECTIONS_PER_PEER: Final = 6  # receiving ends per peer, live and pending (3 modes x 2)
MAX_OFFER_TRIES: Final = 2  # offered cookies tried per round of CONNECTs (connection.next_offer)


class Handshakes:
    """The handshakes of one agent's connections, both ends."""

    def __init__(self, peers: Peers, rng: random.Random, seeded: bool) -> None:
        self.peers = peers
        self.paths = peers.paths
        self.rng = rng
        self.cookies = CookieJar(rng.randbytes(32) if seeded else None)
        self.counts: Counter[str] = Counter()  # what happened, by name (``mrc stats``)
        self._retries = retry_buckets()  # RETRYs per claimed queue pair, and in all
        self._resets = reset_buckets()
        self.incarnation = rng.getrandbits(32) or 1  # the top half of every nonce we send
        self.peer_incarnation: dict[int, int] = {}  # peer index -> its agent's, from proven CONNECTs
        self.known_cookies: dict[int, tuple[int, int]] = {}  # our QP -> (a cookie that opened it, when)

    # ---- the receiving end ------------------------------------------------------------------
    def on_connect(self, msg: Connect, now: int) -> None:
        """A peer opens a queue pair to us: RETRY without a valid cookie, else the receiving end."""
        peers = self.peers
        qp = QpId.decode(msg.qp)
        if qp is None or qp.role != ROLE_RECEIVER or qp.dst != self.paths.index:
            peers.refused["unknown_qp"] += 1
            return
        name = self.paths.peer_name_of_index(qp.src)
        dest = self.paths.by_address.get(msg.meta.src)
        if name is None or dest is None or dest.name != name:
            peers.refused["wrong_source"] += 1
            return
        ev = msg.meta.ev
        for known in (peers.conns.get(qp.value), peers.pending.get(qp.value)):
            if isinstance(known, RecvConnection) and known.answers(msg):
                self.counts["connect_repeated"] += 1  # our answer was lost, or crossed it
                peers.transmit(known, known.connect_ack(ev, self.incarnation))
                return
        if not self.cookies.check(msg.cookie, now, msg.qp):
            # stateless: nothing is kept, the answer goes to the address the CONNECT claims, on
            # a path we draw (a forger's EVs could all lead into a dead link)
            if msg.cookie:
                peers.refused["bad_cookie"] += 1
            if not self._retries.take(msg.qp, now):
                peers.refused["retry_rate"] += 1
                return
            self.counts["retry_sent"] += 1
            peer = self.paths.peer(name, qp.mode)
            retry = ConnectAck(qp.peer.value, msg.initial_psn, msg.nonce, 0, ConnectStatus.RETRY,
                               control_meta(self.any_ev(peer)), self.cookies.mint(now, msg.qp))  # fmt: skip
            peers.send_to(peer, retry)
            return
        self.incarnation_seen(qp.src, msg.nonce >> 32, name, now)  # the cookie proves it is the peer's
        cap = self._over_cap(qp)
        if cap:
            peers.refused[cap] += 1
            return
        peer = self.paths.peer(name, qp.mode)
        conn = RecvConnection(
            qp, peer, peers.transport(qp.mode, msg.initial_psn), peers.conn_rng(), nonce=msg.nonce
        )
        if qp.value in peers.conns:
            # a live connection is replaced only once DATA proves the peer got our answer
            peers.pending[qp.value] = conn
            self.counts["connect_pending"] += 1
        else:
            peers.add(conn, now)
            self.counts["connect_accepted"] += 1
        peers.transmit(conn, conn.connect_ack(ev, self.incarnation))

    def any_ev(self, peer: PeerPaths) -> int:
        space = peer.path_space
        return EV(self.rng.randrange(space.planes), self.rng.randrange(space.t1_count),
                  self.rng.getrandbits(18)).value  # fmt: skip

    def incarnation_seen(self, index: int, incarnation: int, name: str, now: int) -> None:
        """A proven handshake names the incarnation of peer ``index``'s agent (a cookie-checked
        CONNECT, or an ACCEPTED that echoes our nonce). A new one means the peer restarted:
        every connection with an older incarnation goes now (sending ends fail over to new
        connections, ``Peers.drop``; one not yet established stays: whoever answers it is
        current)."""
        known = self.peer_incarnation.get(index)
        self.peer_incarnation[index] = incarnation
        if known is None or known == incarnation:
            return
        self.counts["peer_restarted"] += 1
        log.info("peer %s restarted: its old connections here are dropped", name)
        peers = self.peers
        why = f"peer {name} restarted (a new incarnation of its agent answered)"
        for p in list(peers.pending.values()):
            if p.qp.src == index and p.nonce >> 32 != incarnation:
                peers.forget(p, why)
        for c in list(peers.conns.values()):
            if c.peer.index != index:
                continue
            if isinstance(c, SendConnection):
                if c.established and c.peer_incarnation != incarnation:
                    peers.drop(c, why, now)
            elif c.nonce >> 32 != incarnation:
                peers.forget(c, why)

    def reset(self, msg: DataPacket, now: int) -> None:
        """DATA for a queue pair with no connection here, from the address of the peer its QP
        names: a RESET echoing its PSN and rkey (this agent restarted; the sender's connection
        is to our predecessor), within RESET_RATE_PER_S per queue pair."""
        qp = QpId.decode(msg.qp)
        if qp is None or qp.role != ROLE_RECEIVER or qp.dst != self.paths.index:
            return
        name = self.paths.peer_name_of_index(qp.src)
        dest = self.paths.by_address.get(msg.meta.src)
        if name is None or dest is None or dest.name != name or not self._resets.take(msg.qp, now):
            return
        self.counts["reset_sent"] += 1
        peer = self.paths.peer(name, qp.mode)
        ack = ConnectAck(qp.peer.value, psn_of(msg.psn), 0, msg.rkey, ConnectStatus.RESET,
                         control_meta(self.any_ev(peer)))  # fmt: skip
        self.peers.send_to(peer, ack)

    def _over_cap(self, qp: QpId) -> str:
        """Why a new receiving end for ``qp`` would exceed the caps of its peer ("" if not);
        a pending connection the new one replaces does not count."""
        peers = self.peers
        ends = [c for c in peers.conns.values() if isinstance(c, RecvConnection) and c.qp.src == qp.src]
        ends += [c for q, c in peers.pending.items() if q != qp.value and c.qp.src == qp.src]
        if sum(1 for c in ends if not c.data_seen) >= MAX_HALF_OPEN_PER_PEER:
            return "half_open_cap"
        if len(ends) >= MAX_CONNECTIONS_PER_PEER:
            return "connection_cap"
        return ""

    # ---- the sending end ----------------------------------------------------------------------
    def on_connect_ack(self, msg: ConnectAck, now: int) -> None:
        peers = self.peers
        conn = peers.conns.get(msg.qp)
        if not isinstance(conn, SendConnection):
            peers.refused["no_connection"] += 1
            return
        if not conn.from_peer(msg.meta.src):
            peers.refused["wrong_source"] += 1
            return
        try:
            outcome = conn.on_connect_ack(msg)
        except HandshakeError as exc:
            peers.refused[exc.reason] += 1
            return
        if outcome == "retry":  # the cookie proves we receive at our address: ask again now
            self.counts["retry_received"] += 1
            self.send_connect(conn, now)
        elif outcome == "offered":  # a RETRY to a CONNECT forged in our name: its cookie may do
            self.counts["cookie_offered"] += 1
            self._try_offer(conn)
        elif outcome == "reset":
            self.counts["reset_received"] += 1
            peers.drop(conn, f"peer {conn.peer.name} restarted: it holds no connection for our writes", now)
        elif outcome == "refused":
            peers.drop(conn, f"peer {conn.peer.name} refused the connection ({conn.refused})", now)
        elif outcome == "repeated":
            self.counts["connect_ack_repeated"] += 1
        else:
            self.counts["connected"] += 1
            if conn.cookie or conn.last_offer:
                self.known_cookies[conn.qp.value] = (conn.cookie or conn.last_offer, now)
            self.incarnation_seen(conn.peer.index, conn.peer_incarnation, conn.peer.name, now)
            log.info("send %s (%s): connected, initial psn %d, %.1f ms", conn.peer.name, conn.qp.mode,
                     conn.initial_psn, (now - conn.first_connect_ns) / 1e6)  # fmt: skip
            if peers.events is not None:
                peers.events.on_ready(conn, now)

    def open(self, pp: PeerPaths, mode: Mode, now: int) -> SendConnection:
        """A new sending end to ``pp``, whose handshake starts now."""
        peers = self.peers
        qp = QpId(ROLE_SENDER, mode, self.paths.index, pp.index)
        isn = self.rng.getrandbits(24)
        nonce = (self.incarnation << 32) | self.rng.getrandbits(32)
        new = SendConnection(qp, pp, peers.transport(mode, isn), peers.conn_rng(), nonce)
        cookie, when = self.known_cookies.get(qp.value, (0, 0))
        if cookie and now - when < COOKIE_EPOCH_NS:  # still good: no RETRY round trip
            new.cookie = cookie
        peers.add(new, now)
        self.send_connect(new, now)
        return new

    def send_connect(self, conn: SendConnection, now: int) -> None:
        for msg in conn.connect_messages(now, self.rng):
            self.peers.transmit(conn, msg)
        self.counts["connects_sent"] += 1
        self._try_offer(conn)

    def _try_offer(self, conn: SendConnection) -> None:
        """One CONNECT with the most offered untried cookie, MAX_OFFER_TRIES per round at most."""
        if conn.established or conn.offer_tries >= MAX_OFFER_TRIES:
            return
        cookie = conn.next_offer()
        if cookie:
            self.counts["offer_tried"] += 1
            self.peers.transmit(conn, conn.connect(self.any_ev(conn.peer), cookie))

    def tick(self, now: int) -> None:
        """Repeat unanswered CONNECTs; give up on handshakes older than the connect timeout."""
        peers = self.peers
        timeout_s = peers.opts.connect_timeout_s
        for conn in [c for c in peers.send_connections() if not c.established]:
            if now - conn.first_connect_ns >= timeout_s * 1e9:
                why = (
                    f"peer {conn.peer.name} did not answer the handshake: {conn.connects_sent} "
                    f"CONNECTs in {timeout_s:g} s (no agent there, or no path)"
                )
                peers.drop(conn, why, now)
            elif now - conn.last_connect_ns >= CONNECT_INTERVAL_NS:
                self.send_connect(conn, now)
