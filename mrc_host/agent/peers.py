"""The agent's connections: which frame reaches which connection (the peer binding), and
carrying out what a connection's core asks for. How a connection is opened is handshake.py's;
the operator's denies are denies.py's.

Binding: a connection is bound to its peer. The QP a frame names picks the connection, the
inner source must be one of that peer's NIC addresses, DATA must carry the rkey its handshake
gave out (or a pending connection's, which then replaces the live one), and a sending end
takes nothing before it is established. Anything else is refused and counted by reason
(``refused``) before the core sees it.

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

from mrc_host.core import (
    Action,
    ConnectionFailed,
    EvSet,
    EvStateChanged,
    MessageReceived,
    MessageSent,
    Mode,
    NicPathHealth,
    NicPlaneDelays,
    PathHealthChanged,
    SetTimer,
    Transmit,
    TransportConfig,
    nic_credits_for,
)
from mrc_host.core.config import reported_departures
from mrc_host.ev_profile import ProfileError
from mrc_host.wire.messages import Connect, ConnectAck, DataPacket, Frame

from .connection import Connection, RecvConnection, SendConnection
from .denies import OperatorDenies
from .handshake import Handshakes
from .options import AgentOptions
from .pacer import NicPacer
from .paths import ROLE_SENDER, HostPaths, PeerPaths, QpId
from .ports import LoopCounters, Ports

log = logging.getLogger("mrc.agent")

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
        self.conns: dict[int, Connection] = {}  # local QP -> connection
        self.pending: dict[int, RecvConnection] = {}  # local QP -> a newer handshake's connection
        self.refused: Counter[str] = Counter()  # decodable frames refused by the peer binding
        self.events: ConnectionEvents | None = None
        self.handshakes = Handshakes(self, self.rng, opts.seed is not None)  # (draws the cookie secret)
        self.denies = OperatorDenies(self)
        self.path_health = NicPathHealth()  # this NIC's path verdicts, shared by its connections
        self.plane_delays = NicPlaneDelays(paths.cfg.planes)  # how slow its planes are, shared too
        # this NIC's receiver-credit line, at all its ports' rate (unknown: credits unpaced)
        self.credit_line = nic_credits_for(
            opts.transport(Mode.MRC, 0, mtu), paths.cfg.planes, opts.nic_rate_mbit / 1000
        )
        self.pacer = _pacer(self)  # the NIC's departure clock (None: frames leave when handed over)

    # ---- frames in ------------------------------------------------------------------------
    def on_message(self, msg: Frame, now: int) -> None:
        """A decoded frame: the handshake's, or bound to its connection and given to its core."""
        if isinstance(msg, Connect):
            self.handshakes.on_connect(msg, now)
            return
        if isinstance(msg, ConnectAck):
            self.handshakes.on_connect_ack(msg, now)
            return
        conn = self.conns.get(msg.qp)
        if conn is None:
            self.refused["no_connection"] += 1  # e.g. DATA before (or without) a handshake
            if isinstance(msg, DataPacket):
                self.handshakes.reset(msg, now)
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
                conn = self._promote(newer, now)
            conn.data_seen = True
        self.run(conn, conn.endpoint.receive(msg, now), now)

    def _promote(self, conn: RecvConnection, now: int) -> RecvConnection:
        """A newer handshake's connection takes its QP: it joins the NIC as any new one does
        (path health, credit line, the operator's denies)."""
        del self.pending[conn.qp.value]
        self.handshakes.counts["connection_replaced"] += 1
        log.info("recv %s: a newer handshake replaces the connection", conn.peer.name)
        self.add(conn, now)
        return conn

    # ---- connections -----------------------------------------------------------------------
    def transport(self, mode: Mode, initial_psn: int) -> TransportConfig:
        """The connection's parameters; the operator's deny rules join the profile's."""
        cfg = self.opts.transport(mode, initial_psn, self.mtu)
        if self.pacer is not None:  # (the pacer reports departures: the core waits for them)
            cfg = replace(cfg, **reported_departures(len(self.ports.counters)))  # type: ignore[arg-type]
        if not self.denies.rules:
            return cfg
        return replace(
            cfg, ev_profile=replace(cfg.ev_profile, deny=cfg.ev_profile.deny + tuple(self.denies.rules))
        )

    def check_profile(self) -> None:
        """Refuse at start an EV profile some destination's fabric cannot honour (an explicit
        EV outside its path space, too narrow an entropy mask), not at its first CONNECT."""
        for name in sorted(self.paths.cfg.destinations):
            if name == self.paths.name:
                continue
            for mode in Mode:
                try:
                    EvSet(self.transport(mode, 0), self.paths.peer(name, mode).path_space, random.Random(0))
                except ValueError as exc:
                    raise ProfileError(f"EV profile for {name} ({mode.value}): {exc}") from None

    def conn_rng(self) -> random.Random:
        return random.Random(self.rng.getrandbits(64))

    def add(self, conn: Connection, now: int) -> None:
        """A new live connection: the operator's denies hold on it at once (the profile's are
        the core's: its EV set starts with them DENIED)."""
        self.conns[conn.qp.value] = conn
        conn.endpoint.share_path_health(self.path_health, conn.peer.downlink_group)
        conn.endpoint.share_plane_delays(self.plane_delays)
        conn.endpoint.share_credit_line(self.credit_line)
        for ev in self.denies.evs:
            self.run(conn, conn.endpoint.deny(ev, now), now)
        log.info("connection %s %s (%s) qp %06x", conn.kind, conn.peer.name, conn.qp.mode, conn.qp.value)

    def send_connection(self, peer: str, mode: Mode, now: int) -> SendConnection:
        """Our sending end to ``peer``: an existing one, or a new one whose handshake starts now
        (KeyError names a destination the host's configuration does not list)."""
        pp = self.paths.peer(peer, mode)
        conn = self.conns.get(QpId(ROLE_SENDER, mode, self.paths.index, pp.index).value)
        if isinstance(conn, SendConnection):
            return conn
        return self.handshakes.open(pp, mode, now)

    def send_connections(self) -> list[SendConnection]:
        return [c for c in self.conns.values() if isinstance(c, SendConnection)]

    def drop(self, conn: SendConnection, error: str, now: int) -> None:
        """Give up on a sending end: the transfer logic hears why; a later send starts over."""
        if self.conns.get(conn.qp.value) is not conn:
            return
        log.warning("send %s (%s): %s", conn.peer.name, conn.qp.mode, error)
        del self.conns[conn.qp.value]
        if self.events is not None:
            self.events.on_failed(conn, error, now)

    def forget(self, conn: Connection, why: str) -> None:
        """A receiving end, or a newer handshake's, whose sender is gone: removed, and said."""
        q = conn.qp.value
        if self.conns.get(q) is conn:
            del self.conns[q]
        elif self.pending.get(q) is conn:
            del self.pending[q]
        else:
            return
        log.info("connection %s %s (%s) qp %06x gone: %s", conn.kind, conn.peer.name, conn.qp.mode, q, why)

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

    def send_to(self, peer: PeerPaths, msg: Any) -> None:
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
