"""E1: a T0-T1 link becomes a black hole mid-transfer.

Each mode sends the same bytes from the same sender to the same receiver twice: once
clean (the reference), once while, at 20 % of the bytes, the uplink under the sender's
T0 that this mode uses (``Lab.uplink``) silently drops everything for twice the clean MRC
transfer time (the controller ends the fault). Measured: completion time / clean time,
the longest stall, and the data packets the sender counted lost on its EVs.
"""

from __future__ import annotations

import sys

from .common import Context, Result, at_least, at_most, experiment_entry, step
from .lab import MODES, RECOVERY_GRACE_S, ModeRuns, fault_lab
from .transfer import FaultPlan, fault_windows, run_transfer

ID = "e1"
TITLE = "black hole on one T0-T1 link mid-transfer"
SHAPE = (
    "A failed link costs a connection a few packets (often one) and no measurable impact (MRC bypasses it "
    "in tens of us); a single-path/ECMP connection on it stalls until the fault is cleared."
)


def run(ctx: Context, res: Result) -> None:
    # QUICK too moves 16 MiB (about 1 s at 4 x 30 Mbit/s): the fault is injected when the agent's
    # progress lines (every 0.2 s) show 20 % acknowledged, and 4 MiB was over before it landed
    size = ctx.size(16, 16)
    with fault_lab(ctx, res, "E1", size) as (tb, lab):
        fault_s = max(0.5, 2 * lab.clean["mrc"].seconds)
        res.data["fault_duration_s"] = fault_s
        kept = ModeRuns()
        for mode in MODES:
            link = lab.uplink(mode)
            step(f"E1 {mode}: black hole on {link} at 20 % for {fault_s:.2f} s")
            plan = FaultPlan("blackhole", link, 0.2, duration_s=fault_s)
            r = run_transfer(tb, lab.src, lab.dst, size, mode, [plan], deadline_s=fault_s + RECOVERY_GRACE_S)
            clean = lab.clean[mode]
            ratio = r.seconds / clean.seconds if r.ok else None
            faulted = r.record()
            record = {"link": link, "clean": clean.record(), "faulted": faulted, "ratio": ratio}
            kept.keep(mode, record, faulted["goodput_mbit_s"], fault_windows(r))
            step(
                f"   {mode}: {r.seconds:.2f} s vs {clean.seconds:.2f} s clean, lost {r.lost_packets()}, "
                f"longest stall {faulted['longest_stall_s']:.2f} s"
            )
            paper = "MRC: no measurable impact" if mode == "mrc" else "baseline stalls until the fault clears"
            if mode == "mrc":
                res.add(
                    "completion time / clean", ratio, unit="x", mode=mode, paper=paper, **at_most(ratio, 1.5)
                )
                lost = r.lost_packets()
                res.add(
                    "data packets lost per connection",
                    lost,
                    unit="packets",
                    mode=mode,
                    paper="a few packets, often one",
                    **at_most(lost, 32, "<= 32 (one window share of the dead EV)"),
                )
            else:
                stall = faulted["longest_stall_s"]
                res.info("completion time / clean", ratio, unit="x", mode=mode, paper=paper)
                res.add(
                    "longest stall",
                    stall,
                    unit="s",
                    mode=mode,
                    paper=paper,
                    **at_least(stall, 0.5 * fault_s, f">= 0.5 x fault ({fault_s:.2f} s)"),
                )
                res.add(
                    "retransmitted packets",
                    r.summary.get("retransmissions"),
                    unit="packets",
                    mode=mode,
                    note="go-back-N: a window per loss" if mode == "single-path" else "",
                )
        kept.report(ctx, res, "e1", f"E1 black hole for {fault_s:.2f} s ({size >> 20} MiB)")


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
