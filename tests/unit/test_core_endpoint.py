"""Sender and receiver state machines driven message by message (no simulator)."""

from __future__ import annotations

import ast
import pathlib
import random

from mrc_fabric.ev import EV, ev_t1
from mrc_host.core import EvState, Mode, NsccParams
from mrc_host.core.psn import PSN_MODULUS
from mrc_host.sim.loopback import BASE, RKEY, Pair, make_pair
from mrc_host.wire.messages import DataFlag, DataPacket, Dscp, Ecn, Nack, NackReason, Sack


def payload(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def pair_after_write(size: int, **kw: object) -> Pair:
    """A fresh pair whose sender posted a ``size``-byte write and sent its first packets."""
    p = make_pair(**kw)
    _, acts = p.a.post_write(payload(size), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    return p


def data_sent(p) -> list[DataPacket]:  # type: ignore[no-untyped-def]
    return [m for m in p.sent_log if isinstance(m, DataPacket)]


def test_out_of_order_arrival_places_exact_bytes() -> None:
    p = make_pair(size=8 * 1024)
    data = payload(8 * 1024)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    first = list(p.in_flight)
    p.in_flight = list(reversed(first))  # every packet arrives in reverse order
    p.deliver()
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data
    assert len(p.received_done()) == 1 and p.sent_done()[0].ok
    assert p.b.counters.data_bytes_placed == len(data)
    assert p.a.sender.idle()


def test_every_packet_carries_its_address_and_spreads_over_evs() -> None:
    p = make_pair(size=16 * 1024)
    _, acts = p.a.post_write(payload(16 * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    pkts = data_sent(p)
    assert [d.vaddr for d in pkts] == [BASE + 1024 * i for i in range(16)]
    assert all(d.rkey == RKEY and d.meta.dscp == Dscp.DATA and d.meta.ecn == Ecn.ECT0 for d in pkts)
    assert len({d.meta.ev for d in pkts}) == 16  # 16 distinct EVs, ...
    assert len({(d.meta.ev >> 28, d.meta.ev >> 18 & 0x3FF) for d in pkts}) == 8  # ... on all 8 paths


def test_bad_rkey_and_bad_address_refused_counted_and_fail_the_write() -> None:
    p = make_pair(size=4096)
    _, acts = p.a.post_write(payload(2048), BASE + 3072, RKEY, p.now)  # second packet overruns
    p.absorb(p.a, acts)
    p.deliver()
    region = p.b.regions.get(RKEY)
    assert region is not None
    assert bytes(region.buffer[3072:]) == payload(2048)[:1024]
    assert p.b.counters.refused_writes == {"BAD_ADDRESS": 1}
    assert p.b.counters.nacks_sent["BAD_ADDRESS"] == 1
    done = p.sent_done()
    assert len(done) == 1 and not done[0].ok and done[0].reason == "BAD_ADDRESS"
    _, acts = p.a.post_write(b"x" * 10, BASE, RKEY + 1, p.now)
    p.absorb(p.a, acts)
    p.deliver()
    assert p.b.counters.refused_writes["BAD_RKEY"] == 1
    assert bytes(region.buffer[:10]) == bytes(10)  # nothing written
    assert p.a.sender.idle()


def test_trim_nack_retransmits_at_once_on_another_ev_and_only_penalises() -> None:
    p = pair_after_write(4096)
    victim = data_sent(p)[0]
    before = len(p.sent_log)
    nack = Nack(11, victim.psn, NackReason.TRIMMED, victim.meta.ev)
    p.absorb(p.a, p.a.receive(nack, p.now + 10))
    retx = [m for m in p.sent_log[before:] if isinstance(m, DataPacket)]
    assert len(retx) == 1 and retx[0].psn == victim.psn
    assert retx[0].flags & DataFlag.RETRANSMISSION and retx[0].meta.dscp == Dscp.RETX
    assert retx[0].meta.ev != victim.meta.ev
    # a first mark on a cool path heats it (a second within a half-life skips it: skip_heat)
    assert p.a.evset.state(victim.meta.ev) is EvState.GOOD and p.a.evset.heat(victim.meta.ev, p.now + 10) >= 1
    assert p.a.counters.ev_retired == 0


def test_lasthop_trim_retransmits_without_blaming_the_path() -> None:
    p = pair_after_write(4096)
    victim = data_sent(p)[1]
    p.absorb(p.a, p.a.receive(Nack(11, victim.psn, NackReason.TRIMMED_LASTHOP, victim.meta.ev), p.now))
    assert p.a.evset.state(victim.meta.ev) is EvState.GOOD
    assert p.a.counters.retransmissions == 1


def test_receiver_nacks_trimmed_packets_by_where_they_were_cut() -> None:
    p = pair_after_write(2048)
    first, second = data_sent(p)[:2]
    for pkt, ce in ((first, True), (second, False)):
        pkt.payload = b""
        pkt.trimmed = True
        pkt.meta.ecn = Ecn.CE if ce else Ecn.ECT0
    p.in_flight = []
    out = p.b.receive(first, p.now) + p.b.receive(second, p.now)
    nacks = [a.msg for a in out if hasattr(a, "msg") and isinstance(a.msg, Nack)]
    assert [n.reason for n in nacks] == [NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP]
    assert [n.echo_ev for n in nacks] == [first.meta.ev, second.meta.ev]
    assert p.b.counters.data_bytes_placed == 0


def test_sack_gap_declares_loss_retransmits_elsewhere_and_retires_the_ev() -> None:
    # a small window, so later packets leave later (on ACKs), past the reorder window
    p = make_pair(size=1 << 16, nscc=NsccParams(max_cwnd=8192, min_cwnd=1024), reorder_window_ns=50)
    data = payload(1 << 16)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim = data_sent(p)[0]
    dropped = []

    def keep(m):  # type: ignore[no-untyped-def]
        if isinstance(m, DataPacket) and m.psn == victim.psn and not m.flags & DataFlag.RETRANSMISSION:
            dropped.append(m)
            return False
        return True

    p.deliver(keep)
    assert len(dropped) == 1
    assert p.a.evset.state(victim.meta.ev) is EvState.ASSUMED_BAD
    assert p.a.counters.losses_gap == 1 and p.a.counters.losses_rto == 0
    retx = [m for m in data_sent(p) if m.flags & DataFlag.RETRANSMISSION]
    assert [m.psn for m in retx] == [victim.psn] and retx[0].meta.ev != victim.meta.ev
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data
    assert p.sent_done()[0].ok


def test_timeout_retransmits_and_retires_the_ev() -> None:
    p = pair_after_write(1024)  # a first write gives an RTT sample
    p.deliver()
    assert p.a.sender.srtt_ns is not None
    p.events.clear()
    p.sent_log.clear()
    _, acts = p.a.post_write(payload(1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    only = data_sent(p)[0]
    for _ in range(50):  # timers in order (tail probe, liveness ticks come first), black hole throughout
        p.deliver(keep=lambda m: False)
        p.fire_timers()
        if p.a.counters.rto_fired:
            break
    assert p.a.counters.rto_fired == 1
    assert p.a.evset.state(only.meta.ev) is EvState.ASSUMED_BAD
    assert p.a.counters.losses_tail >= 1  # the tail probe resent it first, blaming no path
    retx = data_sent(p)[-1]
    assert retx.psn == only.psn and retx.meta.ev != only.meta.ev
    p.deliver()
    assert p.sent_done()[0].ok


def test_timeout_before_any_rtt_sample_retires_nothing() -> None:
    p = pair_after_write(1024)
    only = data_sent(p)[0]
    for _ in range(10):
        p.deliver(keep=lambda m: False)
        p.fire_timers()
        if p.a.counters.rto_fired:
            break
    assert p.a.counters.rto_fired == 1 and p.a.counters.ev_retired == 0
    assert p.a.evset.state(only.meta.ev) is EvState.GOOD
    assert data_sent(p)[-1].meta.ev != only.meta.ev  # resent elsewhere all the same


def test_ecn_echo_moves_ev_to_skip() -> None:
    p = pair_after_write(2048, skip_heat=0)  # every mark skips (default: a repeat one)
    pkt = data_sent(p)[0]
    pkt.meta.ecn = Ecn.CE
    p.deliver()
    assert p.b.counters.ecn_ce_received == 1
    assert p.a.counters.ecn_echoes_received == 1
    assert p.a.counters.ev(pkt.meta.ev).ecn_echoes == 1
    # the echoed EV and the active EVs on its (plane, T1) path cross the same queue: all sit out
    ev = EV.decode(pkt.meta.ev)
    same_path = [
        v for v in p.a.evset.active_evs() if (EV.decode(v).plane, EV.decode(v).t1) == (ev.plane, ev.t1)
    ]
    assert len(same_path) > 1
    assert p.a.counters.ev_skipped == len(same_path)
    assert all(p.a.evset.state(v) is EvState.SKIP for v in same_path)
    others = [v for v in p.a.evset.active_evs() if v not in same_path]
    assert others and all(p.a.evset.state(v) is EvState.GOOD for v in others)


def test_sack_carries_port_status_and_sender_avoids_the_down_plane() -> None:
    p = make_pair(size=1 << 16, nscc=NsccParams(max_cwnd=8192, min_cwnd=1024))
    p.absorb(p.b, p.b.set_port_status(0b01, p.now))  # receiver's plane-1 port is down
    _, acts = p.a.post_write(payload(1 << 16), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.deliver()
    sacks = [m for m in p.sent_log if isinstance(m, Sack)]
    assert sacks and all(s.port_status == 0b01 for s in sacks)
    late = data_sent(p)[-16:]
    assert {d.meta.ev >> 28 for d in late} == {0}


def test_psn_wraps_around_24_bits() -> None:
    p = make_pair(size=32 * 1024, initial_psn=PSN_MODULUS - 5)
    data = payload(32 * 1024)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.in_flight.reverse()
    p.deliver()
    psns = [d.psn for d in data_sent(p)]
    assert psns[:6] == [
        PSN_MODULUS - 5,
        PSN_MODULUS - 4,
        PSN_MODULUS - 3,
        PSN_MODULUS - 2,
        PSN_MODULUS - 1,
        0,
    ]
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data
    assert p.sent_done()[0].ok and p.b.receiver.expected == PSN_MODULUS - 5 + 32


def test_single_path_goes_back_n_on_one_ev() -> None:
    p = make_pair(size=16 * 1024, mode=Mode.SINGLE_PATH)
    data = payload(16 * 1024)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim = data_sent(p)[2]
    gone = []

    def keep(m):  # type: ignore[no-untyped-def]
        if isinstance(m, DataPacket) and m.psn == victim.psn and not gone:
            gone.append(m)
            return False
        return True

    p.deliver(keep)
    assert p.b.counters.out_of_order_dropped > 0
    assert p.a.counters.go_back_n_rewinds >= 1
    assert len({d.meta.ev for d in data_sent(p)}) == 1
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data


def test_core_does_no_io_and_reads_no_clock() -> None:
    forbidden = {"socket", "time", "threading", "asyncio", "os", "select", "datetime", "secrets"}
    core = pathlib.Path(__file__).resolve().parents[2] / "mrc_host" / "core"
    for path in core.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = {node.module.split(".")[0]}
            else:
                continue
            assert not names & forbidden, f"{path.name} imports {names & forbidden}"
        # the only use of the random module is the seeded Random type passed in
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "random"
            ):
                assert node.attr == "Random", f"{path.name} uses random.{node.attr}"


def test_sack_window_reports_a_late_packet_filling_an_old_hole() -> None:
    """With the cumulative point far behind the newest PSN, a retransmission that fills an
    older hole must still be inside the SACK bitmap, or the sender resends it forever."""
    p = make_pair(size=128 * 1024)
    b = p.b

    def deliver(seq: int) -> Sack:
        pkt = DataPacket(qp=b.local_qp, psn=seq, vaddr=BASE + 1024 * seq, rkey=RKEY, payload=b"z" * 1024)
        sacks = [a.msg for a in b.receive(pkt, p.now) if isinstance(getattr(a, "msg", None), Sack)]
        return sacks[-1] if sacks else None  # type: ignore[return-value]

    for seq in range(101):
        if seq not in (5, 10):
            deliver(seq)
    sack = deliver(10)  # 5 is still missing: the cumulative ACK stays at 5
    assert sack is not None and sack.cum_psn == 5
    offset = 10 - sack.base_psn
    assert 0 <= offset < 64 and sack.bitmap >> offset & 1
    assert not sack.bitmap >> (5 - sack.base_psn) & 1  # the real hole is still reported as one


def test_reordering_mistaken_for_loss_widens_the_reorder_window() -> None:
    """A packet the SACK gap rule declared lost but that was SACKed after all is counted as
    a spurious loss and widens the reordering window (RACK-style), so the same delay is not
    read as loss again."""
    p = make_pair(size=64 * 1024, planes=1, t1=4, rto_min_ns=10_000_000, rto_initial_ns=10_000_000)
    a = p.a
    _, acts = a.post_write(payload(1024), BASE, RKEY, p.now)  # the packet that will be "late"
    p.absorb(a, acts)
    a.sender.recovery.rtt.srtt_ns = 40_000.0  # an RTT estimate exists: window = SRTT/4 = 10 us
    p.now += 20_000  # later packets go out well past the reordering window
    _, acts = a.post_write(payload(4 * 1024, seed=2), BASE + 1024, RKEY, p.now)
    p.absorb(a, acts)
    first, *later = data_sent(p)
    assert len(later) == 4
    bitmap = sum(1 << (d.psn - first.psn) for d in later)
    sack = Sack(
        qp=a.local_qp,
        cum_psn=first.psn,
        base_psn=first.psn,
        bitmap=bitmap,
        echo_ev=later[0].meta.ev,
        echo_ts=later[0].send_ts,
    )
    a.receive(sack, p.now)
    assert a.counters.losses_gap == 1 and a.sender.recovery.reorder.mult == 1
    late = Sack(
        qp=a.local_qp,
        cum_psn=first.psn + 5,
        base_psn=first.psn,
        bitmap=0,
        echo_ev=first.meta.ev,
        echo_ts=first.send_ts,
    )
    a.receive(late, p.now)  # the original shows up before any resend could have arrived
    assert a.counters.spurious_losses == 1
    assert a.sender.recovery.reorder.mult == 2


def test_probe_ack_returns_on_the_reverse_of_the_path_under_test() -> None:
    """Defect (issue 10): PROBE_ACKs rode the responder's rotating control EV (maybe dead)."""
    from mrc_fabric.ev import EV
    from mrc_host.core.actions import Transmit
    from mrc_host.wire.messages import Probe, ProbeAck

    p = make_pair()
    for plane, t1 in ((0, 3), (1, 1), (1, 2)):
        tested = EV(plane, t1, 12345).value
        acts = p.b.receive(Probe(22, 7, tested, send_ts=5), p.now)
        (ack,) = [a.msg for a in acts if isinstance(a, Transmit)]
        assert isinstance(ack, ProbeAck) and ack.ev_under_test == tested
        assert (EV.decode(ack.meta.ev).plane, EV.decode(ack.meta.ev).t1) == (plane, t1)


def test_sacks_return_on_the_plane_the_data_came_on() -> None:
    p = make_pair(size=1 << 16)
    _, acts = p.a.post_write(payload(1 << 16), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.deliver()
    sacks = [m for m in p.sent_log if isinstance(m, Sack)]
    assert sacks and all(s.meta.ev >> 28 == s.echo_ev >> 28 for s in sacks)


def test_probe_ack_carries_port_status_believed_only_for_our_probe() -> None:
    from mrc_host.core.actions import Transmit
    from mrc_host.wire.codec import decode, encode
    from mrc_host.wire.messages import Probe, ProbeAck

    p = make_pair()
    p.b.set_port_status(0b01, p.now)
    tested = p.a.evset.active_evs()[0]
    acts = p.b.receive(Probe(22, 7, tested, send_ts=5), p.now)
    (ack,) = [a.msg for a in acts if isinstance(a, Transmit)]
    assert isinstance(ack, ProbeAck) and ack.port_status == 0b01
    from ipaddress import IPv6Address

    from mrc_host.wire.codec import FrameAddressing

    addr = FrameAddressing("02:00:00:00:00:01", "02:00:00:00:00:02", "fc00::1", "fc00::1", "fc00::2")
    back = decode(encode(ack, IPv6Address("fcbb:bb00:4000::"), addr))
    assert isinstance(back, ProbeAck) and back.port_status == 0b01
    p.a.receive(back, p.now)  # no probe of ours outstanding: the bitmap is not believed
    assert p.a.evset.peer_ports == 0b11
    p.a.evset.note_sent(tested, 0)
    ((ev, pid),) = [x for x in p.a.prober.liveness_tick(p.a.cfg.probe_interval_ns) if x[0] == tested]
    p.a.receive(ProbeAck(11, pid, ev, port_status=0b01), p.now)
    assert p.a.evset.peer_ports == 0b01


def test_peer_gone_ends_in_error_after_the_retry_count() -> None:
    """Defect (issue 10): a transfer whose peer is gone stayed active forever."""
    from mrc_host.core import ConnectionFailed

    p = make_pair(retry_cnt=3)
    _, acts = p.a.post_write(payload(4096), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    for _ in range(200):
        p.deliver(keep=lambda m: False)  # nothing ever arrives
        p.fire_timers()
        if any(isinstance(e, ConnectionFailed) for e in p.events):
            break
    failed = [e for e in p.events if isinstance(e, ConnectionFailed)]
    assert [f.reason for f in failed] == ["RETRY_EXCEEDED"]
    assert p.a.counters.rto_fired == 4  # retry_cnt + 1 expiries
    done = p.sent_done()
    assert len(done) == 1 and not done[0].ok and done[0].reason == "RETRY_EXCEEDED"
    assert p.a.sender.idle() and p.a.sender.deadline() is None
    _, acts = p.a.post_write(b"more", BASE, RKEY, p.now)  # refused at once, same reason
    assert [a.reason for a in acts if isinstance(a, type(done[0]))] == ["RETRY_EXCEEDED"]


def test_every_ev_denied_ends_in_error_after_the_limit() -> None:
    from mrc_host.core import ConnectionFailed

    p = make_pair(retry_cnt=2)
    for ev in list(p.a.evset.entries):
        p.a.deny(ev, p.now)
    _, acts = p.a.post_write(payload(4096), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    assert not data_sent(p)
    for _ in range(10):
        p.fire_timers()
        if p.sent_done():
            break
    assert [e.reason for e in p.events if isinstance(e, ConnectionFailed)] == ["NO_USABLE_PATH"]
    assert p.sent_done()[0].reason == "NO_USABLE_PATH"
    assert p.now >= 1_000 + 3 * p.a.sender.rto_ns  # only after the limit


def test_single_path_uses_a_fixed_roce_timeout() -> None:
    from mrc_host.core import TransportConfig

    cfg = TransportConfig.for_rtt(3_000, 40_000, mode=Mode.SINGLE_PATH)
    assert cfg.local_ack_timeout == 6 and 4096 << 6 >= 64 * 3_000  # 262 us, not 4 base RTTs
    assert TransportConfig.for_rtt(3_000, 40_000).local_ack_timeout == 0


def test_loss_inside_a_short_message_found_by_the_rack_timer_not_the_tail_probe() -> None:
    """Issue 11 (flaps in a ring all-reduce): a message of a few packets per plane, sent in
    one burst, gives the gap rule nothing to count; the packet lost in it waited for the
    tail probe (2 SRTT after the last send) on every lossy ring step. A later packet was
    delivered, so it is lost once its plane's SRTT plus the reorder window have passed."""
    p = make_pair(size=8 * 1024)
    _, acts = p.a.post_write(payload(1024), BASE, RKEY, p.now)  # a first write gives an RTT sample
    p.absorb(p.a, acts)
    p.deliver()
    p.fire_timers()
    p.deliver()
    p.events.clear()
    p.sent_log.clear()
    _, acts = p.a.post_write(payload(8 * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim = data_sent(p)[1]  # not the last: packets sent after it will be acknowledged
    p.deliver(keep=lambda m: m is not victim)
    s = p.a.sender
    assert s.srtt_ns is not None and not p.sent_done()
    due = victim.send_ts + int(s.recovery.rtt.of_plane(victim.meta.ev >> 28)) + s.recovery.reorder_window()
    tail = s.recovery.tail_at(bool(s.writes))
    assert tail is not None and p.a.next_deadline() == due <= tail  # not after the tail probe
    p.fire_timers()
    p.deliver()
    c = p.a.counters
    assert p.sent_done() and p.sent_done()[0].ok
    assert c.losses_gap == 1 and c.losses_tail == 0 and c.rto_fired == 0
    assert data_sent(p)[-1].psn == victim.psn and data_sent(p)[-1].meta.ev != victim.meta.ev
    assert p.a.evset.state(victim.meta.ev) is EvState.ASSUMED_BAD  # a loss, as the gap rule says


def test_lost_last_packet_recovered_by_tail_probe_not_rto() -> None:
    p = make_pair(size=8 * 1024)
    _, acts = p.a.post_write(payload(8 * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    last = data_sent(p)[-1]
    p.deliver(keep=lambda m: not (isinstance(m, DataPacket) and m is last))
    assert not p.sent_done()
    for _ in range(10):
        p.fire_timers()
        p.deliver()
        if p.sent_done():
            break
    c = p.a.counters
    assert p.sent_done()[0].ok and 1 <= c.losses_tail <= 2 and c.rto_fired == 0  # (+ a delayed-ack one)
    assert p.a.evset.state(last.meta.ev) is EvState.GOOD  # a tail loss blames no path


def test_trim_nack_after_a_gap_guess_undoes_the_retirement() -> None:
    """A packet the gap rule called lost, whose trim NACK arrives afterwards (the trimmed
    header waited in a congested switch while packets sent later on an idle path were
    SACKed), was congestion, not a failed path: the EV is back, with the trim penalty."""
    p = make_pair(
        size=1 << 16, nscc=NsccParams(max_cwnd=8192, min_cwnd=1024), reorder_window_ns=50, skip_heat=0
    )
    _, acts = p.a.post_write(payload(1 << 16), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim = data_sent(p)[0]
    resent = []

    def keep(m):  # type: ignore[no-untyped-def]
        if isinstance(m, DataPacket) and m.flags & DataFlag.RETRANSMISSION:
            resent.append(m)  # the guess was made: the fabric goes quiet from here on
        return not resent and not (isinstance(m, DataPacket) and m.psn == victim.psn)

    p.deliver(keep)
    assert [m.psn for m in resent][:1] == [victim.psn] and p.a.counters.losses_gap == 1
    ev = victim.meta.ev
    assert p.a.evset.state(ev) is EvState.ASSUMED_BAD  # the guess retired it
    undone = p.a.counters.ev_loss_undone
    p.a.receive(Nack(11, victim.psn, NackReason.TRIMMED, ev), p.now + 1)
    c = p.a.counters
    assert c.losses_trimmed_after_guess == 1 and c.ev_loss_undone == undone + 1
    assert p.a.evset.state(ev) is EvState.SKIP
    assert c.ev(ev).trims == 1
    # the same NACK again changes nothing more
    p.a.receive(Nack(11, victim.psn, NackReason.TRIMMED, ev), p.now + 2)
    assert c.losses_trimmed_after_guess == 1


def _gap_guess_on_a_marked_path(
    lasthop: bool = False, mark_age_ns: int = 0, same_path: bool = False, **cfg: object
) -> tuple[Pair, int]:
    """The first packet is held back while the rest are delivered, after an ECN echo heated
    its EV's path ``mark_age_ns`` before it left (``lasthop``: after the peer's last hop
    trimmed another packet -- ``same_path``: one sent after it on its own path): returns the
    pair once the gap rule guessed it lost, and its EV."""
    kw: dict[str, object] = {"planes": 1, "t1": 2} if same_path else {}
    p = make_pair(
        size=1 << 16, nscc=NsccParams(max_cwnd=8192, min_cwnd=1024), reorder_window_ns=50, **kw, **cfg
    )
    p.now = 1_000_000_000
    _, acts = p.a.post_write(payload(1 << 16), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim, other = data_sent(p)[:2]
    ev = victim.meta.ev
    if same_path:
        other = next(m for m in data_sent(p)[1:] if ev_t1(m.meta.ev) == ev_t1(ev))
    if lasthop:
        p.a.receive(Nack(11, other.psn, NackReason.TRIMMED_LASTHOP, other.meta.ev), p.now)
    else:
        assert p.a.evset.ecn_echo(ev, p.now - mark_age_ns)  # a SACK echoed CE for the path
    resent: list[DataPacket] = []

    def keep(m):  # type: ignore[no-untyped-def]
        if isinstance(m, DataPacket) and m.flags & DataFlag.RETRANSMISSION and m.psn == victim.psn:
            resent.append(m)
        held = (victim.psn, other.psn) if lasthop else (victim.psn,)  # (the trimmed one too)
        return not resent and not (isinstance(m, DataPacket) and m.psn in held)

    p.deliver(keep)
    assert resent and p.a.counters.losses_gap == 1
    return p, ev


def test_a_loss_guess_on_a_marked_path_penalises_it_instead_of_retiring_it() -> None:
    """A gap on a path that signalled congestion lately, whose queue may hold its packets as
    long as the RTT varies, is taken for a queue: resent at once, the path sits out (SKIP),
    nothing retired; the trim NACK or the path's cooling decides."""
    p, ev = _gap_guess_on_a_marked_path()
    c = p.a.counters
    assert p.a.evset.state(ev) is EvState.SKIP
    assert c.losses_while_hot == 1 and c.ev_retired == 0 and c.ev_retired_by_loss == 0
    assert c.ev(ev).packets_lost == 1  # still a loss: counted and resent


def test_a_loss_guess_retires_the_path_once_its_marks_have_cooled() -> None:
    """A mark 100 half-lives before the packet left is forgotten: the gap is a plain loss."""
    p, ev = _gap_guess_on_a_marked_path(mark_age_ns=100_000, penalty_halflife_ns=1_000)
    c = p.a.counters
    assert p.a.evset.state(ev) is EvState.ASSUMED_BAD
    assert c.losses_while_hot == 0 and c.ev_retired_by_loss >= 1 and c.ev_retired == c.ev_retired_by_loss


def test_hot_path_heat_zero_keeps_every_loss_guess_a_retirement() -> None:
    p, ev = _gap_guess_on_a_marked_path(hot_path_heat=0.0)
    assert p.a.evset.state(ev) is EvState.ASSUMED_BAD
    assert p.a.counters.losses_while_hot == 0


def test_a_loss_guess_while_the_peers_last_hop_trims_retires_only_a_path_that_delivers_nothing() -> None:
    """Incast: the peer's last hop trimmed one of our packets lately, so every path ends in a
    deep queue; a gap then is that queue, not a failed path -- while the lost packet's path
    has delivered something sent since (a trimmed header proves it reaches the peer). A path
    that delivered nothing since, while others delivered packets sent a reorder window
    later, has failed (issue 45: a dead path under an 8->1 incast took 3.5-5.4 x its floor
    and up to 8 RTOs, retired by none of its losses)."""
    p, ev = _gap_guess_on_a_marked_path(lasthop=True, same_path=True)
    c = p.a.counters
    assert p.a.evset.state(ev) is EvState.GOOD
    assert c.losses_while_hot == 1 and c.ev_retired == 0
    p, ev = _gap_guess_on_a_marked_path(lasthop=True)
    assert p.a.evset.state(ev) is EvState.ASSUMED_BAD
    assert p.a.counters.losses_while_hot == 0 and p.a.counters.ev_retired_by_loss >= 1


def test_a_late_original_that_met_a_marking_queue_echoes_its_mark_in_the_dsack() -> None:
    """The packet guessed lost was only queued, and marked CE there: when it arrives after
    its resend, the D-SACK undoes the loss and its CE echo marks the EV it took."""
    p = make_pair(
        size=1 << 16, nscc=NsccParams(max_cwnd=8192, min_cwnd=1024), reorder_window_ns=50, skip_heat=0
    )
    _, acts = p.a.post_write(payload(1 << 16), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim = data_sent(p)[0]
    ev = victim.meta.ev
    p.deliver(lambda m: not (isinstance(m, DataPacket) and m.psn == victim.psn and m is victim))
    c = p.a.counters
    assert c.losses_gap == 1 and c.ev(ev).ecn_echoes == 0
    victim.meta.ecn = Ecn.CE  # it waited behind a marking queue all along
    p.absorb(p.b, p.b.receive(victim, p.now + 1))
    p.deliver()
    assert c.spurious_losses == 1
    assert c.ev(ev).ecn_echoes == 1 and c.ecn_echoes_received >= 1
    assert p.a.evset.state(ev) is EvState.SKIP  # the retirement undone, the mark taken


def _resent_at_the_tail(**cfg_kw: object) -> tuple[Pair, list[DataPacket]]:
    """A pair whose 8-packet write lost its second packet; the RACK timer resent it at the tail
    (nothing new left to send). Returns the pair and the copies resent."""
    p = make_pair(size=8 * 1024, **cfg_kw)
    _, acts = p.a.post_write(payload(8 * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    victim = data_sent(p)[1]
    p.deliver(keep=lambda m: m is not victim)
    before = len(data_sent(p))
    p.fire_timers()
    return p, [d for d in data_sent(p)[before:] if d.psn == victim.psn]


def test_a_resend_at_the_tail_goes_out_on_two_planes_and_either_copy_completes() -> None:
    p, copies = _resent_at_the_tail()
    assert len(copies) == 2 and p.a.counters.tail_twins == 1
    assert len({d.meta.ev >> 28 for d in copies}) == 2  # two planes
    assert all(d.flags & DataFlag.RETRANSMISSION and d.send_ts == copies[0].send_ts for d in copies)
    p.deliver(keep=lambda m: m is not copies[0])  # the first copy is lost too: the twin carries it
    c = p.a.counters
    assert p.sent_done() and p.sent_done()[0].ok and c.rto_fired == 0 and c.losses_tail == 0
    assert c.retransmissions == 1 and c.losses_gap == 1


def test_both_tail_twins_arriving_prove_no_loss_spurious() -> None:
    """The second of the two copies arrives as a duplicate: that is the twin, not the late
    original, so the loss guess stands (no undo, the reorder window does not grow)."""
    p, copies = _resent_at_the_tail()
    assert len(copies) == 2
    p.deliver()
    c = p.a.counters
    assert p.sent_done()[0].ok and c.dsacks_received == 1
    assert c.spurious_losses == 0 and c.ev_loss_undone == 0
    assert c.tail_twin_duplicates == 1 and c.stray_acks == 0  # expected, not a stray SACK
    assert p.a.sender.recovery.reorder.mult == 1


def test_a_tail_resend_is_twinned_even_where_the_rotation_stands_on_its_own_plane() -> None:
    """Defect (issue 45 item 6): the twin's plane was the rotation's next pick, and where that
    was the resend's own plane no twin went at all -- at 1 % loss (2 x 4, 41 us RTT) half the
    tail resends left single, and one lost again cost the message a round trip (seed 20: 3.2 %
    behind ECMP). The twin goes to the other plane heard from last. Fails on main: None."""
    p, _ = _resent_at_the_tail(twin_tail_resends=False)
    s = p.a.sender
    rec = next(r for r in s.packets.records.values() if r.transmissions == 2)
    own = rec.ev >> 28
    s.packets.plane_load[1 - own] += 1 << 30  # the other plane looks loaded: the rotation stays
    assert s.evset.next_data_ev(rec.ev) >> 28 == own
    ev = s.blame.twin_ev(rec, p.now)
    assert ev is not None and ev >> 28 == 1 - own


def test_no_tail_twins_in_ecmp_mode_or_when_switched_off() -> None:
    for kw in ({"mode": Mode.ECMP}, {"twin_tail_resends": False}):
        p, copies = _resent_at_the_tail(**kw)
        assert len(copies) == 1 and p.a.counters.tail_twins == 0


def test_a_thin_window_s_lost_packet_is_found_by_the_probe_not_the_rto() -> None:
    """Issue 45 item 2 (a 16 -> 1 incast, a link black-holed): each flow's window held one
    packet, and when that one died nothing later could be SACKed past it -- the gap rule and
    RACK had nothing to work with, and 7 of 16 connections of one seed waited for their RTO
    (whose window cut then kept them slow). With more to send and the window this thin, the
    sender probes as at its tail, an SRTT plus the reorder window after the packet left, and
    the probe is a loss guess that blames the path like the RTO it stands in for."""
    p = make_pair(size=16 * 1024, nscc=NsccParams(max_cwnd=1536, min_cwnd=1024))
    _, acts = p.a.post_write(payload(1024), BASE, RKEY, p.now)  # a first write gives an RTT sample
    p.absorb(p.a, acts)
    p.settle()
    p.events.clear()
    p.sent_log.clear()
    _, acts = p.a.post_write(payload(8 * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    assert len(p.a.sender.packets.in_flight) == 1  # the window holds one packet
    target = (data_sent(p)[0].psn + 3) % PSN_MODULUS  # the first three go through, one at a time

    def keep(m):  # type: ignore[no-untyped-def]
        return not (isinstance(m, DataPacket) and m.psn == target and not m.flags & DataFlag.RETRANSMISSION)

    p.deliver(keep)  # the fourth dies while it is the only one out: traffic stops
    victim = data_sent(p)[-1]
    assert victim.psn == target and not p.sent_done() and len(p.a.sender.packets.in_flight) == 1
    c = p.a.counters
    for _ in range(20):  # timers in order (liveness ticks may come first), until one resends it
        p.fire_timers()
        if c.rto_fired or c.losses_tail:
            break
    assert c.rto_fired == 0 and c.losses_tail == 1  # (before: the RTO, losses_rto 1)
    assert p.a.evset.state(victim.meta.ev) is EvState.ASSUMED_BAD  # blamed, as the RTO would
    retx = [m for m in data_sent(p) if m.flags & DataFlag.RETRANSMISSION]
    assert [m.psn for m in retx] == [victim.psn] and retx[0].meta.ev >> 14 != victim.meta.ev >> 14
    p.settle()
    assert p.sent_done()[0].ok and c.rto_fired == 0


def test_a_thin_window_is_judged_as_a_tail_only_below_the_gap_rule_s_reach() -> None:
    p = make_pair()
    blame = p.a.sender.blame
    _, acts = p.a.post_write(payload(8 * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    flight = len(p.a.sender.packets.in_flight)
    assert flight > p.a.cfg.thin_window and blame.sending(True)  # bulk: the gap rule decides
    assert not blame.sending(False)  # nothing more to send: a tail
    off = make_pair(size=16 * 1024, nscc=NsccParams(max_cwnd=1536, min_cwnd=1024), thin_window=0)
    _, acts = off.a.post_write(payload(8 * 1024), BASE, RKEY, off.now)
    off.absorb(off.a, acts)
    assert len(off.a.sender.packets.in_flight) == 1 and off.a.sender.blame.sending(True)  # (switched off)
