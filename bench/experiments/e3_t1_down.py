"""E3: a T1 switch silently stops forwarding (SWITCH_DOWN), then comes back.

At 15 % of a long transfer the T1 that this mode's traffic uses drops everything on all
its ports (the controller black-holes every cabled port, both ways: what a switch whose
data plane died while its control plane looks healthy does) for ``fault_s``; then it
forwards again. Measured per mode: the goodput timeline, the deepest goodput bin against
the rate before the fault, the time until goodput is back above (1 - 1/paths) of that
rate (docs/design.md §8), the rate while the T1 is down, and how long after the T1 came back
the sender had every EV in use again (probes).
"""

from __future__ import annotations

import sys
from typing import Any

from .common import Context, Result, at_least, experiment_entry, fmt, step
from .lab import MODES, RECOVERY_GRACE_S, ModeRuns, fault_lab
from .transfer import FaultPlan, agent_ev_history, fault_windows, rate_between, recovery_after, run_transfer

ID = "e3"
TITLE = "a T1 that silently stops forwarding, then recovers"
SHAPE = (
    "A T1 switch that silently stops forwarding: throughput dips and recovers, no job failure; "
    "a T1 down costs no steady throughput."
)


def _t1_down(
    tb: Any, lab: Any, mode: str, size: int, fault_s: float, paths: int
) -> tuple[Any, dict[str, Any]]:
    """One transfer of ``mode`` whose T1 stops at 15 % for ``fault_s``: the run and its record
    (recovery, deepest bin, rate while down, when every EV was GOOD again)."""
    t1 = lab.t1_of(mode)
    step(f"E3 {mode}: {t1} stops forwarding at 15 % for {fault_s:.2f} s")
    plan = FaultPlan("switch_down", t1, 0.15, duration_s=fault_s)
    r = run_transfer(
        tb, lab.src, lab.dst, size, mode, [plan], deadline_s=fault_s + RECOVERY_GRACE_S, poll_evs=True
    )
    rec = r.record()
    prior = lab.clean[mode].summary["goodput_mbit_s"]
    rec_s, dip = recovery_after(r, prior, 1 - 1 / paths)
    during = None
    if plan.injected_at is not None:
        during = rate_between(r.progress, plan.injected_at + fault_s / 2, plan.injected_at + fault_s)
    history = agent_ev_history(tb, r) or r.ev_changes
    back = None
    if plan.injected_at is not None:
        end = plan.injected_at + fault_s
        restores = [c.t - end for c in history if c.new == "GOOD" and c.t >= end]
        back = max(restores) if restores else None
    rec.update(
        {
            "t1": t1,
            "recovery_s": rec_s,
            "dip": dip,
            "steady_during_mbit_s": during,
            "prior_mbit_s": prior,
            "evs_good_again_after_s": back,
            "agent_ev_history": [c.__dict__ for c in history],
        }
    )
    return r, rec


def _judge(res: Result, mode: str, ok: bool, rec: dict[str, Any], fault_s: float) -> None:
    """MRC's figures against the shape; the baselines' for information."""
    during, prior, rec_s = rec["steady_during_mbit_s"], rec["prior_mbit_s"], rec["recovery_s"]
    steady = during / prior if during is not None and prior else None
    if mode == "mrc":
        res.verified(ok, mode, "no job failure")
        res.info("deepest goodput bin / clean", rec["dip"], unit="x", mode=mode, paper="throughput dips")
        res.add(
            "recovery time (goodput >= (1-1/paths) x clean)",
            rec_s,
            unit="s",
            mode=mode,
            paper="...and recovers",
            expect=f"< fault duration {fault_s:.2f} s",
            holds=rec_s is not None and rec_s < fault_s,
        )
        res.add(
            "steady goodput while the T1 is down / clean",
            steady,
            unit="x",
            mode=mode,
            paper="a T1 down: no steady loss",
            **at_least(steady, 0.8),
        )
        res.info(
            "EVs all GOOD again after the T1 returned",
            rec["evs_good_again_after_s"],
            unit="s",
            mode=mode,
            paper="probes bring retired EVs back (counts/intervals not public)",
        )
    else:
        baseline = "(baseline) stalls while its T1 is down"
        res.info("steady goodput while the T1 is down / clean", steady, unit="x", mode=mode, paper=baseline)
        res.info("longest stall", rec["longest_stall_s"], unit="s", mode=mode)


def run(ctx: Context, res: Result) -> None:
    size = ctx.size(32, 24)  # QUICK: long enough that the steady window lies inside the transfer
    with fault_lab(ctx, res, "E3", size) as (tb, lab):
        # long enough that the steady-state window (its second half) spans several 1 MiB chunk
        # acknowledgements: a shorter one quantises the rate by +-25 %
        fault_s = max(ctx.scale(1.5, 0.3), 0.6 * lab.clean["mrc"].seconds)
        paths = lab.planes * tb.topology.t1_per_plane
        res.data.update({"fault_duration_s": fault_s, "paths": paths})
        kept = ModeRuns()
        for mode in MODES:
            r, rec = _t1_down(tb, lab, mode, size, fault_s, paths)
            kept.keep(mode, rec, rec["goodput_mbit_s"], fault_windows(r))
            step(
                f"   {mode}: ok={r.ok} {r.seconds:.2f} s, deepest bin {fmt(rec['dip'])} of "
                f"{rec['prior_mbit_s']:.0f} Mbit/s, back above {1 - 1 / paths:.2f} after "
                f"{fmt(rec['recovery_s'])} s, during the fault {fmt(rec['steady_during_mbit_s'])} Mbit/s"
            )
            _judge(res, mode, r.ok, rec, fault_s)
        res.caveats.append(
            "goodput comes from the agent's acknowledged bytes, which advance one 1 MiB chunk at a time: "
            "rates over windows under a second are quantised (about +-15 % here)"
        )
        kept.report(ctx, res, "e3", f"E3 T1 down for {fault_s:.2f} s ({size >> 20} MiB)")


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
