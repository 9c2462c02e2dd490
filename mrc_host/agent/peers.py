"""The agent's connections: which frame reaches which connection (the peer binding), how a
connection is opened (the handshake), and carrying out what a connection's core asks for.

Binding: a connection is bound to its peer. The QP a frame names picks the connection, the
inner source must be one of that peer's NIC addresses, DATA must carry the rkey its handshake
gave out, and a sending end takes nothing before it is established. Anything else is refused
and counted by reason (``refused``) before the core sees it.

Handshake (docs/agent.md, "The handshake"): the data sender sends CONNECTs; the receiver keeps
nothing for a CONNECT without a valid cookie and answers RETRY with one (``cookies.py``, at a
rate ``admission.py`` bounds per queue pair); a CONNECT that echoes it creates the receiving
end (its ring allocated when data arrives), within a cap of half-open and of all connections
per peer, and is answered ACCEPTED with the rkey. A CONNECT with a new nonce while a
connection exists makes a *pending* connection that replaces the live one only when DATA with
its rkey arrives, so a CONNECT cannot tear a working connection down -- unless it names a new
*incarnation* of the peer's agent (its nonce's top 32 bits, drawn at the agent's start; an
ACCEPTED names the answerer's the same way) and is proven (a valid cookie; an ACCEPTED echoes
our nonce): then the peer restarted, and every connection with its old incarnation goes at
once (their transfers start again on new connections). DATA for a queue pair that has no
connection here (this agent restarted) is answered RESET, echoing its rkey and PSN, so its
sender connects anew instead of waiting for timeouts.

The core's actions are carried out in ``run``: frames are encoded and sent on the port of
their EV's plane, timers remembered per connection, and completions handed to the transfer
logic (``ConnectionEvents``, implemented by ``transfer.Transfers``) after the frames went
out. Nothing here reads the clock: ``now_ns`` comes in.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Final, Protocol

from mrc_fabric.ev import EV
from mrc_host.core import (
    Action,
    ConnectionFailed,
    EvSet,
    EvState,
    EvStateChanged,
    MessageReceived,
    MessageSent,
    Mode,
    NicPathHealth,
    PathHealthChanged,
    SetTimer,
    Transmit,
    TransportConfig,
)
from mrc_host.core.ev_fields import EvDeny
from mrc_host.core.psn import psn_of
from mrc_host.ev_profile import ProfileError
from mrc_host.wire.messages import Connect, ConnectAck, ConnectStatus, DataPacket, Frame

from .admission import reset_buckets, retry_buckets
from .connection import Connection, HandshakeError, RecvConnection, SendConnection, control_meta
from .cookies import COOKIE_EPOCH_NS, CookieJar
from .options import AgentOptions
from .pacer import NIC_BACKLOG_PER_PLANE, NicPacer
from .paths import ROLE_RECEIVER, ROLE_SENDER, HostPaths, PeerPaths, QpId
from .ports import LoopCounters, Ports

log = logging.getLogger("mrc.agent")

CONNECT_INTERVAL_NS: Final = 200_000_000  # a CONNECT is repeated this often until answered
MAX_HALF_OPEN_PER_PEER: Final = 3  # receiving ends a peer opened that no DATA has proven yet
MAX_CONNECTIONS_PER_PEER: Final = 6  # receiving ends per peer, live and pending (3 modes x 2)
DENIED: Final = EvState.DENIED
MAX_OFFER_TRIES: Final = 2  # offered cookies tried per round of CONNECTs (connection.next_offer)

# the core's connection failures and a peer's refusals of a write, as the user reads them
FAILURE_TEXT: Final = {
    "RETRY_EXCEEDED": "peer {peer} stopped answering: {n} timeouts in a row without an acknowledgement",
    "NO_USABLE_PATH": "no usable path to {peer}: every EV is denied or its port is down",
    "BAD_RKEY": "peer {peer} refused a write: the R_Key is not one it handed out (it restarted?)",
    "BAD_ADDRESS": "peer {peer} refused a write: the address is outside its receive ring",
}


def failure_text(reason: str, peer: str, retry_cnt: int = 7) -> str:
    """A core failure reason (RETRY_EXCEEDED, a NACK reason ...) as a sentence."""
    text = FAILURE_TEXT.get(reason)
    if text is None:
        return f"peer {peer} refused a write ({reason})"
    return text.format(peer=peer, n=retry_cnt + 1)


class ConnectionEvents(Protocol):
    """What the transfer logic hears from the connections (``transfer.Transfers``)."""

    def on_sent(self, conn: SendConnection, msg_id: int, ok: bool, reason: str, now_ns: int) -> None: ...

    def on_received(self, conn: RecvConnection, msg_id: int, now_ns: int) -> None: ...

    def on_ready(self, conn: SendConnection, now_ns: int) -> None:
        """The connection takes chunks now: just established, or ring slots freed."""

    def on_failed(self, conn: SendConnection, error: str, now_ns: int) -> None: ...


class Peers:
    """Every connection of this agent, by local QP."""

    def __init__(
        self, paths: HostPaths, ports: Ports, opts: AgentOptions, mtu: int, counters: LoopCounters
    ) -> None:
        self.paths = paths
        self.ports = ports
        self.opts = opts
        self.mtu = mtu
        self.counters = counters
        # The run's seed and this host's name: every agent of a run gets the same --seed, and
        # one draw for all of them would give them the same EV sequences and transfer ids.
        self.rng = random.Random(None if opts.seed is None else f"{opts.seed}/{paths.cfg.host}")
        self.cookies = CookieJar(None if opts.seed is None else self.rng.randbytes(32))
        self.conns: dict[int, Connection] = {}  # local QP -> connection
        self.pending: dict[int, RecvConnection] = {}  # local QP -> a newer handshake's connection
        self.refused: Counter[str] = Counter()  # decodable frames refused by the peer binding
        self.handshake: Counter[str] = Counter()
        self.denied: set[int] = set()
        self.deny_rules: list[EvDeny] = []  # the operator's, over EV fields (mrc deny --field ...)
        self.events: ConnectionEvents | None = None
        self._retries = retry_buckets()  # RETRYs per claimed queue pair, and in all
        self._resets = reset_buckets()
        self.incarnation = self.rng.getrandbits(32) or 1  # the top half of every nonce we send
        self.peer_incarnation: dict[int, int] = {}  # peer index -> its agent's, from proven CONNECTs
        self.known_cookies: dict[int, tuple[int, int]] = {}  # our QP -> (a cookie that opened it, when)
        self.path_health = NicPathHealth()  # this NIC's path verdicts, shared by its connections
        self.pacer = _pacer(self)  # the NIC's departure clock (None: frames leave when handed over)

    # ---- frames in ------------------------------------------------------------------------
    def on_message(self, msg: Frame, now: int) -> None:
        """A decoded frame: the handshake's, or bound to its connection and given to its core."""
        if isinstance(msg, Connect):
            self._on_connect(msg, now)
            return
        if isinstance(msg, ConnectAck):
            self._on_connect_ack(msg, now)
            return
        conn = self.conns.get(msg.qp)
        if conn is None:
            self.refused["no_connection"] += 1  # e.g. DATA before (or without) a handshake
            if isinstance(msg, DataPacket):
                self._reset(msg, now)
            return
        if msg.meta.src not in conn.peer.addresses:
            self.refused["wrong_source"] += 1
            return
        if isinstance(conn, SendConnection):
            if not conn.established:
                self.refused["not_established"] += 1
                return
            if isinstance(msg, DataPacket):
                self.refused["data_to_sender"] += 1
                return
        elif isinstance(msg, DataPacket) and isinstance(conn, RecvConnection):
            if msg.rkey != conn.rkey:
                newer = self.pending.get(msg.qp)
                if newer is None or msg.rkey != newer.rkey:
                    self.refused["bad_rkey"] += 1
                    return
                conn = self._promote(newer)
            conn.data_seen = True
        self.run(conn, conn.endpoint.receive(msg, now), now)

    def _on_connect(self, msg: Connect, now: int) -> None:
        """A peer opens a queue pair to us: RETRY without a valid cookie, else the receiving end."""
        qp = QpId.decode(msg.qp)
        if qp is None or qp.role != ROLE_RECEIVER or qp.dst != self.paths.index:
            self.refused["unknown_qp"] += 1
            return
        name = self.paths.peer_name_of_index(qp.src)
        dest = self.paths.by_address.get(msg.meta.src)
        if name is None or dest is None or dest.name != name:
            self.refused["wrong_source"] += 1
            return
        ev = msg.meta.ev
        for known in (self.conns.get(qp.value), self.pending.get(qp.value)):
            if isinstance(known, RecvConnection) and known.answers(msg):
                self.handshake["connect_repeated"] += 1  # our answer was lost, or crossed it
                self.transmit(known, known.connect_ack(ev, self.incarnation))
                return
        if not self.cookies.check(msg.cookie, now, msg.qp):
            # stateless: nothing is kept, the answer goes to the address the CONNECT claims, on
            # a path we draw (a forger's EVs could all lead into a dead link)
            if msg.cookie:
                self.refused["bad_cookie"] += 1
            if not self._retries.take(msg.qp, now):
                self.refused["retry_rate"] += 1
                return
            self.handshake["retry_sent"] += 1
            peer = self.paths.peer(name, qp.mode)
            retry = ConnectAck(qp.peer.value, msg.initial_psn, msg.nonce, 0, ConnectStatus.RETRY,
                               control_meta(self._any_ev(peer)), self.cookies.mint(now, msg.qp))  # fmt: skip
            self._send_to(peer, retry)
            return
        self._incarnation(qp.src, msg.nonce >> 32, name, now)  # the cookie proves it is the peer's
        cap = self._over_cap(qp)
        if cap:
            self.refused[cap] += 1
            return
        peer = self.paths.peer(name, qp.mode)
        conn = RecvConnection(
            qp, peer, self._transport(qp.mode, msg.initial_psn), self._conn_rng(), nonce=msg.nonce
        )
        if qp.value in self.conns:
            # a live connection is replaced only once DATA proves the peer got our answer
            self.pending[qp.value] = conn
            self.handshake["connect_pending"] += 1
        else:
            self._add(conn, now)
            self.handshake["connect_accepted"] += 1
        self.transmit(conn, conn.connect_ack(ev, self.incarnation))

    def _any_ev(self, peer: PeerPaths) -> int:
        space = peer.path_space
        return EV(self.rng.randrange(space.planes), self.rng.randrange(space.t1_count),
                  self.rng.getrandbits(18)).value  # fmt: skip

    def _incarnation(self, index: int, incarnation: int, name: str, now: int) -> None:
        """A proven handshake names the incarnation of peer ``index``'s agent (a cookie-checked
        CONNECT, or an ACCEPTED that echoes our nonce). A new one means the peer restarted:
        every connection with an older incarnation goes now (sending ends fail over to new
        connections, ``drop``; one not yet established stays: whoever answers it is current)."""
        known = self.peer_incarnation.get(index)
        self.peer_incarnation[index] = incarnation
        if known is None or known == incarnation:
            return
        self.handshake["peer_restarted"] += 1
        log.info("peer %s restarted: its old connections here are dropped", name)
        for q, p in list(self.pending.items()):
            if p.qp.src == index and p.nonce >> 32 != incarnation:
                del self.pending[q]
        for c in list(self.conns.values()):
            if c.peer.index != index:
                continue
            if isinstance(c, SendConnection):
                if c.established and c.peer_incarnation != incarnation:
                    self.drop(c, f"peer {name} restarted (a new incarnation of its agent answered)", now)
            elif c.nonce >> 32 != incarnation:
                del self.conns[c.qp.value]

    def _reset(self, msg: DataPacket, now: int) -> None:
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
        self.handshake["reset_sent"] += 1
        peer = self.paths.peer(name, qp.mode)
        ack = ConnectAck(qp.peer.value, psn_of(msg.psn), 0, msg.rkey, ConnectStatus.RESET,
                         control_meta(self._any_ev(peer)))  # fmt: skip
        self._send_to(peer, ack)

    def _over_cap(self, qp: QpId) -> str:
        """Why a new receiving end for ``qp`` would exceed the caps of its peer ("" if not);
        a pending connection the new one replaces does not count."""
        ends = [c for c in self.conns.values() if isinstance(c, RecvConnection) and c.qp.src == qp.src]
        ends += [c for q, c in self.pending.items() if q != qp.value and c.qp.src == qp.src]
        if sum(1 for c in ends if not c.data_seen) >= MAX_HALF_OPEN_PER_PEER:
            return "half_open_cap"
        if len(ends) >= MAX_CONNECTIONS_PER_PEER:
            return "connection_cap"
        return ""

    def _promote(self, conn: RecvConnection) -> RecvConnection:
        del self.pending[conn.qp.value]
        self.handshake["connection_replaced"] += 1
        log.info("recv %s: a newer handshake replaces the connection", conn.peer.name)
        self.conns[conn.qp.value] = conn
        return conn

    def _on_connect_ack(self, msg: ConnectAck, now: int) -> None:
        conn = self.conns.get(msg.qp)
        if not isinstance(conn, SendConnection):
            self.refused["no_connection"] += 1
            return
        if not conn.from_peer(msg.meta.src):
            self.refused["wrong_source"] += 1
            return
        try:
            outcome = conn.on_connect_ack(msg)
        except HandshakeError as exc:
            self.refused[exc.reason] += 1
            return
        if outcome == "retry":  # the cookie proves we receive at our address: ask again now
            self.handshake["retry_received"] += 1
            self._send_connect(conn, now)
        elif outcome == "offered":  # a RETRY to a CONNECT forged in our name: its cookie may do
            self.handshake["cookie_offered"] += 1
            self._try_offer(conn)
        elif outcome == "reset":
            self.handshake["reset_received"] += 1
            self.drop(conn, f"peer {conn.peer.name} restarted: it holds no connection for our writes", now)
        elif outcome == "refused":
            self.drop(conn, f"peer {conn.peer.name} refused the connection ({conn.refused})", now)
        elif outcome == "repeated":
            self.handshake["connect_ack_repeated"] += 1
        else:
            self.handshake["connected"] += 1
            if conn.cookie or conn.last_offer:
                self.known_cookies[conn.qp.value] = (conn.cookie or conn.last_offer, now)
            self._incarnation(conn.peer.index, conn.peer_incarnation, conn.peer.name, now)
            log.info("send %s (%s): connected, initial psn %d, %.1f ms", conn.peer.name, conn.qp.mode,
                     conn.initial_psn, (now - conn.first_connect_ns) / 1e6)  # fmt: skip
            if self.events is not None:
                self.events.on_ready(conn, now)

    # ---- connections -----------------------------------------------------------------------
    def _transport(self, mode: Mode, initial_psn: int) -> TransportConfig:
        """The connection's parameters; the operator's deny rules join the profile's."""
        cfg = self.opts.transport(mode, initial_psn, self.mtu)
        if self.pacer is not None:  # (the pacer reports departures: the core waits for them)
            backlog = NIC_BACKLOG_PER_PLANE * len(self.ports.counters)
            cfg = replace(cfg, nic_departures=True, nic_backlog=backlog)
        if not self.deny_rules:
            return cfg
        return replace(
            cfg, ev_profile=replace(cfg.ev_profile, deny=cfg.ev_profile.deny + tuple(self.deny_rules))
        )

    def check_profile(self) -> None:
        """Refuse at start an EV profile some destination's fabric cannot honour (an explicit
        EV outside its path space, too narrow an entropy mask), not at its first CONNECT."""
        for name in sorted(self.paths.cfg.destinations):
            if name == self.paths.name:
                continue
            for mode in Mode:
                try:
                    EvSet(self._transport(mode, 0), self.paths.peer(name, mode).path_space, random.Random(0))
                except ValueError as exc:
                    raise ProfileError(f"EV profile for {name} ({mode.value}): {exc}") from None

    def _conn_rng(self) -> random.Random:
        return random.Random(self.rng.getrandbits(64))

    def _add(self, conn: Connection, now: int) -> None:
        """A new live connection: the operator's denies hold on it at once (the profile's are
        the core's: its EV set starts with them DENIED)."""
        self.conns[conn.qp.value] = conn
        conn.endpoint.share_path_health(self.path_health, conn.peer.downlink_group)
        for ev in self.denied:
            self.run(conn, conn.endpoint.deny(ev, now), now)
        log.info("connection %s %s (%s) qp %06x", conn.kind, conn.peer.name, conn.qp.mode, conn.qp.value)

    def send_connection(self, peer: str, mode: Mode, now: int) -> SendConnection:
        """Our sending end to ``peer``: an existing one, or a new one whose handshake starts now
        (KeyError names a destination the host's configuration does not list)."""
        pp = self.paths.peer(peer, mode)
        qp = QpId(ROLE_SENDER, mode, self.paths.index, pp.index)
        conn = self.conns.get(qp.value)
        if isinstance(conn, SendConnection):
            return conn
        isn = self.rng.getrandbits(24)
        nonce = (self.incarnation << 32) | self.rng.getrandbits(32)
        new = SendConnection(qp, pp, self._transport(mode, isn), self._conn_rng(), nonce)
        cookie, when = self.known_cookies.get(qp.value, (0, 0))
        if cookie and now - when < COOKIE_EPOCH_NS:  # still good: no RETRY round trip
            new.cookie = cookie
        self._add(new, now)
        self._send_connect(new, now)
        return new

    def send_connections(self) -> list[SendConnection]:
        return [c for c in self.conns.values() if isinstance(c, SendConnection)]

    def _send_connect(self, conn: SendConnection, now: int) -> None:
        for msg in conn.connect_messages(now, self.rng):
            self.transmit(conn, msg)
        self.handshake["connects_sent"] += 1
        self._try_offer(conn)

    def _try_offer(self, conn: SendConnection) -> None:
        """One CONNECT with the most offered untried cookie, MAX_OFFER_TRIES per round at most."""
        if conn.established or conn.offer_tries >= MAX_OFFER_TRIES:
            return
        cookie = conn.next_offer()
        if cookie:
            self.handshake["offer_tried"] += 1
            self.transmit(conn, conn.connect(self._any_ev(conn.peer), cookie))

    def drop(self, conn: SendConnection, error: str, now: int) -> None:
        """Give up on a sending end: the transfer logic hears why; a later send starts over."""
        if self.conns.get(conn.qp.value) is not conn:
            return
        log.warning("send %s (%s): %s", conn.peer.name, conn.qp.mode, error)
        del self.conns[conn.qp.value]
        if self.events is not None:
            self.events.on_failed(conn, error, now)

    def tick(self, now: int) -> None:
        """Repeat unanswered CONNECTs; give up on handshakes older than the connect timeout."""
        timeout_ns = self.opts.connect_timeout_s * 1e9
        for conn in [c for c in self.send_connections() if not c.established]:
            if now - conn.first_connect_ns >= timeout_ns:
                self.drop(conn, f"peer {conn.peer.name} did not answer the handshake: {conn.connects_sent} "
                                f"CONNECTs in {self.opts.connect_timeout_s:g} s (no agent there, or no path)",
                          now)  # fmt: skip
            elif now - conn.last_connect_ns >= CONNECT_INTERVAL_NS:
                self._send_connect(conn, now)

    # ---- the core's actions ----------------------------------------------------------------
    def run(self, conn: Connection, actions: list[Action], now: int) -> None:
        """Carry out a connection's core actions: frames and timers first, then completions
        (so the transfer logic's own posts come after, and their timer is the one kept)."""
        done: list[Action] = []
        for act in actions:
            if isinstance(act, Transmit):
                self.transmit(conn, act.msg, now)
            elif isinstance(act, SetTimer):
                conn.deadline = act.at_ns
            elif isinstance(act, PathHealthChanged):
                for other in list(self.conns.values()):  # the NIC's other connections read them
                    if other is not conn:
                        self.run(other, other.endpoint.on_path_health(now), now)
            elif isinstance(act, EvStateChanged):
                conn.note_ev_change(act, now)
                log.info("%s %s ev %08x %s -> %s (%s)", conn.kind, conn.peer.name, act.ev, act.old, act.new,
                         act.reason)  # fmt: skip
            else:
                done.append(act)
        events = self.events
        for act in done:
            if isinstance(act, MessageSent):
                if events is not None and isinstance(conn, SendConnection):
                    events.on_sent(conn, act.msg_id, act.ok, act.reason, now)
            elif isinstance(act, MessageReceived):
                if events is not None and isinstance(conn, RecvConnection):
                    events.on_received(conn, act.msg_id, now)
            elif isinstance(act, ConnectionFailed) and isinstance(conn, SendConnection):
                # the core gave up (retry_cnt timeouts in a row, or no EV may carry the work)
                cfg = conn.endpoint.cfg
                self.drop(conn, failure_text(act.reason, conn.peer.name, cfg.retry_cnt), now)
                return
        # the slots of abandoned WRITEs come free once their last PSN is acknowledged
        if events is not None and isinstance(conn, SendConnection) and conn.reserved and conn.release():
            events.on_ready(conn, now)

    def transmit(self, conn: Connection, msg: Any, now: int = -1) -> None:
        """Encode ``msg`` onto its plane's port (in place, into a packet ring's slot, where the
        port has rings); a core's frame (``now`` given) through the pacer, if there is one:
        DATA when its port is free, anything else at once."""
        try:
            plane, encoder, carrier, payload_sum = conn.route(msg)
            if self.pacer is None or now < 0:
                self.ports.send_msg(plane, encoder, msg, carrier, payload_sum)
            else:
                self.pacer.send(conn, plane, msg, (encoder, carrier, payload_sum), now)
        except (ValueError, TypeError, IndexError) as exc:
            self.counters.internal_errors += 1
            log.error("cannot encode %s: %s", type(msg).__name__, exc)

    def _send_to(self, peer: PeerPaths, msg: Any) -> None:
        """A frame to a peer no connection stands for (a RETRY)."""
        try:
            plane, encoder, carrier = peer.route(msg.meta.ev)
            frame = encoder.encode(msg, carrier)
        except (ValueError, TypeError, IndexError):
            self.refused["bad_ev"] += 1  # an EV on a plane this host has no port in
            return
        self.ports.send(plane, frame)

    def fire_timers(self, now: int) -> None:
        """Every connection timer that is due; a bug costs one event, never the agent."""
        for c in [c for c in self.conns.values() if c.deadline is not None and c.deadline <= now]:
            c.deadline = None
            try:
                self.run(c, c.endpoint.on_timer(now), now)
            except Exception:
                self.counters.internal_errors += 1
                log.exception("internal error in connection %s/%s", c.peer.name, c.kind)

    def next_timer(self) -> int | None:
        best: int | None = None
        for c in self.conns.values():
            d = c.deadline
            if d is not None and (best is None or d < best):
                best = d
        return best

    # ---- the operator -----------------------------------------------------------------------
    def deny(self, ev: int, now: int) -> int:
        """DENY ``ev`` on every connection, and on connections made later; how many now."""
        self.denied.add(ev)
        conns = list(self.conns.values())
        for conn in conns:
            self.run(conn, conn.endpoint.deny(ev, now), now)
        return len(conns)

    def allow(self, ev: int, now: int) -> int:
        """Lift a DENY; how many connections use ``ev`` (ValueError: not denied and unused)."""
        was_denied = ev in self.denied
        self.denied.discard(ev)
        n = 0
        for conn in list(self.conns.values()):
            try:
                acts = conn.endpoint.allow(ev, now)
            except KeyError:
                continue
            self.run(conn, acts, now)
            n += 1
        if not was_denied and n == 0:
            raise ValueError(f"ev: {ev:08x} is not denied and no connection uses it")
        return n

    def deny_rule(self, rule: EvDeny, now: int) -> tuple[int, int]:
        """DENY every EV ``rule`` matches, on every connection and on connections made later:
        (connections, EVs) denied now."""
        if rule not in self.deny_rules:
            self.deny_rules.append(rule)
        conns = evs = 0
        for conn in list(self.conns.values()):
            hit = [
                v for v, e in conn.endpoint.evset.entries.items() if e.state is not DENIED and rule.matches(v)
            ]
            for v in hit:
                self.run(conn, conn.endpoint.deny(v, now), now)
            conns, evs = conns + bool(hit), evs + len(hit)
        return conns, evs

    def allow_rule(self, rule: EvDeny, now: int) -> tuple[int, int]:
        """Lift a deny rule: its EVs that no other deny holds are GOOD again; (connections, EVs)
        (ValueError: no such rule)."""
        if rule not in self.deny_rules:
            raise ValueError("rule: not one of the agent's deny rules (mrc stats lists them)")
        self.deny_rules.remove(rule)
        held = [*self.opts.ev_profile.values.deny, *self.deny_rules]
        conns = evs = 0
        for conn in list(self.conns.values()):
            hit = [
                v
                for v, e in conn.endpoint.evset.entries.items()
                if e.state is DENIED and rule.matches(v) and v not in self.denied
                and not any(r.matches(v) for r in held)
            ]  # fmt: skip
            for v in hit:
                self.run(conn, conn.endpoint.allow(v, now), now)
            conns, evs = conns + bool(hit), evs + len(hit)
        return conns, evs

    def __iter__(self) -> Iterator[Connection]:
        return iter(list(self.conns.values()))


def _pacer(peers: Peers) -> NicPacer | None:
    """With the host link's rate, the pacer (pacer.py): DATA leaves each port at that rate and
    its core hears when; a core with room again hands over more."""
    if not peers.opts.nic_rate_mbit:
        return None

    def ready(conn: Connection, now: int) -> None:
        if peers.conns.get(conn.qp.value) is conn:
            peers.run(conn, conn.endpoint.nic_ready(now), now)

    return NicPacer(peers.ports, peers.opts.nic_rate_mbit, _departed, ready)


def _departed(conn: Connection, msg: DataPacket, now: int) -> bool:
    """The pacer wrote ``msg`` to its port: its core hears it left (True: room for more)."""
    return conn.endpoint.departed(msg.psn, msg.send_ts, now)


# ---- frames in, a batch at a time --------------------------------------------------------
def on_messages(peers: Peers, msgs: list[Frame], now: int) -> None:
    """Frames read together (a batch of the agent's loop), in order, as ``Peers.on_message``
    would take them one by one; a run of frames bound to one connection goes to its core in one
    ``Endpoint.receive_many`` (the core's end-of-event work once per run, not per frame).
    Anything but the plain case (a handshake, a refusal, a new rkey) takes ``on_message``."""
    conns = peers.conns
    conn: Connection | None = None
    run: list[Any] = []
    for msg in msgs:
        c = _bound(conns, msg)
        if run and c is not conn:
            if conn is not None:
                _deliver(peers, conn, run, now)
            run = []
            c = _bound(conns, msg)  # (that run's handling may have changed the connections)
        if c is None:
            peers.on_message(msg, now)
            continue
        conn = c
        if isinstance(c, RecvConnection) and isinstance(msg, DataPacket):
            c.data_seen = True
        run.append(msg)
    if run and conn is not None:
        _deliver(peers, conn, run, now)


def _bound(conns: dict[int, Connection], msg: Frame) -> Connection | None:
    """The connection ``Peers.on_message`` would hand ``msg`` to with nothing else to do (no
    handshake, no refusal, no pending connection promoted); None otherwise."""
    if isinstance(msg, (Connect, ConnectAck)):
        return None
    conn = conns.get(msg.qp)
    if conn is None or msg.meta.src not in conn.peer.addresses:
        return None
    if isinstance(conn, SendConnection):
        if not conn.established or isinstance(msg, DataPacket):
            return None
    elif isinstance(msg, DataPacket) and isinstance(conn, RecvConnection) and msg.rkey != conn.rkey:
        return None
    return conn


def _deliver(peers: Peers, conn: Connection, run: list[Any], now: int) -> None:
    """A run of frames bound to ``conn``, to its core: a completion or failure is carried out
    before the frames after it, which go through ``on_message`` if the connection is gone or
    replaced meanwhile."""
    i, n = 0, len(run)
    while i < n:
        if peers.conns.get(run[i].qp) is not conn:
            for k in range(i, n):
                peers.on_message(run[k], now)
            return
        i, actions = conn.endpoint.receive_many(run, i, now)
        peers.run(conn, actions, now)
