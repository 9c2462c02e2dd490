"""The BTH AckReq bit: with fewer than ``ack_every`` packets in flight, the last DATA packet a
sender can send asks for its SACK at once.

Why: the receiver coalesces SACKs (one per ``ack_every`` packets or ``ack_delay_ns``). A packet
it holds comes back late by up to ``ack_delay_ns``, and the sender reads that as queueing
delay. A flow whose window is under ``ack_every`` packets has every sample inflated that
way, so its congestion control keeps shrinking it: in an 8->1 incast a flow starved at one
packet while the others finished first, and the incast's completion swung 1.02-1.06 x its
ideal from seed to seed.
"""

from __future__ import annotations

import random

from mrc_host.core import NsccParams
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataPacket, Opcode, Sack

MTU = 1024


def _data(msgs: list[object]) -> list[DataPacket]:
    return [m for m in msgs if isinstance(m, DataPacket)]


def test_a_window_under_ack_every_asks_for_each_sack() -> None:
    """One packet fits: it is all the receiver will get, so it asks to be SACKed at once."""
    p = make_pair(size=1 << 16, cc_algorithm="fixed", nscc=NsccParams(max_cwnd=MTU))
    _, acts = p.a.post_write(random.Random(1).randbytes(16 * MTU), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    first = _data(p.sent_log)
    assert len(first) == 1 and first[0].ack_req
    p.deliver()
    later = _data(p.sent_log)[1:]
    assert later and all(d.ack_req for d in later)


def test_a_lone_packet_sent_into_a_full_window_leaves_its_sack_to_coalescing() -> None:
    """A SACK that frees one packet of a wide window (``ack_each_below`` or more in flight):
    that packet does not ask. Asking there
    made the ACK clock one SACK per packet for good (each SACK freed one packet, whose
    AckReq brought the next SACK): twice the SACK work at both ends, for nothing, since the
    next arrival releases a held SACK anyway."""
    window = 64
    p = make_pair(size=1 << 20, cc_algorithm="fixed", nscc=NsccParams(max_cwnd=window * MTU))
    assert window >= p.a.sender.cfg.ack_each_below
    _, acts = p.a.post_write(random.Random(3).randbytes(2 * window * MTU), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    burst = _data(p.sent_log)
    assert len(burst) == window and burst[-1].ack_req  # a burst of the window: its last asks
    first, p.in_flight = p.in_flight[0], []  # only the first packet arrives for now
    p.now += 100
    p.absorb(p.b, p.b.receive(first[1], p.now))
    assert p.b.receiver.ack_deadline is not None and not p.in_flight  # held for coalescing
    p.now = p.b.receiver.ack_deadline
    p.absorb(p.b, p.b.on_timer(p.now))  # its SACK, alone, frees one packet of the window
    (sack,) = p.in_flight
    p.in_flight = []
    p.now += 100
    p.absorb(p.a, p.a.receive(sack[1], p.now))
    lone = _data(p.sent_log)[window:]
    assert len(lone) == 1 and not lone[0].ack_req


def _held_packet(ack_req: bool) -> DataPacket:
    """A packet from the middle of a message, in order, not a resend: the receiver may hold it."""
    return DataPacket(
        22, 0, BASE, RKEY, b"x" * MTU, msg_id=1, send_ts=500, opcode=Opcode.WRITE_FIRST, ack_req=ack_req
    )


def test_the_receiver_holds_a_packet_for_coalescing_unless_it_asks() -> None:
    held = make_pair()
    assert not [
        a for a in held.b.receive(_held_packet(False), 1_000) if isinstance(getattr(a, "msg", None), Sack)
    ]
    assert held.b.receiver.ack_deadline is not None
    asked = make_pair()
    sacks = [
        a.msg for a in asked.b.receive(_held_packet(True), 1_000) if isinstance(getattr(a, "msg", None), Sack)
    ]
    assert len(sacks) == 1 and sacks[0].echo_ts == 500
    assert asked.b.receiver.ack_deadline is None


def test_a_one_packet_window_reads_no_ack_delay_as_queueing() -> None:
    """With room for one packet, each SACK comes at once: the RTT samples are the wire's
    (two delivery rounds of the loopback, 200 ns), not the receiver's coalescing delay."""
    ack_delay = 50_000
    p = make_pair(
        size=1 << 16,
        cc_algorithm="fixed",
        nscc=NsccParams(max_cwnd=MTU),
        ack_delay_ns=ack_delay,
    )
    _, acts = p.a.post_write(random.Random(2).randbytes(8 * MTU), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    for _ in range(64):  # deliver, and let a timer fire whenever traffic settles
        p.deliver()
        if p.sent_done():
            break
        p.fire_timers()
    assert len(p.sent_done()) == 1 and p.sent_done()[0].ok
    rtt = p.a.sender.recovery.rtt
    assert rtt.min_rtt_ns is not None and rtt.srtt_ns is not None
    assert rtt.srtt_ns < ack_delay / 10
    assert rtt.spread < ack_delay / 10
