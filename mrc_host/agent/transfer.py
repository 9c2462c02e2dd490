"""A transfer's whole life: from the ``mrc send`` request to its summary.

A transfer waits in the queue of its peer and mode (first come, first served: each sending
connection fills one transfer's chunks at a time, up to ``connection.MAX_POSTED`` WRITEs in
the core, the next transfer's start right behind the last one's end); its chunks go to the
connection as the ring allows; each chunk's completion counts its bytes; the receiver's
RECEIPT (on the reverse connection) ends it. Header-only control chunks -- receipts for what
the peer sent us, CANCELs -- go ahead of data.

Liveness belongs to the connection, not to the transfers: a connection with WRITEs out whose
peer acknowledged nothing for ``--peer-timeout`` (or ``PEER_TIMEOUT_RTOS`` of its own RTO, when
that is longer) is dropped; the transfers that were sending
on it end with that error, those still queued move to the next connection (its handshake
starts at once) and never fail for having waited. A transfer ends on its own for its
deadline, a receipt that never came, a write its peer refused, ``mrc cancel`` or its client
going away, and then it is *cancelled*: its WRITEs are taken back from the core at once (no
packet of it is sent afterwards, its buffers are freed) and the receiver gets a CANCEL.

Nothing here reads the clock or touches a socket: ``now_ns`` comes in, replies go out through
the callback the agent gives.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mrc_host.core import Mode
from mrc_host.core.counters import RETX_CAUSES
from mrc_host.wire.codec import crc32

from .connection import RecvConnection, SendConnection
from .control import ControlClient
from .inbound import Inbound
from .payload import CHUNK_DATA_BYTES, ChunkFlag, ChunkHeader, ChunkKind, Pattern, chunk_count
from .peers import Peers, failure_text
from .ports import LoopCounters

log = logging.getLogger("mrc.agent")

HISTORY: Final = 50
PROGRESS_EVERY_NS: Final = 200_000_000
RECEIPT_TIMEOUT_NS: Final = 10_000_000_000
# a connection is dead after this many of its own RTOs (not backed off) without an
# acknowledgement, when that is longer than --peer-timeout: on a machine where an RTT takes
# seconds (a VM without KVM), a fixed 10 s is a few round trips, not a silent peer
PEER_TIMEOUT_RTOS: Final = 16
Reply = Callable[[ControlClient, dict[str, Any]], None]
Key = tuple[str, Mode]  # (peer, mode): one sending connection and its queue


@dataclass
class Transfer:
    """One ``mrc send``: ``size`` pattern bytes to ``peer``, chunked into RDMA WRITEs."""

    transfer_id: int
    peer: str
    mode: Mode
    size: int
    seed: int
    started_ns: int  # the request
    deadline_ns: int
    client: ControlClient | None = None
    progress: bool = False
    conn: SendConnection | None = None  # where its chunks went (None while it waits)
    sending_ns: int = 0  # its first chunk went to the connection
    chunks_total: int = 0
    next_offset: int = 0
    chunks_posted: int = 0
    chunks_acked: int = 0
    bytes_acked: int = 0
    acked_ns: int = 0  # when the last chunk was acknowledged
    finished_ns: int = 0
    last_progress_ns: int = 0
    error: str = ""
    retried: str = ""  # why its first connection died before any of its bytes was acknowledged
    receipt: dict[str, Any] | None = None  # what the receiver said about the bytes it got
    base_counters: dict[str, int] = field(default_factory=dict)
    crc: int = 0  # running CRC-32 of the chunks posted so far

    @property
    def key(self) -> Key:
        return (self.peer, self.mode)

    @property
    def all_posted(self) -> bool:
        return self.chunks_posted >= self.chunks_total

    @property
    def all_acked(self) -> bool:
        return self.chunks_acked >= self.chunks_total

    @property
    def crc32(self) -> str:
        """CRC-32 of all the bytes sent, once the last chunk is posted ("" before)."""
        return f"{self.crc:08x}" if self.all_posted else ""

    @property
    def done(self) -> bool:
        return self.finished_ns != 0

    def restart(self, why: str) -> None:
        """Back to the queue, from its first byte (its connection died before any was acknowledged)."""
        self.retried = why
        self.conn = None
        self.sending_ns = self.next_offset = self.chunks_posted = self.chunks_acked = self.crc = 0
        self.base_counters = {}

    def next_chunk(self, piece: int) -> tuple[list[bytes | memoryview], int, list[int]]:
        """The next chunk as a gather list (its header, then a read-only view of the pattern:
        no copy of the data, and its packets are views of it too), its data bytes and the UDP
        checksum shares of its ``piece``-byte packets (``Pattern.piece_sums``); advances the
        transfer."""
        pattern = Pattern(self.seed)
        length = min(CHUNK_DATA_BYTES, self.size - self.next_offset)
        data = pattern.view(self.next_offset, length)
        self.crc = crc32(data, self.crc)
        last = self.chunks_posted + 1 >= self.chunks_total
        flags = ChunkFlag.LAST if last else ChunkFlag.NONE
        hdr = ChunkHeader(ChunkKind.DATA, flags, self.transfer_id, self.next_offset, length, self.size,
                          self.seed, self.crc if last else 0).pack()  # fmt: skip
        sums = pattern.piece_sums(hdr, self.next_offset, length, piece)
        self.next_offset += length
        self.chunks_posted += 1
        return [hdr, data], length, sums


RETX_KINDS = (*RETX_CAUSES, "unattributed")  # "unattributed" is a bug: a resend no loss queued


def _core_totals(conn: SendConnection | None) -> dict[str, int]:
    if conn is None:
        return {}
    c = conn.endpoint.counters
    return {f"retx_{k}": c.retx_causes[k] for k in RETX_KINDS} | {
        "data_packets_sent": c.data_packets_sent,
        "data_bytes_delivered": c.data_bytes_delivered,
        "retransmissions": c.retransmissions,
        "ev_retired": c.ev_retired,
        "ev_restored": c.ev_restored,
        "losses_gap": c.losses_gap,
        "losses_rto": c.losses_rto,
        "spurious_losses": c.spurious_losses,
        "ev_loss_undone": c.ev_loss_undone,
        "ev_undone": c.ev_undone,
        "losses_trimmed_after_guess": c.losses_trimmed_after_guess,
        "losses_while_hot": c.losses_while_hot,
        "losses_hot_dead": c.losses_hot_dead,
        "losses_path": c.losses_path,
        "ev_retired_by_loss": c.ev_retired_by_loss,
    }


def _us(ns: float | int | None) -> float | None:
    return None if ns is None else round(ns / 1000, 1)


def summary(t: Transfer, now_ns: int = 0) -> dict[str, Any]:
    """What ``mrc send`` prints; ``now_ns`` ends the clock of a transfer still running. The
    clock starts when its first chunk went out (``waited_s``: how long it queued before)."""
    start = t.sending_ns or t.started_ns
    end = t.finished_ns or t.acked_ns or now_ns or start
    seconds = max(end - start, 1) / 1e9
    now = _core_totals(t.conn)
    d = {k: v - t.base_counters.get(k, 0) for k, v in now.items()}
    sender = t.conn.endpoint.sender if t.conn is not None else None
    verified = None if t.receipt is None else bool(t.receipt.get("ok"))
    return {
        "transfer_id": f"{t.transfer_id:016x}",
        "peer": t.peer,
        "mode": t.mode.value,
        "bytes": t.size,
        "bytes_acked": t.bytes_acked,
        "seconds": round(seconds, 6),
        "waited_s": round(max(start - t.started_ns, 0) / 1e9, 6),
        "goodput_mbit_s": round(t.bytes_acked * 8 / seconds / 1e6, 3),
        "packets_per_s": round(d.get("data_packets_sent", 0) / seconds, 1),
        "data_packets_sent": d.get("data_packets_sent", 0),
        "retransmissions": d.get("retransmissions", 0),
        # the same by the loss kind that queued each resend (mrc_host.core.counters.RETX_CAUSES)
        "retransmissions_by_cause": {k: n for k in RETX_KINDS if (n := d.get(f"retx_{k}", 0))},
        "evs_retired": d.get("ev_retired", 0),
        "evs_retired_by_loss": d.get("ev_retired_by_loss", 0),
        # of the retired EVs, those back at once: the packet taken for lost arrived after all
        "evs_undone": d.get("ev_undone", 0),
        "evs_restored": d.get("ev_restored", 0),
        "losses_gap": d.get("losses_gap", 0),
        "losses_rto": d.get("losses_rto", 0),
        # loss guesses a late delivery proved to be reordering or a trim NACK proved to be
        # congestion, and the retirements (each with its path's sibling EVs) undone for them
        "spurious_losses": d.get("spurious_losses", 0),
        "ev_loss_undone": d.get("ev_loss_undone", 0),
        "losses_trimmed_after_guess": d.get("losses_trimmed_after_guess", 0),
        # loss guesses on a path that was marked or trimmed lately: it sat out, not retired
        "losses_while_hot": d.get("losses_while_hot", 0),
        # of those, paths that proved nothing a round trip later: retired after all, and the
        # packets overdue on a path so retired, resent at once
        "losses_hot_dead": d.get("losses_hot_dead", 0),
        "losses_path": d.get("losses_path", 0),
        # the sender's smoothed and smallest RTT so far (the fabric's BDP = rate x RTT)
        "srtt_us": _us(sender.srtt_ns) if sender is not None else None,
        "min_rtt_us": _us(sender.min_rtt_ns) if sender is not None else None,
        "crc32": t.crc32,
        "verified": verified,
        "receipt": t.receipt,
        "error": t.error,
        "ok": not t.error and verified is True,
    }


class Transfers:
    """Every transfer of this agent, in either direction (``Peers`` reports to it)."""

    def __init__(self, peers: Peers, reply: Reply, counters: LoopCounters, peer_timeout_s: float) -> None:
        self.peers = peers
        self.reply = reply
        self.counters = counters
        self.peer_timeout_ns = int(peer_timeout_s * 1e9)
        self.active: dict[int, Transfer] = {}  # transfer id -> transfer in progress
        self.queues: dict[Key, deque[Transfer]] = {}  # transfers with chunks still to post
        self.control: dict[Key, deque[bytes]] = {}  # header-only chunks to post first
        self.sent: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.inbound = Inbound()
        self._pumping = False
        self._again: list[Key] = []
        peers.events = self

    # ---- start -----------------------------------------------------------------------------
    def start(self, peer: str, mode: Mode, size: int, now: int, deadline_s: float,
              client: ControlClient | None = None, progress: bool = False) -> Transfer:  # fmt: skip
        rng = self.peers.rng
        tid = rng.getrandbits(64) or 1
        while tid in self.active:
            tid = rng.getrandbits(64) or 1
        t = Transfer(tid, peer, mode, size, rng.getrandbits(32), now, now + int(deadline_s * 1e9), client,
                     progress, last_progress_ns=now)  # fmt: skip
        t.chunks_total = chunk_count(size)
        self.active[tid] = t
        self.queues.setdefault(t.key, deque()).append(t)
        log.info("send %016x to %s: %d B (%s)", tid, peer, size, mode.value)
        if client is not None:
            self.reply(client, {"event": "started", "transfer_id": f"{tid:016x}"})
        self.pump(t.key, now)
        return t

    # ---- chunks out ------------------------------------------------------------------------
    def pump(self, key: Key, now: int) -> None:
        """Post what the connection to ``key`` takes now: control chunks, then the queue's head.
        Not re-entrant: a completion while posting asks for another round instead."""
        if self._pumping:
            if key not in self._again:
                self._again.append(key)
            return
        self._pumping = True
        try:
            self._pump(key, now)
            while self._again:
                self._pump(self._again.pop(0), now)
        finally:
            self._pumping = False

    def _pump(self, key: Key, now: int) -> None:
        queue, control = self.queues.get(key), self.control.get(key)
        if not queue and not control:
            return
        conn = self.peers.send_connection(key[0], key[1], now)
        while conn.can_post() and self.peers.conns.get(conn.qp.value) is conn:
            if control:
                self.peers.run(conn, conn.post(control.popleft(), 0, 0, now), now)
                continue
            if not queue:
                return
            t = queue[0]
            if t.conn is None:
                t.conn, t.sending_ns, t.base_counters = conn, now, _core_totals(conn)
            elif t.conn is not conn:  # its connection died under it: it ended with that
                queue.popleft()
                continue
            chunk, length, sums = t.next_chunk(conn.mtu)
            if t.all_posted:
                queue.popleft()
            self.peers.run(conn, conn.post(chunk, t.transfer_id, length, now, sums), now)

    def on_ready(self, conn: SendConnection, now: int) -> None:
        self.pump((conn.peer.name, conn.qp.mode), now)

    def on_sent(self, conn: SendConnection, msg_id: int, ok: bool, reason: str, now: int) -> None:
        """A WRITE completed: its bytes count for its transfer; the slot takes the next chunk."""
        done = conn.completed(msg_id)
        key = (conn.peer.name, conn.qp.mode)
        if done is not None and done[0]:
            t = self.active.get(done[0])
            if t is not None and t.conn is conn:
                if not ok and conn.endpoint.sender.failed:
                    return  # the connection failed as a whole: on_failed, next, decides for t
                t.chunks_acked += 1
                if ok:
                    t.bytes_acked += done[1]
                elif not t.error:
                    self.cancel(t, failure_text(reason, conn.peer.name), now)
                    return
                if t.all_acked:
                    t.acked_ns = now
                    if t.receipt is not None:
                        self._finish(t, now)
        self.pump(key, now)

    # ---- chunks in -------------------------------------------------------------------------
    def on_received(self, conn: RecvConnection, msg_id: int, now: int) -> None:
        """A WRITE from the peer is in the ring: a DATA chunk to check, a RECEIPT, a CANCEL."""
        got = conn.chunk(msg_id)
        if got is None:
            self.counters.malformed["bad_chunk"] += 1
            return
        hdr, data = got
        try:
            if hdr.kind is ChunkKind.DATA:
                rec = self.inbound.on_data(conn, hdr, data)
                if rec is not None:
                    log.info("received transfer %016x from %s: %d B, ok=%s", rec.transfer_id, rec.peer,
                             rec.received, rec.ok)  # fmt: skip
                    key = (conn.peer.name, conn.qp.mode)
                    self.control.setdefault(key, deque()).append(rec.receipt())
                    self.pump(key, now)
            elif hdr.kind is ChunkKind.RECEIPT:
                self._on_receipt(conn.peer.name, hdr, now)
            elif self.inbound.cancel(conn, hdr.transfer_id) is not None:
                log.info("transfer %016x from %s cancelled by its sender", hdr.transfer_id, conn.peer.name)
        finally:
            data.release()  # a view of the ring slot, which a later WRITE overwrites

    def _on_receipt(self, peer: str, hdr: ChunkHeader, now: int) -> None:
        t = self.active.get(hdr.transfer_id)
        if t is None or t.peer != peer:
            self.counters.malformed["stray_receipt"] += 1
            return
        ok = bool(hdr.flags & ChunkFlag.OK)
        good = ok and f"{hdr.crc32:08x}" == t.crc32 and hdr.total == t.size
        t.receipt = {"ok": good, "bytes": hdr.total, "crc32": f"{hdr.crc32:08x}"}
        if t.all_acked:
            self._finish(t, now)

    # ---- the end ---------------------------------------------------------------------------
    def on_failed(self, conn: SendConnection, error: str, now: int) -> None:
        """A sending connection is gone. Never established: every transfer waiting for it ends.
        Else those with chunks unacknowledged on it end, except that one of which nothing was
        acknowledged yet goes back to the queue once (the peer may have restarted: a new
        handshake tells); queued ones, and receipts and CANCELs not yet acknowledged, wait for
        the next connection, whose handshake starts now."""
        key = (conn.peer.name, conn.qp.mode)
        queue = self.queues.setdefault(key, deque())
        if not conn.established:
            for t in list(queue):
                self._end(t, f"{t.retried}; then {error}" if t.retried else error, now)
            self.control.pop(key, None)
            return
        if conn.control_posted:  # receipts and CANCELs the peer may not have: on the next one
            self.control.setdefault(key, deque()).extendleft(reversed(list(conn.control_posted.values())))
        sending = [t for t in self.active.values() if t.conn is conn and not t.all_acked]
        for t in reversed(sending):
            why = f"{error} ({t.bytes_acked} of {t.size} bytes acknowledged)"
            if t.chunks_acked == 0 and not t.retried:
                if t in queue:
                    queue.remove(t)
                t.restart(why)
                queue.appendleft(t)
                log.info("transfer %016x: %s; once more on a new connection", t.transfer_id, why)
            else:
                self._end(t, f"{t.retried}; then {why}" if t.retried else why, now)
        if queue or self.control.get(key):
            self.pump(key, now)

    def cancel(self, t: Transfer, error: str, now: int) -> None:
        """End ``t`` now: its WRITEs taken back from the core, the receiver told, the client answered."""
        if t.done:
            return
        key = t.key
        conn = t.conn
        if conn is not None and t.chunks_acked < t.chunks_posted:
            self.peers.run(conn, conn.abandon(t.transfer_id, now), now)
        if (
            conn is not None
            and t.chunks_posted
            and not t.all_acked
            and self.peers.conns.get(conn.qp.value) is conn
        ):
            notice = ChunkHeader(
                ChunkKind.CANCEL, ChunkFlag.NONE, t.transfer_id, t.next_offset, 0, t.size, t.seed
            )
            self.control.setdefault(key, deque()).append(notice.pack())
        self._end(t, error, now)
        self.pump(key, now)

    def cancel_id(self, tid: int, now: int) -> Transfer | None:
        t = self.active.get(tid)
        if t is not None:
            self.cancel(t, "cancelled (mrc cancel)", now)
        return t

    def client_gone(self, client: ControlClient, now: int) -> None:
        """A client that asked for a transfer went away: the transfer is cancelled."""
        for t in [t for t in self.active.values() if t.client is client]:
            t.client = None
            self.cancel(t, "cancelled: the client that asked for it went away", now)

    def _end(self, t: Transfer, error: str, now: int) -> None:
        t.error = t.error or error
        self._finish(t, now)

    def _finish(self, t: Transfer, now: int) -> None:
        if self.active.pop(t.transfer_id, None) is None:
            return
        queue = self.queues.get(t.key)
        if queue is not None and t in queue:
            queue.remove(t)
        t.finished_ns = now
        s = summary(t)
        self.sent.append(s)
        log.info("transfer %016x done: %s", t.transfer_id, s)
        if t.client is not None and not t.client.closed:
            reply: dict[str, Any] = {"ok": s["ok"], "summary": s}
            if not s["ok"]:
                reply["error"] = t.error or "the receiver did not confirm the bytes"
            self.reply(t.client, reply)

    # ---- every tick ------------------------------------------------------------------------
    def tick(self, now: int) -> None:
        """Deadlines, missing receipts, silent peers (per connection), progress lines."""
        for t in list(self.active.values()):
            if t.done:
                continue
            if t.all_acked and t.receipt is None and now - t.acked_ns > RECEIPT_TIMEOUT_NS:
                self._end(t, "no receipt from the receiver", now)
            elif now >= t.deadline_ns:
                self.cancel(t, f"deadline: not done after {(now - t.started_ns) / 1e9:.1f} s "
                               f"({t.bytes_acked} of {t.size} bytes acknowledged)", now)  # fmt: skip
        for conn in self.peers.send_connections():
            mark = conn.progress()
            if not conn.established or not conn.outstanding or mark != conn.progress_mark:
                conn.progress_mark, conn.progress_ns = mark, now
            elif now - conn.progress_ns >= (limit := self.silence_limit_ns(conn)):
                self.peers.drop(conn, f"peer {conn.peer.name} stopped answering: nothing acknowledged "
                                      f"for {limit / 1e9:.3g} s", now)  # fmt: skip
        for t in list(self.active.values()):
            if t.progress and t.client is not None and now - t.last_progress_ns >= PROGRESS_EVERY_NS:
                t.last_progress_ns = now
                self.reply(t.client, self._progress_line(t, now))

    def silence_limit_ns(self, conn: SendConnection) -> int:
        """How long ``conn`` may go without an acknowledgement: ``--peer-timeout``, or
        ``PEER_TIMEOUT_RTOS`` of its RTO as its RTT samples set it (the backoff left out: a
        stall must not lengthen its own limit) when that is longer."""
        rto = conn.endpoint.sender.recovery.rto_ns(backed_off=False)
        return max(self.peer_timeout_ns, PEER_TIMEOUT_RTOS * rto)

    def _progress_line(self, t: Transfer, now: int) -> dict[str, Any]:
        c = _core_totals(t.conn)
        b = t.base_counters
        return {
            "event": "progress",
            "transfer_id": f"{t.transfer_id:016x}",
            "bytes": t.size,
            "bytes_acked": t.bytes_acked,
            # payload the peer acknowledged, SACKed out of order included: the fabric's
            # delivery rate, while bytes_acked only moves with the cumulative ACK
            "bytes_delivered": c.get("data_bytes_delivered", 0) - b.get("data_bytes_delivered", 0),
            "elapsed_s": round((now - t.started_ns) / 1e9, 3),
            "queued": t.conn is None,
            "retransmissions": c.get("retransmissions", 0) - b.get("retransmissions", 0),
            "evs_retired": c.get("ev_retired", 0) - b.get("ev_retired", 0),
        }

    def describe(self, now: int) -> dict[str, Any]:
        return {
            "active": [
                summary(t, now) | {"done": False, "queued": t.conn is None} for t in self.active.values()
            ],
            "sent": list(self.sent),
            "received": [r.to_dict() for r in self.inbound.received],
            "receiving": self.inbound.in_progress(),
        }
