"""Abandoning a posted write (``Endpoint.abandon``).

An application that cancels a transfer must stop its packets at once and free its bytes,
without breaking the connection's PSN sequence: a write not yet segmented disappears; the
packets of one already (partly) sent keep their PSNs, and any that must be resent go out as
empty fillers of message 0, which place nothing and complete no message. The writes posted
around it complete as usual.
"""

from __future__ import annotations

import random

from mrc_host.core import MessageReceived, MessageSent, Mode, NsccParams
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataPacket, NackReason, Opcode


def payload(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def data_of(sent: list[object], msg_id: int) -> list[DataPacket]:
    return [m for m in sent if isinstance(m, DataPacket) and m.msg_id == msg_id]


def test_an_unsent_write_is_dropped_and_the_next_completes() -> None:
    p = make_pair(size=1 << 16, nscc=NsccParams(max_cwnd=4096, min_cwnd=1024))
    a = p.a
    assert a.sender.next_msg_id == 1
    first, acts = a.post_write(payload(8192), BASE, RKEY, p.now)
    p.absorb(a, acts)
    second, acts = a.post_write(payload(8192, 2), BASE + 8192, RKEY, p.now)
    p.absorb(a, acts)
    third, acts = a.post_write(payload(4096, 3), BASE + 16384, RKEY, p.now)
    p.absorb(a, acts)
    assert (first, second, third) == (1, 2, 3) and a.sender.next_msg_id == 4
    assert data_of(p.sent_log, second) == []  # the window holds it back
    end, acts = a.abandon(second, p.now)
    assert end == a.sender.snd_una  # nothing of it was ever sent
    p.absorb(a, acts)
    p.deliver()
    assert data_of(p.sent_log, second) == []
    assert [e.msg_id for e in p.sent_done()] == [first, third] and all(e.ok for e in p.sent_done())
    assert [e.msg_id for e in p.received_done()] == [first, third]
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer[16384:20480]) == payload(4096, 3)
    assert a.counters.messages_abandoned == 1 and a.sender.idle()
    assert a.abandon(second, p.now)[0] is None  # no longer pending


def test_a_partly_sent_write_stops_and_its_losses_come_back_as_fillers() -> None:
    p = make_pair(size=1 << 16, nscc=NsccParams(max_cwnd=4096, min_cwnd=1024))
    a = p.a
    big, acts = a.post_write(payload(16384), BASE, RKEY, p.now)
    p.absorb(a, acts)
    sent_before = data_of(p.sent_log, big)
    assert 0 < len(sent_before) < 16  # the window let a few of its 16 packets out
    lost = sent_before[0]
    p.in_flight = [(d, m) for d, m in p.in_flight if m is not lost]  # the first one is lost
    end, acts = a.abandon(big, p.now)
    assert end == a.sender.snd_una + len(sent_before)
    assert a.sender.inflight_bytes == 0  # its bytes no longer count against the window
    p.absorb(a, acts)
    nxt, acts = a.post_write(payload(4096, 5), BASE + 32768, RKEY, p.now)
    p.absorb(a, acts)
    p.deliver()
    for _ in range(50):  # the lost packet's PSN is found missing and resent (timers)
        if a.sender.idle():
            break
        p.fire_timers()
        p.deliver()
    assert a.sender.idle() and a.sender.snd_una >= end
    assert len(data_of(p.sent_log, big)) == len(sent_before)  # not one more packet of it
    fillers = data_of(p.sent_log, 0)
    assert fillers and all(f.payload == b"" and f.opcode is Opcode.WRITE_MIDDLE for f in fillers)
    assert {f.psn for f in fillers} == {lost.psn}
    # the next write completes on both ends, the abandoned one on neither
    assert [e.msg_id for e in p.sent_done()] == [nxt] and p.sent_done()[0].ok
    assert [e.msg_id for e in p.received_done() if isinstance(e, MessageReceived)] == [nxt]
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer[32768:36864]) == payload(4096, 5)
    assert bytes(region.buffer[0:1024]) == bytes(1024)  # the lost packet's bytes never arrived


def test_a_connection_failure_after_an_abandon_reports_the_live_writes_only() -> None:
    p = make_pair(size=1 << 16, nscc=NsccParams(max_cwnd=4096, min_cwnd=1024), retry_cnt=1)
    a = p.a
    big, acts = a.post_write(payload(16384), BASE, RKEY, p.now)
    p.absorb(a, acts)
    a.abandon(big, p.now)
    other, acts = a.post_write(payload(2048, 4), BASE + 32768, RKEY, p.now)
    p.absorb(a, acts)
    p.in_flight.clear()  # the peer is gone
    for _ in range(20):
        p.fire_timers()
        p.in_flight.clear()
    failed = [e for e in p.sent_done() if isinstance(e, MessageSent)]
    assert {e.msg_id for e in failed if e.msg_id} == {other} and not any(e.ok for e in failed)


def test_go_back_n_resends_fillers_in_place() -> None:
    p = make_pair(size=1 << 16, nscc=NsccParams(max_cwnd=4096, min_cwnd=1024), mode=Mode.SINGLE_PATH)
    a = p.a
    big, acts = a.post_write(payload(8192), BASE, RKEY, p.now)
    p.absorb(a, acts)
    sent = data_of(p.sent_log, big)
    p.in_flight = [(d, m) for d, m in p.in_flight if m is not sent[0]]
    a.abandon(big, p.now)
    p.deliver()
    for _ in range(50):
        if a.sender.idle():
            break
        p.fire_timers()
        p.deliver()
    assert a.sender.idle() and len(data_of(p.sent_log, big)) == len(sent)
    assert p.b.counters.refused_writes.get(NackReason.BAD_ADDRESS.name, 0) == 0


def test_writes_complete_at_the_receiver_in_posting_order_whatever_the_arrival_order() -> None:
    """The receiver reads each completed WRITE by its message id: two WRITEs completed by the
    same arrival must be reported in the order they were posted, even when the second one's
    last packet arrived first."""
    p = make_pair(size=1 << 16)
    a = p.a
    first, acts = a.post_write(payload(2048), BASE, RKEY, p.now)
    p.absorb(a, acts)
    second, acts = a.post_write(payload(1024, 2), BASE + 4096, RKEY, p.now)
    p.absorb(a, acts)
    tail = next(m for d, m in p.in_flight if isinstance(m, DataPacket) and m.opcode is Opcode.WRITE_LAST)
    assert tail.msg_id == first
    p.in_flight = [(d, m) for d, m in p.in_flight if m is not tail]
    p.deliver()  # everything but the first WRITE's last packet: nothing completes yet
    assert p.received_done() == []
    p.absorb(p.b, p.b.receive(tail, p.now + 1))  # both complete now
    assert [e.msg_id for e in p.received_done()] == [first, second]
