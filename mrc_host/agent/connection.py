"""One end of one queue pair, with the transfers that use it.

The agent keeps one ``Connection`` per peer per direction (and per mode): a
``SendConnection`` whose endpoint sends DATA to the peer's receive ring, and a
``RecvConnection`` whose endpoint owns the receive ring the peer writes into. Both wrap
a core ``Endpoint``; this module adds what the core leaves to its user: which bytes to
write where (payload.py), the receive ring, and the bookkeeping for ``mrc send``/``stats``.
Nothing here touches a socket or reads the clock: the agent passes ``now_ns`` in and
carries out the actions that come back.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from mrc_fabric.ev import EV, ev_plane, ev_t1
from mrc_host.core import Action, Endpoint, EvStateChanged, TransportConfig
from mrc_host.wire.codec import crc32, payload_sums
from mrc_host.wire.messages import Connect, ConnectAck, ConnectStatus, DataPacket, Dscp, Ecn, PathMeta

from .paths import ROLE_RECEIVER, ROLE_SENDER, RX_BASE_VADDR, PeerPaths, QpId
from .payload import (
    CHUNK_DATA_BYTES,
    HEADER_BYTES,
    RING_BYTES,
    RING_SLOTS,
    BadChunk,
    ChunkFlag,
    ChunkHeader,
    ChunkKind,
    Pattern,
    Verifier,
    chunk_count,
    slot_offset,
    slot_vaddr,
)

EV_HISTORY: Final = 200
# WRITEs handed to the core at once: enough to keep a window of chunks in flight, few enough
# that preparing them (pattern, hash, copy) is no long stall; never more than the ring holds
MAX_POSTED: Final = min(4, RING_SLOTS)


@dataclass
class Transfer:
    """One ``mrc send``: ``size`` pattern bytes to ``peer``, chunked into RDMA WRITEs."""

    transfer_id: int
    peer: str
    mode: str
    size: int
    seed: int
    started_ns: int
    chunks_total: int = 0
    next_offset: int = 0
    chunks_posted: int = 0
    chunks_acked: int = 0
    bytes_acked: int = 0
    acked_ns: int = 0  # when the last chunk was acknowledged
    finished_ns: int = 0
    error: str = ""
    receipt: dict[str, Any] | None = None  # what the receiver said about the bytes it got
    base_counters: dict[str, int] = field(default_factory=dict)
    crc: int = 0  # running CRC-32 of the chunks posted so far

    @property
    def all_posted(self) -> bool:
        return self.chunks_posted >= self.chunks_total

    @property
    def crc32(self) -> str:
        """CRC-32 of all the bytes sent, once the last chunk is posted ("" before)."""
        return f"{self.crc:08x}" if self.all_posted else ""

    @property
    def all_acked(self) -> bool:
        return self.chunks_acked >= self.chunks_total

    @property
    def done(self) -> bool:
        return self.finished_ns != 0


# the core's own connection failures (ConnectionFailed), said as the user sees them; anything
# else is the peer's NACK of a write
_FAILURE_TEXT: Final = {
    "RETRY_EXCEEDED": "peer {peer} stopped answering: {reason} (retry_cnt timeouts in a row)",
    "NO_USABLE_PATH": "no usable path to {peer}: {reason} (no EV allowed to carry the work)",
}


def _core_totals(ep: Endpoint) -> dict[str, int]:
    c = ep.counters
    return {
        "data_packets_sent": c.data_packets_sent,
        "data_bytes_delivered": c.data_bytes_delivered,
        "retransmissions": c.retransmissions,
        "ev_retired": c.ev_retired,
        "ev_restored": c.ev_restored,
        "losses_gap": c.losses_gap,
        "losses_rto": c.losses_rto,
        "rto_fired": c.rto_fired,
        "spurious_losses": c.spurious_losses,
        "ev_loss_undone": c.ev_loss_undone,
        "losses_trimmed_after_guess": c.losses_trimmed_after_guess,
        "losses_while_hot": c.losses_while_hot,
        "ev_retired_by_loss": c.ev_retired_by_loss,
    }


def _us(ns: float | int | None) -> float | None:
    return None if ns is None else round(ns / 1000, 1)


class HandshakeError(ValueError):
    """A CONNECT_ACK that does not answer this connection's CONNECT; ``reason`` is a counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def control_meta(ev: int) -> PathMeta:
    return PathMeta(ev=ev, ecn=Ecn.NOT_ECT, dscp=Dscp.CONTROL)


class Connection:
    """Shared part: the endpoint, its peer's routes (plane, encoder, carrier) and its timer.

    ``cfg.initial_psn`` is the connection's first PSN, random per connection and agreed in
    the handshake; ``nonce`` names the handshake that created the connection.
    """

    role = -1

    def __init__(
        self, qp: QpId, peer: PeerPaths, cfg: TransportConfig, rng: random.Random, nonce: int = 0
    ) -> None:
        self.qp = qp
        self.peer = peer
        self.initial_psn = cfg.initial_psn
        self.nonce = nonce
        self.endpoint = Endpoint(
            local_qp=qp.value, peer_qp=qp.peer.value, config=cfg, paths=peer.path_space, rng=rng
        )
        self.deadline: int | None = None
        self.ev_history: deque[dict[str, Any]] = deque(maxlen=EV_HISTORY)

    @property
    def kind(self) -> str:
        return "send" if self.role == ROLE_SENDER else "recv"

    def from_peer(self, src: str) -> bool:
        """Whether an inner source address is one of this connection's peer NIC ports."""
        return src in self.peer.addresses

    def encode(self, msg: Any) -> tuple[int, bytes]:
        """(plane, frame) for a message the core asked to transmit."""
        plane, encoder, carrier = self.peer.route(msg.meta.ev)
        return plane, encoder.encode(msg, carrier)

    def note_ev_change(self, ch: EvStateChanged, now_ns: int) -> None:
        self.ev_history.append(
            {"t_ns": now_ns, "ev": f"{ch.ev:08x}", "old": ch.old, "new": ch.new, "reason": ch.reason}
        )

    def ev_table(self) -> list[dict[str, Any]]:
        """Per EV: state, whether it is in the rotation, and its packet counters."""
        ep = self.endpoint
        rows = []
        for value, e in sorted(ep.evset.entries.items()):
            c = ep.counters.per_ev.get(value)
            rows.append(
                {
                    "peer": self.peer.name,
                    "conn": self.kind,
                    "mode": self.qp.mode.value,
                    "ev": f"{value:08x}",
                    "plane": ev_plane(value),
                    "t1": ev_t1(value),
                    "state": e.state.value,
                    "active": e.active,
                    "data_sent": c.data_packets_sent if c else 0,
                    "control_sent": c.control_packets_sent if c else 0,
                    "delivered": c.packets_delivered if c else 0,
                    "lost": c.packets_lost if c else 0,
                    "ecn": c.ecn_echoes if c else 0,
                    "trims": c.trims if c else 0,
                    "data_received": c.data_packets_received if c else 0,
                }
            )
        return rows

    def describe(self) -> dict[str, Any]:
        counters = self.endpoint.counters.as_dict()
        counters.pop("per_ev", None)
        return {
            "peer": self.peer.name,
            "conn": self.kind,
            "mode": self.qp.mode.value,
            "qp": self.qp.value,
            "peer_qp": self.qp.peer.value,
            "initial_psn": self.initial_psn,
            "established": getattr(self, "established", True),
            "counters": counters,
            "ev_history": list(self.ev_history)[-20:],
        }


class SendConnection(Connection):
    """Our DATA to the peer: transfers queue here and fill the peer's receive ring in order.

    It starts unestablished: ``connect_messages`` are the CONNECTs to send (the agent
    repeats them until ``on_connect_ack`` accepts an answer or it gives up); nothing is
    posted to the core before that, since the peer's rkey comes with the answer.
    """

    role = ROLE_SENDER

    def __init__(
        self, qp: QpId, peer: PeerPaths, cfg: TransportConfig, rng: random.Random, nonce: int = 0
    ) -> None:
        super().__init__(qp, peer, cfg, rng, nonce)
        self.rkey = 0
        self.established = False
        self.refused = ""  # the peer's CONNECT_ACK said REFUSED
        self.connects_sent = 0
        self.first_connect_ns = 0
        self.last_connect_ns = 0
        self.queue: deque[Transfer] = deque()
        self.chunk_seq = 0  # chunks ever posted on this connection (slot = seq % RING_SLOTS)
        self.posted: dict[int, tuple[Transfer | None, int]] = {}  # msg_id -> (transfer, data bytes)
        self.receipts: deque[tuple[int, int, int, bool]] = deque()  # (transfer, bytes, crc32, ok)
        # msg_id -> (its first vaddr, its length, each packet payload's UDP checksum share):
        # summed once per posted chunk, used by every (re)transmission of its packets
        self.piece_sums: dict[int, tuple[int, int, list[int]]] = {}
        self.mtu = cfg.mtu

    def start(self, t: Transfer) -> None:
        t.chunks_total = chunk_count(t.size)
        t.base_counters = _core_totals(self.endpoint)
        self.queue.append(t)

    def queue_receipt(self, transfer_id: int, ok: bool, received: int, crc: int) -> None:
        self.receipts.append((transfer_id, received, crc, ok))

    def connect_messages(self, now_ns: int, rng: random.Random) -> list[Connect]:
        """One CONNECT per plane (a random path in each), so one dead plane cannot stop it."""
        if not self.connects_sent:
            self.first_connect_ns = now_ns
        self.connects_sent += 1
        self.last_connect_ns = now_ns
        space = self.peer.path_space
        out = []
        for plane in range(space.planes):
            ev = EV(plane, rng.randrange(space.t1_count), rng.getrandbits(18)).value
            out.append(Connect(self.qp.peer.value, self.initial_psn, self.nonce, control_meta(ev)))
        return out

    def on_connect_ack(self, ack: ConnectAck) -> bool:
        """Take the peer's answer; True when it established the connection now.

        Raises HandshakeError for an answer to some other CONNECT (a forgery or a stale one).
        A repeated answer to this one changes nothing.
        """
        if ack.nonce != self.nonce or ack.initial_psn != self.initial_psn:
            raise HandshakeError("stale_handshake", "nonce or initial PSN is not this connection's")
        if self.established:
            if ack.rkey != self.rkey:
                raise HandshakeError("stale_handshake", "a second answer with another rkey")
            return False
        if ack.status is not ConnectStatus.ACCEPTED:
            self.refused = ack.status.name
            return False
        self.rkey = ack.rkey
        self.established = True
        return True

    def pump(self, now_ns: int) -> list[Action]:
        """Post as many chunks as free ring slots allow; returns the core's actions."""
        out: list[Action] = []
        if not self.established:
            return out
        while len(self.posted) < MAX_POSTED:
            if self.receipts:
                tid, received, crc, ok = self.receipts.popleft()
                flags = ChunkFlag.OK if ok else ChunkFlag.NONE
                hdr = ChunkHeader(ChunkKind.RECEIPT, flags, tid, 0, 0, received, 0, crc)
                out += self._post(hdr.pack(), None, 0, now_ns)
                continue
            if not self.queue:
                break
            t = self.queue[0]
            length = min(CHUNK_DATA_BYTES, t.size - t.next_offset)
            data = Pattern(t.seed).view(t.next_offset, length)
            t.crc = crc32(data, t.crc)
            last = t.chunks_posted + 1 >= t.chunks_total
            flags = ChunkFlag.LAST if last else ChunkFlag.NONE
            crc = t.crc if last else 0
            tid, offset = t.transfer_id, t.next_offset
            hdr = ChunkHeader(ChunkKind.DATA, flags, tid, offset, length, t.size, t.seed, crc)
            out += self._post(b"".join((hdr.pack(), data)), t, length, now_ns)  # one copy
            t.next_offset += length
            t.chunks_posted += 1
            if last:
                self.queue.popleft()
        return out

    def _post(self, chunk: bytes, t: Transfer | None, length: int, now_ns: int) -> list[Action]:
        vaddr = slot_vaddr(RX_BASE_VADDR, self.chunk_seq)
        self.chunk_seq += 1
        msg_id, actions = self.endpoint.post_write(chunk, vaddr, self.rkey, now_ns)
        self.posted[msg_id] = (t, length)
        self.piece_sums[msg_id] = (vaddr, len(chunk), payload_sums(chunk, self.mtu))
        return actions

    def encode(self, msg: Any) -> tuple[int, bytes]:
        """``Connection.encode``, with a DATA payload's checksum share taken from ``piece_sums``."""
        if type(msg) is DataPacket:
            entry = self.piece_sums.get(msg.msg_id)
            if entry is not None:
                base, length, sums = entry
                mtu = self.mtu
                k, rem = divmod(msg.vaddr - base, mtu)
                # only a payload that is exactly that piece (a stale or foreign id is summed anew)
                if rem == 0 and 0 <= k < len(sums) and len(msg.payload) == min(mtu, length - k * mtu):
                    plane, encoder, carrier = self.peer.route(msg.meta.ev)
                    return plane, encoder.encode_data(msg, carrier, sums[k])
        return super().encode(msg)

    def on_sent(self, msg_id: int, ok: bool, reason: str, now_ns: int) -> Transfer | None:
        """A WRITE completed; returns its transfer (None for a receipt or an unknown id)."""
        entry = self.posted.pop(msg_id, None)
        self.piece_sums.pop(msg_id, None)
        t, length = entry if entry is not None else (None, 0)
        if t is None:
            return None
        t.chunks_acked += 1
        if ok:
            t.bytes_acked += length
        elif not t.error:
            t.error = _FAILURE_TEXT.get(reason, "peer refused a write: {reason}").format(
                peer=self.peer.name, reason=reason
            )
        if t.all_acked:
            t.acked_ns = now_ns
        return t

    def summary(self, t: Transfer, now_ns: int = 0) -> dict[str, Any]:
        """What ``mrc send`` prints; ``now_ns`` ends the clock of a transfer still running."""
        end = t.finished_ns or t.acked_ns or now_ns
        seconds = max(end - t.started_ns, 1) / 1e9
        now = _core_totals(self.endpoint)
        delta = {k: now[k] - t.base_counters.get(k, 0) for k in now}
        verified = None if t.receipt is None else bool(t.receipt.get("ok"))
        return {
            "transfer_id": f"{t.transfer_id:016x}",
            "peer": t.peer,
            "mode": t.mode,
            "bytes": t.size,
            "bytes_acked": t.bytes_acked,
            "seconds": round(seconds, 6),
            "goodput_mbit_s": round(t.bytes_acked * 8 / seconds / 1e6, 3),
            "packets_per_s": round(delta["data_packets_sent"] / seconds, 1),
            "data_packets_sent": delta["data_packets_sent"],
            "retransmissions": delta["retransmissions"],
            "evs_retired": delta["ev_retired"],
            "evs_retired_by_loss": delta["ev_retired_by_loss"],
            "evs_restored": delta["ev_restored"],
            "losses_gap": delta["losses_gap"],
            "losses_rto": delta["losses_rto"],
            # loss guesses a late delivery proved to be reordering or a trim NACK proved to be
            # congestion, and the retirements (each with its path's sibling EVs) undone for them
            "spurious_losses": delta["spurious_losses"],
            "ev_loss_undone": delta["ev_loss_undone"],
            "losses_trimmed_after_guess": delta["losses_trimmed_after_guess"],
            # loss guesses on a path that was marked or trimmed lately: it sat out, not retired
            "losses_while_hot": delta["losses_while_hot"],
            # the sender's smoothed and smallest RTT so far (the fabric's BDP = rate x RTT)
            "srtt_us": _us(self.endpoint.sender.srtt_ns),
            "min_rtt_us": _us(self.endpoint.sender.min_rtt_ns),
            "crc32": t.crc32,
            "verified": verified,
            "receipt": t.receipt,
            "error": t.error,
            "ok": not t.error and verified is True,
        }


@dataclass
class Received:
    """A transfer the receive ring delivered (what ``mrc stats`` lists under transfers.received)."""

    peer: str
    transfer_id: int
    size: int
    received: int
    chunks: int
    mismatched_chunks: int
    out_of_order: int
    crc32: str
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)  # (a compiled class has no __dict__)
        d["transfer_id"] = f"{self.transfer_id:016x}"
        return d


class RecvConnection(Connection):
    """The peer's DATA to us: a registered receive ring, read chunk by chunk in order."""

    role = ROLE_RECEIVER

    def __init__(
        self,
        qp: QpId,
        peer: PeerPaths,
        cfg: TransportConfig,
        rng: random.Random,
        nonce: int = 0,
        rkey: int | None = None,
    ) -> None:
        """Created by a CONNECT (its nonce and initial PSN); ``rkey`` defaults to a random one."""
        super().__init__(qp, peer, cfg, rng, nonce)
        self.rkey = rkey if rkey is not None else rng.getrandbits(32) or 1
        self.region = self.endpoint.register_region(RX_BASE_VADDR, RING_BYTES, self.rkey)
        self.data_seen = False  # a DATA packet with this rkey arrived: the peer has our answer
        self.view = memoryview(self.region.buffer)
        self.cursor = 0  # chunks read so far
        self.verifiers: dict[int, Verifier] = {}
        self.bad_chunks = 0

    def connect_ack(self, ev: int) -> ConnectAck:
        """The answer to the CONNECT that created this connection, on ``ev`` (its path back)."""
        return ConnectAck(self.qp.peer.value, self.initial_psn, self.nonce, self.rkey, meta=control_meta(ev))

    def answers(self, c: Connect) -> bool:
        """Whether ``c`` is (a repeat of) the CONNECT that created this connection."""
        return c.nonce == self.nonce and c.initial_psn == self.initial_psn

    def take_chunk(self) -> tuple[ChunkHeader, memoryview] | None:
        """The chunk at the cursor (called once per MessageReceived); None if it is garbage."""
        off = slot_offset(self.cursor)
        self.cursor += 1
        try:
            hdr = ChunkHeader.unpack(self.view[off : off + HEADER_BYTES])
        except BadChunk:
            self.bad_chunks += 1
            return None
        start = off + HEADER_BYTES
        return hdr, self.view[start : start + hdr.length]

    def on_data_chunk(self, hdr: ChunkHeader, data: memoryview) -> Received | None:
        """Check a DATA chunk; returns the finished transfer's record after its last chunk."""
        v = self.verifiers.get(hdr.transfer_id)
        if v is None:
            v = self.verifiers[hdr.transfer_id] = Verifier(hdr)
        if not v.add(hdr, data):
            return None
        del self.verifiers[hdr.transfer_id]
        return Received(
            self.peer.name, v.transfer_id, v.total, v.received, v.chunks, v.mismatched_chunks,
            v.out_of_order, v.crc32, v.ok,
        )  # fmt: skip
