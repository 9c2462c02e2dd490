"""One end of one queue pair: its core endpoint, its peer's routes, its handshake state and
its share of the receive ring.

The agent keeps one ``Connection`` per peer per direction (and per mode): a
``SendConnection`` whose endpoint sends DATA to the peer's receive ring, and a
``RecvConnection`` whose endpoint owns the receive ring the peer writes into. Both wrap a
core ``Endpoint``; this module adds what the core leaves to its user: the handshake fields,
which ring slot a WRITE goes to, and the receive ring. What a transfer writes, and when,
is ``transfer.py``'s; which frames reach a connection is ``peers.py``'s. Nothing here
touches a socket or reads the clock: ``now_ns`` comes in, core actions go back.
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any, Final

from mrc_fabric.ev import EV, ev_plane, ev_t1
from mrc_host.core import Action, Endpoint, EvStateChanged, TransportConfig
from mrc_host.core.psn import unwrap
from mrc_host.wire.codec import FrameEncoder, payload_sums
from mrc_host.wire.messages import Connect, ConnectAck, ConnectStatus, DataPacket, Dscp, Ecn, PathMeta

from .paths import ROLE_SENDER, RX_BASE_VADDR, PeerPaths, QpId
from .payload import (
    HEADER_BYTES,
    RING_BYTES,
    RING_SLOTS,
    BadChunk,
    ChunkHeader,
    slot_of,
    slot_offset,
    slot_vaddr,
)

EV_HISTORY: Final = 200
# WRITEs a sending end has in the core at once (abandoned ones until their last PSN is
# acknowledged included): enough to keep a window of chunks in flight, few enough that
# preparing them (pattern, CRC, copy) is no long stall; never more than the ring holds
MAX_POSTED: Final = min(4, RING_SLOTS)
MAX_OFFERS: Final = 16  # distinct cookies a handshake keeps from RETRYs to CONNECTs not its own
NONCE_LOW: Final = 0xFFFF_FFFF  # a nonce's random half; its top half is the agent's incarnation


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
    the handshake; ``nonce`` names the handshake that created the connection (its top 32 bits
    are the incarnation of the data sender's agent, its low 32 bits random).
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

    @property
    def established(self) -> bool:
        return True

    def from_peer(self, src: str) -> bool:
        """Whether an inner source address is one of this connection's peer NIC ports."""
        return src in self.peer.addresses

    def route(self, msg: Any) -> tuple[int, FrameEncoder, bytes, int]:
        """Where a message the core asked to transmit goes and how it is encoded: its plane,
        that port's encoder, the carrier, and a DATA payload's checksum share (-1: unknown)."""
        plane, encoder, carrier = self.peer.route(msg.meta.ev)
        return plane, encoder, carrier, -1

    def encode(self, msg: Any) -> tuple[int, bytes]:
        """(plane, frame) for a message the core asked to transmit."""
        plane, encoder, carrier, payload_sum = self.route(msg)
        return plane, encoder.encode(msg, carrier, payload_sum)

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
            "established": self.established,
            "counters": counters,
            "ev_history": list(self.ev_history)[-20:],
        }


class SendConnection(Connection):
    """Our DATA to the peer's receive ring.

    It starts unestablished: ``connect_messages`` are the CONNECTs to send (repeated until an
    answer is accepted or the handshake times out); the peer may first answer RETRY with a
    cookie, which the next CONNECTs carry. A RETRY answering some other CONNECT on this queue
    pair (forged in our name: the peer's cookies are per queue pair) is an *offer*: its cookie
    is tried once (``next_offer``). Nothing is posted to the core before the peer accepted,
    since its rkey comes with the answer. ``post`` hands a chunk to the core in the slot its
    message id names; ``abandon`` takes an owner's chunks back at once.
    """

    role = ROLE_SENDER

    def __init__(
        self, qp: QpId, peer: PeerPaths, cfg: TransportConfig, rng: random.Random, nonce: int = 0
    ) -> None:
        super().__init__(qp, peer, cfg, rng, nonce)
        self.rkey = 0
        self._established = False
        self.refused = ""  # the peer's CONNECT_ACK said REFUSED
        self.cookie = 0  # the peer's answer to a CONNECT without one (RETRY): proof we got it
        self.connects_sent = 0
        self.first_connect_ns = 0
        self.last_connect_ns = 0
        self.offers: dict[int, int] = {}  # cookie -> how often offered, not yet tried
        self.tried: set[int] = set()
        self.offer_tries = 0  # offers tried since the last round of CONNECTs
        self.last_offer = 0
        # header-only chunks (receipts, CANCELs) in the core: moved to the next connection if
        # this one dies before the peer has them
        self.control_posted: dict[int, bytes] = {}
        self.peer_incarnation = 0  # of the agent that accepted us (0 until then)
        # msg_id -> (its owner: a transfer id, 0 for a control chunk; the data bytes it carries)
        self.posted: dict[int, tuple[int, int]] = {}
        self.reserved: dict[int, int] = {}  # abandoned msg_id -> sequence after its last packet
        # msg_id -> (its first vaddr, its length, each packet payload's UDP checksum share):
        # summed once per posted chunk, used by every (re)transmission of its packets
        self.piece_sums: dict[int, tuple[int, int, list[int]]] = {}
        self.mtu = cfg.mtu
        self.progress_mark = -1  # acknowledged bytes + completed writes when last seen to move ...
        self.progress_ns = 0  # ... and when

    @property
    def established(self) -> bool:
        return self._established

    # ---- handshake ------------------------------------------------------------------------
    def connect_messages(self, now_ns: int, rng: random.Random) -> list[Connect]:
        """One CONNECT per plane (a random path in each), so one dead plane cannot stop it."""
        if not self.connects_sent:
            self.first_connect_ns = now_ns
        self.connects_sent += 1
        self.last_connect_ns = now_ns
        self.offer_tries = 0
        space = self.peer.path_space
        return [self.connect(EV(p, rng.randrange(space.t1_count), rng.getrandbits(18)).value, self.cookie)
                for p in range(space.planes)]  # fmt: skip

    def connect(self, ev: int, cookie: int) -> Connect:
        return Connect(self.qp.peer.value, self.initial_psn, self.nonce, control_meta(ev), cookie)

    def _offer(self, cookie: int) -> None:
        new = cookie not in self.tried and cookie != self.cookie
        if new and (cookie in self.offers or len(self.offers) < MAX_OFFERS):
            self.offers[cookie] = self.offers.get(cookie, 0) + 1

    def next_offer(self) -> int:
        """The most offered cookie not tried yet (0: none); it counts as tried from now on. The
        real peer's cookie comes again and again; a forger must outnumber it with each value."""
        if not self.offers:
            return 0
        cookie = max(self.offers, key=lambda c: self.offers[c])
        del self.offers[cookie]
        self.tried.add(cookie)
        self.offer_tries += 1
        self.last_offer = cookie
        return cookie

    def on_connect_ack(self, ack: ConnectAck) -> str:
        """Take the peer's answer: "opened" (established now), "retry" (a new cookie: send the
        CONNECTs again at once), "refused", or "repeated" (nothing new).

        Raises HandshakeError for an answer to some other CONNECT (a forgery or a stale one).
        """
        if ack.status is ConnectStatus.RESET:
            return self._on_reset(ack)
        # the answer echoes our nonce's random half (an ACCEPTED puts the answerer's incarnation
        # in the top half) and our initial PSN: 56 bits no off-path host knows
        if (ack.nonce ^ self.nonce) & NONCE_LOW or ack.initial_psn != self.initial_psn:
            if ack.status is ConnectStatus.RETRY and not self._established and ack.cookie:
                self._offer(ack.cookie)
                return "offered"
            raise HandshakeError("stale_handshake", "nonce or initial PSN is not this connection's")
        if ack.status is ConnectStatus.RETRY:
            if self._established:
                raise HandshakeError("stale_handshake", "a RETRY after the handshake")
            if ack.cookie == self.cookie:
                return "repeated"
            self.cookie = ack.cookie
            return "retry"
        if self._established:
            if ack.rkey != self.rkey:
                raise HandshakeError("stale_handshake", "a second answer with another rkey")
            return "repeated"
        if ack.status is not ConnectStatus.ACCEPTED:
            self.refused = ack.status.name
            return "refused"
        self.rkey = ack.rkey
        self._established = True
        self.peer_incarnation = ack.nonce >> 32
        self.offers.clear()
        return "opened"

    def _on_reset(self, ack: ConnectAck) -> str:
        """ "reset" when the peer says it has no connection for DATA we sent on this one: it
        echoes our rkey and a PSN we sent (an off-path host knows neither)."""
        snd = self.endpoint.sender
        if not self._established or ack.rkey != self.rkey:
            raise HandshakeError("stale_handshake", "a RESET for another connection")
        if not self.initial_psn <= unwrap(ack.initial_psn, snd.snd_una) < snd.snd_nxt:
            raise HandshakeError("stale_handshake", "a RESET for a PSN this connection did not send")
        return "reset"

    # ---- ring slots -------------------------------------------------------------------------
    def can_post(self) -> bool:
        """Whether a chunk may go to the core now: established, fewer than MAX_POSTED WRITEs
        outstanding, and the slot the next message id names is free."""
        if not self._established or self.endpoint.sender.failed:
            return False
        if self.reserved:
            self.release()
        if len(self.posted) + len(self.reserved) >= MAX_POSTED:
            return False
        slot = slot_of(self.endpoint.sender.next_msg_id)
        return all(slot_of(m) != slot for m in self.posted) and all(slot_of(m) != slot for m in self.reserved)

    def release(self) -> bool:
        """Abandoned WRITEs whose every PSN is acknowledged now: their slots are free again
        (True if any was freed)."""
        una = self.endpoint.sender.snd_una
        done = [m for m, end in self.reserved.items() if una >= end]
        for m in done:
            del self.reserved[m]
        return bool(done)

    def post(
        self,
        chunk: bytes | list[bytes | memoryview],
        owner: int,
        length: int,
        now_ns: int,
        sums: list[int] | None = None,
    ) -> list[Action]:
        """Hand ``chunk`` (header + ``length`` data bytes; or a gather list of them, read in order,
        its views read-only, kept uncopied until the WRITE completes) to the core as one WRITE
        into its slot; ``sums``: its ``mtu``-byte pieces' ``payload_sums`` where the caller knows them."""
        vaddr = slot_vaddr(RX_BASE_VADDR, self.endpoint.sender.next_msg_id)
        msg_id, actions = self.endpoint.post_write(chunk, vaddr, self.rkey, now_ns)
        self.posted[msg_id] = (owner, length)
        if not owner:  # a receipt or CANCEL, kept whole to repost on the next connection
            self.control_posted[msg_id] = chunk if isinstance(chunk, bytes) else b"".join(chunk)
        if sums is None:
            sums = payload_sums(chunk if isinstance(chunk, bytes) else b"".join(chunk), self.mtu)
        size = len(chunk) if isinstance(chunk, bytes) else sum([len(s) for s in chunk])
        self.piece_sums[msg_id] = (vaddr, size, sums)
        return actions

    def completed(self, msg_id: int) -> tuple[int, int] | None:
        """A WRITE completed (MessageSent): (its owner, its data bytes); None for an id not
        posted here (or abandoned)."""
        self.piece_sums.pop(msg_id, None)
        self.control_posted.pop(msg_id, None)
        return self.posted.pop(msg_id, None)

    def abandon(self, owner: int, now_ns: int) -> list[Action]:
        """Take every WRITE of ``owner`` back from the core at once; each keeps its slot until
        its last PSN is acknowledged (a late packet of it must not land in a reused slot)."""
        out: list[Action] = []
        for msg_id in [m for m, (o, _n) in self.posted.items() if o == owner]:
            del self.posted[msg_id]
            self.piece_sums.pop(msg_id, None)
            end, actions = self.endpoint.abandon(msg_id, now_ns)
            if end is not None and end > self.endpoint.sender.snd_una:
                self.reserved[msg_id] = end
            out += actions
        return out

    @property
    def outstanding(self) -> bool:
        """Whether anything posted here still waits for the peer (liveness counts then)."""
        if self.reserved:
            self.release()
        return bool(self.posted) or bool(self.reserved)

    def progress(self) -> int:
        """A number that moves whenever the peer acknowledges anything new."""
        c = self.endpoint.counters
        return c.data_bytes_delivered + c.messages_completed

    def route(self, msg: Any) -> tuple[int, FrameEncoder, bytes, int]:
        """``Connection.route``, with a DATA payload's checksum share taken from ``piece_sums``."""
        plane, encoder, carrier = self.peer.route(msg.meta.ev)
        if type(msg) is DataPacket:
            entry = self.piece_sums.get(msg.msg_id)
            if entry is not None:
                base, length, sums = entry
                mtu = self.mtu
                off = msg.vaddr - base
                k, rem = off // mtu, off % mtu  # (compiled, divmod() is a call on boxed ints: ~80 ns)
                # only a payload that is exactly that piece (a stale or foreign id is summed anew)
                if rem == 0 and 0 <= k < len(sums) and len(msg.payload) == min(mtu, length - k * mtu):
                    return plane, encoder, carrier, sums[k]
        return plane, encoder, carrier, -1


class RecvConnection(Connection):
    """The peer's DATA to us: a registered receive ring (its memory allocated, whole, when the
    first DATA lands), read slot by slot as the core reports WRITEs complete."""

    role = 0

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
        self.region = self.endpoint.register_region(RX_BASE_VADDR, RING_BYTES, self.rkey, lazy=True)
        self.data_seen = False  # a DATA packet with this rkey arrived: the peer has our answer
        self.bad_chunks = 0

    def connect_ack(self, ev: int, incarnation: int) -> ConnectAck:
        """The answer to the CONNECT that created this connection, on ``ev`` (its path back),
        naming our agent's ``incarnation`` beside the random half of the CONNECT's nonce."""
        nonce = (incarnation << 32) | (self.nonce & NONCE_LOW)
        return ConnectAck(self.qp.peer.value, self.initial_psn, nonce, self.rkey, meta=control_meta(ev))

    def answers(self, c: Connect) -> bool:
        """Whether ``c`` is (a repeat of) the CONNECT that created this connection."""
        return c.nonce == self.nonce and c.initial_psn == self.initial_psn

    def chunk(self, msg_id: int) -> tuple[ChunkHeader, memoryview] | None:
        """The chunk of the WRITE ``msg_id`` (called once per MessageReceived); None if its slot
        holds garbage. The data is a view of the ring, valid until the next packet lands."""
        off = slot_offset(msg_id)
        ring = self.region.view
        try:
            hdr = ChunkHeader.unpack(ring[off : off + HEADER_BYTES])
        except BadChunk:
            self.bad_chunks += 1
            return None
        start = off + HEADER_BYTES
        if start + hdr.length > len(ring):  # (a ring no data reached yet has no memory)
            self.bad_chunks += 1
            return None
        return hdr, ring[start : start + hdr.length]
