"""Peer safety (issue 13 item 1, core side) and per-connection random initial PSNs.

The sender believes a SACK or NACK only for PSNs it sent and has not yet seen acknowledged;
everything else is counted by reason and dropped before it can touch ECN, congestion
control or EV state.
"""

from __future__ import annotations

import random

import pytest

from mrc_host.core import EvState, TransportConfig
from mrc_host.core.psn import PSN_MODULUS
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataFlag, DataPacket, Nack, NackReason, Sack


def payload(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def data_sent(p) -> list[DataPacket]:  # type: ignore[no-untyped-def]
    return [m for m in p.sent_log if isinstance(m, DataPacket)]


def started(n_bytes: int = 4096, **kw: object):  # type: ignore[no-untyped-def]
    p = make_pair(**kw)
    _, acts = p.a.post_write(payload(n_bytes), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.in_flight = []  # the test plays the receiver
    return p


def test_sack_naming_psns_never_sent_is_dropped_before_ecn_and_cc() -> None:
    p = started()
    pkts = data_sent(p)
    first = pkts[0]
    cwnd = p.a.sender.congestion.cwnd
    # bitmap bit 63 names a PSN far beyond snd_nxt; the ECN echo names a real EV
    forged = Sack(11, first.psn, first.psn, 1 | 1 << 63, first.meta.ev, ecn_echo=True, echo_ts=first.send_ts)
    p.a.receive(forged, p.now + 10)
    c = p.a.counters
    assert c.acks_dropped["sack_bitmap_beyond_sent"] == 1
    assert c.ecn_echoes_received == 0 and p.a.evset.state(first.meta.ev) is EvState.GOOD
    assert p.a.sender.congestion.cwnd == cwnd
    assert not any(r.sacked for r in p.a.sender.packets.records.values())
    beyond = Sack(11, (first.psn + 100) & 0xFFFFFF, first.psn, 0, first.meta.ev, ecn_echo=True)
    p.a.receive(beyond, p.now + 20)
    assert c.acks_dropped["sack_cum_beyond_sent"] == 1
    assert p.a.sender.snd_una == p.a.cfg.initial_psn


def test_replayed_sack_changes_nothing() -> None:
    p = started(2048)
    a, b = data_sent(p)[:2]
    real = Sack(11, a.psn + 1, a.psn, 1, a.meta.ev, echo_ts=a.send_ts)
    p.a.receive(real, p.now + 10)
    assert p.a.sender.snd_una == p.a.cfg.initial_psn + 1
    replay = Sack(11, a.psn + 1, a.psn, 1, a.meta.ev, ecn_echo=True, echo_ts=a.send_ts)
    p.a.receive(replay, p.now + 20)
    assert p.a.counters.acks_dropped["sack_nothing_new"] == 1
    assert p.a.counters.ecn_echoes_received == 0
    assert p.a.evset.state(a.meta.ev) is EvState.GOOD
    assert p.a.evset.state(b.meta.ev) is EvState.GOOD


def test_sack_whose_echo_matches_no_packet_sent_moves_nothing() -> None:
    """Issue 27 item 4: a SACK whose echo (send time, EV) names no copy of a packet it
    acknowledges moves nothing, the cumulative ACK included: a blind forgery must guess
    the 96-bit echo of a packet in flight. (Before, the acks were believed and only the
    ECN echo and RTT sample refused.)"""
    p = started(2048)
    a, b = data_sent(p)[:2]
    for lie in (
        Sack(11, a.psn + 1, a.psn, 1, b.meta.ev, ecn_echo=True, echo_ts=1),  # wrong EV and time
        Sack(11, a.psn + 1, a.psn, 1, a.meta.ev, ecn_echo=True, echo_ts=a.send_ts + 1),  # wrong time
        Sack(11, a.psn + 2, a.psn, 3, a.meta.ev ^ 1, echo_ts=a.send_ts),  # a's time, another EV
    ):
        p.a.receive(lie, p.now + 10)
    c = p.a.counters
    assert p.a.sender.snd_una == p.a.cfg.initial_psn  # nothing acknowledged
    assert not any(r.sacked for r in p.a.sender.packets.records.values())
    assert c.acks_dropped["sack_echo_unmatched"] == 3 and c.sack_echo_unmatched == 3
    assert c.ecn_echoes_received == 0 and p.a.evset.state(b.meta.ev) is EvState.GOOD
    assert p.a.sender.srtt_ns is None
    p.a.receive(Sack(11, a.psn + 1, a.psn, 1, a.meta.ev, echo_ts=a.send_ts), p.now + 20)  # the real one
    assert p.a.sender.snd_una == p.a.cfg.initial_psn + 1 and p.a.sender.srtt_ns is not None


def test_sack_echoing_a_packet_acknowledged_earlier_moves_the_cumulative_ack() -> None:
    """The echo may name a packet an earlier SACK already covered (SACKs reordered on their
    way): it was sent, so the SACK is believed for what it adds."""
    p = started(2048)
    a, b = data_sent(p)[:2]
    p.a.receive(Sack(11, a.psn, a.psn, 2, b.meta.ev, echo_ts=b.send_ts), p.now + 10)  # b, out of order
    assert p.a.sender.snd_una == p.a.cfg.initial_psn
    p.absorb(p.a, p.a.receive(Sack(11, a.psn + 2, a.psn, 0, b.meta.ev, echo_ts=b.send_ts), p.now + 20))
    assert p.a.sender.snd_una == p.a.cfg.initial_psn + 2 and p.sent_done()[0].ok


def test_nack_for_acked_or_unsent_psn_or_foreign_ev_dropped() -> None:
    p = started(2048)
    a, b = data_sent(p)[:2]
    p.a.receive(Sack(11, a.psn + 1, a.psn, 1, a.meta.ev, echo_ts=a.send_ts), p.now)
    cwnd = p.a.sender.congestion.cwnd
    sent_before = p.a.counters.data_packets_sent
    p.a.receive(Nack(11, a.psn, NackReason.TRIMMED, a.meta.ev), p.now)  # already acknowledged
    p.a.receive(Nack(11, (b.psn + 50) & 0xFFFFFF, NackReason.TRIMMED, b.meta.ev), p.now)  # never sent
    p.a.receive(Nack(11, b.psn, NackReason.TRIMMED, 0x0ABCDEF1), p.now)  # not one of our EVs
    p.a.receive(Nack(11, b.psn, NackReason.BAD_RKEY, 0x0ABCDEF1), p.now)
    c = p.a.counters
    assert c.acks_dropped == {"nack_not_outstanding": 2, "nack_unknown_ev": 2}
    assert p.a.sender.congestion.cwnd == cwnd and c.data_packets_sent == sent_before
    assert p.a.evset.state(b.meta.ev) is EvState.GOOD and not p.sent_done()


def test_stale_trim_nack_does_not_touch_the_window() -> None:
    """Defect (issue 10): cc.on_trim() ran before the stale-NACK check."""
    p = started(2048)
    a = data_sent(p)[0]
    nack = Nack(11, a.psn, NackReason.TRIMMED_LASTHOP, a.meta.ev)
    p.a.receive(nack, p.now)
    cwnd = p.a.sender.congestion.cwnd
    packets = p.a.sender.packets
    packets.known_lost(packets.records[p.a.cfg.initial_psn])  # "queued for resending" again ...
    packets.retx.clear()  # ... and kept so (not resent): the NACK repeats
    p.a.receive(nack, p.now + 1)
    assert p.a.counters.acks_dropped["nack_stale"] == 1
    assert p.a.sender.congestion.cwnd == cwnd


def test_trim_nack_tells_the_sender_where_it_was_cut() -> None:
    """Defect (issue 26): every trim looked alike, so a cut at the receiver's own port (an
    incast: every path ends in that queue) could not be told from a congested path. A
    last-hop trim is remembered for judging loss guesses; only a fabric trim steers the EV."""
    seen: list[bool] = []
    for reason in (NackReason.TRIMMED_LASTHOP, NackReason.TRIMMED):
        p = started(2048, skip_heat=0)  # every fabric mark skips
        a = data_sent(p)[0]
        blame = p.a.sender.blame
        cut_at = blame.lasthop_trim_ns
        p.a.receive(Nack(11, a.psn, reason, a.meta.ev), p.now)
        seen.append(blame.lasthop_trim_ns > cut_at)
        skipped = p.a.evset.state(a.meta.ev) is EvState.SKIP
        assert skipped is (reason is NackReason.TRIMMED)  # only a fabric trim steers the EV
    assert seen == [True, False]


def test_trim_of_an_earlier_copy_skips_the_echoed_ev_and_keeps_the_copy_in_flight() -> None:
    """Defect (issue 10): SKIP went to the record's EV, not the EV the trimmed copy took."""
    p = started(4096, skip_heat=0)  # every fabric mark skips
    a = data_sent(p)[0]
    p.absorb(p.a, p.a.receive(Nack(11, a.psn, NackReason.TRIMMED_LASTHOP, a.meta.ev), p.now))
    resent = [m for m in p.sent_log if isinstance(m, DataPacket) and m.flags & DataFlag.RETRANSMISSION]
    assert len(resent) == 1 and resent[0].meta.ev != a.meta.ev
    # a fabric trim NACK for the *first* copy arrives late
    before = p.a.counters.data_packets_sent
    p.a.receive(Nack(11, a.psn, NackReason.TRIMMED, a.meta.ev), p.now + 5)
    assert p.a.evset.state(a.meta.ev) is EvState.SKIP
    assert p.a.evset.state(resent[0].meta.ev) is EvState.GOOD
    assert p.a.counters.data_packets_sent == before  # the resent copy is still in flight
    assert p.a.counters.acks_dropped["nack_earlier_copy"] == 1


@pytest.mark.parametrize("start", [0, 1, PSN_MODULUS // 2, PSN_MODULUS - 3, 0xABCDEF])
def test_transfer_with_loss_from_any_initial_psn(start: int) -> None:
    p = make_pair(size=64 * 1024, initial_psn=start, reorder_window_ns=50)
    data = payload(64 * 1024)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    drop = {(start + 7) & 0xFFFFFF, (start + 40) & 0xFFFFFF}

    def keep(m) -> bool:  # type: ignore[no-untyped-def]
        return not (isinstance(m, DataPacket) and m.psn in drop and not m.flags & DataFlag.RETRANSMISSION)

    p.settle(keep)
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data
    assert p.sent_done()[0].ok
    assert p.a.counters.stray_acks == 0 and not p.a.counters.acks_dropped


def test_initial_psn_outside_24_bits_refused() -> None:
    with pytest.raises(ValueError, match="initial_psn"):
        TransportConfig(initial_psn=PSN_MODULUS)
    with pytest.raises(ValueError, match="initial_psn"):
        TransportConfig(initial_psn=-1)


def test_sack_echoing_the_copy_before_a_resend_is_believed() -> None:
    """The echo may name the copy sent before the latest one of a packet resent since (the
    first copy arrived after all): that packet was sent, so the SACK is believed."""
    p = started(1024)
    (a,) = data_sent(p)
    for _ in range(10):  # a tail probe, then the RTO, resend a
        p.fire_timers()
        resent = [m for m in data_sent(p) if m.psn == a.psn]
        if len(resent) > 1:
            break
    p.in_flight = []
    assert len({m.send_ts for m in resent}) == 2 and resent[1].send_ts != a.send_ts  # (+ a tail twin)
    p.a.receive(Sack(11, a.psn + 1, a.psn, 0, a.meta.ev, echo_ts=a.send_ts), p.now + 10)
    assert p.a.sender.snd_una == p.a.cfg.initial_psn + 1
    assert p.a.counters.acks_dropped["sack_echo_unmatched"] == 0


def test_sack_echoing_a_packet_the_peer_refused_is_believed_for_the_others() -> None:
    """A packet refused by a BAD_RKEY NACK leaves the records, but its echo is remembered:
    the SACK its arrival triggered still acknowledges the packets after it."""
    p = started(2048)
    a = data_sent(p)[0]
    p.a.receive(Nack(11, a.psn, NackReason.BAD_RKEY, a.meta.ev), p.now + 5)
    assert p.a.sender.packets.records.get(p.a.cfg.initial_psn) is None
    p.a.receive(Sack(11, a.psn + 2, a.psn, 0, a.meta.ev, echo_ts=a.send_ts), p.now + 10)
    assert p.a.sender.snd_una == p.a.cfg.initial_psn + 2
    assert p.a.counters.acks_dropped["sack_echo_unmatched"] == 0


def test_blind_forged_sacks_with_valid_psns_move_nothing() -> None:
    """20,000 SACKs that name only PSNs in flight but guess the echo (64-bit send time,
    32-bit EV) at random: none is believed, each is counted."""
    p = started(8192)
    pkts = data_sent(p)
    rng = random.Random(27)
    first = pkts[0].psn
    for _ in range(20_000):
        cum = (first + rng.randrange(len(pkts) + 1)) & 0xFFFFFF
        bitmap = rng.getrandbits(len(pkts))
        forged = Sack(11, cum, first, bitmap, rng.getrandbits(32), ecn_echo=True, echo_ts=rng.getrandbits(64))
        p.a.receive(forged, p.now + 10)
    c = p.a.counters
    assert p.a.sender.snd_una == p.a.cfg.initial_psn
    assert not any(r.sacked for r in p.a.sender.packets.records.values())
    assert c.ecn_echoes_received == 0 and p.a.sender.srtt_ns is None
    assert c.sack_echo_unmatched + c.acks_dropped["sack_nothing_new"] == 20_000
    assert c.sack_echo_unmatched > 19_000
