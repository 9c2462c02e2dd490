"""The fidelity monitor of a live run: samples in a thread, a verdict whenever asked.

::

    monitor = FidelityMonitor(plan_of(tb), run_dir=tb.run.path, link_rate=cfg.link_rate).start()
    ...                                   # the run
    mark = monitor.mark()                 # judge a part of it on its own:
    verdict = monitor.verdict(since=mark) # ... its intervals and drops since the mark
    final = monitor.stop()                # the whole run; written to <run_dir>/fidelity.json

Every ``interval_s`` it reads the watched processes' threads, the machine's CPU, every
fabric interface's counters and root qdisc (``sampler``), and keeps the interval's figures
(``figures``). ``<run_dir>/fidelity.json`` holds the verdict so far (rewritten every few
seconds, so ``mrc view`` and ``mrc-testbed``'s CLI can show it while the run goes on); the
switches' P4 counters and the agents' port counters are read only at the start, at each
mark and at the end, since a read costs the switches CPU. Thresholds: ``thresholds.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrc_fabric.recording import FIDELITY_FILE
from topologies.fidelity import drops as drop_counts
from topologies.fidelity.figures import Interval, RawSample, interval
from topologies.fidelity.judge import Drops, Verdict, coarse_short, judge
from topologies.fidelity.sampler import Sampler, WatchPlan
from topologies.fidelity.thresholds import DEFAULT, Thresholds

log = logging.getLogger(__name__)

FILE_NAME = FIDELITY_FILE
WRITE_EVERY_S = 2.0
SETTLE_S = 0.5  # before a verdict compares counters: what is queued in a switch leaves it
MIN_TAIL_S = 0.2  # a verdict judges the time since the last full interval too, when this long
MAX_INTERVALS = 7200  # two hours of one-second intervals; older ones are dropped (and said)


@dataclass
class Mark:
    """A point of the run to judge from: where its intervals start, its counters then."""

    index: int
    sample: RawSample
    counters: dict[tuple[str, str, int], int] = field(default_factory=dict)
    agents: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


class FidelityMonitor:
    def __init__(
        self,
        plan: WatchPlan,
        run_dir: Path | None = None,
        link_rate: float | None = None,
        rate_source: str = "",
        thresholds: Thresholds = DEFAULT,
        ports: dict[tuple[str, int], str] | None = None,
    ) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.link_rate = link_rate
        self.rate_source = rate_source
        self.thresholds = thresholds
        self.ports = ports or {}  # BMv2: (switch, P4 port) -> interface
        self.slowed: set[str] = set()  # BMv2 switches with a queue slowed on purpose (queue_slowed)
        self.sampler = Sampler(plan, backlog_step_s=thresholds.backlog_step_s)
        self.intervals: list[Interval] = []
        self.dropped_intervals = 0
        self._last: RawSample | None = None
        self._start: Mark | None = None
        self._lock = threading.Lock()
        self._sampling = threading.Lock()  # the sampler's caches are not shared between threads
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._written = 0.0
        self.final: Verdict | None = None

    def queue_slowed(self, switch: str) -> None:
        """An experiment slowed one of ``switch``'s BMv2 queues on purpose: from now on to the end
        of the run, frames its full queues lose are the congestion it made, not the emulation's
        (``Drops.by_design``)."""
        self.slowed.add(switch)

    # -- life cycle ---------------------------------------------------------------------------
    def start(self) -> FidelityMonitor:
        self.sampler.start()
        self._start = self.mark()
        self._last = self._start.sample
        self._thread = threading.Thread(target=self._run, name="fidelity", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> Verdict:
        """Stop sampling; the verdict of the whole run (also written to fidelity.json)."""
        if self.final is not None:
            return self.final
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._take()
        self.final = self.verdict()
        self.sampler.close()
        self._write(self.final, final=True)
        return self.final

    def _run(self) -> None:
        next_at = time.monotonic() + self.thresholds.interval_s
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.thresholds.interval_s
            try:
                self._take()
                if time.monotonic() - self._written >= WRITE_EVERY_S:
                    self._write(self.verdict(counters=False, fresh=False), final=False)
            except Exception as exc:  # one bad sample (a namespace going away) must not end it
                log.warning("fidelity sample failed: %s: %s", type(exc).__name__, exc)

    def _sample(self, fine: bool = False) -> RawSample:
        with self._sampling:
            return self.sampler.sample(fine)

    def _take(self) -> RawSample:
        """A sample that closes an interval (the sampling thread's, and the last one); the
        links it finds short are read finely until one is not (``backlog.py``)."""
        sample = self._sample(fine=True)
        with self._lock:
            if self._last is not None:
                iv = interval(self._last, sample, self.plan.links)
                self.intervals.append(iv)
                self.sampler.watch({f.link.ifname for f in iv.links if coarse_short(f, self.thresholds)})
                if len(self.intervals) > MAX_INTERVALS:
                    del self.intervals[0]
                    self.dropped_intervals += 1
            self._last = sample
        return sample

    # -- verdicts -----------------------------------------------------------------------------
    def mark(self) -> Mark:
        """Now, as a point to judge from (reads the switch and agent counters). The switches'
        counters are read before the interfaces' (and after them at the end of a window), so
        a frame in flight between the two reads is never taken for a lost one."""
        counters, agents = self._counters(), self._agents()
        sample = self._sample()
        with self._lock:
            index = len(self.intervals) + self.dropped_intervals
        return Mark(index, sample, counters, agents)

    def verdict(self, since: Mark | None = None, counters: bool = True, fresh: bool = True) -> Verdict:
        """The verdict from ``since`` (default: the start) to now (``fresh``) or the last
        interval; ``counters``: also read the switches' and agents' counters now (their drops
        count)."""
        start = since or self._start
        if counters and start is not None and (start.counters or start.agents):
            time.sleep(SETTLE_S)  # frames in flight reach a counter before they are compared
        last = self._sample() if fresh and not self._stop.is_set() else self._last
        with self._lock:
            skip = 0 if start is None else max(0, start.index - self.dropped_intervals)
            window = list(self.intervals[skip:])
            tail = self._last
        if fresh and last is not None and tail is not None and last.t - tail.t >= MIN_TAIL_S:
            window.append(interval(tail, last, self.plan.links))  # the part since the last interval
        tally = Drops()
        pacers: dict[str, dict[str, float]] = {}
        if start is not None and last is not None:
            drop_counts.kernel_drops(start.sample, last, tally)
            if counters:
                if self.plan.target == "bmv2" and start.counters:
                    after = self._counters()
                    drop_counts.bmv2_drops(
                        start.counters, after, self.ports, start.sample, last, tally, set(self.slowed)
                    )
                if start.agents:
                    agents = self._agents()
                    drop_counts.agent_drops(start.agents, agents, tally)
                    pacers = drop_counts.pacer_figures(start.agents, agents)
        v = judge(window, tally, self.thresholds)
        if pacers:  # (paced agents: their DATA waits in their pacer, not in the host link)
            v.figures["agent_pacers"] = pacers
        v.figures["link_rate_mbit_s"] = self.link_rate
        v.figures["link_rate_source"] = self.rate_source
        v.figures["interval_s"] = self.thresholds.interval_s
        v.figures["seconds"] = round(sum(iv.dt for iv in window), 1)
        return v

    def _counters(self) -> dict[tuple[str, str, int], int]:
        if self.plan.target != "bmv2" or self.plan.counters is None:
            return {}
        try:
            return drop_counts.counter_table(self.plan.counters())
        except Exception as exc:  # a controller being restarted: no switch drops this time
            log.info("fidelity: switch counters unreadable: %s", exc)
            return {}

    def _agents(self) -> dict[str, list[dict[str, Any]]]:
        if self.plan.agent_ports is None:
            return {}
        try:
            return self.plan.agent_ports()
        except Exception as exc:
            log.info("fidelity: agent counters unreadable: %s", exc)
            return {}

    # -- fidelity.json ------------------------------------------------------------------------
    def _write(self, v: Verdict, final: bool) -> None:
        self._written = time.monotonic()
        if self.run_dir is None:
            return
        from topologies.fidelity.report import figures_line

        body = {"final": final, "updated_unix": time.time(), **v.as_dict()}
        body["line"] = figures_line(body)
        path = self.run_dir / FILE_NAME
        tmp = path.with_suffix(".tmp")
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(body, indent=1, default=str) + "\n")
            os.replace(tmp, path)


def read_verdict(run_dir: Path) -> dict[str, Any] | None:
    """The verdict a run's monitor wrote last (None: none yet)."""
    try:
        data: dict[str, Any] = json.loads((run_dir / FILE_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data


def monitor_of(tb: Any, thresholds: Thresholds = DEFAULT) -> FidelityMonitor:
    """A monitor for a running :class:`topologies.testbed.Testbed` (not started)."""
    from topologies.fidelity.sampler import plan_of

    topo = tb.topology
    plan = plan_of(tb)
    ports: dict[tuple[str, int], str] = {}
    if plan.target == "bmv2":
        for sw in topo.switches:
            ports.update({(sw.name, e.port): e.ifname for e in topo.ports_of(sw.name)})
    return FidelityMonitor(
        plan,
        run_dir=tb.run.path if tb.run is not None else None,
        link_rate=tb.config.link_rate,
        rate_source=getattr(tb, "rate_source", ""),
        thresholds=thresholds,
        ports=ports,
    )
