"""The fidelity verdict: a run's intervals and drops held against the thresholds.

Pure, so each rule has its unit test (``tests/unit/test_fidelity_judge.py``). A run is
*faithful* when no watched process was CPU-bound, starved or slow to be scheduled, no link
with packets in its queue fell short of its rate, and the frames dropped where the design
drops none stay within the allowance -- all counted over the *active* intervals, the ones in
which the fabric carried traffic. Otherwise it is *not faithful*, with each reason naming
the process or link and how much (``Verdict.text``).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from topologies.fidelity.figures import Interval, LinkFig, ProcessFig
from topologies.fidelity.thresholds import DEFAULT, Thresholds

# Kinds of drops that are not by design (Drops.by_kind), in the words of the verdict.
DROP_KINDS = {
    "qdisc": "in link qdiscs",
    "interface": "by interfaces",
    "backlog": "at full kernel input backlogs",
    "switch_ingress": "between a port and its switch (ring or input buffer)",
    "switch_queue": "in full BMv2 egress queues",
    "agent_socket": "in full agent receive buffers",
}


UNJUDGED = {"driver"}  # the process driving the run (the testbed's own): shown, not judged
OUTSIDE_NOTE_CORES = 0.25  # other work this heavy is named next to the reasons (a hint, not a rule)


@dataclass
class Drops:
    """Frames lost where the design loses none, by kind and place, and frames carried."""

    by_kind: dict[str, int] = field(default_factory=dict)
    where: dict[str, int] = field(default_factory=dict)  # "kind place" -> frames
    frames: int = 0  # frames the fabric's links carried in the window
    # tail drops the design has after all: a BMv2 queue an experiment slowed on purpose, full
    # (the Linux target counts its own as a drop reason); figures, never against fidelity
    by_design: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, place: str, frames: int) -> None:
        if frames > 0:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + frames
            self.where[f"{kind} {place}"] = self.where.get(f"{kind} {place}", 0) + frames

    def add_by_design(self, kind: str, place: str, frames: int) -> None:
        if frames > 0:
            self.by_design[f"{kind} {place}"] = self.by_design.get(f"{kind} {place}", 0) + frames

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


@dataclass
class Verdict:
    faithful: bool
    reasons: list[str]
    active_intervals: int
    intervals: int
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        if not self.active_intervals:
            return (
                "faithful (no traffic to judge)"
                if self.faithful
                else "not faithful: " + "; ".join(self.reasons)
            )
        return "faithful" if self.faithful else "not faithful: " + "; ".join(self.reasons)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdict"] = self.text
        return out


def active(intervals: list[Interval], th: Thresholds) -> list[Interval]:
    """The intervals that decide: the fabric carried traffic, or a watched process wanted a
    good part of a CPU (a process starved so badly that traffic stopped is judged too)."""
    return [
        iv
        for iv in intervals
        if iv.fabric_mbit_s >= th.active_mbit_s
        or any(p.demand >= th.starved_demand for p in iv.procs if p.key.kind not in UNJUDGED)
    ]


def counted(bad: int, of: int, th: Thresholds) -> bool:
    """Enough bad intervals to call a process or link out."""
    return of > 0 and bad >= th.min_bad_intervals and bad / of >= th.bad_share


def process_problems(fig: ProcessFig, th: Thresholds) -> list[str]:
    """What was wrong with one process in one interval (empty: nothing)."""
    out = []
    # kept off the CPU for a good part of the interval, either wanting much of a core or at
    # long waits per wake-up: a switch that wakes for each packet and uses 1 % of a core is
    # starved when each packet waits milliseconds for it (its demand never reaches half a core)
    long_waits = fig.delay_ms >= th.sched_delay_ms
    if fig.waited >= th.starved and (fig.demand >= th.starved_demand or long_waits):
        out.append("starved")
    elif fig.demand >= th.saturated:
        out.append("cpu-bound")
    if fig.cpu >= th.delay_min_cpu and fig.delay_ms >= th.sched_delay_ms:
        out.append("slow to schedule")
    return out


def judge_processes(runs: list[Interval], th: Thresholds) -> tuple[list[str], dict[str, Any]]:
    bad: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    seen: dict[str, list[ProcessFig]] = defaultdict(list)
    for iv in runs:
        for fig in iv.procs:
            seen[fig.key.label].append(fig)
            if fig.key.kind in UNJUDGED:
                continue
            for problem in process_problems(fig, th):
                bad[fig.key.label][problem] += 1
    reasons, figures = [], {}
    for label, figs in sorted(seen.items()):
        worst = max(figs, key=lambda f: f.demand)
        figures[label] = {
            "cpu_median": round(statistics.median(f.cpu for f in figs), 3),
            "cpu_max": round(max(f.cpu for f in figs), 3),
            "busiest_thread": worst.busiest,
            "demand_max": round(worst.demand, 3),
            "waited_max": round(max(f.waited for f in figs), 3),
            "delay_ms_median": round(statistics.median(f.delay_ms for f in figs), 3),
            "delay_ms_max": round(max(f.delay_ms for f in figs), 3),
            "bad_intervals": dict(bad.get(label, {})),
        }
        for problem, n in sorted(bad.get(label, {}).items()):
            if counted(n, len(figs), th):
                reasons.append(f"{label} {problem} {_how(problem, figs)} in {n} of {len(figs)} s")
    return reasons, figures


def _how(problem: str, figs: list[ProcessFig]) -> str:
    if problem == "cpu-bound":
        worst = max(figs, key=lambda f: f.demand)
        return f"(thread {worst.busiest} wanted {worst.demand:.0%} of a core)"
    if problem == "starved":
        worst = max(figs, key=lambda f: f.waited)
        return (
            f"(wanted {worst.demand:.0%} of a core, waited for one {worst.waited:.0%} of the time, "
            f"{worst.delay_ms:.1f} ms per wake-up)"
        )
    return f"(up to {max(f.delay_ms for f in figs):.1f} ms run-queue wait per wake-up)"


def coarse_short(fig: LinkFig, th: Thresholds) -> bool:
    """Short by the interval's two samples alone: its queue held packets at both, and it carried
    less than its rate times the share of its frames the rate held back."""
    return bool(
        fig.queued and fig.configured and fig.mbit_s < th.link_min_share * fig.configured * min(1.0, fig.held)
    )


def short_share(fig: LinkFig, th: Thresholds) -> tuple[float, bool] | None:
    """(share of its rate, judged on fine reads) when the link fell short in this interval.

    Two samples a second apart cannot tell a link fed in bursts from one the machine did not
    serve: both start and end the second with a queue, HTB holds back nearly every frame
    (within a burst as much as when starved), and both carry part of their rate. A link short
    by them is read every ``backlog_step_s`` from then on (``backlog.FineReader``); read so, it
    is judged on the steps its queue stood at both ends: a burst's steps go at the rate, and a
    link that had a standing queue for less than ``backlogged_min_s`` was fed in bursts."""
    if not coarse_short(fig, th):
        return None
    assert fig.configured  # coarse_short checked it
    fine = fig.fine
    if fine is None or fine.read_s < th.fine_min_read_s:
        return fig.mbit_s / fig.configured, False
    share = fine.mbit_s / fig.configured
    if fine.seconds < th.backlogged_min_s or share >= th.link_min_share:
        return None
    return share, True


def judge_links(runs: list[Interval], th: Thresholds) -> tuple[list[str], dict[str, Any]]:
    """Links that carried less than their rate while their queue held packets.

    Only a shortfall in two active intervals in a row counts (the second of them): a gap
    between bursts (a transfer that ended and the next that began, a sender's timeout) can
    leave one second short, and a link the machine cannot serve stays short."""
    short: dict[str, list[tuple[float, float, bool]]] = defaultdict(list)  # share, Mbit/s, fine
    stats: dict[str, dict[str, Any]] = {}
    was_short: set[str] = set()
    for iv in runs:
        now_short: set[str] = set()
        for fig in iv.links:
            name = fig.link.name
            s = stats.setdefault(
                name, {"configured": fig.configured, "mbit_s_max": 0.0, "queued": 0, "backlog_max": 0}
            )
            s["configured"] = fig.configured or s["configured"]  # a port slowed mid-run gets a rate
            s["mbit_s_max"] = round(max(s["mbit_s_max"], fig.mbit_s), 2)
            s["backlog_max"] = max(s["backlog_max"], fig.backlog)
            s["held_max"] = max(s.get("held_max", 0.0), fig.held)
            if fig.fine is not None and fig.fine.seconds > 0:
                low = min(s.get("backlogged_mbit_s_min", fig.fine.mbit_s), fig.fine.mbit_s)
                s["backlogged_mbit_s_min"] = round(low, 2)
            if fig.queued and fig.configured:
                s["queued"] += 1
                if coarse_short(fig, th):  # what the two samples alone say (read finely after)
                    s["short_by_samples"] = s.get("short_by_samples", 0) + 1
                found = short_share(fig, th)
                if found is not None:
                    now_short.add(name)
                    if name in was_short:
                        short[name].append((found[0], fig.configured, found[1]))
        was_short = now_short
    reasons = []
    for name, shares in sorted(short.items()):
        if counted(len(shares), stats[name]["queued"], th):
            share, rate, fine = min(shares)
            how = (
                f"while its queue stood (read every {th.backlog_step_s * 1000:g} ms)"
                if fine
                else ("with packets queued")
            )
            reasons.append(
                f"link {name} carried as little as {share:.0%} of its {rate:g} Mbit/s {how}, "
                f"in {len(shares)} of {stats[name]['queued']} s (each the second of a short pair)"
            )
    return reasons, {k: v for k, v in stats.items() if v["mbit_s_max"] > 0 or v["queued"]}


def judge_drops(drops: Drops, th: Thresholds) -> list[str]:
    allowance = min(th.drop_frames, th.drop_share * drops.frames)
    if drops.total <= allowance:
        return []
    worst = sorted(drops.where.items(), key=lambda kv: -kv[1])[:3]
    kinds = ", ".join(f"{n} {DROP_KINDS.get(k, k)}" for k, n in sorted(drops.by_kind.items()))
    places = ", ".join(f"{w} ({n})" for w, n in worst)
    return [
        f"{drops.total} frames dropped outside the design ({kinds}; most at {places}) "
        f"of {drops.frames} carried"
    ]


def _queue_max(runs: list[Interval]) -> dict[str, int]:
    """BMv2: each switch's deepest data queue (packets, as last dequeued) over the run."""
    out: dict[str, int] = {}
    for iv in runs:
        for switch, depth in iv.switch_queues.items():
            out[switch] = max(out.get(switch, 0), depth)
    return out


def _median(values: list[float], digits: int) -> float | None:
    return round(statistics.median(values), digits) if values else None


def judge(intervals: list[Interval], drops: Drops, th: Thresholds = DEFAULT) -> Verdict:
    runs = active(intervals, th)
    proc_reasons, proc_figs = judge_processes(runs, th)
    link_reasons, link_figs = judge_links(runs, th)
    drop_reasons = judge_drops(drops, th)
    busy = [iv.machine_busy for iv in runs]
    outside = _median([iv.outside_cores for iv in runs], 2)
    figures: dict[str, Any] = {
        "processes": proc_figs,
        "links": link_figs,
        "drops": {
            "total": drops.total,
            "by_kind": drops.by_kind,
            "where": drops.where,
            "frames": drops.frames,
            "by_design": drops.by_design,
        },
        "machine_busy_median": _median(busy, 3),
        "machine_busy_max": round(max(busy), 3) if busy else None,
        "outside_cores_median": outside,
        "softirq_median": _median([iv.softirq for iv in runs], 3),
        "fabric_mbit_s_median": _median([iv.fabric_mbit_s for iv in runs], 2),
        "switch_queue_max": _queue_max(runs),
        "thresholds": th.as_dict(),
    }
    reasons = [*proc_reasons, *link_reasons, *drop_reasons]
    if reasons and outside is not None and outside >= OUTSIDE_NOTE_CORES:
        reasons.append(f"work outside this run used {outside:.1f} cores of the machine meanwhile")
    return Verdict(not reasons, reasons, len(runs), len(intervals), figures)
