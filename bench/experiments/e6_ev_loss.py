"""E6: 20 % drop on the links of one EV's path: that EV goes inactive, the rate holds.

At 20 % of a long transfer both fabric links of one (plane, T1) path, sender T0 -> T1 ->
receiver T0, start dropping 20 % of packets (both directions) until the transfer ends.
For MRC the path is plane 0 / T1 0 (one of its 8 EVs); for the baselines the path their
traffic uses. Measured: the time until the sender retired that path's EV (ASSUMED_BAD,
from the agent's own EV history), the share of data the EV carried while the loss was on
against its fair share, and goodput during the loss against the clean rate.
"""

from __future__ import annotations

import sys
from typing import Any

from .common import Context, Result, at_least, at_most, experiment_entry, fmt, step
from .lab import MODES, ModeRuns, fault_lab
from .transfer import FaultPlan, agent_ev_history, fault_windows, rate_between, run_transfer

ID = "e6"
TITLE = "20 % drop on the links of one EV's path"
SHAPE = "20 % drop injected on one EV: that EV goes inactive at once, another takes over, rate holds."
LOSS = 0.2


def _lossy_path(ctx: Context, tb: Any, lab: Any, mode: str, size: int) -> tuple[Any, dict[str, Any]]:
    """One transfer of ``mode`` whose path's links drop 20 % from 20 % on: the run and its
    record (when the path was retired, its share of the data, goodput during the loss)."""
    plane, t1 = lab.path_of(mode)
    links = lab.path_links(mode)
    step(f"E6 {mode}: {LOSS:.0%} drop on {', '.join(links)} (plane {plane}, T1 {t1}) from 20 %")
    plans = [FaultPlan("loss", link, 0.2, probability=LOSS) for link in links]
    r = run_transfer(tb, lab.src, lab.dst, size, mode, plans, deadline_s=ctx.scale(45.0, 20.0), poll_evs=True)
    rec = r.record()
    start = min((p.injected_at for p in plans if p.injected_at is not None), default=None)
    # the agent keeps only its last 20 changes per connection (exact times); the 0.1 s polls
    # cover the start: the first retirement is the earliest either saw
    exact = agent_ev_history(tb, r)
    hit = sorted((c for c in [*exact, *r.ev_changes] if c.plane == plane and c.t1 == t1), key=lambda c: c.t)
    retired = next(
        (c.t - start for c in hit if c.new == "ASSUMED_BAD" and start is not None and c.t >= start),
        None,
    )
    # share of data the path's EVs carried after the fault, against an equal split
    evs_on_path = [ev for ev, row in r.ev_after.items() if row["plane"] == plane and row["t1"] == t1]
    per_ev = r.data_per_ev()
    total = sum(per_ev.values()) or 1
    share = sum(per_ev.get(ev, 0) for ev in evs_on_path) / total
    fair = len(evs_on_path) / max(1, len(per_ev))
    prior = lab.clean[mode].summary["goodput_mbit_s"]
    during = rate_between(r.progress, start + 0.4, r.seconds) if start is not None else None
    ratio = during / prior if during is not None and prior else None
    rec.update(
        {
            "plane": plane,
            "t1": t1,
            "links": links,
            "retired_after_s": retired,
            "path_share": share,
            "fair_share": fair,
            "prior_mbit_s": prior,
            "during_mbit_s": during,
            "ratio": ratio,
            "path_ev_changes": [c.__dict__ for c in hit],
        }
    )
    step(
        f"   {mode}: retired after {fmt(retired, 3)} s, path carried {share:.1%} of the data "
        f"(fair {fair:.1%}),"
        f" goodput during the loss {fmt(ratio)} of clean, {len(hit)} state changes on that path"
    )
    return r, rec


def _judge(res: Result, mode: str, rec: dict[str, Any]) -> None:
    """MRC's figures against the shape; the baselines' for information."""
    retired, ratio, share, fair = rec["retired_after_s"], rec["ratio"], rec["path_share"], rec["fair_share"]
    if mode == "mrc":
        res.add(
            "time until that EV is retired",
            retired,
            unit="s",
            mode=mode,
            paper="inactive at once",
            **at_most(retired, 0.5, "<= 0.5 s (tens of RTTs here)"),
        )
        res.add(
            "goodput while one path drops 20 % / clean",
            ratio,
            unit="x",
            mode=mode,
            paper="rate holds",
            **at_least(ratio, 0.85),
        )
        res.add(
            "data share of the lossy path (whole transfer)",
            share,
            unit="share",
            mode=mode,
            paper="another EV takes over",
            expect=f"< fair share {fair:.3f}",
            holds=share < fair,
        )
    else:
        baseline = "(baseline) keeps using the lossy path"
        res.info("goodput while its path drops 20 % / clean", ratio, unit="x", mode=mode, paper=baseline)


def run(ctx: Context, res: Result) -> None:
    size = ctx.size(32, 24)  # QUICK: long enough that the steady window lies inside the transfer
    with fault_lab(ctx, res, "E6", size) as (tb, lab):
        kept = ModeRuns()
        for mode in MODES:
            r, rec = _lossy_path(ctx, tb, lab, mode, size)
            kept.keep(mode, rec, rec["goodput_mbit_s"], fault_windows(r)[:1])
            _judge(res, mode, rec)
        kept.report(ctx, res, "e6", f"E6 {LOSS:.0%} drop on one path ({size >> 20} MiB)")
        res.caveats.append(
            "MRC keeps probing the retired EV; probes that pass the 20 % loss can restore it for a while "
            "(the agent then retires it again), so its share is small but not zero"
        )


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
