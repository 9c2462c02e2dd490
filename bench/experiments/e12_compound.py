"""E12: faults that add up: a black hole, then a T1 that stops forwarding, in one transfer.

One MRC transfer from the first host under T0 0 to the last host under the last T0; at
20 % of its bytes the uplink under the sender's T0 that MRC uses most (``Lab.uplink``)
black-holes everything, at 50 % a T1 of another plane silently stops forwarding. Neither
is repaired before the transfer ends. Measured: completion time against the clean run,
data packets lost, and the EVs whose path crosses either fault that are still GOOD when
the transfer ends (they must be none: a floor that keeps traffic on a dead path is the
defect this row guards against), and EVs retired on paths neither fault touched.
"""

from __future__ import annotations

import sys
from typing import Any

from .common import Context, Result, at_most, experiment_entry, fabric, fabric_info, step
from .lab import FAULT_SHAPE, RECOVERY_GRACE_S, Lab
from .plots import timelines
from .transfer import FaultPlan, fault_windows, run_transfer

ID = "e12"
TITLE = "faults that add up: a black hole, then a T1 down"
SHAPE = (
    "Several faults in a row each cost about what they cost alone: the transfer bypasses every dead "
    "path and no traffic stays on one (the paper's production fabric sees many concurrent faults)."
)


def crossing(rows: dict[str, dict[str, Any]], dead: list[tuple[int, int]]) -> list[str]:
    """EVs of ``rows`` whose (plane, T1) is one of the ``dead`` paths."""
    return [ev for ev, r in rows.items() if (int(r["plane"]), int(r["t1"])) in dead]


def left_on_paths(r: Any, dead: list[tuple[int, int]]) -> tuple[list[str], list[str]]:
    """The EVs crossing a dead path still GOOD at the end, and those retired off the dead paths
    (GOOD before the transfer)."""
    still_good = [ev for ev in crossing(r.ev_after, dead) if r.ev_after[ev]["state"] == "GOOD"]
    off_path = [
        ev
        for ev, row in r.ev_after.items()
        if ev not in crossing(r.ev_after, dead)
        and row["state"] != "GOOD"
        and r.ev_before.get(ev, {}).get("state", "GOOD") == "GOOD"
    ]
    return still_good, off_path


def _judge(
    res: Result, r: Any, ratio: float | None, still_good: list[str], off_path: list[str], faults: int
) -> None:
    """The shape: every fault costs about what it costs alone, and no EV stays on a dead path."""
    paper = "several faults cost each about what it costs alone"
    res.verified(r.ok, "mrc", "no job failure")
    res.add("completion time / clean", ratio, unit="x", mode="mrc", paper=paper, **at_most(ratio, 1.3))
    res.add(
        "EVs on a faulted path still GOOD at the end",
        len(still_good),
        mode="mrc",
        paper="no traffic stays on a dead path",
        **at_most(len(still_good), 0, "0"),
    )
    res.add(
        "data packets lost per fault",
        r.lost_packets() / faults,
        unit="packets",
        mode="mrc",
        paper="a few packets per fault",
        **at_most(r.lost_packets() / faults, 32, "<= 32 (E1's bound for one fault)"),
    )
    res.info("EVs retired off the faults' paths", len(off_path), mode="mrc")


def run(ctx: Context, res: Result) -> None:
    size = ctx.size(48, 24)
    with fabric(ctx, **FAULT_SHAPE) as tb:
        res.fabric = fabric_info(tb)
        lab = Lab(tb, ctx)
        step(f"E12 reference transfer {lab.src} -> {lab.dst}")
        clean = lab.reference(size, ("mrc",))["mrc"]
        plane, t1 = lab.path_of("mrc")
        other = (plane + 1) % lab.planes
        t1_down = tb.topology.t1(other, 0).name
        dead = [(plane, t1), (other, 0)]
        plans = [
            FaultPlan("blackhole", lab.uplink("mrc"), 0.2),
            FaultPlan("switch_down", t1_down, 0.5),
        ]
        step(f"E12 mrc: black hole on {plans[0].target} at 20 %, then {t1_down} down at 50 %")
        r = run_transfer(
            tb,
            lab.src,
            lab.dst,
            size,
            "mrc",
            plans,
            deadline_s=10 * clean.seconds + RECOVERY_GRACE_S,
            clear_after=False,  # the EV table is read with both faults still in place
        )
        tb.controller.clear()
        ratio = r.seconds / clean.seconds if r.ok else None
        still_good, off_path = left_on_paths(r, dead)
        missed = [p.error for p in plans if p.error]
        step(
            f"   mrc: ok={r.ok} {r.seconds:.2f} s vs {clean.seconds:.2f} s clean (x{ratio or 0:.2f}), "
            f"lost {r.lost_packets()}, crossing EVs still GOOD {len(still_good)}, "
            f"retired off the faults' paths {len(off_path)}" + (f"; {missed}" if missed else "")
        )
        if missed:
            raise RuntimeError(f"a fault did not land: {missed}")
        _judge(res, r, ratio, still_good, off_path, len(plans))
        res.data.update(
            {
                "clean": clean.record(),
                "faulted": r.record(),
                "faults": [p.record() for p in plans],
                "dead_paths": dead,
                "crossing_evs_still_good": still_good,
                "retired_off_path": off_path,
            }
        )
        res.plots.append(
            timelines(
                ctx.out / "e12.png",
                f"E12 black hole then T1 down ({size >> 20} MiB)",
                {"mrc clean": clean.record()["goodput_mbit_s"], "mrc faulted": r.record()["goodput_mbit_s"]},
                {"mrc faulted": fault_windows(r)},
            ).name
        )
        res.caveats.append(
            "the faults are never repaired during the transfer; the agents' timers run at ms RTTs"
        )


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
