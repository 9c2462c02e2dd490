"""The RTO blames the path of a silent packet at once but resends it a slack later
(``Recovery.suspects``, ``rto_slack``).

Defect (issue 45 item 4): a fault-free all-to-all (one plane, 8 T0 x 4 hosts, 4 T1, 200 ns
links, trimming at 8 packets) fired spurious RTOs. Windows of 1-3 packets took 12.0-12.7 us
for a round trip behind three queues full to the trim threshold, while the connection's few
RTT samples (7-13 in its life, the newest 10-25 us older than the packet) never passed 9.5 us:
the RTO sat at its 12 us floor and fired before the SACK came. Waiting longer for every
packet kept dead paths GOOD longer (the fuzz's dead_ev); so the timer now retires the path
when it runs out, as before, and only the resend, the backoff and the window cut wait.
The samples below are one such connection's (seed 1), the packet's round trip the one it took.
"""

from __future__ import annotations

from collections.abc import Callable

from mrc_host.core import EvState, TransportConfig
from mrc_host.core.records import TxRecord
from mrc_host.core.recovery import Recovery, rto_slack
from mrc_host.sim.loopback import BASE, RKEY, Pair, make_pair
from mrc_host.wire.messages import DataPacket, Message, Opcode
from tests.unit.loss_rig import packet, recovery, transmit

BASE_RTT = 3006  # the all-to-all fabric's unloaded round trip (ns): the RTO floor is 4 of them
SAMPLES = [6743, 5813, 6854, 5588, 5147, 6908, 7820, 6686, 9017, 7379]  # RTT ns, oldest first
TRUE_RTT = 12_110  # the packet's: it crossed three full queues


def connection() -> tuple[Recovery, TxRecord, int]:
    """The traced connection after its samples, with one packet in flight that left at the
    returned time (after waiting at the host's shared port)."""
    cfg = TransportConfig(rto_min_ns=4 * BASE_RTT, nic_departures=True)
    r = recovery(cfg, planes=1)
    for rtt in SAMPLES:
        r.rtt.sample(rtt)
    left = 1_000_000
    rec = transmit(r, packet(10, 4096, Opcode.WRITE_ONLY), 0, left - 9_850)
    r.nic.on_departed(rec, left)
    return r, rec, left


def test_a_one_packet_window_behind_three_full_queues_is_suspect_not_timed_out() -> None:
    """Fails on main (no ``suspects``: its RTO, 12,024 ns, fired before the SACK came)."""
    r, rec, left = connection()
    rto = r.rto_ns()
    assert rto < TRUE_RTT  # the plain estimate is below the round trip
    assert r.deadline(sending=True) == left + rto
    assert r.suspects(left + rto - 1) == []
    assert r.suspects(left + rto) == [rec]  # its path is judged when the RTO runs out
    assert r.suspects(left + rto + 1) == []  # once
    assert r.expired(left + TRUE_RTT) == []  # but it is not resent before its SACK can come
    due = r.deadline(sending=True)
    assert due == left + rto + rto_slack(r) and due > left + TRUE_RTT
    assert r.expired(due) == [rec]  # a packet really gone still times out
    assert rto_slack(r) >= r.rto_ns(backed_off=False) // 8  # (at least a share of the RTO)


def held_pair() -> tuple[Pair, list[DataPacket]]:
    """A pair with an RTT sample, whose next one-packet write (and every copy of it) is held
    back until the sender's timers took a path of it out of use: returns the pair and the
    copies held, the last that copy."""
    p = make_pair(planes=1)  # (no tail resend twinned onto another plane)
    _, acts = p.a.post_write(bytes(1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.deliver()
    assert p.a.sender.srtt_ns is not None
    p.events.clear()
    _, acts = p.a.post_write(bytes(1024), BASE + 1024, RKEY, p.now)
    p.absorb(p.a, acts)
    held: list[DataPacket] = []

    def hold(m: Message) -> bool:
        if isinstance(m, DataPacket):
            held.append(m)
            return False
        return True

    p.deliver(hold)
    for _ in range(50):  # the sender's timers each at its time (tail probe, liveness ticks)
        copy = held[-1]  # the latest copy
        step(p, hold)
        if p.a.evset.state(copy.meta.ev) is not EvState.GOOD:
            break
    held.append(copy)
    return p, held


def step(p: Pair, keep: Callable[[Message], bool]) -> None:
    """The sender's next timer fires at its time; what it sends is delivered if ``keep``."""
    at = p.a.next_deadline()
    assert at is not None
    p.now = max(p.now, at)
    p.absorb(p.a, p.a.on_timer(p.now))
    p.deliver(keep)


def test_the_rto_retires_the_path_before_it_resends_and_a_late_arrival_brings_it_back() -> None:
    """Fails on main: the path went ASSUMED_BAD only with the RTO fired and the packet resent."""
    p, held = held_pair()
    last = held[-1]
    c = p.a.counters
    assert p.a.evset.state(last.meta.ev) is EvState.ASSUMED_BAD  # not GOOD once the RTO ran out
    assert c.rto_fired == 0 and c.losses_rto == 0
    # the packet was only queued: it arrives within the slack and its path comes back
    p.absorb(p.b, p.b.receive(last, p.now))
    p.deliver()
    assert p.a.evset.state(last.meta.ev) is EvState.GOOD
    assert c.rto_fired == 0 and c.losses_rto == 0 and c.ev_loss_undone == 1
    assert p.sent_done() and p.sent_done()[0].ok


def test_a_packet_really_gone_is_resent_elsewhere_by_the_rto_a_slack_later() -> None:
    p, held = held_pair()
    last = held[-1]
    for _ in range(20):
        step(p, lambda m: not (isinstance(m, DataPacket) and m.psn == last.psn and m.meta.ev == last.meta.ev))
        if p.a.counters.rto_fired:
            break
    assert p.a.counters.rto_fired == 1 and p.a.counters.losses_rto == 1
    resent = [m for m in p.sent_log if isinstance(m, DataPacket) and m.psn == last.psn][-1]
    assert resent.meta.ev != last.meta.ev  # (the path came back meanwhile: its probes were answered)
    p.deliver()
    assert p.sent_done() and p.sent_done()[0].ok
