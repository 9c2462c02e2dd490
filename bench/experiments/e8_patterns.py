"""E8: collective traffic patterns across all hosts, with and without a fault.

Fabric as in E1-E6 (4 planes, links htb-limited). Two patterns, every transfer at once:

- all-to-all: every host sends ``size`` to every other host;
- ring: host i sends to host i+1 (the data movement of one ring all-reduce step).

Each pattern runs per mode clean, then again with a T0-T1 uplink of plane 0 under T0 0
black-holed a quarter of the clean job time after the start, for the clean job time.
Measured: job completion time (until the last transfer ended), faulted / clean, and the
MRC job time against single-path's (the paper: one MRC connection spraying many paths
beats 16 single-path connections on ring all-reduce).
"""

from __future__ import annotations

import sys
from typing import Any

from .common import Context, Result, at_most, beats, experiment_entry, fabric, fabric_info, step
from .lab import FAULT_SHAPE, MODES, uplink_name
from .plots import bars
from .transfer import FaultPlan, run_concurrent

ID = "e8"
TITLE = "all-to-all and ring across all hosts, with and without a fault"
SHAPE = (
    "1 MRC connection spraying 256 paths beats 16 single-path connections on ring all-reduce; "
    "a fault costs MRC jobs little (no job failure)."
)
GRACE_S = 40.0


def patterns(hosts: list[str]) -> dict[str, list[tuple[str, str]]]:
    n = len(hosts)
    return {
        "all-to-all": [(a, b) for a in hosts for b in hosts if a != b],
        "ring": [(hosts[i], hosts[(i + 1) % n]) for i in range(n)],
    }


def busiest_uplink(tb: Any, runs: list[Any]) -> str | None:
    """The sender-T0 uplink that carries most of ``runs``' connections (by their EVs).

    Why: a single-path connection rides one plane and one T1, so a fault on a fixed link
    (plane 0, T1 0) may miss every single-path connection of the pattern and say nothing
    about them; the fault goes where this mode's own traffic is. ``None``: no EV rows."""
    counts: dict[tuple[int, int, int], int] = {}
    t0_of = {h.name: int(h.t0_index) for h in tb.topology.hosts}
    for r in runs:
        for row in r.ev_after.values():
            key = (int(row["plane"]), t0_of[r.src], int(row["t1"]))
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    plane, t0, t1 = max(counts.items(), key=lambda kv: kv[1])[0]
    return uplink_name(tb, plane, t0, t1)


def run(ctx: Context, res: Result) -> None:
    sizes = {"all-to-all": ctx.size(4, 1), "ring": ctx.size(8, 2)}
    with fabric(ctx, **FAULT_SHAPE) as tb:
        res.fabric = fabric_info(tb)
        hosts = tb.host_names()
        mrc_link = uplink_name(tb, 0, 0, 0)  # MRC sprays every uplink: any one is on its paths
        groups: dict[str, dict[str, float]] = {}
        data: dict[str, Any] = {"fault_link": {}}
        for name, pairs in patterns(hosts).items():
            size = sizes[name]
            for mode in MODES:
                for src, dst in pairs:  # open every connection first (EV draws, first RTTs)
                    tb.send(src, dst, 256 << 10, mode=mode)
                clean_runs, clean_s = run_concurrent(tb, pairs, size, mode)
                fault_s = max(0.5, clean_s)
                link = (busiest_uplink(tb, clean_runs) if mode == "single-path" else None) or mrc_link
                data["fault_link"].setdefault(name, {})[mode] = link
                plan = FaultPlan("blackhole", link, None, duration_s=fault_s)
                fault_runs, fault_job_s = run_concurrent(
                    tb,
                    pairs,
                    size,
                    mode,
                    [plan],
                    fault_after_s=clean_s / 4,
                    deadline_s=clean_s / 4 + fault_s + GRACE_S,
                )
                ok = all(r.ok for r in clean_runs + fault_runs)
                data.setdefault(name, {})[mode] = {
                    "pairs": len(pairs),
                    "size": size,
                    "clean_job_s": clean_s,
                    "fault_job_s": fault_job_s,
                    "fault_duration_s": fault_s,
                    "all_ok": ok,
                    "aggregate_goodput_mbit_s": len(pairs) * size * 8 / clean_s / 1e6,
                    "clean": [r.record(bin_s=0.5) | {"goodput_mbit_s": None} for r in clean_runs],
                    "faulted": [r.record(bin_s=0.5) | {"goodput_mbit_s": None} for r in fault_runs],
                }
                groups.setdefault(f"{name} clean", {})[mode] = clean_s
                groups.setdefault(f"{name} fault", {})[mode] = fault_job_s
                step(
                    f"E8 {name:10} {mode:11}: {len(pairs)} x {size >> 20} MiB in {clean_s:.2f} s clean, "
                    f"{fault_job_s:.2f} s with {link} black-holed for {fault_s:.2f} s, all ok {ok}"
                )
            d = data[name]
            mrc_ratio = d["mrc"]["fault_job_s"] / d["mrc"]["clean_job_s"]
            faulted_over_clean = f"{name}: job time with fault / clean"
            res.add(
                faulted_over_clean,
                mrc_ratio,
                unit="x",
                mode="mrc",
                paper="a fault costs MRC little",
                **at_most(mrc_ratio, 1.5),
            )
            res.verified(d["mrc"]["all_ok"], "mrc", "no job failure", f"{name}: all transfers verified")
            for base in ("single-path", "ecmp"):
                ratio = d[base]["fault_job_s"] / d[base]["clean_job_s"]
                res.info(faulted_over_clean, ratio, unit="x", mode=base)
            speedup = d["single-path"]["clean_job_s"] / d["mrc"]["clean_job_s"]
            res.add(
                f"{name}: single-path job time / MRC job time (clean)",
                speedup,
                unit="x",
                mode="mrc",
                paper="MRC beats single-path connections",
                **beats(speedup, "single-path connections"),
            )
        res.data.update(data)
        res.plots.append(bars(ctx.out / "e8.png", "E8 job completion time (s)", groups, "seconds").name)
        res.caveats.append(
            "single-path is bounded by one NIC port (one plane) per connection, so MRC's advantage on a "
            "clean "
            "fabric is mostly its planes x port bandwidth; the 4 hosts' agents share 2 CPU cores"
        )


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
