"""Receiver credits (``nscc+rccc``, ``rccc``): the sender's gate and asks, the NIC's credit line."""

from __future__ import annotations

import dataclasses
import random
import struct

import pytest

from mrc_host.core import Endpoint, NicCredits, PathSpace, SetTimer, TransportConfig
from mrc_host.core.actions import Transmit
from mrc_host.core.cc_base import cc_names, create_cc
from mrc_host.core.config import RcccParams
from mrc_host.core.control import ControlOut
from mrc_host.core.counters import Counters
from mrc_host.core.credit_rx import CreditGrants
from mrc_host.core.credit_tx import SenderCredit, unwrap_credit
from mrc_host.core.evset import EvSet
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.codec import CREDIT_LEN, OPHDR_OFF, UDP_OFF, decode_frame, encode
from mrc_host.wire.messages import Credit, CreditRequest, DataPacket, Dscp, Ecn, Opcode
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER

MTU = 4096
BDP = 64 * 1024
SPEC = int(RcccParams().speculative_bdps * BDP)  # what a sender speculates (a quarter BDP)


def cfg(**kw: object) -> TransportConfig:
    base = TransportConfig.for_rtt(4_000, BDP, mtu=MTU, cc_algorithm="nscc+rccc")
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_both_credit_algorithms_are_registered_and_use_credits() -> None:
    assert {"nscc+rccc", "rccc"} <= set(cc_names())
    assert create_cc(cfg()).uses_credits and create_cc(cfg(cc_algorithm="rccc")).uses_credits
    assert not create_cc(cfg(cc_algorithm="nscc")).uses_credits


def test_credit_counts_wrap_as_serial_numbers() -> None:
    assert unwrap_credit(5, 0xFFFF_FFF0) == 0x1_0000_0005  # past 2**32: the next lap
    assert unwrap_credit(0xFFFF_FFF0, 0x1_0000_0005) == 0xFFFF_FFF0  # a late one from before it
    assert unwrap_credit(100, 50) == 100


def test_a_sender_speculates_its_allowance_then_sends_only_with_credit() -> None:
    c = SenderCredit(cfg())
    sent = 0
    while c.may_send():
        c.spend(MTU)
        sent += MTU
    assert sent == SPEC > 0  # speculation: its allowance unscheduled
    c.heard()
    assert not c.may_send()
    target = c.request(1 << 20, now_ns=5)
    assert target is not None
    c.sent(target, 5)
    assert c.on_credit(MTU, 10)
    assert c.may_send()
    c.spend(MTU + 100)  # a whole packet on any positive balance, the rest a debt
    assert not c.may_send() and c.balance == -100


def test_the_target_grows_with_the_need_only_and_is_asked_for_once() -> None:
    c = SenderCredit(cfg())
    reserve = 2 * RcccParams().quantum
    first = c.request(1 << 20, now_ns=0)  # a write of 1 MiB: what speculation does not cover
    assert first == (1 << 20) - SPEC + reserve
    assert c.request(1 << 20, now_ns=0) == first  # not sent yet: asked again
    c.sent(first, 0)
    assert c.request(1 << 20, now_ns=1) is None  # unchanged: nothing to ask
    for _ in range(SPEC // MTU):
        c.spend(MTU)  # speculation spends its allowance: the target stays
    assert c.request((1 << 20) - SPEC, now_ns=2) is None
    c.on_credit(64 * 1024, 3)  # granted a part
    c.spend(MTU)
    assert c.request((1 << 20) - SPEC - MTU, now_ns=4) is None  # sending with credit: the same target
    # a second write of 1 MiB posted: the target grows by exactly that
    assert c.request((2 << 20) - SPEC - MTU, now_ns=5) == first + (1 << 20)


def test_a_sender_waiting_for_credit_asks_again_after_two_base_rtts() -> None:
    c = SenderCredit(cfg())
    c.heard()
    target = c.request(1 << 20, now_ns=0)
    assert target is not None
    c.sent(target, 0)
    assert c.deadline() == 8_000 and c.request(1 << 20, now_ns=7_999) is None
    assert c.request(1 << 20, now_ns=8_000) == c.asked == target
    c.sent(target, 8_000)
    assert c.retries == 1 and c.deadline() == 16_000
    assert c.on_credit(c.asked, 9_000)  # all it asked for: no longer waiting
    assert c.request(0, now_ns=30_000) is None and c.deadline() is None


def test_a_need_above_two_gib_is_asked_for_in_steps_the_receiver_reads_ahead() -> None:
    """Counts are compared within 2**31: a target further ahead would read as behind what was
    granted, and the sender would wait for credit forever."""
    c = SenderCredit(cfg())
    c.heard()
    (g, out) = _grants(NicCredits(0.0))
    need = 3 << 30
    for step in range(3):
        target = c.request(need, now_ns=step)
        assert target is not None and 0 < target - c.granted < 1 << 31
        c.sent(target, step)
        g.on_request(CreditRequest(7, target & 0xFFFF_FFFF), step, out)  # type: ignore[arg-type]
        assert g.granted == target  # (unpaced: all of it, at once)
        assert c.on_credit(out[-1].msg.granted, step)  # type: ignore[attr-defined]
        assert c.granted == target
        need -= c.balance
        c.spend(c.balance)
    assert c.granted >= (3 << 30) - c.spec_bytes


def test_a_credit_above_every_target_asked_is_refused_and_counted() -> None:
    """A receiver grants at most what it was asked for: a CREDIT beyond that is a bug or a
    forgery, and believing it would put the sender's count 2**31 ahead of the receiver's."""
    pair = make_pair(size=2 << 20, cc_algorithm="nscc+rccc")
    a = pair.a
    credit = a.sender.credit
    assert credit is not None
    a.receive(Credit(a.local_qp, 4096), 0)  # nothing asked yet
    assert a.counters.malformed["credit_beyond_request"] == 1 and credit.granted == 0
    a.post_write(bytes(2 << 20), BASE, RKEY, 0)
    asked = credit.asked
    assert asked > 1 << 20 and a.counters.credit_requests_sent == 1
    a.receive(Credit(a.local_qp, 0x7FFF_0000), 1)
    assert a.counters.malformed["credit_beyond_request"] == 2 and credit.granted == 0
    a.receive(Credit(a.local_qp, asked), 2)
    assert credit.granted == asked and a.counters.malformed["credit_beyond_request"] == 2


def _grants(line: NicCredits) -> tuple[CreditGrants, list[object]]:
    conf = cfg()
    evset = EvSet(conf, PathSpace(2, 4), random.Random(1), None)
    counters = Counters()
    return CreditGrants(conf, line, ControlOut(evset, counters, True), 7, counters), []


def test_the_nic_line_grants_round_robin_at_its_rate() -> None:
    """Two receiving endpoints on one 100 Gb/s line, both asked for much: their CREDITs
    alternate, each a quantum, and together they grant the line's rate."""
    line = NicCredits(100.0)
    (a, out_a), (b, out_b) = _grants(line), _grants(line)
    a.on_request(CreditRequest(7, 1 << 24), 0, out_a)  # type: ignore[arg-type]
    b.on_request(CreditRequest(7, 1 << 24), 0, out_b)  # type: ignore[arg-type]
    order = []
    now = 0
    while now < 200_000:
        nxt = min(a.deadline() or 1 << 62, b.deadline() or 1 << 62)
        now = nxt
        for name, g, out in (("a", a, out_a), ("b", b, out_b)):
            if g.deadline() == now:
                g.on_timer(now, out)  # type: ignore[arg-type]
                order.append(name)
    assert order[:6] in (list("ababab"), list("bababa"))
    wire = a.granted + b.granted + (a.granted + b.granted) // MTU * 150
    assert wire * 8 / 200_000 == pytest.approx(100.0, rel=0.02)
    assert abs(a.granted - b.granted) <= RcccParams().quantum
    assert all(isinstance(t.msg, Credit) for t in out_a)  # type: ignore[attr-defined]


def test_a_request_not_above_what_was_granted_is_answered_at_once() -> None:
    """A sender that asks again for what it was granted lost a CREDIT: it hears it again."""
    (g, out) = _grants(NicCredits(100.0))
    g.on_request(CreditRequest(7, 8192), 0, out)  # type: ignore[arg-type]
    assert g.granted == 8192 and len(out) == 1
    g.on_request(CreditRequest(7, 8192), 50_000, out)  # type: ignore[arg-type]
    assert len(out) == 2 and out[-1].msg.granted == 8192  # type: ignore[attr-defined]
    assert g.deadline() is None


def test_unpaced_without_a_known_rate_everything_asked_is_granted_at_once() -> None:
    (g, out) = _grants(NicCredits(0.0))
    g.on_request(CreditRequest(7, 1 << 20), 0, out)  # type: ignore[arg-type]
    assert g.granted == 1 << 20 and g.deadline() is None


def test_a_write_over_credits_completes_intact_with_few_control_messages() -> None:
    """Loopback, unpaced: the sender speculates up to its allowance, asks once, is granted the
    rest, and the write completes with every byte in place."""
    size = 1 << 20
    pair = make_pair(size=size, cc_algorithm="nscc+rccc")
    data = bytes(range(256)) * (size // 256)
    _, actions = pair.a.post_write(data, BASE, RKEY, pair.now)
    first = [t.msg for t in actions if isinstance(t, Transmit)]
    spec = pair.a.sender.credit.spec_bytes  # type: ignore[union-attr]
    assert sum(len(m.payload) for m in first if isinstance(m, DataPacket)) <= spec < size
    assert sum(isinstance(m, CreditRequest) for m in first) == 1
    # a control message as switches classify them: DSCP CONTROL, Not-ECT (never trimmed, never marked)
    (req,) = [m for m in first if isinstance(m, CreditRequest)]
    assert (req.meta.dscp, req.meta.ecn) == (Dscp.CONTROL, Ecn.NOT_ECT)
    pair.absorb(pair.a, actions)
    pair.settle()
    assert pair.sent_done() and pair.sent_done()[0].ok
    region = pair.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer[:size]) == data
    assert pair.a.counters.credit_requests_sent <= 3 and pair.b.counters.credits_sent >= 1


# ---- the wire: CREDIT and CREDIT_REQUEST ---------------------------------------------------
def _frame(msg: Credit | CreditRequest) -> bytes:
    return encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)


@pytest.mark.parametrize("count", [0, 1, 0x8000_0000, 0xFFFF_FFFF])
def test_credit_messages_round_trip_through_the_codec(count: int) -> None:
    for msg in (Credit(0x00ABCD, count), CreditRequest(0x00ABCD, count)):
        frame = _frame(msg)
        assert frame[OPHDR_OFF - 12] == (Opcode.CREDIT if isinstance(msg, Credit) else Opcode.CREDIT_REQUEST)
        back = decode_frame(frame, verify_icrc=True)
        assert type(back) is type(msg) and back.qp == msg.qp
        assert (back.granted if isinstance(back, Credit) else back.target) == count  # type: ignore[union-attr]
        assert len(frame) == OPHDR_OFF + CREDIT_LEN + 4  # the header and the ICRC, nothing more


def test_malformed_credit_frames_are_counted_and_dropped() -> None:
    """A CREDIT cut short, one with bytes after its header, one naming another queue pair, one
    whose count is out of range: each counted by reason, none granting anything."""
    pair = make_pair(size=2 << 20, cc_algorithm="nscc+rccc")
    a = pair.a
    credit = a.sender.credit
    assert credit is not None
    good = _frame(Credit(a.local_qp, 1 << 20))
    long = bytearray(good[:-4] + b"\0\0\0\0" + good[-4:])
    struct.pack_into(">H", long, 18, len(long) - 54)  # (outer and inner lengths made to match)
    struct.pack_into(">H", long, 58, len(long) - 94)
    struct.pack_into(">H", long, UDP_OFF + 4, len(long) - UDP_OFF)
    for frame in (good[: OPHDR_OFF + 2], bytes(long)):
        a.receive_frame(frame, 0)
    a.receive(Credit(a.local_qp, 1 << 32), 0)  # (a decoded message carries any int: checked)
    a.receive(CreditRequest(a.local_qp, -1), 0)
    a.receive_frame(_frame(Credit(a.local_qp + 1, 1 << 20)), 0)
    m = a.counters.malformed
    assert m["truncated"] == 1 and m["bad_length"] == 1 and m["bad_credit"] == 2
    assert a.counters.wrong_qp == 1
    assert credit.granted == 0 and credit.balance == 0 and a.grants is None
    a.post_write(bytes(2 << 20), BASE, RKEY, 0)  # a request for more than the good one grants
    a.receive_frame(good, 0)  # the well-formed one counts
    assert a.counters.credits_received == 1 and credit.granted == 1 << 20


def test_a_credit_to_a_sender_without_credits_is_counted_and_ignored() -> None:
    pair = make_pair(cc_algorithm="nscc")
    a = pair.a
    assert a.sender.credit is None
    acts = a.receive(Credit(a.local_qp, 12345), 0)
    assert a.counters.credits_received == 1 and not [x for x in acts if isinstance(x, Transmit)]


def test_credits_are_granted_and_consumed_end_to_end_on_a_paced_line() -> None:
    """Two senders into one receiving NIC whose credit line runs at 100 Gb/s: each one's DATA
    beyond its speculation is covered by CREDITs it received (never more than a packet of
    debt), and the two receivers' grants interleave."""
    line = NicCredits(100.0)
    conf = cfg()
    paths = PathSpace(2, 4)
    rng = random.Random(5)
    snd = [Endpoint(local_qp=10 + i, peer_qp=20 + i, config=conf, paths=paths, rng=rng) for i in range(2)]
    rcv = [
        Endpoint(local_qp=20 + i, peer_qp=10 + i, config=conf, paths=paths, rng=rng, credit_line=line)
        for i in range(2)
    ]
    for r in rcv:
        r.register_region(BASE, 1 << 20, RKEY)
    size = 512 * 1024
    queue: list[tuple[Endpoint, object]] = []
    for s in snd:
        _, acts = s.post_write(bytes(size), BASE, RKEY, 0)
        queue += [(s, x) for x in acts]
    peer = {id(e): p for e, p in [*zip(snd, rcv, strict=True), *zip(rcv, snd, strict=True)]}
    timers: dict[int, int] = {}
    credit_times: list[list[int]] = [[], []]
    now = 0
    for _ in range(100_000):
        while queue:
            src, act = queue.pop(0)
            if isinstance(act, Transmit):
                if isinstance(act.msg, Credit):
                    credit_times[rcv.index(src)].append(now)  # type: ignore[arg-type]
                elif isinstance(act.msg, DataPacket):
                    c = src.sender.credit  # type: ignore[attr-defined]
                    # the gate held: speculation and balance each at most a packet overdrawn
                    assert c.spec_left > -MTU and c.balance > -MTU
                dst = peer[id(src)]
                queue += [(dst, x) for x in dst.receive(act.msg, now)]  # type: ignore[arg-type]
            elif isinstance(act, SetTimer):
                timers[id(src)] = act.at_ns if act.at_ns is not None else -1
        due = [(t, e) for e in (*snd, *rcv) if (t := timers.get(id(e), -1)) >= 0]
        if not due:
            break
        now = max(now, min(t for t, _ in due))
        for t, e in due:
            if t <= now:
                timers[id(e)] = -1
                queue += [(e, x) for x in e.on_timer(now)]
    for s, r in zip(snd, rcv, strict=True):
        c = s.sender.credit
        assert c is not None and s.counters.messages_completed == 1
        assert r.counters.credits_sent >= 4 and s.counters.credits_received == r.counters.credits_sent
        # every new byte beyond speculation was paid for with credit granted
        assert c.granted >= size - c.spec_bytes and r.grants is not None and r.grants.granted == c.granted
    # round robin on the line: each receiver granted while the other did (its middle CREDIT
    # falls between the other's first and last)
    for mine, other in (credit_times, credit_times[::-1]):
        assert other[0] <= sorted(mine)[len(mine) // 2] <= other[-1]


def test_data_beyond_every_grant_delays_the_nics_next_grants_by_its_wire_time() -> None:
    """Speculation, and resends that need no credit, take the port's time as granted DATA does:
    grants paced at the port's rate alone would leave the queue such bytes made standing for
    good. Booked once, at the endpoint's next slot; DATA within its grants books nothing, and
    less than a quantum beyond them waits until there is more."""
    line = NicCredits(100.0)
    (g, out) = _grants(line)
    quantum = RcccParams().quantum
    g.on_request(CreditRequest(7, 1 << 24), 0, out)  # type: ignore[arg-type]
    assert g.granted == quantum
    slot = g.deadline()
    assert slot is not None
    g.c.data_bytes_placed = g.granted  # all it granted arrived, nothing more
    g.on_timer(slot, out)  # type: ignore[arg-type]
    assert g.granted == 2 * quantum and g.deadline() == 2 * slot
    extra = 32 * MTU
    g.c.data_bytes_placed = g.granted + extra  # 32 packets no grant covered
    g.on_timer(2 * slot, out)  # type: ignore[arg-type]
    assert g.granted == 2 * quantum and len(out) == 2  # this slot went to them
    nxt = g.deadline()
    assert nxt is not None
    # (the skipped slot's quantum is part of their time)
    assert nxt - 2 * slot == pytest.approx((extra + 32 * g.per_packet) * 8 / 100.0, abs=2)
    g.on_timer(nxt, out)  # type: ignore[arg-type]
    assert g.granted == 3 * quantum and g.unscheduled == extra  # booked once
    g.c.data_bytes_placed += quantum - 1  # under a quantum beyond: granted as usual
    slot = g.deadline()
    assert slot is not None and slot - nxt == pytest.approx(g.wire * 8 / 100.0, abs=2)
    g.on_timer(slot, out)  # type: ignore[arg-type]
    assert g.granted == 4 * quantum and g.unscheduled == extra
