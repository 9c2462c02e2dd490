"""The agent process: one selector loop that owns the clock and drives the connections.

``Agent.run`` waits on the NIC ports (``ports.Ports``), the control socket and its
clients (``control.ControlServer``) and a wake-up pipe for signals. Each turn it reads
frames, decodes them (``codec.decode_frame``, ICRC checked; refusals counted by reason),
binds each to its connection (the handshake, the peer's addresses, the rkey -- anything
else is refused and counted) and carries out the actions the core returns: ``Transmit`` is
encoded from per-plane templates and sent on the port of the EV's plane, ``SetTimer`` is
remembered, completions drive the transfers (``transfers.TransferBook``). Then it fires
every endpoint timer that is due (``time.monotonic_ns``), and every tick repeats
unanswered handshakes, ends transfers past their deadline or whose peer went silent, and
sends progress lines. SIGTERM/SIGINT end the loop; the nftables rules, the sockets and the
control socket file are removed on the way out.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import random
import selectors
import signal
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from mrc_fabric.frames import DEFAULT_PAYLOAD
from mrc_fabric.hostconfig import HostConfig
from mrc_host.core import (
    Action,
    ConnectionFailed,
    EvSet,
    EvStateChanged,
    MessageReceived,
    MessageSent,
    Mode,
    SetTimer,
    Transmit,
    TransportConfig,
)
from mrc_host.wire.codec import MalformedPacket, decode_frame
from mrc_host.wire.messages import Connect, ConnectAck, DataPacket

from . import protocol
from .connection import (
    Connection,
    HandshakeError,
    RecvConnection,
    SendConnection,
    Transfer,
)
from .control import ControlClient, ControlServer
from .ev_profile import AgentEvProfile, ProfileError
from .netio import KernelQuiet, interface_mtu
from .paths import ROLE_RECEIVER, ROLE_SENDER, HostPaths, QpId, payload_mtu
from .payload import ChunkFlag, ChunkKind
from .ports import Ports
from .transfers import TransferBook

log = logging.getLogger("mrc.agent")

TICK_S: Final = 0.1  # handshakes, deadlines and progress lines are looked at this often
DEFAULT_BASE_RTT_US: Final = 10_000  # Python agents on a shared CPU: see docs/agent.md, 'Timers'
DEFAULT_WINDOW: Final = 0  # 0: DEFAULT_WINDOW_PACKETS payloads (see _transport)
DEFAULT_WINDOW_PACKETS: Final = 64  # CC maximum in payloads: see docs/agent.md, "Timers and window"
DEFAULT_PSN_WINDOW: Final = 1 << 14  # PSNs a sender may have past its oldest unacknowledged one
DEFAULT_ACK_EVERY: Final = 8  # one SACK per this many in-order DATA packets (or the ACK delay)
INITIAL_RTO_NS: Final = 200_000_000
CONNECT_INTERVAL_NS: Final = 200_000_000  # a CONNECT is repeated this often until answered ...
DEFAULT_CONNECT_TIMEOUT_S: Final = 5.0  # ... for this long, then the peer is reported dead
DEFAULT_PEER_TIMEOUT_S: Final = 10.0  # no acknowledgement for this long: the peer is reported dead
DEFAULT_DEADLINE_S: Final = 600.0  # a transfer not finished by then ends with an error
# after a frame, poll the ports without sleeping this long (a sleeping receiver costs each
# frame sent to it a wake-up); off by default: it measured no faster (docs/agent.md, "Limits")
DEFAULT_BUSY_POLL_US: Final = 0


@dataclass
class AgentOptions:
    config: Path
    control: Path
    mtu: int | None = None  # DATA payload bytes; default: 4096, or the largest the NIC MTU allows
    base_rtt_us: int = DEFAULT_BASE_RTT_US
    window_bytes: int = DEFAULT_WINDOW
    psn_window: int = DEFAULT_PSN_WINDOW
    ack_every: int = DEFAULT_ACK_EVERY
    kernel_rules: bool = True
    seed: int | None = None
    verify_icrc: bool = True
    busy_poll_us: int = DEFAULT_BUSY_POLL_US
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    peer_timeout_s: float = DEFAULT_PEER_TIMEOUT_S
    deadline_s: float = DEFAULT_DEADLINE_S
    # which EVs connections draw and deny, and the CC (mrc_host/agent/ev_profile.py)
    ev_profile: AgentEvProfile = field(default_factory=AgentEvProfile)


class Agent:
    def __init__(self, opts: AgentOptions) -> None:
        self.opts = opts
        self.paths = HostPaths(HostConfig.load(opts.config))
        self.started = time.monotonic()
        self.rng = random.Random(opts.seed)
        self.ports = Ports([p.ifname for p in self.paths.ports])
        self.control = ControlServer(opts.control, self.command, self._count_internal_error)
        self.transfers = TransferBook()
        self.control.on_drop = self.transfers.forget_client
        self.malformed: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()  # decodable frames refused by the peer binding
        self.handshake: Counter[str] = Counter()
        self.pending: dict[int, RecvConnection] = {}  # local QP -> a newer handshake's connection
        self.internal_errors = 0
        self.conns: dict[int, Connection] = {}  # local QP -> connection
        self.denied: set[int] = set()
        self.quiet = KernelQuiet(self.paths.nic_prefixes())
        self.sel = selectors.DefaultSelector()
        self._stop = False
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self.mtu = self._choose_mtu(opts.mtu)
        if not 0 <= opts.busy_poll_us <= 100_000:
            raise ValueError(f"--busy-poll-us: {opts.busy_poll_us} is outside 0..100000")
        if not 1 <= opts.ack_every <= 64:
            raise ValueError(f"--ack-every: {opts.ack_every} is outside 1..64")
        if not 2 <= opts.psn_window < 1 << 23:
            raise ValueError(f"--psn-window: {opts.psn_window} is outside 2..{(1 << 23) - 1}")
        self._check_ev_profile()

    # ---- set-up and tear-down ----------------------------------------------------------------
    def _choose_mtu(self, wanted: int | None) -> int:
        limit = min(payload_mtu(interface_mtu(p.ifname)) for p in self.paths.ports)
        if wanted is None:
            return min(DEFAULT_PAYLOAD, limit)
        if not 256 <= wanted <= limit:
            raise ValueError(f"--mtu: {wanted} B of payload does not fit the NIC MTU (256..{limit})")
        return wanted

    def open(self) -> None:
        """Sockets, kernel rules, control socket. On failure everything opened is closed again."""
        self.paths.warm_up()
        try:
            self.ports.open(self.sel)
            if self.opts.kernel_rules:
                self.quiet.install()
            self.control.open(self.sel)
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self.sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        except BaseException:
            self.close()
            raise
        log.info(
            "agent %s up: ports %s, payload mtu %d, rules %s, control %s",
            self.paths.name,
            [p.ifname for p in self.paths.ports],
            self.mtu,
            self.quiet.prefixes if self.quiet.installed else "off",
            self.opts.control,
        )

    def close(self) -> None:
        self.control.close()
        self.ports.close()
        try:
            self.quiet.remove()
        except (RuntimeError, OSError) as exc:
            log.error("could not remove the nftables rules: %s", exc)
        for w in (self._wake_r, self._wake_w):
            if w is not None:
                w.close()
        self._wake_r = self._wake_w = None
        self.sel.close()

    def _count_internal_error(self) -> None:
        self.internal_errors += 1

    def stop(self) -> None:
        """Ask the loop to end (safe from a signal handler or another thread)."""
        self._stop = True
        if self._wake_w is not None:
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: object) -> None:
            log.info("signal %d: shutting down", signum)
            self.stop()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # ---- the loop ----------------------------------------------------------------------------
    def run(self) -> None:
        last_tick = 0
        spin_ns = self.opts.busy_poll_us * 1000
        spin_until = 0  # poll without sleeping until then: frames are arriving
        while not self._stop:
            now = time.monotonic_ns()
            timeout = TICK_S
            for c in self.conns.values():
                if c.deadline is not None:
                    timeout = min(timeout, max(0.0, (c.deadline - now) / 1e9))
            if now < spin_until:
                timeout = 0.0
            ready_ports: list[int] = []
            for key, _mask in self.sel.select(timeout):
                kind, arg = key.data
                if kind == "port":
                    ready_ports.append(arg)
                elif kind == "listen":
                    self.control.accept()
                elif kind == "client":
                    self.control.io(arg, _mask)
                else:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)  # type: ignore[union-attr]
            if ready_ports:
                self.ports.read(ready_ports, self._on_frame_guarded)
                if spin_ns:
                    spin_until = time.monotonic_ns() + spin_ns
            now = time.monotonic_ns()
            self._fire_timers(now)
            if now - last_tick >= TICK_S * 1e9:
                last_tick = now
                self._tick(now)

    def _fire_timers(self, now: int) -> None:
        for c in list(self.conns.values()):
            if c.deadline is not None and c.deadline <= now:
                c.deadline = None
                self._guarded(c, lambda c=c: c.endpoint.on_timer(now), now)

    def _guarded(self, conn: Connection, fn: Any, now: int) -> None:
        try:
            self._apply(conn, fn(), now)
        except Exception:  # a bug must cost one event, never the agent
            self.internal_errors += 1
            log.exception("internal error in connection %s/%s", conn.peer.name, conn.kind)

    # ---- frames in -----------------------------------------------------------------------------
    def _on_frame_guarded(self, frame: bytes, plane: int) -> None:
        try:
            self._on_frame(frame, time.monotonic_ns())
        except Exception:  # a bug must cost one frame, never the agent
            self.internal_errors += 1
            self.malformed["internal"] += 1
            log.exception("internal error on a frame from %s", self.ports.counters[plane].ifname)

    def _on_frame(self, frame: bytes, now: int) -> None:
        """One frame: decode (ICRC checked), then the peer binding, then the connection's core.

        A connection is bound to its peer: the QP names it, the inner source must be one of
        the peer's NIC addresses, and DATA must carry the rkey its handshake gave. Anything
        else is refused and counted by reason, before the core sees it.
        """
        try:
            msg = decode_frame(frame, verify_icrc=self.opts.verify_icrc)
        except MalformedPacket as exc:
            self.malformed[exc.reason] += 1
            return
        if isinstance(msg, Connect):
            self._on_connect(msg, now)
            return
        if isinstance(msg, ConnectAck):
            self._on_connect_ack(msg, now)
            return
        conn = self.conns.get(msg.qp)
        if conn is None:
            self.refused["no_connection"] += 1  # e.g. DATA before (or without) a handshake
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
        elif isinstance(msg, DataPacket) and isinstance(conn, RecvConnection) and msg.rkey != conn.rkey:
            newer = self.pending.get(msg.qp)
            if newer is None or msg.rkey != newer.rkey or not newer.from_peer(msg.meta.src):
                self.refused["bad_rkey"] += 1
                return
            conn = self._promote(newer)
        self._apply(conn, conn.endpoint.receive(msg, now), now)

    def _on_connect(self, msg: Connect, now: int) -> None:
        """A peer opens a queue pair to us: create (or re-answer) the receiving end."""
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
                self._transmit(known, known.connect_ack(ev))
                return
        peer = self.paths.peer(name, qp.mode)
        conn = RecvConnection(
            qp, peer, self._transport(qp.mode, msg.initial_psn), self._conn_rng(), nonce=msg.nonce
        )
        if qp.value in self.conns:
            # a live connection is replaced only once DATA proves the peer got our answer:
            # a forged CONNECT (its sender never sees the rkey) cannot tear it down
            self.pending[qp.value] = conn
            self.handshake["connect_pending"] += 1
        else:
            self._add(conn)
            self.handshake["connect_accepted"] += 1
        self._transmit(conn, conn.connect_ack(ev))

    def _promote(self, conn: RecvConnection) -> RecvConnection:
        del self.pending[conn.qp.value]
        self.handshake["connection_replaced"] += 1
        log.info("recv %s: a newer handshake replaces the connection", conn.peer.name)
        self._add(conn)
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
            opened = conn.on_connect_ack(msg)
        except HandshakeError as exc:
            self.refused[exc.reason] += 1
            return
        if conn.refused:
            self._drop_send(conn, f"peer {conn.peer.name} refused the connection ({conn.refused})", now)
            return
        if not opened:
            self.handshake["connect_ack_repeated"] += 1
            return
        self.handshake["connected"] += 1
        rtt_ms = (now - conn.first_connect_ns) / 1e6
        log.info("send %s (%s): connected, initial psn %d, %.1f ms",
                 conn.peer.name, conn.qp.mode, conn.initial_psn, rtt_ms)  # fmt: skip
        self._apply(conn, conn.pump(now), now)

    # ---- connections ---------------------------------------------------------------------------
    def _transport(self, mode: Mode, initial_psn: int) -> TransportConfig:
        """Timers from the base RTT; the window from the congestion control, bounded by
        ``window_bytes`` (the CC's maximum) and ``psn_window`` (PSNs past the oldest
        unacknowledged one). No fixed packet cap: the receiver's SACK always reports the
        packet that triggered it, so a span wider than the 64-bit bitmap is safe."""
        rtt = self.opts.base_rtt_us * 1000
        # the first RTO waits longer than the derived 10 RTT: before any RTT sample, a burst of a
        # whole window through a Python receiver can take that long, and a spurious first RTO
        # would retire a healthy path
        window = self.opts.window_bytes or DEFAULT_WINDOW_PACKETS * self.mtu
        return TransportConfig.for_rtt(
            rtt,
            int(window / 1.25),
            mode=mode,
            mtu=self.mtu,
            rto_initial_ns=max(10 * rtt, INITIAL_RTO_NS),
            # a whole plane is declared dead only after 2 base RTTs of silence: one plane's
            # frames can wait several ms behind the other's in a busy Python receiver or behind
            # neighbour discovery on a path's first packets (the core's default is 1 base RTT)
            plane_guard_min_ns=2 * rtt,
            rx_window=self.opts.psn_window,
            initial_psn=initial_psn,
            ack_every=self.opts.ack_every,
            **self.opts.ev_profile.transport_overrides(),
        )

    def _check_ev_profile(self) -> None:
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

    def _add(self, conn: Connection) -> None:
        self.conns[conn.qp.value] = conn
        self._deny_by_profile(conn)

    def _deny_by_profile(self, conn: Connection) -> None:
        """The profile's DENIED rules hold on every connection from its first packet."""
        for ev in self.opts.ev_profile.denied(sorted(conn.endpoint.evset.entries)):
            conn.endpoint.deny(ev, time.monotonic_ns())
        now = time.monotonic_ns()
        for ev in self.denied:
            self._apply(conn, conn.endpoint.deny(ev, now), now)
        log.info("connection %s %s (%s) qp %06x", conn.kind, conn.peer.name, conn.qp.mode, conn.qp.value)

    def send_connection(self, peer: str, mode: Mode) -> SendConnection:
        """Our sending end to ``peer``: an existing one, or a new one whose handshake starts now."""
        pp = self.paths.peer(peer, mode)  # KeyError for an unknown peer
        qp = QpId(ROLE_SENDER, mode, self.paths.index, pp.index)
        conn = self.conns.get(qp.value)
        if conn is None:
            isn = self.rng.getrandbits(24)
            conn = SendConnection(
                qp, pp, self._transport(mode, isn), self._conn_rng(), self.rng.getrandbits(64)
            )
            self._add(conn)
            self._send_connect(conn, time.monotonic_ns())
        assert isinstance(conn, SendConnection)
        return conn

    def _send_connect(self, conn: SendConnection, now: int) -> None:
        for msg in conn.connect_messages(now, self.rng):
            self._transmit(conn, msg)
        self.handshake["connects_sent"] += 1

    def _drop_send(self, conn: SendConnection, error: str, now: int) -> None:
        """Give up on a sending end: its transfers end with ``error``; a later send starts over."""
        log.warning("send %s (%s): %s", conn.peer.name, conn.qp.mode, error)
        if self.conns.get(conn.qp.value) is conn:
            del self.conns[conn.qp.value]
        for tid, at in list(self.transfers.active.items()):
            if at.conn is conn:
                at.transfer.error = at.transfer.error or error
                self._finish(tid, now)

    # ---- actions out ---------------------------------------------------------------------------
    def _apply(self, conn: Connection, actions: list[Action], now: int) -> None:
        pump = False
        for act in actions:
            if isinstance(act, Transmit):
                self._transmit(conn, act.msg)
            elif isinstance(act, SetTimer):
                conn.deadline = act.at_ns
            elif isinstance(act, MessageSent):
                pump = True
                self._on_sent(conn, act, now)
            elif isinstance(act, MessageReceived):
                self._on_received(conn, now)
            elif isinstance(act, EvStateChanged):
                conn.note_ev_change(act, now)
                log.info("%s %s ev %08x %s -> %s (%s)", conn.kind, conn.peer.name, act.ev, act.old, act.new,
                         act.reason)  # fmt: skip
            elif isinstance(act, ConnectionFailed):
                # the core gave up (retry_cnt timeouts in a row, or no EV may carry the work):
                # its transfers fail with that reason and a later send starts a new connection
                if isinstance(conn, SendConnection):
                    self._drop_send(conn, act.reason, now)
                return
        if pump and isinstance(conn, SendConnection):
            more = conn.pump(now)
            if more:
                self._apply(conn, more, now)

    def _transmit(self, conn: Connection, msg: Any) -> None:
        try:
            plane, frame = conn.encode(msg)
        except (ValueError, TypeError, IndexError) as exc:
            self.internal_errors += 1
            log.error("cannot encode %s: %s", type(msg).__name__, exc)
            return
        self.ports.send(plane, frame)

    def _on_sent(self, conn: Connection, act: MessageSent, now: int) -> None:
        if not isinstance(conn, SendConnection):
            return
        t = conn.on_sent(act.msg_id, act.ok, act.reason, now)
        if t is not None and t.all_acked and (t.receipt is not None or t.error):
            self._finish(t.transfer_id, now)

    def _on_received(self, conn: Connection, now: int) -> None:
        if not isinstance(conn, RecvConnection):
            return
        chunk = conn.take_chunk()
        if chunk is None:
            self.malformed["bad_chunk"] += 1
            return
        hdr, data = chunk
        if hdr.kind is ChunkKind.RECEIPT:
            self._on_receipt(conn.peer.name, hdr.transfer_id, hdr.flags, hdr.total, hdr.crc32, now)
            return
        rec = conn.on_data_chunk(hdr, data)
        if rec is None:
            return
        self.transfers.received.append(rec)
        log.info("received transfer %016x from %s: %d B, ok=%s", rec.transfer_id, rec.peer, rec.received,
                 rec.ok)  # fmt: skip
        back = self.send_connection(conn.peer.name, conn.qp.mode)
        back.queue_receipt(rec.transfer_id, rec.ok, rec.received, int(rec.crc32, 16))
        self._apply(back, back.pump(now), now)

    def _on_receipt(self, peer: str, tid: int, flags: int, received: int, crc: int, now: int) -> None:
        done = self.transfers.on_receipt(peer, tid, bool(flags & ChunkFlag.OK), received, crc)
        if done is None:
            self.malformed["stray_receipt"] += 1
        elif done:
            self._finish(tid, now)

    # ---- transfers -----------------------------------------------------------------------------
    def start_send(self, req: protocol.Request, client: ControlClient | None) -> int:
        conn = self.send_connection(req.peer, req.mode)
        now = time.monotonic_ns()
        tid = self.rng.getrandbits(64) or 1
        t = Transfer(tid, req.peer, req.mode.value, req.size, self.rng.getrandbits(32), now)
        self.transfers.start(conn, t, client, req.progress, req.deadline_s or self.opts.deadline_s, now)
        log.info("send %016x to %s: %d B (%s)", tid, req.peer, req.size, req.mode.value)
        self._apply(conn, conn.pump(now), now)
        return tid

    def _finish(self, tid: int, now: int) -> None:
        done = self.transfers.finish(tid, now)
        if done is None:
            return
        at, summary = done
        log.info("transfer %016x done: %s", tid, summary)
        if at.client is not None and not at.client.closed:
            reply: dict[str, Any] = {"ok": summary["ok"], "summary": summary}
            if not summary["ok"]:
                reply["error"] = at.transfer.error or "receiver did not confirm the bytes"
            self.control.reply(at.client, reply)

    def _tick(self, now: int) -> None:
        for conn in [c for c in self.conns.values() if isinstance(c, SendConnection) and not c.established]:
            if now - conn.first_connect_ns >= self.opts.connect_timeout_s * 1e9:
                self._drop_send(
                    conn,
                    f"peer {conn.peer.name} did not answer the handshake: {conn.connects_sent} CONNECTs "
                    f"in {self.opts.connect_timeout_s:g} s (no agent there, or no path)",
                    now,
                )
            elif now - conn.last_connect_ns >= CONNECT_INTERVAL_NS:
                self._send_connect(conn, now)
        for e in self.transfers.expired(now, self.opts.peer_timeout_s):
            at = self.transfers.active.get(e.transfer_id)
            if at is None:  # ended by an earlier expiry's dropped connection
                continue
            if e.peer_dead:
                self._drop_send(at.conn, e.error, now)
            else:
                at.transfer.error = at.transfer.error or e.error
                self._finish(e.transfer_id, now)
        for at, line in self.transfers.progress_due(now):
            if at.client is not None:
                self.control.reply(at.client, line)

    # ---- control requests ---------------------------------------------------------------------
    def command(self, req: protocol.Request, client: ControlClient | None = None) -> dict[str, Any] | None:
        """Run one control request; None when the reply comes later (``send``)."""
        now = time.monotonic_ns()
        if req.cmd == "ping":
            return {"ok": True, "host": self.paths.name, "pid": os.getpid()}
        if req.cmd == "send":
            if req.peer == self.paths.name:
                raise protocol.ProtocolError("peer", "cannot send to this host itself")
            if req.peer not in self.paths.cfg.destinations:
                known = ", ".join(sorted(self.paths.cfg.destinations))
                raise protocol.ProtocolError("peer", f"{req.peer!r} is not a destination (known: {known})")
            self.start_send(req, client)
            return None
        if req.cmd == "stats":
            return {"ok": True, **self.stats()}
        if req.cmd == "evs":
            return {"ok": True, "host": self.paths.name, "evs": self.ev_rows()}
        if req.cmd == "deny":
            self.denied.add(req.ev)
            n = 0
            for conn in list(self.conns.values()):
                self._apply(conn, conn.endpoint.deny(req.ev, now), now)
                n += 1
            return {"ok": True, "ev": f"{req.ev:08x}", "connections": n}
        if req.cmd == "allow":
            was_denied = req.ev in self.denied
            self.denied.discard(req.ev)
            n = 0
            for conn in list(self.conns.values()):
                try:
                    acts = conn.endpoint.allow(req.ev, now)
                except KeyError:
                    continue
                self._apply(conn, acts, now)
                n += 1
            if not was_denied and n == 0:
                raise protocol.ProtocolError("ev", f"{req.ev:08x} is not denied and no connection uses it")
            return {"ok": True, "ev": f"{req.ev:08x}", "connections": n}
        raise protocol.ProtocolError("cmd", f"{req.cmd!r} is not handled")

    # ---- introspection -------------------------------------------------------------------------
    def ev_rows(self) -> list[dict[str, Any]]:
        return [row for c in self.conns.values() for row in c.ev_table()]

    def stats(self) -> dict[str, Any]:
        now = time.monotonic_ns()
        conns = [c.describe() for c in self.conns.values()]
        totals: Counter[str] = Counter()
        for c in self.conns.values():
            k = c.endpoint.counters
            for name in (
                "data_packets_sent", "data_bytes_sent", "retransmissions", "data_packets_received",
                "data_bytes_placed", "sacks_sent", "sacks_received", "probes_sent", "probe_acks_received",
                "ev_retired", "ev_restored", "ecn_echoes_received", "losses_gap", "losses_rto",
            ):  # fmt: skip
                totals[name] += getattr(k, name)
            for reason, n in k.malformed.items():
                totals[f"core_malformed_{reason}"] += n
            # the core's refusals of SACKs/NACKs for PSNs not sent or already acknowledged
            for reason, n in dict(getattr(k, "acks_dropped", {})).items():
                totals[f"acks_dropped_{reason}"] += n
            totals["stray_acks"] += k.stray_acks
        return {
            "host": self.paths.name,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - self.started, 3),
            "mtu": self.mtu,
            "ports": self.ports.describe(),
            "malformed": dict(self.malformed),
            "refused": dict(self.refused),
            "handshake": dict(self.handshake),
            "verify_icrc": self.opts.verify_icrc,
            "internal_errors": self.internal_errors,
            "kernel_drops": self.quiet.counters(),
            "denied": [f"{ev:08x}" for ev in sorted(self.denied)],
            "totals": dict(totals),
            "connections": conns,
            "evs": self.ev_rows(),
            "transfers": self.transfers.describe(now),
        }


def serve(opts: AgentOptions) -> None:
    """``mrc serve``: run until SIGTERM/SIGINT, then clean up."""
    agent = Agent(opts)
    agent.open()
    agent.install_signal_handlers()
    # everything made so far (scapy's and numpy's modules, the frame templates) lives as long
    # as the process: out of the collector's generations, a full collection no longer walks
    # those hundreds of thousands of objects (~28 ms, a pause in the packet loop)
    gc.freeze()
    try:
        agent.run()
    finally:
        agent.close()
        log.info("agent %s stopped", agent.paths.name)
