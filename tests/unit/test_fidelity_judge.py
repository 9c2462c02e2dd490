"""The fidelity verdict, one test per threshold (topologies/fidelity/thresholds.py).

Each test builds intervals by hand, with a figure just past the threshold and one just
short of it, so a threshold that moves or a rule that stops reading it fails here.
"""

from __future__ import annotations

from dataclasses import replace

from topologies.fidelity.figures import (
    HELD_MIN,
    Interval,
    LinkDir,
    LinkFig,
    ProcessFig,
    ProcessKey,
    RawSample,
    interval,
    process_fig,
)
from topologies.fidelity.judge import Drops, judge
from topologies.fidelity.procfs import IfStats, MachineTimes, TaskTimes
from topologies.fidelity.qdiscs import TC_H_ROOT, QdiscStats, held_levels
from topologies.fidelity.thresholds import DEFAULT

SWITCH = ProcessKey("bmv2", "t0p0n0", 100)
LINK = LinkDir("t0p0n0>t1p0n0", "t0p0n0-eth3")


def proc(
    cpu: float = 0.1, demand: float = 0.2, waited: float = 0.0, delay: float = 0.1, key: ProcessKey = SWITCH
) -> ProcessFig:
    return ProcessFig(key, cpu, "thread", demand, waited, delay)


def link(
    mbit: float = 20.0, configured: float | None = 30.0, queued: bool = False, held: float = 1.0
) -> LinkFig:
    return LinkFig(LINK, mbit, configured, queued, 5 if queued else 0, held if queued else 0.0)


def run(
    bad: ProcessFig | None = None,
    n_bad: int = 3,
    n: int = 10,
    bad_link: LinkFig | None = None,
    carried: float = 20.0,
) -> list[Interval]:
    """``n`` active intervals; the first ``n_bad`` hold ``bad`` / ``bad_link``, the rest are fine."""
    out = []
    for i in range(n):
        iv = Interval(float(i), 1.0, 0.5, 0.05, None)
        iv.procs = [bad if bad is not None and i < n_bad else proc()]
        iv.links = [bad_link if bad_link is not None and i < n_bad else link(carried)]
        out.append(iv)
    return out


def reasons(intervals: list[Interval], drops: Drops | None = None) -> list[str]:
    return judge(intervals, drops or Drops(frames=100_000), DEFAULT).reasons


def test_a_quiet_run_is_faithful() -> None:
    v = judge(run(), Drops(frames=100_000))
    assert v.faithful and v.text == "faithful" and v.active_intervals == 10


def test_active_mbit_s_only_judges_intervals_with_traffic_or_demand() -> None:
    th = DEFAULT
    slow = proc(cpu=0.2, delay=th.sched_delay_ms * 3)  # slow to schedule, but wanting little CPU
    quiet = run(bad=slow, n_bad=10, carried=th.active_mbit_s * 0.5, bad_link=link(th.active_mbit_s * 0.5))
    assert judge(quiet, Drops()).faithful and judge(quiet, Drops()).active_intervals == 0
    busy = run(bad=slow, n_bad=10, carried=th.active_mbit_s * 2, bad_link=link(th.active_mbit_s * 2))
    assert not judge(busy, Drops()).faithful
    # a process starved so badly that the traffic stopped is judged all the same
    starved = proc(cpu=0.01, demand=1.0, waited=0.99)
    stalled = run(bad=starved, n_bad=10, carried=0.0, bad_link=link(0.0))
    assert judge(stalled, Drops()).active_intervals == 10 and not judge(stalled, Drops()).faithful


def test_saturated_calls_a_thread_that_never_idled_cpu_bound() -> None:
    th = DEFAULT.saturated
    assert any("cpu-bound" in r for r in reasons(run(bad=proc(cpu=0.95, demand=th + 0.02, waited=0.05))))
    assert reasons(run(bad=proc(cpu=0.85, demand=th - 0.02, waited=0.05))) == []


def test_starved_needs_both_the_wait_and_the_demand() -> None:
    th = DEFAULT
    hungry = proc(cpu=0.3, demand=th.starved_demand + 0.1, waited=th.starved + 0.02)
    assert any("starved" in r for r in reasons(run(bad=hungry)))
    assert reasons(run(bad=replace(hungry, waited=th.starved - 0.02))) == []
    # waiting a lot for a CPU while wanting little of one is latency, judged by sched_delay_ms
    assert reasons(run(bad=replace(hungry, demand=th.starved_demand - 0.1, cpu=0.01))) == []


def test_starved_counts_long_waits_per_wake_up_of_a_thread_that_wants_little() -> None:
    """A software switch that wakes for every packet uses a few % of a core; kept off the CPU
    (pinned beside busy loops, without autogroup) it waited 23-55 % of each second at 7-15 ms
    per wake-up while wanting under half a core: starved, although neither its demand nor its
    CPU reached the other rules' floors."""
    th = DEFAULT
    switch = proc(cpu=0.01, demand=0.4, waited=th.starved + 0.05, delay=th.sched_delay_ms * 5)
    out = reasons(run(bad=switch))
    assert len(out) == 1 and "starved" in out[0] and "ms per wake-up" in out[0], out
    # waits that short per wake-up are a busy machine's ordinary latency, not starvation
    assert reasons(run(bad=replace(switch, delay_ms=th.sched_delay_ms - 0.5))) == []
    # and long waits that add up to little of the interval decide nothing
    assert reasons(run(bad=replace(switch, waited=th.starved - 0.05))) == []


def test_starved_and_cpu_bound_are_one_reason_each() -> None:
    out = reasons(run(bad=proc(cpu=0.2, demand=1.0, waited=0.8)))
    assert len(out) == 1 and "starved" in out[0] and "waited for one 80%" in out[0]


def test_sched_delay_ms_is_judged_for_processes_that_use_the_cpu() -> None:
    th = DEFAULT
    slow = proc(cpu=th.delay_min_cpu + 0.05, delay=th.sched_delay_ms + 0.5)
    assert any("slow to schedule" in r for r in reasons(run(bad=slow)))
    assert reasons(run(bad=replace(slow, delay_ms=th.sched_delay_ms - 0.5))) == []


def test_delay_min_cpu_leaves_a_nearly_idle_process_alone() -> None:
    th = DEFAULT
    idle = proc(cpu=th.delay_min_cpu / 2, delay=th.sched_delay_ms * 10)
    assert reasons(run(bad=idle)) == []


def test_link_min_share_flags_a_queued_link_that_falls_short() -> None:
    th = DEFAULT
    short = link(30.0 * (th.link_min_share - 0.05), queued=True)
    out = reasons(run(bad_link=short))
    assert len(out) == 1 and out[0].startswith(f"link {LINK.name} carried as little as")
    assert reasons(run(bad_link=link(30.0 * (th.link_min_share + 0.02), queued=True))) == []
    # a link that carried little without a queue was only offered little
    assert reasons(run(bad_link=link(3.0, queued=False))) == []
    # an unlimited link has no rate to fall short of
    assert reasons(run(bad_link=link(3.0, configured=None, queued=True))) == []
    # one whose rate held back only 80 % of its packets was backlogged for about 80 % of the second
    busy = 30.0 * 0.8 * th.link_min_share
    assert reasons(run(bad_link=link(busy + 0.5, queued=True, held=0.8))) == []
    assert reasons(run(bad_link=link(busy - 0.5, queued=True, held=0.8))) != []


def test_a_link_short_for_single_seconds_between_bursts_is_not_called_out() -> None:
    """A gap between two transfers (or a sender's timeout) inside one second leaves a queue at
    both ends of it and part of the rate carried: one short second at a time, never two in a
    row, is no shortfall; the same seconds back to back are."""
    th = DEFAULT
    short = link(30.0 * 0.4, queued=True)
    full = link(30.0, queued=True)
    alternating = run(n=12)
    for i, iv in enumerate(alternating):
        iv.links = [short if i % 2 else full]
    assert reasons(alternating) == []
    in_a_row = run(n=12)
    for i, iv in enumerate(in_a_row):
        iv.links = [short if 2 <= i < 2 + 3 else full]
    out = reasons(in_a_row)
    assert len(out) == 1 and "carried as little as 40% of its 30 Mbit/s" in out[0], out
    assert "in 2 of 12 s" in out[0], out  # the second and third short seconds, of 12 queued
    assert th.min_bad_intervals == 2  # two short pairs are needed: one pair is one bad second
    one_pair = run(n=12)
    for i, iv in enumerate(one_pair):
        iv.links = [short if i in (4, 5) else full]
    assert reasons(one_pair) == []


def test_drop_share_allows_a_tiny_share_of_the_frames_carried() -> None:
    th = DEFAULT
    frames = 100_000
    allowed = int(th.drop_share * frames)
    ok = Drops(frames=frames)
    ok.add("qdisc", "h0-eth0", allowed)
    assert reasons(run(), ok) == []
    bad = Drops(frames=frames)
    bad.add("qdisc", "h0-eth0", allowed + 1)
    (out,) = reasons(run(), bad)
    assert out.startswith(f"{allowed + 1} frames dropped outside the design") and "h0-eth0" in out


def test_drop_frames_caps_the_allowance_of_a_long_run() -> None:
    th = DEFAULT
    frames = int(10 * th.drop_frames / th.drop_share)  # the share alone would allow 10x drop_frames
    d = Drops(frames=frames)
    d.add("switch_queue", "t1p0n0", th.drop_frames + 1)
    assert any("full BMv2 egress queues" in r for r in reasons(run(), d))


def test_bad_share_and_min_bad_intervals_decide_how_much_of_a_run_counts() -> None:
    th = DEFAULT
    hog = proc(cpu=1.0, demand=1.0, waited=0.0)
    assert reasons(run(bad=hog, n_bad=th.min_bad_intervals - 1, n=3)) == []  # too few
    n = 100
    below = int(th.bad_share * n) - 1
    assert reasons(run(bad=hog, n_bad=below, n=n)) == []  # too small a share
    assert reasons(run(bad=hog, n_bad=int(th.bad_share * n), n=n)) != []


def test_the_driver_is_shown_not_judged() -> None:
    driver = proc(cpu=1.0, demand=1.0, key=ProcessKey("driver", "testbed", 1))
    v = judge(run(bad=driver, n_bad=10), Drops(frames=1))
    assert v.faithful and "driver testbed" in v.figures["processes"]


def test_interval_s_and_the_figures_of_two_samples() -> None:
    """CPU, demand, wait and delay come from schedstat deltas over the interval's length."""
    dt = DEFAULT.interval_s
    before = {1: TaskTimes("ingress", 0, 0, 0), 2: TaskTimes("egress", 0, 0, 0)}
    after = {
        1: TaskTimes("ingress", int(0.6e9 * dt), int(0.3e9 * dt), 100),
        2: TaskTimes("egress", int(0.1e9 * dt), 0, 100),
    }
    f = process_fig(SWITCH, before, after, dt)
    assert round(f.cpu, 3) == 0.7 and f.busiest == "ingress" and round(f.demand, 3) == 0.9
    assert round(f.waited, 3) == 0.3 and round(f.delay_ms, 3) == round(0.3e3 * dt / 200, 3)


def test_a_link_is_queued_only_with_a_standing_queue_held_back_by_its_rate() -> None:
    def sample(t: float, tx: int, backlog: int, overlimits: int) -> RawSample:
        ifs = {LINK.ifname: IfStats(0, 0, 0, tx, 0, 0)}
        packets = tx // 1500
        q = {LINK.ifname: QdiscStats("htb", tx, packets, 0, overlimits, backlog, backlog // 1500)}
        return RawSample(t, {}, MachineTimes(0, 0, 100, 2), 0, None, ifs, q, {LINK.ifname: 30.0})

    a = sample(0.0, 0, 9000, 0)
    b = sample(1.0, 3_000_000, 9000, 2000)  # held back about once per packet: never ran dry
    (lf,) = interval(a, b, [LINK]).links
    assert lf.queued and lf.configured == 30.0 and round(lf.mbit_s) == 24 and lf.held == 1.0
    drained = interval(a, sample(1.0, 3_000_000, 0, 2000), [LINK])
    assert not drained.links[0].queued  # empty at the end
    # a queue at both ends that was held back for only a few of its packets idled in between
    idled = interval(a, sample(1.0, 3_000_000, 9000, int(2000 * HELD_MIN) - 10), [LINK])
    assert not idled.links[0].queued


def test_a_frame_held_back_counts_once_however_many_htb_classes_it_passes() -> None:
    """The Linux shim's port has a parent class at the link rate above its leaves: HTB counts a
    held-back frame in both, 2 overlimits per frame on a port that never ran dry (seen: held
    up to 2.0 on every shim port, 1.0 on TCLink's one-class host links). Counted raw, a port
    backlogged for half its frames looked backlogged for all and owed 90 % of its rate."""

    def sample(t: float, tx: int, overlimits: int, levels: dict[str, int]) -> RawSample:
        ifs = {LINK.ifname: IfStats(0, 0, 0, tx, 0, 0)}
        q = {LINK.ifname: QdiscStats("htb", tx, tx // 1500, 0, overlimits, 9000, 6)}
        rates = {LINK.ifname: 30.0}
        return RawSample(t, {}, MachineTimes(0, 0, 100, 2), 0, None, ifs, q, rates, {}, levels)

    half = 1000  # 2 overlimits for each of 1000 of the 2000 frames: held back for half of them
    two = {LINK.ifname: 2}
    (shim,) = interval(sample(0.0, 0, 0, two), sample(1.0, 3_000_000, 2 * half, two), [LINK]).links
    assert shim.held == 0.5 and shim.queued
    (raw,) = interval(sample(0.0, 0, 0, {}), sample(1.0, 3_000_000, 2 * half, {}), [LINK]).links
    assert raw.held == 1.0  # one class (TCLink): the same count is every frame held back


class _Netlink:
    """pyroute2's IPRoute as held_levels reads it: qdiscs and classes as netlink messages."""

    def __init__(self, qdiscs: list[dict[str, object]], classes: dict[int, list[dict[str, object]]]) -> None:
        self.qdiscs, self.classes = qdiscs, classes

    def get_qdiscs(self) -> list[dict[str, object]]:
        return self.qdiscs

    def get_classes(self, index: int) -> list[dict[str, object]]:
        return self.classes.get(index, [])


def test_held_levels_reads_how_many_rate_classes_a_port_stacks() -> None:
    def qdisc(index: int, handle: int, kind: str) -> dict[str, object]:
        return {"index": index, "handle": handle, "parent": TC_H_ROOT, "attrs": [("TCA_KIND", kind)]}

    def cls(handle: int, parent: int) -> dict[str, object]:
        return {"handle": handle, "parent": parent}

    tclink = [cls(0x50001, 0x50000)]  # 5:1 under the root 5:
    shim = [cls(0x10010, 0x10000), cls(0x10001, 0x10010), cls(0x10002, 0x10010)]  # 1:10, 1:1, 1:2
    ipr = _Netlink(
        [qdisc(1, 0x50000, "htb"), qdisc(2, 0x10000, "htb"), qdisc(3, 0x10000, "pfifo_fast")],
        {1: tclink, 2: shim},
    )
    assert held_levels(ipr, {1: "h0-eth0", 2: "t0-eth1", 3: "t0-eth2"}) == {"h0-eth0": 1, "t0-eth1": 2}


def test_a_port_slowed_mid_run_is_judged_on_the_rate_it_got() -> None:
    """E9 slows a port of an unlimited fabric halfway: the link had no rate when first seen, so
    its reason must name the rate it was short of, not fail on the missing one."""
    unlimited = link(80.0, configured=None, queued=True)
    slowed = link(50.0 * 0.4, configured=50.0, queued=True)
    intervals = run(n=10)
    for i, iv in enumerate(intervals):
        iv.links = [unlimited if i < 4 else slowed]
    v = judge(intervals, Drops(frames=100_000), DEFAULT)
    assert v.reasons and v.reasons[0].startswith(
        f"link {LINK.name} carried as little as 40% of its 50 Mbit/s"
    )
    assert v.figures["links"][LINK.name]["configured"] == 50.0
