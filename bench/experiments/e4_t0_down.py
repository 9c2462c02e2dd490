"""E4: a T0 switch goes down: the sender loses one plane.

At 15 % of a long transfer the sender's T0 in one plane (the single-path connection's
plane, so every mode is hit) drops everything on all its ports for ``fault_s``. MRC
retires that plane's EVs and carries on over the other planes. Measured: goodput in the
second half of the fault window against the clean rate, expected about 1 - 1/planes.
"""

from __future__ import annotations

import sys

from .common import Context, Result, experiment_main, fabric, fabric_info, fmt, step
from .lab import FAULT_SHAPE, MODES, Lab
from .plots import timelines
from .transfer import FaultPlan, fault_windows, rate_between, run_transfer

ID = "e4"
TITLE = "a T0 down: one plane lost"
SHAPE = "A T0 switch down: steady-state throughput drops by one plane's share (1/planes); the job survives."
DEADLINE_GRACE_S = 40.0


def run(ctx: Context, res: Result) -> None:
    size = ctx.size(32, 24)  # QUICK: long enough that the steady window lies inside the transfer
    with fabric(ctx, **FAULT_SHAPE) as tb:
        res.fabric = fabric_info(tb)
        lab = Lab(tb, ctx)
        step(f"E4 reference transfers {lab.src} -> {lab.dst}")
        lab.reference(size)
        fault_s = max(ctx.scale(1.5, 0.5), 0.6 * lab.clean["mrc"].seconds)
        expected = 1 - 1 / lab.planes
        res.data.update({"fault_duration_s": fault_s, "expected_ratio": expected})
        series, shades, runs = {}, {}, {}
        for mode in MODES:
            t0 = lab.t0_of("single-path")
            step(f"E4 {mode}: {t0} down at 15 % for {fault_s:.2f} s")
            plan = FaultPlan("switch_down", t0, 0.15, duration_s=fault_s)
            r = run_transfer(tb, lab.src, lab.dst, size, mode, [plan], deadline_s=fault_s + DEADLINE_GRACE_S)
            rec = r.record()
            prior = lab.clean[mode].summary["goodput_mbit_s"]
            during = None
            if plan.injected_at is not None:
                during = rate_between(r.progress, plan.injected_at + fault_s / 2, plan.injected_at + fault_s)
            ratio = during / prior if during is not None and prior else None
            rec.update({"t0": t0, "prior_mbit_s": prior, "steady_during_mbit_s": during, "ratio": ratio})
            runs[mode] = rec
            series[mode] = rec["goodput_mbit_s"]
            shades[mode] = fault_windows(r)
            step(f"   {mode}: ok={r.ok} {r.seconds:.2f} s, during the fault {fmt(ratio)} of clean")
            if mode == "mrc":
                res.add(
                    "steady goodput with one plane down / clean",
                    ratio,
                    unit="x",
                    mode=mode,
                    paper=f"drops by one plane's share: {expected:.2f}",
                    expect=f"{expected - 0.15:.2f}..{expected + 0.15:.2f}",
                    holds=ratio is not None and abs(ratio - expected) <= 0.15,
                )
                res.add(
                    "completed, bytes verified",
                    float(r.ok),
                    mode=mode,
                    paper="the job survives",
                    expect="1",
                    holds=r.ok,
                )
            else:
                res.add(
                    "steady goodput with one plane down / clean",
                    ratio,
                    unit="x",
                    mode=mode,
                    paper="(baseline) single-path on that plane stalls; ECMP EVs of that plane stall",
                    expect="info",
                )
        res.data["runs"] = runs
        res.plots.append(
            timelines(
                ctx.out / "e4.png", f"E4 T0 down for {fault_s:.2f} s ({size >> 20} MiB)", series, shades
            ).name
        )


def main(argv: list[str] | None = None) -> int:
    return experiment_main(ID, TITLE, SHAPE, run, argv)


if __name__ == "__main__":
    sys.exit(main())
