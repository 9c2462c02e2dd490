"""One live transfer (or several at once) with faults fired at set progress, measured.

:func:`run_transfer` starts an agent ``send`` and meanwhile

- records every progress update (seconds since start, bytes acknowledged);
- fires each :class:`FaultPlan` through the controller's northbound API once the transfer
  has reached its share of the bytes (``at_fraction``; ``None`` = before the transfer starts),
  with the plan's duration, probability and flap period, so the controller ends it;
- enforces a deadline: a transfer still running after ``deadline_s`` gets every fault
  cleared (the baselines stall until then, by design) and is reported as not having
  finished under the fault, with the bytes it had by the deadline;
- optionally polls the sender's EV table (state changes with their time).

Every wait is bounded: progress lines come every 0.2 s, threads are joined with timeouts.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from mrc_fabric.ev import ev_plane, ev_t1
from mrc_fabric.time_scale import scaled
from mrc_host.agent.payload import CHUNK_DATA_BYTES
from topologies.watch import EvChange

EV_POLL_S = 0.1  # on the reference machine: slower on a slower one (topologies/watch.py says why)
# the agent acknowledges bytes a chunk (one RDMA WRITE of up to 1 MiB) at a time, so a goodput
# bin must span a few chunks or it alternates between 0 and twice the rate
CHUNK_BYTES = CHUNK_DATA_BYTES
CHUNKS_PER_BIN = 3
MIN_BIN_S = 0.2


@dataclass
class FaultPlan:
    kind: str  # link_down | blackhole | loss | flap | switch_down | nic_port_down
    target: str
    at_fraction: float | None = 0.2  # None: injected before the transfer starts
    duration_s: float = 0.0  # 0: until cleared at the end of the transfer
    probability: float = 0.0
    period_s: float = 0.0
    direction: str = "both"
    fault_id: str = ""
    injected_at: float | None = None  # seconds since the transfer started (negative: before)
    landed_at: float | None = None  # when the controller had the fault in place (same clock)
    error: str = ""

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


@dataclass
class TransferRun:
    src: str
    dst: str
    mode: str
    size: int
    summary: dict[str, Any] = field(default_factory=dict)
    progress: list[tuple[float, int]] = field(default_factory=list)
    faults: list[FaultPlan] = field(default_factory=list)
    ev_changes: list[EvChange] = field(default_factory=list)
    ev_before: dict[str, dict[str, Any]] = field(default_factory=dict)
    ev_after: dict[str, dict[str, Any]] = field(default_factory=dict)
    wall_s: float = 0.0
    t0_monotonic: float = 0.0  # time.monotonic() when the transfer started
    deadline_s: float = 0.0
    deadline_hit: bool = False
    acked_at_deadline: int = 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return bool(self.summary.get("ok"))

    @property
    def seconds(self) -> float:
        return float(self.summary.get("seconds") or self.wall_s)

    def ev_delta(self, counter: str) -> dict[str, int]:
        """How much the sender's per-EV ``counter`` (an EV-table column) grew during this transfer."""
        before = self.ev_before
        return {ev: r[counter] - before.get(ev, {}).get(counter, 0) for ev, r in self.ev_after.items()}

    def lost_packets(self) -> int:
        """Data packets the sender counted lost on its EVs during this transfer."""
        return sum(self.ev_delta("lost").values())

    def data_per_ev(self) -> dict[str, int]:
        return self.ev_delta("data_sent")

    def bin_s(self) -> float:
        """Goodput bin length: a few chunks' worth at this transfer's mean rate (at least 0.2 s)."""
        rate = self.size / self.seconds if self.seconds > 0 else 0.0
        return max(MIN_BIN_S, CHUNKS_PER_BIN * CHUNK_BYTES / rate) if rate > 0 else MIN_BIN_S

    def record(self, bin_s: float | None = None) -> dict[str, Any]:
        bin_s = bin_s or self.bin_s()
        return {
            "src": self.src,
            "dst": self.dst,
            "mode": self.mode,
            "size": self.size,
            "ok": self.ok,
            "seconds": self.seconds,
            "wall_s": round(self.wall_s, 3),
            "deadline_s": self.deadline_s,
            "deadline_hit": self.deadline_hit,
            "acked_at_deadline": self.acked_at_deadline,
            "lost_packets": self.lost_packets(),
            "longest_stall_s": round(longest_stall(self.progress), 3),
            "summary": self.summary,
            "faults": [f.record() for f in self.faults],
            "ev_changes": [c.__dict__ for c in self.ev_changes],
            "goodput_bin_s": round(bin_s, 3),
            "goodput_mbit_s": goodput_bins(self.progress, bin_s),
            "progress": [(round(t, 3), b) for t, b in self.progress],
            "error": self.error,
        }


def send_rows(evs: list[dict[str, Any]], peer: str, mode: str) -> dict[str, dict[str, Any]]:
    """The sender-side EV rows of ``mode``'s connection to ``peer``, by EV."""
    return {
        r["ev"]: r for r in evs if r.get("peer") == peer and r.get("conn") == "send" and r.get("mode") == mode
    }


def inject(tb: Any, plan: FaultPlan, t: float, clock: Any = None) -> None:
    """Fire ``plan`` at ``t``; ``clock()`` (same origin as ``t``) stamps when the controller
    answered, i.e. when the fault was in the data plane."""
    try:
        fault = tb.controller.inject(
            plan.kind,
            plan.target,
            direction=plan.direction,
            probability=plan.probability,
            period_s=plan.period_s,
            duration_s=plan.duration_s,
        )
        plan.fault_id, plan.injected_at = fault.id, t
        plan.landed_at = clock() if clock is not None else t
    except Exception as exc:  # reported in the result; the transfer goes on
        plan.error = f"{type(exc).__name__}: {exc}"


class _Watch:
    def __init__(self, tb: Any, run: TransferRun, poll_evs: bool) -> None:
        self.tb, self.run, self.poll_evs = tb, run, poll_evs
        self.t0 = 0.0
        self.done = threading.Event()
        self.cond = threading.Condition()
        self.acked = 0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def on_progress(self, update: dict[str, Any]) -> None:
        acked = int(update.get("bytes_acked", 0))
        self.run.progress.append((self.now(), acked))
        with self.cond:
            self.acked = acked
            self.cond.notify_all()

    def injector(self) -> None:
        for plan in sorted(
            (p for p in self.run.faults if p.at_fraction is not None), key=lambda p: p.at_fraction or 0.0
        ):
            with self.cond:
                while self.acked < (plan.at_fraction or 0) * self.run.size and not self.done.is_set():
                    self.cond.wait(0.2)
            if self.done.is_set():
                plan.error = plan.error or "the transfer finished before this fault was due"
                continue
            inject(self.tb, plan, self.now(), self.now)

    def deadline(self) -> None:
        if self.run.deadline_s <= 0 or self.done.wait(self.run.deadline_s):
            return
        self.run.deadline_hit = True
        self.run.acked_at_deadline = self.acked
        try:
            self.tb.controller.clear()
        except Exception as exc:  # noted; the transfer then only ends when the fault's duration does
            self.run.error = f"clearing faults at the deadline failed: {exc}"

    def ev_poller(self) -> None:
        client = self.tb.agent(self.run.src).client
        last: dict[str, str] = {ev: r["state"] for ev, r in self.run.ev_before.items()}
        while not self.done.wait(scaled(EV_POLL_S)):
            try:
                rows = send_rows(client.evs(), self.run.dst, self.run.mode)
            except Exception:  # the agent is busy: the next poll tries again
                continue
            t = self.now()
            for ev, r in rows.items():
                old = last.get(ev, "GOOD")
                if r["state"] != old:
                    self.run.ev_changes.append(EvChange(t, ev, r["plane"], r["t1"], old, r["state"]))
                last[ev] = r["state"]


def run_transfer(
    tb: Any,
    src: str,
    dst: str,
    size: int,
    mode: str,
    faults: list[FaultPlan] | None = None,
    deadline_s: float = 0.0,
    poll_evs: bool = False,
    clear_after: bool = True,
) -> TransferRun:
    """One ``send`` from ``src``'s agent, with ``faults`` fired on the way (see module doc)."""
    run = TransferRun(src, dst, mode, size, faults=list(faults or []), deadline_s=deadline_s)
    client = tb.agent(src).client
    run.ev_before = send_rows(client.evs(), dst, mode)
    watch = _Watch(tb, run, poll_evs)
    for plan in run.faults:
        if plan.at_fraction is None:
            inject(tb, plan, 0.0)
    threads = [
        threading.Thread(target=watch.injector, daemon=True),
        threading.Thread(target=watch.deadline, daemon=True),
    ]
    if poll_evs:
        threads.append(threading.Thread(target=watch.ev_poller, daemon=True))
    watch.t0 = run.t0_monotonic = time.monotonic()
    for t in threads:
        t.start()
    try:
        run.summary = client.send(dst, size, mode=mode, on_progress=watch.on_progress)
    except Exception as exc:  # an agent refusal: recorded, the experiment decides
        run.error = f"{type(exc).__name__}: {exc}"
        run.summary = dict(getattr(exc, "reply", {}).get("summary", {}) or {})
    finally:
        run.wall_s = watch.now()
        watch.done.set()
        with watch.cond:
            watch.cond.notify_all()
        for t in threads:
            t.join(timeout=30)
        if clear_after and run.faults:
            tb.controller.clear()
    if run.ok and (not run.progress or run.progress[-1][1] < size):
        run.progress.append((run.seconds, int(run.summary.get("bytes_acked", size))))
    run.ev_after = send_rows(client.evs(), dst, mode)
    return run


def run_concurrent(
    tb: Any,
    pairs: list[tuple[str, str]],
    size: int,
    mode: str,
    faults: list[FaultPlan] | None = None,
    fault_after_s: float = 0.0,
    deadline_s: float = 0.0,
    sizes: list[int] | None = None,
) -> tuple[list[TransferRun], float]:
    """Every ``(src, dst)`` transfer at once; faults fired ``fault_after_s`` after the start.

    ``sizes``: bytes per pair (default ``size`` for each). Returns the runs and the job's
    completion time (until the last transfer ended).
    """
    each = sizes or [size] * len(pairs)
    runs = [TransferRun(s, d, mode, n, deadline_s=deadline_s) for (s, d), n in zip(pairs, each, strict=True)]
    done = threading.Event()
    t0 = time.monotonic()

    def one(run: TransferRun) -> None:
        def progress(update: dict[str, Any]) -> None:
            run.progress.append((time.monotonic() - t0, int(update.get("bytes_acked", 0))))

        client = tb.agent(run.src).client
        try:
            run.ev_before = send_rows(client.evs(), run.dst, mode)
            run.summary = client.send(run.dst, run.size, mode=mode, on_progress=progress)
            run.ev_after = send_rows(client.evs(), run.dst, mode)
        except Exception as exc:  # recorded per transfer
            run.error = f"{type(exc).__name__}: {exc}"
        run.wall_s = time.monotonic() - t0

    def fire() -> None:
        if faults and not done.wait(fault_after_s):
            for plan in faults:
                inject(tb, plan, time.monotonic() - t0)
        if deadline_s > 0 and not done.wait(max(0.0, deadline_s - (time.monotonic() - t0))):
            for run in runs:
                run.deadline_hit = run.deadline_hit or not run.summary
            tb.controller.clear()

    threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in runs]
    side = threading.Thread(target=fire, daemon=True)
    side.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    job_s = time.monotonic() - t0
    done.set()
    side.join(timeout=30)
    if faults:
        tb.controller.clear()
    for run in runs:
        run.faults = list(faults or [])
    return runs, job_s


def goodput_bins(progress: list[tuple[float, int]], bin_s: float = 0.2) -> list[tuple[float, float]]:
    """(bin end in s, Mbit/s) from cumulative (t, bytes) samples, bins of about ``bin_s``."""
    out: list[tuple[float, float]] = []
    prev_t, prev_b = 0.0, 0
    for t, b in progress:
        if t - prev_t >= bin_s * 0.75:
            out.append((round(t, 3), round((b - prev_b) * 8 / (t - prev_t) / 1e6, 3)))
            prev_t, prev_b = t, b
    return out


def longest_stall(progress: list[tuple[float, int]]) -> float:
    """The longest time the acknowledged bytes did not grow (seconds)."""
    longest, since, last_b = 0.0, 0.0, 0
    for t, b in progress:
        if b > last_b:
            longest = max(longest, t - since)
            since, last_b = t, b
    return longest


def rate_between(progress: list[tuple[float, int]], t_from: float, t_to: float) -> float | None:
    """Mean goodput (Mbit/s) between two times, from the samples nearest inside them."""
    inside = [(t, b) for t, b in progress if t_from <= t <= t_to]
    if len(inside) < 2 or inside[-1][0] - inside[0][0] <= 0:
        return None
    (ta, ba), (tb_, bb) = inside[0], inside[-1]
    return (bb - ba) * 8 / (tb_ - ta) / 1e6


def fault_windows(run: TransferRun) -> list[tuple[float, float | None]]:
    """(start, end) of each injected fault in the run's time (end None: until the transfer ended)."""
    out: list[tuple[float, float | None]] = []
    for f in run.faults:
        if f.injected_at is None:
            continue
        end = f.injected_at + f.duration_s if f.duration_s else run.wall_s
        out.append((f.injected_at, min(end, run.wall_s)))
    return out


def agent_ev_history(tb: Any, run: TransferRun) -> list[EvChange]:
    """The sender agent's own (exact, monotonic-clock) EV state changes during ``run``."""
    try:
        conns = tb.agent(run.src).client.stats().get("connections", [])
    except Exception:  # no history: callers fall back to polled changes
        return []
    t0_ns = int(run.t0_monotonic * 1e9)
    out = []
    for conn in conns:
        if conn.get("peer") != run.dst or conn.get("conn") != "send" or conn.get("mode") != run.mode:
            continue
        for h in conn.get("ev_history", []):
            if h["t_ns"] >= t0_ns:
                ev = int(h["ev"], 16)
                out.append(
                    EvChange((h["t_ns"] - t0_ns) / 1e9, h["ev"], ev_plane(ev), ev_t1(ev), h["old"], h["new"])
                )
    return sorted(out, key=lambda c: c.t)


def first_inject(run: TransferRun) -> float | None:
    times = [f.injected_at for f in run.faults if f.injected_at is not None]
    return min(times) if times else None


def recovery_after(
    run: TransferRun, prior_mbit_s: float, threshold: float, bin_s: float | None = None
) -> tuple[float | None, float | None]:
    """(seconds from the first fault until binned goodput is back >= threshold x prior,
    deepest bin / prior)."""
    start = first_inject(run)
    if start is None or prior_mbit_s <= 0:
        return None, None
    after = [(t, g) for t, g in goodput_bins(run.progress, bin_s or run.bin_s()) if t > start]
    if not after:
        return None, None
    dip = min(g for _t, g in after) / prior_mbit_s
    dipped = False
    for t, g in after:
        if g < threshold * prior_mbit_s:
            dipped = True
        elif dipped:
            return t - start, dip
    return (0.0 if not dipped else None), dip
