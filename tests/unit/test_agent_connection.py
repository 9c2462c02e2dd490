"""A transfer between two agent connections wired back to back through real frames.

No sockets and no root: the sender's ``SendConnection`` and the receiver's ``RecvConnection``
exchange the exact bytes the agent would put on the wire (their own encoders, the codec's
decode), on a simulated clock, so the chunking, the receive ring, the verifier and the
receipt are tested together with the frame path. Optional drops by EV show recovery.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from controller.compiler import compile_host_configs
from mrc_fabric.hostconfig import HostConfig
from mrc_fabric.topology import build_clos
from mrc_host.agent.connection import HandshakeError, Received, RecvConnection, SendConnection, Transfer
from mrc_host.agent.paths import ROLE_SENDER, HostPaths, QpId
from mrc_host.agent.payload import CHUNK_DATA_BYTES, ChunkFlag, ChunkKind
from mrc_host.core import MessageReceived, MessageSent, Mode, SetTimer, Transmit, TransportConfig
from mrc_host.wire.codec import decode, decode_frame
from mrc_host.wire.messages import SACK_BITMAP_BITS, Connect, ConnectAck, DataPacket


def _configs() -> dict[str, HostConfig]:
    return compile_host_configs(build_clos(2, 2, 2, 2, prefix="uc"))


class Wire:
    """Two connections, frames in flight, a clock, and what each side reported."""

    def __init__(self, mode: Mode = Mode.MRC, drop: Callable[[int, bytes], bool] | None = None) -> None:
        cfgs = _configs()
        a, b = HostPaths(cfgs["uch0"]), HostPaths(cfgs["uch3"])
        isn = 0xFFFF00  # the PSN space wraps during every transfer here
        cfg = TransportConfig.for_rtt(
            1_000_000, 64 * 1024, mode=mode, mtu=1364, rx_window=SACK_BITMAP_BITS, initial_psn=isn
        )
        q = QpId(ROLE_SENDER, mode, a.index, b.index)
        self.tx = SendConnection(q, a.peer("uch3", mode), cfg, random.Random(1), nonce=0x1234)
        # the handshake, through real frames: CONNECT creates the receiving end, CONNECT_ACK
        # gives the sender its rkey
        connects = [decode_frame(self.tx.encode(c)[1]) for c in self.tx.connect_messages(0, random.Random(3))]
        assert len(connects) == 2 and all(isinstance(c, Connect) for c in connects)
        c = connects[0]
        assert isinstance(c, Connect) and c.initial_psn == isn and c.nonce == 0x1234
        self.rx = RecvConnection(
            QpId.decode(c.qp), b.peer("uch0", mode), cfg, random.Random(2), nonce=c.nonce
        )
        assert self.rx.answers(c) and self.rx.qp.peer == self.tx.qp
        ack = decode_frame(self.rx.encode(self.rx.connect_ack(c.meta.ev))[1])
        assert isinstance(ack, ConnectAck) and not self.tx.established
        assert self.tx.on_connect_ack(ack) and self.tx.established and self.tx.rkey == self.rx.rkey
        assert not self.tx.on_connect_ack(ack)  # a repeated answer changes nothing
        self.now = 1_000_000
        self.flight: list[tuple[object, bytes]] = []
        self.timers: dict[int, int | None] = {}
        self.sent: list[MessageSent] = []
        self.received: list[Received] = []
        self.drop = drop or (lambda ev, frame: False)
        self.frames = 0
        self.data_frames = 0

    def apply(self, conn, actions) -> None:
        for act in actions:
            if isinstance(act, Transmit):
                plane, frame = conn.encode(act.msg)
                assert plane == act.msg.meta.ev >> 28
                self.frames += 1
                if isinstance(act.msg, DataPacket):
                    # the send side's checksum shortcut (piece_sums) gives the encoder's own frame
                    peer = conn.peer
                    assert frame == peer.encoders[plane].encode(act.msg, peer.carrier(act.msg.meta.ev))
                    self.data_frames += 1
                if not self.drop(act.msg.meta.ev, frame):
                    self.flight.append((self.rx if conn is self.tx else self.tx, frame))
            elif isinstance(act, SetTimer):
                self.timers[id(conn)] = act.at_ns
            elif isinstance(act, MessageSent):
                self.sent.append(act)
                conn.on_sent(act.msg_id, act.ok, act.reason, self.now)
                self.apply(conn, conn.pump(self.now))
            elif isinstance(act, MessageReceived):
                hdr, data = conn.take_chunk()
                assert hdr.kind is ChunkKind.DATA
                rec = conn.on_data_chunk(hdr, data)
                if rec is not None:
                    self.received.append(rec)

    def run(self, until: Callable[[], bool], limit: int = 200_000) -> None:
        for _ in range(limit):
            if until():
                return
            if self.flight:
                batch, self.flight = self.flight, []
                self.now += 20_000
                for dst, frame in batch:
                    self.apply(dst, dst.endpoint.receive(decode(frame), self.now))
                continue
            due = [(t, c) for c in (self.tx, self.rx) if (t := self.timers.get(id(c))) is not None]
            assert due, "nothing in flight and no timer: stuck"
            t, c = min(due, key=lambda x: x[0])
            self.now = max(self.now, t)
            self.apply(c, c.endpoint.on_timer(self.now))
        raise AssertionError("did not finish")


def _send(w: Wire, size: int) -> Transfer:
    t = Transfer(77, "uch3", w.tx.qp.mode.value, size, seed=5, started_ns=w.now)
    w.tx.start(t)
    w.apply(w.tx, w.tx.pump(w.now))
    return t


def test_a_transfer_arrives_verified_over_every_path() -> None:
    w = Wire()
    size = 3 * CHUNK_DATA_BYTES + 12345
    t = _send(w, size)
    w.run(lambda: t.all_acked)
    assert [r.ok for r in w.received] == [True]
    rec = w.received[0]
    assert rec.received == size and rec.chunks == 4 and rec.crc32 == t.crc32
    assert t.bytes_acked == size and all(m.ok for m in w.sent)
    used = {(r["plane"], r["t1"]) for r in w.tx.ev_table() if r["data_sent"] > 0}
    assert used == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert w.data_frames >= size // w.tx.mtu and not w.tx.piece_sums  # each chunk's sums freed when done
    summary = w.tx.summary(t, w.now)
    assert summary["bytes_acked"] == size and summary["verified"] is None  # no receipt yet


def test_the_ring_is_reused_many_times() -> None:
    w = Wire()
    size = 40 * CHUNK_DATA_BYTES  # more chunks than the ring has slots
    t = _send(w, size)
    w.run(lambda: t.all_acked, limit=2_000_000)
    assert w.received[0].ok and w.received[0].chunks == 40


def test_a_dead_path_is_retired_and_the_transfer_completes() -> None:
    dead = {}

    def drop(ev: int, frame: bytes) -> bool:
        return (ev >> 28, (ev >> 18) & 0x3FF) == (0, 1) and dead.setdefault("on", True)

    w = Wire(drop=drop)
    t = _send(w, 2 * CHUNK_DATA_BYTES)
    w.run(lambda: t.all_acked)
    assert w.received[0].ok
    states = {(r["plane"], r["t1"]): r["state"] for r in w.tx.ev_table()}
    assert states[(0, 1)] == "ASSUMED_BAD"
    assert w.tx.summary(t, w.now)["retransmissions"] > 0


def test_receipts_travel_as_header_only_writes() -> None:
    w = Wire()
    w.tx.queue_receipt(1234, True, 99, 0x07070707)
    w.apply(w.tx, w.tx.pump(w.now))
    got = []
    orig = w.apply

    def apply(conn, actions):
        for act in actions:
            if isinstance(act, MessageReceived):
                got.append(conn.take_chunk()[0])
        orig(conn, [a for a in actions if not isinstance(a, MessageReceived)])

    w.apply = apply  # type: ignore[method-assign]
    w.run(lambda: bool(got))
    hdr = got[0]
    assert hdr.kind is ChunkKind.RECEIPT and hdr.transfer_id == 1234 and hdr.total == 99
    assert hdr.flags & ChunkFlag.OK and hdr.crc32 == 0x07070707


def test_single_path_mode_uses_one_ev() -> None:
    w = Wire(mode=Mode.SINGLE_PATH)
    t = _send(w, CHUNK_DATA_BYTES)
    w.run(lambda: t.all_acked)
    assert w.received[0].ok
    assert len([r for r in w.tx.ev_table() if r["data_sent"] > 0]) == 1


def test_garbage_in_the_ring_is_counted_not_fatal() -> None:
    w = Wire()
    assert w.rx.take_chunk() is None  # an all-zero slot: no header
    assert w.rx.bad_chunks == 1


def test_a_connect_ack_for_another_handshake_is_refused() -> None:
    w = Wire()
    forged = w.rx.connect_ack(0)
    forged.nonce ^= 1
    with pytest.raises(HandshakeError) as exc:
        w.tx.on_connect_ack(forged)
    assert exc.value.reason == "stale_handshake"
    forged = w.rx.connect_ack(0)
    forged.rkey ^= 1  # a second answer may not change the rkey
    with pytest.raises(HandshakeError):
        w.tx.on_connect_ack(forged)


def test_nothing_is_posted_before_the_handshake() -> None:
    cfgs = _configs()
    a = HostPaths(cfgs["uch0"])
    tx = SendConnection(QpId(ROLE_SENDER, Mode.MRC, a.index, 3), a.peer("uch3", Mode.MRC),
                        TransportConfig(), random.Random(1))  # fmt: skip
    tx.start(Transfer(1, "uch3", "mrc", 1000, seed=1, started_ns=0))
    assert tx.pump(0) == [] and not tx.posted
