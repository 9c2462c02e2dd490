"""Transfers between two agents' connections wired back to back through real frames.

No sockets and no root (``agent_duo``): the sender's and the receiver's connection and
transfer logic exchange the exact bytes the agents would put on the wire, on a simulated
clock, so the handshake, the chunking, the receive ring, the verifier and the receipt are
tested together with the frame path. Optional drops show recovery.
"""

from __future__ import annotations

import random

import pytest
from agent_duo import MTU, FakeClient, Net

from mrc_host.agent.connection import HandshakeError, RecvConnection, SendConnection
from mrc_host.agent.paths import ROLE_SENDER, QpId
from mrc_host.agent.payload import CHUNK_DATA_BYTES, ChunkFlag, ChunkHeader, ChunkKind
from mrc_host.core import EvState, Mode, TransportConfig
from mrc_host.wire.codec import decode_frame
from mrc_host.wire.messages import DataPacket


def _send(net: Net, size: int, mode: Mode = Mode.MRC) -> FakeClient:
    c = FakeClient()
    net["uch0"].send("uch3", size, net.now, mode=mode, client=c)
    return c


def _finished(c: FakeClient) -> bool:
    return c.final is not None


def test_a_transfer_arrives_verified_over_every_path() -> None:
    net = Net()
    size = 3 * CHUNK_DATA_BYTES + 12345
    c = _send(net, size)
    net.run(lambda: _finished(c))
    s = c.final["summary"]  # type: ignore[index]
    assert c.final["ok"] and s["verified"] is True and s["bytes_acked"] == size  # type: ignore[index]
    (rec,) = net["uch3"].transfers.inbound.received
    assert rec.ok and rec.received == size and rec.chunks == 4 and rec.crc32 == s["crc32"]
    tx = net["uch0"].peers.send_connections()[0]
    used = {(r["plane"], r["t1"]) for r in tx.ev_table() if r["data_sent"] > 0}
    assert used == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert s["data_packets_sent"] >= size // MTU and not tx.piece_sums  # each chunk's sums freed when done


def test_the_ring_is_reused_many_times() -> None:
    net = Net()
    c = _send(net, 40 * CHUNK_DATA_BYTES)  # more chunks than the ring has slots
    net.run(lambda: _finished(c), limit=2_000_000)
    assert c.final["ok"] and net["uch3"].transfers.inbound.received[0].chunks == 40  # type: ignore[index]


def test_a_dead_path_is_retired_and_the_transfer_completes() -> None:
    net = Net()

    def drop(src: str, dst: str, frame: bytes) -> bool:
        msg = decode_frame(frame)
        ev = msg.meta.ev
        return src == "uch0" and isinstance(msg, DataPacket) and (ev >> 28, (ev >> 18) & 0x3FF) == (0, 1)

    net.drop = drop
    c = _send(net, 2 * CHUNK_DATA_BYTES)
    net.run(lambda: _finished(c))
    assert c.final["ok"], c.final  # type: ignore[index]
    tx = net["uch0"].peers.send_connections()[0]
    states = {(r["plane"], r["t1"]): r["state"] for r in tx.ev_table()}
    assert states[(0, 1)] == "ASSUMED_BAD"
    assert c.final["summary"]["retransmissions"] > 0  # type: ignore[index]


def test_receipts_travel_as_header_only_writes() -> None:
    net = Net()
    c = _send(net, 1000)
    net.run(lambda: _finished(c))
    # the receipt came back on the receiver's own sending connection, as one header-only WRITE
    back = net["uch3"].peers.send_connections()
    assert [b.peer.name for b in back] == ["uch0"]
    net.run(lambda: back[0].endpoint.counters.messages_completed == 1)  # its SACK may still be on its way
    assert back[0].endpoint.counters.data_bytes_sent == 80
    receipt = c.final["summary"]["receipt"]  # type: ignore[index]
    assert receipt == {"ok": True, "bytes": 1000, "crc32": c.final["summary"]["crc32"]}  # type: ignore[index]


def test_single_path_mode_uses_one_ev() -> None:
    net = Net()
    c = _send(net, CHUNK_DATA_BYTES, Mode.SINGLE_PATH)
    net.run(lambda: _finished(c))
    assert c.final["ok"]  # type: ignore[index]
    tx = net["uch0"].peers.send_connections()[0]
    assert len([r for r in tx.ev_table() if r["data_sent"] > 0]) == 1


def test_garbage_in_the_ring_is_counted_not_fatal() -> None:
    net = Net()
    c = _send(net, 1000)
    net.run(lambda: _finished(c))
    rx = next(x for x in net["uch3"].peers.conns.values() if isinstance(x, RecvConnection))
    assert rx.chunk(7) is None  # a slot no WRITE filled: no header
    assert rx.bad_chunks == 1
    rx.region.buffer[7 << 20 : (7 << 20) + 80] = ChunkHeader(
        ChunkKind.DATA, ChunkFlag.NONE, 1, 0, CHUNK_DATA_BYTES + 1, 1, 1
    ).pack()
    assert rx.chunk(7) is None and rx.bad_chunks == 2  # claims more bytes than its slot holds


def test_a_connect_ack_for_another_handshake_is_refused() -> None:
    net = Net()
    c = _send(net, 1000)
    net.run(lambda: _finished(c))
    tx = net["uch0"].peers.send_connections()[0]
    rx = next(x for x in net["uch3"].peers.conns.values() if isinstance(x, RecvConnection))
    forged = rx.connect_ack(0, net["uch3"].peers.handshakes.incarnation)
    forged.nonce ^= 1
    with pytest.raises(HandshakeError) as exc:
        tx.on_connect_ack(forged)
    assert exc.value.reason == "stale_handshake"
    forged = rx.connect_ack(0, net["uch3"].peers.handshakes.incarnation)
    forged.rkey ^= 1  # a second answer may not change the rkey
    with pytest.raises(HandshakeError):
        tx.on_connect_ack(forged)


def test_nothing_is_posted_before_the_handshake() -> None:
    net = Net()
    a = net["uch0"].paths
    tx = SendConnection(QpId(ROLE_SENDER, Mode.MRC, a.index, 3), a.peer("uch3", Mode.MRC),
                        TransportConfig(), random.Random(1))  # fmt: skip
    assert not tx.can_post() and not tx.posted
    # through the transfer logic: the frames before the answer are CONNECTs only
    net["uch0"].send("uch3", 10 * CHUNK_DATA_BYTES, net.now)
    assert all(decode_frame(f).__class__.__name__ == "Connect" for _p, f in net["uch0"].out)


def test_the_operator_denies_a_field_range_on_live_and_later_connections() -> None:
    """`mrc deny --field 1 --min 1 --max 1` (T1 1 in the contract format): every EV of a live
    connection it matches is DENIED, the next transfer sprays over T1 0 alone, connections
    made later start with them DENIED; `mrc allow` with the same rule lifts it."""
    from types import SimpleNamespace

    from mrc_host.agent.commands import Commands
    from mrc_host.agent.protocol import ProtocolError, parse_request
    from mrc_host.core import EvSet, EvState, PathSpace

    net = Net()
    c = _send(net, 2 * CHUNK_DATA_BYTES)
    net.run(lambda: _finished(c))
    host = net["uch0"]
    cmds = Commands(SimpleNamespace(peers=host.peers))  # type: ignore[arg-type]
    tx = host.peers.send_connections()[0]
    before = {r["ev"]: r["data_sent"] for r in tx.ev_table()}
    reply = cmds.deny(parse_request('{"cmd": "deny", "rule": {"field": 1, "min": 1, "max": 1}}'), None)
    t1_one = [r for r in tx.ev_table() if r["t1"] == 1]
    assert reply["evs"] >= len(t1_one) > 0 and all(r["state"] == "DENIED" for r in t1_one)
    c2 = _send(net, 2 * CHUNK_DATA_BYTES)
    net.run(lambda: _finished(c2))
    assert c2.final is not None and c2.final["ok"]
    sent = {(r["plane"], r["t1"]) for r in tx.ev_table() if r["data_sent"] > before[r["ev"]]}
    assert sent == {(0, 0), (1, 0)}
    later = EvSet(host.peers.transport(Mode.MRC, 0), PathSpace(2, 2), random.Random(4))
    assert {e.state for e in later.entries.values() if e.t1 == 1} == {EvState.DENIED}
    allow = parse_request('{"cmd": "allow", "rule": {"field": 1, "min": 1, "max": 1}}')
    assert cmds.allow(allow, None)["evs"] == reply["evs"]
    assert all(r["state"] == "GOOD" for r in tx.ev_table() if r["t1"] == 1)
    with pytest.raises(ProtocolError, match="rule: not one of the agent's deny rules"):
        cmds.allow(allow, None)
    with pytest.raises(ProtocolError, match=r"rule.field: must be an integer in 0..2, got 3"):
        cmds.deny(parse_request('{"cmd": "deny", "rule": {"field": 3}}'), None)


def test_a_newer_handshakes_connection_joins_the_nic_when_it_takes_the_qp() -> None:
    """A connection that waited behind a live one on its QP (a newer handshake) takes the QP
    when its DATA comes: from then on it shares the NIC as a connection accepted at once does --
    the receive-credit line and the operator's denies."""
    net = Net()
    c = _send(net, 1000)
    net.run(lambda: _finished(c))
    peers = net["uch3"].peers
    old = next(x for x in peers.conns.values() if isinstance(x, RecvConnection))
    newer = RecvConnection(old.qp, old.peer, peers.transport(Mode.MRC, 0), random.Random(2), nonce=old.nonce)
    peers.pending[old.qp.value] = newer
    denied = next(iter(newer.endpoint.evset.entries))
    peers.denies.evs.add(denied)  # (as `mrc deny EV` leaves it)
    assert peers._promote(newer, net.now) is newer
    assert peers.conns[old.qp.value] is newer and old.qp.value not in peers.pending
    assert newer.endpoint._credit_line is peers.credit_line
    assert newer.endpoint.evset.entries[denied].state is EvState.DENIED
