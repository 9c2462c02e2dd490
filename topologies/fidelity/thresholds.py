"""When a live run stops being faithful: every threshold of the fidelity verdict, in one place.

A live run is evidence only while the machine keeps up with it (Mininet-HiFi's rule: monitor
the invariants that hardware would keep). docs/testbed.md ("Fidelity") states these same
numbers for users; ``tests/unit/test_fidelity_judge.py`` holds one test per threshold.

The monitor cuts a run into intervals (``interval_s``) and judges each *active* one (the
fabric carried at least ``active_mbit_s``, or a watched process wanted at least
``starved_demand`` of a CPU) on its own; a process or link is called out when
at least ``bad_share`` of the active intervals, and at least ``min_bad_intervals`` of them,
were bad for it, so one slow second (a garbage collection, a connection set-up) decides
nothing and a run that was starved for a stretch is never averaged away.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Thresholds:
    interval_s: float = 1.0
    # an interval is active when the fabric's links carried at least this much in all
    active_mbit_s: float = 1.0
    # -- processes: switches (BMv2, Linux shims), agents, the controller --------------------
    # a thread that ran or waited to run for this share of an interval never idled: it is the
    # bottleneck, whatever the links are set to (CPU-bound)
    saturated: float = 0.90
    # a thread that wanted at least ``starved_demand`` of a core (running or waiting to run), or
    # whose process waited ``sched_delay_ms`` per wake-up, and was kept off every CPU for
    # ``starved`` of the interval was starved: its work took longer than it would have on a
    # machine of its own, and packets waited for it
    starved: float = 0.20
    starved_demand: float = 0.50
    # mean time a process's threads waited for a CPU each time they were scheduled in, while
    # busy (ms); a BMv2 packet crosses four threads per hop, so this adds up along a path
    sched_delay_ms: float = 2.0
    # the delay above is judged only for a process that ran at least this share of a core
    delay_min_cpu: float = 0.05
    # -- links ---------------------------------------------------------------------------------
    # a link whose queue held packets must carry at least this share of its configured rate, times
    # the share of its packets its rate held back (the part of the second it was backlogged)
    # in two active intervals in a row (judge.judge_links: one short second is a gap between bursts)
    link_min_share: float = 0.90
    # a link short by the two samples of an interval is read every ``backlog_step_s`` from then
    # on, and judged on the steps its queue held packets at both ends (judge.short_share): a
    # link fed in bursts sends at its rate in them and idles empty in between; one with a
    # standing queue for less than ``backlogged_min_s`` of a second was fed in bursts. Fine
    # reads covering less than ``fine_min_read_s`` of it leave the interval to its two samples.
    backlog_step_s: float = 0.05
    backlogged_min_s: float = 0.25
    fine_min_read_s: float = 0.5
    # -- drops that are not by design (qdiscs, rings, socket buffers, BMv2 queues) ---------
    # at most this share of the frames the fabric carried (MRC takes an unexplained loss for a
    # failed path, so the allowance is tiny)
    drop_share: float = 0.0005
    # and never more than this many frames, whatever was carried
    drop_frames: int = 100
    # -- how much of the run decides --------------------------------------------------------
    bad_share: float = 0.10
    min_bad_intervals: int = 2

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT = Thresholds()
