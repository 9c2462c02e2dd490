"""Planes slow at the NIC or inside the fabric (issue 66, item 1: planes in proportion to
what they deliver).

A NIC port at a lower rate than the others (a link that renegotiated down, or a whole plane
slower) held the queue pair's whole NIC backlog, so the sender, stopped at the bound, fed the
fast ports one packet at a time: two planes with one at 50 Gb/s reached 0.67 of their
capacity, eight with one at 5 Gb/s 0.27, and several cases ran slower than with the slow
plane dead. Each test here failed on main before the fix it guards.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from bench import sim_slow_plane
from mrc_fabric.ev import PLANE_SHIFT
from mrc_host.core import EvSet, PathSpace, TransportConfig
from mrc_host.core.config import reported_departures
from mrc_host.core.nic_clock import NicClock
from mrc_host.core.records import PendingWrite, TxRecord
from mrc_host.core.recovery import Recovery
from mrc_host.core.rtt import RttEstimator
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fuzz import run_checked
from mrc_host.wire.messages import Opcode
from tests.unit.loss_rig import deliver, recovery, send
from tests.unit.scenario_rig import one_job

MTU = 4096

# Fuzz seed 4242, draw 1145: three planes, plane 1 at 25 Gb/s throughout, plane 2's host links at
# 10 Gb/s; two flows one after the other, an all-to-all beside the first. Ports counted alike
# (main's default), the second flow put 0.44 / 0.36 / 0.20 of its bytes on planes whose
# capacity shares are 0.74 / 0.19 / 0.07 (slow_plane 0.30, limit 0.05)
DRAW_4242_1145 = """
name = "fuzz"
seed = 185
modes = ["mrc"]
faults = ["rate=25:p1@0", "rate=10:h0-p2@0", "rate=10:h1-p2@0", "rate=10:h2-p2@0", "rate=10:h3-p2@0"]

[fabric]
planes = 3
t0 = 2
t1 = 7
hosts_per_t0 = 2
link_delay = "2000ns"

[[traffic]]
pattern = "flow"
name = "t0-flow"
src = 1
dst = 0
size = 3145728
start = "522180ns"

[[traffic]]
pattern = "flow"
name = "t1-flow"
src = 1
dst = 3
size = 6291456
start = "1740600ns"

[[traffic]]
pattern = "all-to-all"
name = "t2-all-to-all"
hosts = [0, 1, 2, 3]
size = 12288
start = "522180ns"
"""


def _rec(seq: int, sent_ns: int) -> TxRecord:
    rec = TxRecord(seq, PendingWrite(1, [], 0, 0), 0, b"x" * MTU, Opcode.WRITE_MIDDLE)
    rec.sent_ns = sent_ns
    return rec


def _clock(rates: list[float]) -> NicClock:
    """A NIC clock whose ports each reported one departure at its rate (``rates``, Gb/s)."""
    planes = len(rates)
    nic = NicClock(TransportConfig(nic_departures=True, nic_backlog=2 * planes, weigh_ports=True), planes)
    for plane, gbps in enumerate(rates):
        rec = _rec(plane, 0)
        nic.on_sent(rec, plane, MTU, 0)
        nic.on_departed(rec, 100, plane, gbps)
    assert nic.waiting == 0
    return nic


def _hand(nic: NicClock, plane: int, n: int) -> None:
    for seq in range(n):
        nic.on_sent(_rec(1000 + seq, 1_000), plane, MTU, 1_000)


def test_a_slow_port_holds_only_its_part_of_the_backlog() -> None:
    """Port 1 runs at a quarter of port 0's rate: it counts up to its part of the backlog
    (2 of 4), so four copies waiting there no longer stop the sender, and the rotation passes
    it over while the other port can take the packet."""
    nic = _clock([100.0, 25.0])
    assert nic.slow == 0b10
    _hand(nic, 1, 4)
    assert nic.waiting == 4
    assert not nic.full()  # main: the four on the slow port filled the backlog
    assert nic.backed_up() == 0b10
    _hand(nic, 0, 2)
    assert nic.full()  # the fast port's own part still bounds the sender


def test_ports_alike_count_whole_as_before() -> None:
    """Ports at the same rate, or a NIC that does not say its rate, are not slow: every copy
    counts, as before (capped per port, a burst onto one fast port let the sender hand over
    past the bound, and planes slow inside the fabric took the spill)."""
    for rates in ([100.0, 100.0], [100.0, 90.0], [0.0, 0.0]):
        nic = _clock(rates)
        assert nic.slow == 0
        _hand(nic, 0, 4)
        assert nic.full()
        assert nic.backed_up() == 0
    off = NicClock(TransportConfig(nic_departures=True, nic_backlog=4, weigh_ports=False), 2)
    for plane, gbps in enumerate([100.0, 25.0]):
        rec = _rec(plane, 0)
        off.on_sent(rec, plane, MTU, 0)
        off.on_departed(rec, 100, plane, gbps)
    assert off.slow == 0


def test_a_port_counted_whole_again_once_it_is_as_fast() -> None:
    """The judgement follows the rate the NIC says: a port back at the others' rate counts
    whole again, and the copies waiting on it are counted afresh."""
    nic = _clock([100.0, 25.0])
    _hand(nic, 1, 3)
    assert (nic.waiting, nic.counted) == (3, 2)
    rec = _rec(7, 2_000)
    nic.on_sent(rec, 1, MTU, 2_000)
    nic.on_departed(rec, 2_100, 1, 100.0)  # it left port 1, now at line rate
    assert nic.slow == 0
    assert (nic.waiting, nic.counted) == (3, 3)


def test_late_at_tail_leaves_out_a_slow_port_whose_packet_would_come_last() -> None:
    """Near the end of the writes a packet on a port twenty times slower would be heard of
    after the fast ports had sent all that is left: it goes to them. Far from the end it
    does not matter."""
    nic = _clock([100.0, 100.0, 100.0, 5.0])
    assert nic.slow == 0b1000
    delays = [21_000.0, 21_000.0, 21_000.0, 60_000.0]
    assert nic.late_at_tail(256 * 1024, delays) == 0b1000
    assert nic.late_at_tail(64 << 20, delays) == 0


def test_the_rotation_gives_planes_bytes_in_flight_in_proportion_to_their_port_rate() -> None:
    """Equal bytes in flight left a port at a quarter rate a queue the others did not have;
    weighed, it carries a fifth of what is in flight (and none lost or acknowledged here)."""
    s = EvSet(TransportConfig(), PathSpace(2, 4), random.Random(7))
    s.weigh_planes([100.0, 25.0])
    for k in range(1000):
        ev = s.next_data_ev(now_ns=k)
        assert ev is not None
        s.plane_load[ev >> PLANE_SHIFT] += MTU
    assert s.plane_load[1] / sum(s.plane_load) == pytest.approx(0.2, abs=0.01)
    s.weigh_planes([100.0, 100.0])
    assert s.plane_weight is None  # ports alike: bytes in flight alike, as before


def test_an_unsampled_plane_is_timed_by_when_its_packets_were_heard_of() -> None:
    """A plane much slower than the others has no RTT sample of its own (its SACKs come after
    the others' have covered its packets); it was timed at the connection's SRTT and taken
    for failed a round trip ahead of its packets (8 planes, one at 5 Gb/s: 12 plane failures,
    131 resends). Now it is timed by when its packets were heard of, by any SACK."""
    rtt = RttEstimator(2)
    rtt.sample(21_000)
    rtt.sample_plane(0, 21_000, 21_000)
    assert rtt.of_plane(1) == 21_000
    rtt.heard_plane(1, 60_000, 0, True)
    assert rtt.of_plane(1) == 60_000
    rtt.heard_plane(1, 68_000, 0, True)
    assert 60_000 < rtt.of_plane(1) < 68_000
    rtt.sample_plane(1, 50_000, 90_000)
    assert rtt.of_plane(1) == 50_000  # its own sample, once it has one


def _first_window_behind(slow_gbps: float, behind: int) -> list[int]:
    """Two planes, plane 1's port at ``slow_gbps`` (plane 0's at 100): plane 1's first full
    packet leaves at 0 and is not heard of, while plane 0 delivers packets that left
    ``behind`` after it. The planes the watch fails then."""
    cfg = TransportConfig(
        rto_min_ns=1_000,
        rto_initial_ns=50_000,
        sack_gap_threshold=3,
        **reported_departures(2),  # type: ignore[arg-type]
    )
    r = recovery(cfg)
    r.rtt.sample(2_000)
    stuck = send(r, 0, 1 << PLANE_SHIFT, 0, size=MTU)
    r.nic.on_departed(stuck, 0, 1, slow_gbps)
    newly = []
    for i in range(3):
        at = behind + i
        rec = send(r, 1 + i, 0, at, size=MTU)
        r.nic.on_departed(rec, at, 0, 100.0)
        deliver(r, rec, at + 2_000)
        newly.append(rec)
    return r.plane_watch.dead_planes(newly, behind + 2_002)


def test_a_slow_ports_first_packets_get_their_serialisation_before_the_plane_is_failed() -> None:
    """Defect: a plane whose NIC port runs at 10 Gb/s beside one at 100 was timed, before its
    first delivery, by the fast plane's round trip (2 us here, waited 6 us: a timeout's
    wait), while a full packet takes 3.3 us a link at 10 Gb/s: fuzz seed 5151, draw 785
    (below), every connection of an all-to-all failed the plane, 67 resends, none lost. Now
    it also gets a packet's extra serialisation on each link of the longest path
    (``NicClock.port_lag``, 12 us here): not failed 10 us behind; a black hole still is, 20 us
    behind. Ports alike keep the timeout's wait."""
    assert _first_window_behind(10.0, 10_000) == []
    assert _first_window_behind(10.0, 20_000) == [1]
    assert _first_window_behind(100.0, 10_000) == [1]


def _tail_after(slow_gbps: float) -> tuple[Recovery, int, int]:
    """Two planes, plane 1's port at ``slow_gbps`` (plane 0's at 100): a full packet on each
    leaves at 0, plane 0's is acknowledged at 2 us, plane 1's, the newest, is not. The
    recovery, when the tail probe fires and RACK's wait for plane 1."""
    cfg = TransportConfig(
        rto_min_ns=1_000,
        rto_initial_ns=50_000,
        **reported_departures(2),  # type: ignore[arg-type]
    )
    r = recovery(cfg)
    fast = send(r, 0, 0, 0, size=MTU)
    slow = send(r, 1, 1 << PLANE_SHIFT, 0, size=MTU)
    r.nic.on_departed(fast, 0, 0, 100.0)
    r.nic.on_departed(slow, 0, 1, slow_gbps)
    r.rtt.sample(2_000)
    r.rtt.sample_plane(0, 2_000, 2_000)
    deliver(r, fast, 2_000)
    tail = r.tail_at(sending=False)
    assert tail is not None
    return r, tail, r.plane_wait(1)


def test_a_slow_ports_tail_is_probed_and_judged_after_its_serialisation() -> None:
    """Defect: the tail probe and RACK timed a packet on a 10 Gb/s port's plane, not heard of
    yet, by the 100 Gb/s planes' round trip: an all-to-all's short writes probed the tail of
    nearly every connection whose last packet took the slow plane (fuzz seed 5151, draw 1984:
    52 resends, none lost). Now both wait its ``port_lag`` more, until the plane is heard of."""
    slow, slow_tail, slow_wait = _tail_after(10.0)
    _, tail, wait = _tail_after(100.0)
    lag = slow.nic.port_lag(1)
    assert lag > 12_000
    assert slow_tail == tail + int(lag)
    assert slow_wait == wait + int(lag)
    slow.rtt.heard_plane(1, 15_000, 15_000, True)  # heard of: its own delay says it now
    assert slow.plane_watch.unheard_lag(1) == 0.0


# Fuzz seed 5151, draw 785: two planes, plane 1 at 10 Gb/s throughout, an all-to-all of five
# hosts starting together (no connection of a NIC has heard of plane 1 yet). On main every one
# of its 20 connections failed plane 1 before its first delivery; the second shape is made up
# around it (four planes, plane 2 at 10 Gb/s throughout: on main 7 connections of 12 failed it)
SLOW_FIRST = {
    "5151_785": (2, 6, 4, [1, 3, 4, 6, 7], 131072, 1, 10, 200),
    "4p_10_all": (4, 4, 3, [0, 2, 4, 5], 262144, 2, 10, 200),
}


def _slow_plane_all_to_all(
    planes: int, t1: int, per_t0: int, hosts: list[int], size: int, slow: int, gbps: int, link_ns: int
) -> str:
    traffic = f'pattern = "all-to-all"\nhosts = {hosts}\nsize = {size}\nstart = "300600ns"'
    return one_job(
        "slow plane first window", 438, [f"rate={gbps}:p{slow}@0"], (planes, 2, t1, per_t0, link_ns), traffic
    )


@pytest.mark.parametrize("name", sorted(SLOW_FIRST))
def test_a_plane_slow_at_the_nic_is_not_failed_before_its_first_packets_can_come(name: str) -> None:
    """The same defect, end to end: at most one connection in ten fails the slow plane (after
    its first deliveries, behind the other senders' packets at a peer's slow port), where on
    main every one did."""
    sc = sf.load_text(_slow_plane_all_to_all(*SLOW_FIRST[name]), name)
    net, _ = sf.build(sc, sc.runs[0])
    net.run(sc.time_limit_ns)
    assert all(c.data_ok for c in net.connections)
    failed = [c.name for c in net.connections if c.sender.counters.planes_failed]
    assert len(failed) * 10 <= len(net.connections), failed


# Fuzz seed 5151, draw 1474: five planes, plane 2's T1 links at 10 Gb/s (its NIC ports at 100), a
# permutation of five hosts. On main four of the five connections failed plane 2 as silent a
# few microseconds after its first delivery (its service gap unknown yet) and resent 96 packets,
# none lost; the next shape is the same defect made up around it (three planes, plane 1's T1s at
# 25 Gb/s, an all-to-all).
SLOW_INSIDE = {
    "5151_1474": (5, 6, 4, [0, 2, 3, 7, 10], "permutation", 2621440, 2, 10),
    "3p_25_all": (3, 4, 3, [0, 1, 4, 7], "all-to-all", 524288, 1, 25),
}


def _slow_inside(
    planes: int, t1: int, per_t0: int, hosts: list[int], pattern: str, size: int, slow: int, gbps: int
) -> str:
    faults = [f"rate={gbps}:p{slow}-t1_{k}@0" for k in range(t1)]
    traffic = f'pattern = "{pattern}"\nhosts = {hosts}\nsize = {size}\nstart = "0ns"'
    return one_job("slow inside", 641, faults, (planes, 3, t1, per_t0, 200), traffic)


@pytest.mark.parametrize("name", sorted(SLOW_INSIDE))
def test_a_plane_slower_inside_is_not_failed_between_its_deliveries(name: str) -> None:
    """Defect: a plane slowed inside the fabric was failed as silent while it delivered at its
    own pace (``PlaneWatch.delivering``): with one delivery its service gap is unknown, and the
    next packet, behind the first on a link ten times slower, came a packet's time at that rate
    later. Now its gap is at least how much later than the other planes its packets are heard
    of at the least (a queue alone, as in an incast, does not raise that)."""
    sc = sf.load_text(_slow_inside(*SLOW_INSIDE[name]), name)
    net, _ = sf.build(sc, sc.runs[0])
    net.run(sc.time_limit_ns)
    assert all(c.data_ok for c in net.connections)
    failed = {c.name: c.sender.counters.planes_failed for c in net.connections}
    assert sum(failed.values()) == 0, failed


@pytest.mark.parametrize("name", ["2p_50_nic", "4p_mix_plane", "8p_5_plane"])
def test_planes_slow_at_the_nic_are_used_in_proportion(name: str) -> None:
    """One connection, a write of about 40 RTTs; main: 0.67, 0.55 and 0.27 of capacity, the
    last 3.5 x as long as with its slow plane dead. Now at least 0.9 of capacity, each
    plane's share of the bytes within 0.05 of its share of the capacity, no plane failed
    for being slow, and never slower than with the slow planes dead: by default
    (``weigh_ports``)."""
    slow = _case_holds(name)
    assert slow["resent"] == 0 and slow["rtos"] == 0


@pytest.mark.parametrize("name", ["4p_mix_inside", "8p_25_inside", "2p_50_inside"])
def test_planes_slow_inside_the_fabric_are_used_in_proportion(name: str) -> None:
    """The same targets for planes slowed inside the fabric, which no port rate shows: by
    their queues (``weigh_queues``, ``plane_queues.py``). On main: 0.70 and 0.64 of capacity,
    the second 1.4 x as long as with its slow plane dead (2p_50_inside held, at 0.93: kept
    from getting worse)."""
    _case_holds(name)


def _case_holds(name: str) -> dict[str, Any]:
    """``bench.sim_slow_plane``'s case ``name`` on seed 1 meets the bench's targets: at least
    0.9 of capacity, shares within 0.05, never slower than with the slow planes dead."""
    rates, where = next((r, w) for n, r, w in sim_slow_plane.CASES if n == name)
    slow = sim_slow_plane.run(rates, where, seed=1)
    dead = sim_slow_plane.run(rates, where, seed=1, variant="dead")
    assert slow["completed"]
    assert slow["of_capacity"] >= sim_slow_plane.GOODPUT_MIN
    assert slow["share_error"] <= sim_slow_plane.SHARE_TOL
    assert slow["time_us"] <= dead["time_us"]
    return slow


def test_a_fuzz_draws_planes_carry_their_capacity_shares_by_default() -> None:
    """Fuzz seed 4242, draw 1145: on main (ports alike) the second flow's share error was 0.30;
    weighed by default, every invariant holds but the all-to-all's resends with nothing
    dropped, which main had too (the open findings' kind: a slow plane's late packets)."""
    r = run_checked(sf.load_text(DRAW_4242_1145, "draw 1145"))
    verdicts = r["verdicts"]
    assert verdicts["slow_plane"]["checked"] > 0  # (the flows were alone long enough to judge)
    assert [k for k in r["failed"] if k != "resend"] == [], {k: v["violations"] for k, v in verdicts.items()}
