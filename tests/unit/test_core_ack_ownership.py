"""The sender's state has one owner (issue 45 item 9).

``AckBook`` works out what a SACK or NACK proves and returns it; the ``Sender`` applies it
(the cumulative ACK, completions, resends, rewinds), as aioquic's recovery hands its results
back to its connection. Before, the book held the sender and wrote its fields itself.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path

from mrc_host.core.actions import MessageSent
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataPacket, Nack, NackReason, Sack

ACKS = Path(__file__).resolve().parents[2] / "mrc_host" / "core" / "acks.py"


def started(n_bytes: int):  # type: ignore[no-untyped-def]
    p = make_pair()
    _, acts = p.a.post_write(random.Random(1).randbytes(n_bytes), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.in_flight = []  # the test plays the receiver
    return p, [m for m in p.sent_log if isinstance(m, DataPacket)]


def test_the_book_returns_what_a_sack_proved_and_the_sender_applies_it() -> None:
    p, pkts = started(3 * 1024)
    a, b = pkts[:2]
    snd = p.a.sender
    una, nxt = snd.snd_una, snd.snd_nxt
    sack = Sack(11, a.psn + 2, a.psn, 0b11, b.meta.ev, echo_ts=b.send_ts)
    proof = snd.acks.on_sack(sack, una, nxt, p.now + 10)
    assert proof is not None and proof.cum == una + 2
    assert [r.seq for r in proof.newly] == [una, una + 1] and proof.rtt == p.now + 10 - b.send_ts
    # the book changed none of the sender's state: the cumulative ACK and records are the sender's
    assert snd.snd_una == una and una in snd.packets.records and una + 1 in snd.packets.records
    # through the endpoint, the sender applies it: the cumulative ACK moves, records go
    p2, pkts2 = started(3 * 1024)
    a2, b2 = pkts2[:2]
    acts = p2.a.receive(Sack(11, a2.psn + 2, a2.psn, 0b11, b2.meta.ev, echo_ts=b2.send_ts), p2.now + 10)
    assert p2.a.sender.snd_una == una + 2 and una not in p2.a.sender.packets.records
    assert not [x for x in acts if isinstance(x, MessageSent)]  # one packet of three still out


def test_the_book_returns_what_a_nack_proved_and_the_sender_applies_it() -> None:
    p, pkts = started(2 * 1024)
    snd = p.a.sender
    trimmed = pkts[1]
    nack = Nack(11, trimmed.psn, NackReason.TRIMMED_LASTHOP, trimmed.meta.ev)
    proof = snd.acks.on_nack(nack, snd.snd_una, snd.snd_nxt, p.now + 5)
    assert proof is not None and proof.trimmed and proof.lasthop and proof.resend
    assert not snd.packets.retx and not snd.packets.records[snd.snd_una + 1].lost  # nothing applied yet
    refused = Nack(11, pkts[0].psn, NackReason.BAD_RKEY, pkts[0].meta.ev)
    proof = snd.acks.on_nack(refused, snd.snd_una, snd.snd_nxt, p.now + 5)
    assert proof is not None and proof.refused == "BAD_RKEY" and snd.snd_una in snd.packets.records
    acts = p.a.receive(refused, p.now + 6)
    assert snd.snd_una not in snd.packets.records
    assert [x for x in acts if isinstance(x, MessageSent)] == []  # the other packet is still out
    p.a.receive(nack, p.now + 7)
    assert p.a.counters.retransmissions == 1  # resent at once, ahead of new data


def test_the_book_holds_no_sender_and_writes_no_field_of_one() -> None:
    """The book gets the records it reads, the loss detector and the EV set, never the
    sender, and assigns none of the sender's fields (nor pops or pushes its queues)."""
    tree = ast.parse(ACKS.read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "Sender" not in names and "tx" not in names
    sender_state = {"snd_una", "snd_nxt", "retx", "writes", "failed", "stalled_since", "lasthop_trim_ns"}
    written = set()
    methods = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name != "__init__"]
    for node in (n for f in methods for n in ast.walk(f)):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Attribute):
                    written.add(t.attr)
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if call and node.func.attr in ("pop", "appendleft", "append", "clear"):  # type: ignore[attr-defined]
            owner = node.func.value  # type: ignore[attr-defined]
            if isinstance(owner, ast.Attribute):
                written.add(owner.attr)
    assert not written & (sender_state | {"records"}), written & (sender_state | {"records"})
