"""Watch one live transfer: progress over time, EV state changes, faults fired at set progress.

Used by ``make demo`` and by the testbed tests. A :class:`TransferWatch` runs the
agent's ``send`` and meanwhile

- records every progress update (time, bytes acknowledged) for the goodput curve;
- polls the sender's EV table and records each state change with its time;
- fires each :class:`PlannedFault` through the controller once the transfer has reached
  its share of the bytes (progress-triggered, so it hits mid-transfer at any speed),
  reading the switch fault-drop counters at injection and at the end.

Times are seconds since the transfer started (``time.monotonic``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mrc_fabric.drop_reasons import DropReason
from mrc_fabric.ev import EV
from mrc_fabric.p4names import Counter
from mrc_fabric.time_scale import scaled

# the sender's EVs are read this often on the reference machine, slower on a slower one: each
# read costs the agent a whole EV table's answer, and at a fixed rate a VM 30x slower spent most
# of its agent's core answering them (the agent's own history gives the exact times)
EV_POLL_S = 0.05
THREAD_JOIN_S = 30.0  # the injector's and poller's end after the transfer (reference machine)
FAULT_DROP = Counter.DROP_REASON
FAULT_DROP_INDEX = DropReason.FAULT.cell


@dataclass
class PlannedFault:
    """Inject ``kind`` on ``target`` once ``at_fraction`` of the bytes are acknowledged."""

    kind: str
    target: str
    at_fraction: float
    label: str = ""
    probability: float = 0.0  # loss
    period_s: float = 0.0  # flap
    fault_id: str = ""
    injected_at: float | None = None  # seconds since the transfer started, before the first table write
    landed_at: float | None = None  # ... when the controller answered: every table write done
    acked_at_injection: int = 0
    switches: list[str] = field(default_factory=list)
    drops_at_injection: dict[str, int] = field(default_factory=dict)
    drops_at_end: dict[str, int] = field(default_factory=dict)
    evs_at_injection: dict[str, dict[str, Any]] = field(default_factory=dict)  # EV -> sender row
    evs_sampled_unix: float = 0.0  # when evs_at_injection was read (Unix time: recordings use it)
    error: str = ""

    @property
    def switch_drops(self) -> int:
        return sum(self.drops_at_end.get(s, 0) - self.drops_at_injection.get(s, 0) for s in self.switches)


@dataclass
class EvChange:
    t: float
    ev: str
    plane: int
    t1: int
    old: str
    new: str
    reason: str = ""  # the core's words for it, where the agent's EV history has them


@dataclass
class WatchResult:
    summary: dict[str, Any]
    progress: list[tuple[float, int]]  # (t, bytes acknowledged)
    ev_changes: list[EvChange]
    ev_first: dict[str, dict[str, Any]]  # EV -> first row seen (state GOOD at the start)
    ev_last: dict[str, dict[str, Any]]  # EV -> last row seen
    faults: list[PlannedFault]
    wall_s: float


def fault_drops(controller: Any, switches: list[str]) -> dict[str, int]:
    """Packets each switch dropped for faults so far (drop_reason[fault])."""
    if not switches:
        return {}
    cells, _errors = controller.counters(switches)
    out = dict.fromkeys(switches, 0)
    for c in cells:
        if c.counter == FAULT_DROP and c.index == FAULT_DROP_INDEX:
            out[c.switch] = c.packets
    return out


def send_rows(evs: list[dict[str, Any]], peer: str) -> dict[str, dict[str, Any]]:
    """The sender-side EV rows of the connection to ``peer``, by EV."""
    return {r["ev"]: r for r in evs if r.get("peer") == peer and r.get("conn") == "send"}


class TransferWatch:
    def __init__(
        self,
        testbed: Any,
        src: str,
        dst: str,
        size: int,
        mode: str = "mrc",
        faults: list[PlannedFault] | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.testbed = testbed
        self.src, self.dst, self.size, self.mode = src, dst, size, mode
        self.faults = faults or []
        self.user_progress = on_progress
        self.progress: list[tuple[float, int]] = []
        self.ev_changes: list[EvChange] = []
        self.ev_first: dict[str, dict[str, Any]] = {}
        self.ev_last: dict[str, dict[str, Any]] = {}
        self._t0 = 0.0
        self._done = threading.Event()
        self._fire = threading.Condition()
        self._acked = 0
        self._drops_at_start: dict[str, int] = {}

    def _now(self) -> float:
        return time.monotonic() - self._t0

    # -- threads -----------------------------------------------------------------------------------
    def _on_progress(self, update: dict[str, Any]) -> None:
        acked = int(update.get("bytes_acked", 0))
        self.progress.append((self._now(), acked))
        with self._fire:
            self._acked = acked
            self._fire.notify_all()
        if self.user_progress is not None:
            self.user_progress(update)

    def _poll_evs(self) -> None:
        client = self.testbed.agent(self.src).client
        while not self._done.is_set():
            self._sample_evs(client)
            self._done.wait(scaled(EV_POLL_S))
        self._sample_evs(client)

    def _sample_evs(self, client: Any) -> None:
        try:
            rows = send_rows(client.evs(), self.dst)
        except Exception:  # the agent is busy or gone; the next poll tries again
            return
        t = self._now()
        for ev, row in rows.items():
            prev = self.ev_last.get(ev)
            if prev is None:
                self.ev_first[ev] = row
                if row["state"] != "GOOD":
                    self.ev_changes.append(EvChange(t, ev, row["plane"], row["t1"], "GOOD", row["state"]))
            elif prev["state"] != row["state"]:
                self.ev_changes.append(EvChange(t, ev, row["plane"], row["t1"], prev["state"], row["state"]))
            self.ev_last[ev] = row

    def _inject(self) -> None:
        ctl = self.testbed.controller
        for f in sorted(self.faults, key=lambda x: x.at_fraction):
            with self._fire:
                while self._acked < f.at_fraction * self.size and not self._done.is_set():
                    self._fire.wait(0.5)
            if self._done.is_set():
                f.error = "the transfer finished before this fault was due"
                return
            try:
                before = self._drops_at_start
                f.evs_at_injection = send_rows(self.testbed.agent(self.src).client.evs(), self.dst)
                f.evs_sampled_unix = time.time()
                # stamped before the first write: the first switch's entry acts at once, the
                # others up to ~0.1 s later (BMv2), so EVs may retire before the call returns
                requested, acked = self._now(), self._acked
                extra = {k: v for k, v in (("probability", f.probability), ("period_s", f.period_s)) if v}
                fault = ctl.inject(f.kind, f.target, **extra)
                f.fault_id, f.injected_at, f.acked_at_injection = fault.id, requested, acked
                f.landed_at = self._now()
                # entries read "switch:table:port action"
                f.switches = sorted({entry.split(":")[0] for entry in fault.entries})
                f.drops_at_injection = {s: before.get(s, 0) for s in f.switches}
            except Exception as exc:  # reported in the result, the transfer goes on
                f.error = f"{type(exc).__name__}: {exc}"

    def _merge_history(self, client: Any) -> None:
        """Replace each EV's polled changes by the agent's own exact EV history where it reaches back.

        The agent stamps each change with ``time.monotonic_ns()`` (the same clock as ours) but
        keeps only the last few per connection; polls (every EV_POLL_S) cover the rest and miss
        changes that revert within one poll.
        """
        try:
            conns = client.stats().get("connections", [])
        except Exception:  # no history: the polled changes stand
            return
        t0_ns = int(self._t0 * 1e9)
        exact: list[EvChange] = []
        for conn in conns:
            if conn.get("peer") != self.dst or conn.get("conn") != "send":
                continue
            for h in conn.get("ev_history", []):
                if h["t_ns"] < t0_ns:
                    continue
                ev = EV.decode(int(h["ev"], 16))
                exact.append(
                    EvChange(
                        (h["t_ns"] - t0_ns) / 1e9,
                        h["ev"],
                        ev.plane,
                        ev.t1,
                        h["old"],
                        h["new"],
                        h.get("reason", ""),
                    )
                )
        if not exact:
            return
        # per EV: the history keeps the last few changes of the whole connection, so an EV whose
        # changes were evicted by others' keeps its polled ones, and the rest keep those before
        # their first exact change
        first: dict[str, float] = {}
        for c in exact:
            first[c.ev] = min(c.t, first.get(c.ev, c.t))
        polled = [c for c in self.ev_changes if c.t < first.get(c.ev, float("inf"))]
        self.ev_changes = sorted(polled + exact, key=lambda c: c.t)

    # -- run ---------------------------------------------------------------------------------------
    def run(self) -> WatchResult:
        client = self.testbed.agent(self.src).client
        self._sample_evs(client)  # EV rows of an existing connection, before anything happens
        # Fault drop counters before anything happens: reading them at injection would delay the
        # fault by a counter read of every switch (no fault is active, so they do not move).
        self._drops_at_start = (
            fault_drops(self.testbed.controller, [s.name for s in self.testbed.topology.switches])
            if self.faults
            else {}
        )
        self.ev_changes.clear()
        self._t0 = time.monotonic()
        poller = threading.Thread(target=self._poll_evs, name="ev-poll", daemon=True)
        injector = threading.Thread(target=self._inject, name="fault-inject", daemon=True)
        poller.start()
        injector.start()
        try:
            summary = self.testbed.send(self.src, self.dst, self.size, self.mode, self._on_progress)
        finally:
            wall = self._now()
            self._done.set()
            with self._fire:
                self._fire.notify_all()
            injector.join(timeout=scaled(THREAD_JOIN_S))
            poller.join(timeout=scaled(THREAD_JOIN_S))
        ctl = self.testbed.controller
        for f in self.faults:
            if f.fault_id:
                f.drops_at_end = fault_drops(ctl, f.switches)
        if summary.get("ok") and (not self.progress or self.progress[-1][1] < self.size):
            self.progress.append((wall, int(summary.get("bytes_acked", self.size))))
        self._merge_history(client)
        return WatchResult(
            summary, self.progress, self.ev_changes, self.ev_first, self.ev_last, self.faults, wall
        )


def goodput_series(progress: list[tuple[float, int]], bin_s: float = 0.2) -> list[tuple[float, float]]:
    """(t, Mbit/s) per ``bin_s`` from cumulative (t, bytes) samples."""
    out: list[tuple[float, float]] = [(0.0, 0.0)]
    prev_t, prev_b = 0.0, 0
    for t, b in progress:
        if t - prev_t >= bin_s * 0.5:
            out.append((t, (b - prev_b) * 8 / (t - prev_t) / 1e6))
            prev_t, prev_b = t, b
    return out


def completion_series(progress: list[tuple[float, int]]) -> list[tuple[float, float]]:
    """(t, Mbit/s) between one rise of cumulative (t, bytes) samples and the next.

    Acknowledged bytes rise a whole WRITE (1 MiB) at a time, so fixed bins show a comb of
    zeros and spikes at a few Mbit/s; averaging between completions draws the rate at which
    WRITEs finished, and a real stall still shows as a long, low step.
    """
    out: list[tuple[float, float]] = [(0.0, 0.0)]
    prev_t, prev_b = 0.0, 0
    for t, b in progress:
        if b != prev_b and t > prev_t:
            out.append((t, (b - prev_b) * 8 / (t - prev_t) / 1e6))
            prev_t, prev_b = t, b
    return out
