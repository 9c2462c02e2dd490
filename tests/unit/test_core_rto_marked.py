"""The RTO of a connection the fabric marks (ECN) makes room for its queues (``queue_slack``).

Defect (issue 45 item 4): a fault-free all-to-all (one plane, 8 T0 x 4 hosts, 4 T1, 200 ns
links, trimming at 8 packets) fired spurious RTOs. Windows of 1-3 packets took 12.0-12.7 us
for a round trip behind three queues full to the trim threshold, while the connection's few
RTT samples (7-13 in its life, the newest 10-25 us older than the packet) never passed 9.5 us:
SRTT plus the variation stayed under the 12 us floor, and the RTO fired at the floor. The
samples below are one such connection's (seed 1), the packet's round trip the one it took.
"""

from __future__ import annotations

from mrc_host.core import TransportConfig
from mrc_host.core.records import PendingWrite, TxRecord
from mrc_host.core.recovery import MARKED_SRTTS, Recovery
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataPacket, Ecn, Opcode

BASE_RTT = 3006  # the all-to-all fabric's unloaded round trip (ns): the RTO floor is 4 of them
# (RTT ns, echoed CE) as the connection sampled them, oldest first, ~10 us apart
SAMPLES = [(6743, False), (5813, False), (6854, True), (5588, True), (5147, False)]
SAMPLES += [(6908, True), (7820, True), (6686, False), (9017, True), (7379, True)]
TRUE_RTT = 12_110  # the packet's: it crossed three full queues


def connection(marked: bool, mark_srtts: float = 1.5) -> tuple[Recovery, TxRecord, int]:
    """The connection after its samples (the last mark ``mark_srtts`` SRTTs before the packet
    left, if ``marked``), with one packet in flight; returns it and when it left."""
    cfg = TransportConfig(rto_min_ns=4 * BASE_RTT, nic_departures=True)
    r = Recovery(cfg, 1, [0])
    for rtt, _ in SAMPLES:
        r.rtt.sample(rtt)
    left = 1_000_000
    if marked:
        r.rtt.marked_ns = left - int(mark_srtts * (r.rtt.srtt_ns or 0))
    rec = TxRecord(10, PendingWrite(1, [], 0, 0), 0, b"x" * 4096, Opcode.WRITE_ONLY)
    r.on_sent(rec, 0, left - 9_850)  # it waited at the host's shared port
    r.nic.on_departed(rec, left)
    return r, rec, left


def test_a_one_packet_window_behind_three_full_queues_fires_no_rto() -> None:
    """Fails on main: its RTO was 12,024 ns and fired before the packet's SACK came."""
    r, rec, left = connection(marked=True)
    assert r.rto_ns() < TRUE_RTT  # the plain estimate is below the round trip
    assert r.expired(left + TRUE_RTT) == []
    due = r.deadline(sending=True)
    assert due is not None and due > left + TRUE_RTT
    assert r.expired(due) == [rec]  # it still times out, a recent queue's worth later


def test_unmarked_or_long_unmarked_connections_keep_the_plain_rto() -> None:
    """A path that failed sends no marks: the RTO of a connection with none, or none for
    ``MARKED_SRTTS`` SRTTs before the packet left, is not extended."""
    for r, rec, left in (
        connection(marked=False),
        connection(marked=True, mark_srtts=MARKED_SRTTS + 0.1),
    ):
        assert r.deadline(sending=True) == left + r.rto_ns()
        assert r.expired(left + r.rto_ns()) == [rec]


def test_a_sack_echoing_ce_marks_the_connection() -> None:
    """Fails on main (no mark kept): the RTO's slack starts from the SACKs' CE echoes."""
    p = make_pair(ack_every=1)
    _, acts = p.a.post_write(bytes(2048), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    rtt = p.a.sender.recovery.rtt
    assert rtt.marked_ns < 0

    def mark(m: object) -> bool:
        if isinstance(m, DataPacket):
            m.meta.ecn = Ecn.CE
        return True

    p.deliver(mark)
    assert p.sent_done() and 0 < rtt.marked_ns <= p.now
