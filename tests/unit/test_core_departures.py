"""Loss timers run from when a packet left the NIC (``TransportConfig.nic_departures``).

A host's queue pairs share its NIC ports, served a packet each in turn: with 15 connections
a host hands over ~14 MB at once and a packet waits up to ~140 us before it leaves. Timed
from the hand-over, that wait entered every RTT sample (SRTT 100-156 us on a 9 us fabric),
the RTO and the reorder window grew with it, and a packet lost to a failed switch waited a
whole inflated RTO to be resent. Reported by the NIC (mrc-sim's port), the departure is the
clock: a packet still queued is never lost, and the RTT is the fabric's."""

from __future__ import annotations

from mrc_host.core import TransportConfig
from mrc_host.core.recovery import Recovery
from mrc_host.sim import scenario_file as sf
from tests.unit.loss_rig import deliver, recovery, send

PLANE1 = 1 << 28


def make(**kw: object) -> Recovery:
    cfg = TransportConfig(**{"rto_min_ns": 1_000, "rto_initial_ns": 50_000, "nic_departures": True, **kw})  # type: ignore[arg-type]
    return recovery(cfg)


def test_a_packet_still_queued_at_the_nic_never_times_out_and_its_rto_runs_from_its_departure() -> None:
    r = make()
    rec = send(r, 0, 0, 0)
    rto = r.rto_ns()
    assert rec.at_nic and r.deadline(False) == rto  # armed on the lower bound (the hand-over)
    r.nic.hold(r.packets.in_flight, 3 * rto)  # the timer fired: still queued
    assert r.expired(3 * rto) == [] and r.deadline(False) == 4 * rto  # (no busy loop)
    r.nic.on_departed(rec, 3 * rto + 5)
    assert not rec.at_nic and rec.left_ns == 3 * rto + 5 and r.nic.last_left == 3 * rto + 5
    assert r.expired(4 * rto + 4) == [] and r.expired(4 * rto + 5) == [rec]


def test_the_tail_probe_and_rack_skip_packets_still_queued_at_the_nic() -> None:
    r = make()
    r.rtt.sample(10_000)
    old = send(r, 0, 0, 0)
    queued = send(r, 1, PLANE1, 0)
    newest = send(r, 2, 0, 0)
    r.nic.on_departed(old, 100)
    r.nic.on_departed(newest, 200)
    deliver(r, newest, 12_000)
    r.note_rack([newest])
    late = 500_000
    r.nic.hold(r.packets.in_flight, late)
    assert queued.left_ns == late and r.nic.last_left == late
    assert r.rack_losses(late, sending=False) == [old]  # overtaken and overdue; the queued one is not
    assert r.tail_losses(late) == [old]
    tail = r.tail_at(False)
    assert tail is None or tail > late  # the tail is still leaving: no probe yet


def test_without_reports_the_timers_run_from_the_hand_over_as_before() -> None:
    r = make(nic_departures=False)
    rec = send(r, 0, 0, 0)
    assert not rec.at_nic
    r.nic.hold(r.packets.in_flight, 10**9)
    assert r.expired(r.rto_ns()) == [rec]


SCENARIO = """name = "departures"
seed = {seed}
modes = ["mrc"]
faults = [{faults}]
[fabric]
planes = 2
t0 = 2
t1 = 4
hosts_per_t0 = 4
link_gbps = 100
link_delay = "1us"
[[traffic]]
pattern = "all-to-all"
name = "a2a"
size = "256KiB"
"""


def run(seed: int, fault: str = "") -> tuple[object, list[object]]:
    sc = sf.load_text(SCENARIO.format(seed=seed, faults=f'"{fault}"' if fault else ""))
    net, jobs = sf.build(sc, sc.runs[0])
    net.run(sc.time_limit_ns)
    return net, jobs


def test_rtt_samples_in_an_all_to_all_are_the_fabric_s_not_the_nic_queue_s() -> None:
    """Each host's 7 connections share its two ports: what they hand over at once waits there
    up to ~35 us (four base RTTs), and none of it enters the loss rules' RTT."""
    net, jobs = run(1)
    conns = net.connections  # type: ignore[attr-defined]
    assert jobs[0].done and all(c.data_ok for c in conns)  # type: ignore[attr-defined]
    base = max(c.base_rtt_ns for c in conns)
    for c in conns:
        assert c.sender.sender.recovery.rtt.min_rtt_ns < 2 * base
        srtt = c.sender.sender.srtt_ns
        assert srtt is not None and srtt < 3 * base, (c.name, srtt, base)
    assert sum(c.sender.counters.rto_fired for c in conns) == 0


def test_a_t1_that_stops_under_an_all_to_all_costs_no_timeout_and_little_time() -> None:
    """T1 1 of plane 0 stops at 30 %: 1 path in 8 of the 56 connections. Timed from the
    hand-over, each connection handed its whole window over at once, so its packets waited at
    the NIC with EVs chosen tens of us before they left -- onto the path retired since -- and
    a loss waited for an RTO inflated by that wait: the job took 1.8-2.9 x the fault-free
    one. With departures reported and each queue pair's NIC backlog bounded: 0 timeouts."""
    _, free = run(1)
    net, hit = run(1, "switch-down:p0-t1_1@30%")
    conns = net.connections  # type: ignore[attr-defined]
    assert hit[0].done and all(c.data_ok for c in conns)  # type: ignore[attr-defined]
    assert sum(c.sender.counters.rto_fired for c in conns) == 0
    ratio = hit[0].completion_ns / free[0].completion_ns  # type: ignore[attr-defined]
    assert ratio <= 1.06, ratio
