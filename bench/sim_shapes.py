"""The paper's results in shape, at production scale, in mrc-sim (MRC against its baselines).

Why: one machine cannot emulate 8 planes of 100 Gb/s ports with 128-256 EVs per
connection, but the simulator runs the very same core on that shape. Each shipped
scenario (mrc_host/sim/scenarios/, named after the result it reproduces) runs every
mode side by side; where a result needs a reference (the same run without its faults,
a bystander flow alone) the benchmark runs that too. Flow sizes are scaled down so the
whole set finishes in minutes on two cores (``--quick`` scales them down further);
the fabric keeps its shape.

Writes ``sim_shapes.json`` (the shape table and every run), ``sim_shapes.png`` (the
table), ``sim_shapes.md`` and, per scenario, ``<scenario>.json`` and ``<scenario>.png``.

    python -m bench.sim_shapes --out results/sim-shapes [--quick] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from mrc_fabric.ev import EV
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.plots import scenario_png

QUICK_SCALE = 0.25
MIN_SIZE = 256 * 1024


def scaled(sc: sf.Scenario, factor: float) -> sf.Scenario:
    """The same scenario with every traffic size times ``factor`` (fabric unchanged)."""
    if factor == 1:
        return sc
    traffic = [replace(t, size=max(MIN_SIZE, int(t.size * factor))) for t in sc.traffic]
    nominal = max(int(t.nominal_bytes() * 8 / (sc.shape.link_gbps * sc.shape.planes)) + 1 for t in traffic)
    return replace(sc, traffic=traffic, nominal_ns=nominal)


def without_faults(sc: sf.Scenario) -> sf.Scenario:
    return replace(sc, faults=[])


def only_items(sc: sf.Scenario, names: set[str]) -> sf.Scenario:
    return replace(sc, traffic=[t for t in sc.traffic if t.name in names])


def _job(run: dict[str, Any], name: str) -> float | None:
    t: float | None = run["jobs"][name]["completion_time_us"]
    return t


def _flow(run: dict[str, Any], name: str) -> dict[str, Any]:
    return next(f for f in run["flows"] if f["name"] == name)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _fmt(v: float | None, unit: str = "", digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}{unit}"


def _steady(run: dict[str, Any], flow: str, fault_us: float) -> tuple[float | None, float | None]:
    """Mean goodput before the fault and over the last half of the time after it (Gb/s; None: no bucket)."""
    f = _flow(run, flow)
    tl, width = f["goodput_timeline_gbps"], run["timeline_bucket_us"]
    first = int(fault_us / width)
    before = tl[1:first]
    end = len(tl) - 1  # the last bucket is partial
    after = tl[first + 1 + (end - first - 1) // 2 : end]
    mean_before = sum(before) / len(before) if before else None
    return mean_before, (sum(after) / len(after) if after else None)


Row = dict[str, Any]


def check_flaps(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    cells, extra = {}, {}
    for mode, run in res["runs"].items():
        jct, clean = _job(run, "allreduce"), _job(ref["runs"][mode], "allreduce")
        phases = 0  # link-downs that happened while the job ran
        conn_flaps = 0  # ... times the connections whose traffic can cross the link (either T0 end)
        end = jct if jct is not None else run["elapsed_us"]
        ends = [(sc.shape.t0_of(f["src"]), sc.shape.t0_of(f["dst"])) for f in run.get("flows", [])]
        for f in run["faults"]:
            span = end - f["start_us"]
            if f["kind"] == "flap":
                period = float(f["spec"].split("=")[1].split("us")[0])
                n = max(0, int(-(-span // (2 * period))))
            else:  # one down (and later up): one flap
                n = int(span > 0)
            phases += n
            t0 = int(f["target"].split("-t0_")[1].split("-")[0]) if "-t0_" in f.get("target", "") else -1
            conn_flaps += n * sum(1 for a, b in ends if t0 in (a, b))
        lost = sum(f["data_packets_lost"] for f in run["faults"])
        per_flap = lost / phases if phases else None
        per_conn = lost / conn_flaps if conn_flaps else None
        extra[mode] = {
            "jct_us": jct,
            "jct_no_fault_us": clean,
            "flaps": phases,
            "lost_per_flap": per_flap,
            "lost_per_flap_per_connection": per_conn,
        }
        cells[mode] = (
            f"JCT x{_fmt(_ratio(jct, clean))} of no-fault, {_fmt(per_flap, '', 1)} pkts lost/flap "
            f"({_fmt(per_conn, '', 1)} per connection through the link's T0)"
            if jct is not None
            else "did not complete"
        )
    m = extra["mrc"]
    ratio = _ratio(m["jct_us"], m["jct_no_fault_us"])
    per = m["lost_per_flap_per_connection"]
    holds = ratio is not None and ratio <= 1.05 and per is not None and per <= 4
    return {"cells": cells, "holds": holds, "metrics": extra}


def _clean_steady(run: dict[str, Any], flow: str) -> float | None:
    """Mean goodput of the run without faults, ramp (first bucket) and partial last bucket left out."""
    tl = _flow(run, flow)["goodput_timeline_gbps"][1:-1]
    return sum(tl) / len(tl) if tl else None


def check_switch(expect: str) -> Callable[[sf.Scenario, dict[str, Any], dict[str, Any]], Row]:
    """Steady goodput long after the fault against the same flow's steady goodput without it.

    The baseline is the run without faults, not the stretch before the fault: at QUICK
    scale that stretch is mostly the window's ramp, which made a T1 loss look like a gain."""

    def check(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
        fault_us = res["runs"]["mrc"]["faults"][0]["start_us"]
        cells, extra = {}, {}
        for mode, run in res["runs"].items():
            jct, clean = _job(run, "flow"), _job(ref["runs"][mode], "flow")
            _, after = _steady(run, "flow", fault_us) if jct is not None else (None, None)
            base = _clean_steady(ref["runs"][mode], "flow")
            steady = _ratio(after, base)
            tl, width = _flow(run, "flow")["goodput_timeline_gbps"], run["timeline_bucket_us"]
            first = int(fault_us / width) + 1
            window = tl[first : first + max(2, (len(tl) - first) // 4)]
            dip = _ratio(min(window), base) if window and jct is not None else None
            extra[mode] = {
                "jct_us": jct,
                "jct_no_fault_us": clean,
                "steady_after_over_no_fault": steady,
                "dip_over_no_fault": dip,
            }
            cells[mode] = (
                f"steady after fault / no-fault {_fmt(steady)}, dip to {_fmt(dip)}, "
                f"JCT x{_fmt(_ratio(jct, clean))}"
                if jct is not None
                else "stalled: did not complete"
            )
        s = extra["mrc"]["steady_after_over_no_fault"]
        if expect == "no-steady-loss":
            holds = extra["mrc"]["jct_us"] is not None and s is not None and s >= 0.93
        else:  # one plane's share: 7/8 with 8 planes
            share = 1 - 1 / sc.shape.planes
            holds = s is not None and abs(s - share) <= 0.07
        return {"cells": cells, "holds": holds, "metrics": extra}

    return check


def check_ev_drop(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    spec = sc.faults[0]
    target = spec.split(":")[1].split("@")[0]  # p<plane>-t0_<i>-t1_<j>
    plane, t1 = int(target[1 : target.index("-")]), int(target.rsplit("_", 1)[1])
    fault_us = res["runs"]["mrc"]["faults"][0]["start_us"]
    cells, extra = {}, {}
    for mode, run in res["runs"].items():
        jct, clean = _job(run, "flow"), _job(ref["runs"][mode], "flow")
        retired = [
            e["t_us"]
            for e in _flow(run, "flow")["ev_events"]
            if e["new"].startswith("ASSUMED_BAD")
            and (EV.decode(int(e["ev"], 16)).plane, EV.decode(int(e["ev"], 16)).t1) == (plane, t1)
        ]
        after = retired[0] - fault_us if retired else None
        extra[mode] = {"jct_us": jct, "jct_no_fault_us": clean, "retired_after_us": after}
        cells[mode] = ("did not complete" if jct is None else f"JCT x{_fmt(_ratio(jct, clean))}") + (
            f", EV retired {after:.1f} us after" if after is not None else ""
        )
    m = extra["mrc"]
    ratio = _ratio(m["jct_us"], m["jct_no_fault_us"])
    holds = ratio is not None and ratio <= 1.05 and m["retired_after_us"] is not None
    return {"cells": cells, "holds": holds, "metrics": extra}


def check_shared_ev(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    cells, extra = {}, {}
    link = sc.shape.link_gbps
    for mode, run in res["runs"].items():
        a, b = _flow(run, "a"), _flow(run, "b")
        line_a = link if mode == "single-path" else link * sc.shape.planes
        fa, fb = (a["goodput_gbps"] or 0) / line_a, (b["goodput_gbps"] or 0) / link
        extra[mode] = {
            "a_of_line_rate": fa,
            "b_of_line_rate": fb,
            "a_ecn_echoes": a["ecn_echoes"],
            "a_ev_skips": a["ev_skipped"],
            "a_ev_retired": a["ev_retired"],
            "b_ecn_echoes": b["ecn_echoes"],
        }
        cells[mode] = (
            f"a {fa:.0%}, b {fb:.0%} of line rate; a: {a['ecn_echoes']} ECN echoes, "
            f"{a['ev_retired']} EVs retired; b: {b['ecn_echoes']} ECN echoes"
        )
    m = extra["mrc"]
    return {
        "cells": cells,
        # ECN must be what moved a: echoes on a, both near line rate
        "holds": m["a_of_line_rate"] >= 0.8 and m["b_of_line_rate"] >= 0.8 and m["a_ecn_echoes"] > 0,
        "metrics": extra,
    }


def check_bystander(sc: sf.Scenario, res: dict[str, Any], alone: dict[str, Any]) -> Row:
    cells, extra = {}, {}
    for mode, run in res["runs"].items():
        gp = _flow(run, "bystander")["goodput_gbps"]
        ref = _flow(alone["runs"][mode], "bystander")["goodput_gbps"]
        cost = None if gp is None or not ref else 1 - gp / ref
        extra[mode] = {"bystander_gbps": gp, "alone_gbps": ref, "cost": cost}
        cells[mode] = f"bystander cost {_fmt(None if cost is None else 100 * cost, ' %', 0)}"
    sp, mrc = extra["single-path"]["cost"], extra["mrc"]["cost"]
    holds = sp is not None and 0.25 <= sp <= 0.75 and mrc is not None and mrc <= 0.1
    return {"cells": cells, "holds": holds, "metrics": extra}


def check_loss(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    cells, extra = {}, {}
    line = sc.shape.link_gbps * sc.shape.planes
    for mode, run in res["runs"].items():
        gp = _flow(run, "flow")["goodput_gbps"]
        clean = _flow(ref["runs"][mode], "flow")["goodput_gbps"]
        extra[mode] = {
            "goodput_gbps": gp,
            "no_loss_gbps": clean,
            "of_line_rate": None if gp is None else gp / line,
        }
        cells[mode] = (
            "did not complete"
            if gp is None
            else f"{gp / line:.0%} of line rate ({_fmt(_ratio(gp, clean), '', 2)} of its no-loss goodput)"
        )
    # both against the NIC's line rate (all planes): single-path RoCE rides one port of it
    m, sp = extra["mrc"]["of_line_rate"], extra["single-path"]["of_line_rate"]
    holds = m is not None and m >= 0.3 and (sp is None or sp <= 0.1)
    return {"cells": cells, "holds": holds, "metrics": extra}


def check_ring(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    cells, extra = {}, {}
    for name, run in res["runs"].items():
        jct = _job(run, "allreduce")
        extra[name] = {"jct_us": jct}
        cells[name.split("-")[0] if not name.startswith("single") else "single-path"] = (
            f"{name}: JCT {_fmt(jct, ' us', 1)}" if jct is not None else f"{name}: did not complete"
        )
    m, s = extra["mrc-1qp"]["jct_us"], extra["single-path-16qp"]["jct_us"]
    return {"cells": cells, "holds": m is not None and (s is None or m < s), "metrics": extra}


def uplink_balance(run: dict[str, Any], t0: int) -> tuple[float | None, int]:
    """Busiest uplink of ``t0`` over the mean of all its uplinks, and how many carried data."""
    rows = run.get("t0_uplink_data_bytes", {}).get(str(t0))
    if not rows:
        return None, 0
    flat = [b for row in rows for b in row]
    mean = sum(flat) / len(flat)
    return (max(flat) / mean if mean else None), sum(1 for b in flat if b)


def check_spray(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    """MRC's uplink max/mean near 1; ECMP (the baseline with the same EVs, hashed) above it."""
    src = sc.traffic[0].src
    assert src is not None
    t0 = sc.shape.t0_of(src)
    cells, extra = {}, {}
    for mode, run in res["runs"].items():
        ratio, used = uplink_balance(run, t0)
        n = sc.shape.planes * sc.shape.t1
        extra[mode] = {"uplink_max_over_mean": ratio, "uplinks_used": used, "uplinks": n}
        cells[mode] = f"uplink max/mean {_fmt(ratio)} ({used} of {n} uplinks carry data)"
    m, e = extra["mrc"]["uplink_max_over_mean"], extra["ecmp"]["uplink_max_over_mean"]
    holds = m is not None and m <= 1.15 and e is not None and e > m
    return {"cells": cells, "holds": holds, "metrics": extra}


# scenario -> (check, what reference run it needs)
CHECKS: dict[str, tuple[Callable[[sf.Scenario, dict[str, Any], dict[str, Any]], Row], str]] = {
    "link-flaps-allreduce": (check_flaps, "no-faults"),
    "t1-silent-stop": (check_switch("no-steady-loss"), "no-faults"),
    "t0-down": (check_switch("one-plane"), "no-faults"),
    "ev-drop-20pct": (check_ev_drop, "no-faults"),
    "two-flows-one-ev": (check_shared_ev, "none"),
    "incast-bystander": (check_bystander, "bystander-alone"),
    "random-loss-1pct": (check_loss, "no-faults"),
    "ring-allreduce-256-paths": (check_ring, "none"),
    "spray-balance": (check_spray, "none"),
}


def table_png(rows: list[dict[str, Any]], path: Path) -> None:
    cols = ["paper's shape", "MRC", "single-path", "ECMP", "holds?"]
    cells = [
        [r["paper"][:60], r["mrc"], r["single-path"], r["ecmp"], "yes" if r["holds"] else "NO"] for r in rows
    ]
    fig, ax = plt.subplots(figsize=(20, 0.55 * (len(rows) + 1) + 0.5))
    ax.axis("off")
    tab = ax.table(
        cellText=cells, colLabels=cols, loc="center", cellLoc="left", colWidths=[0.3, 0.2, 0.2, 0.2, 0.05]
    )
    tab.auto_set_font_size(False)
    tab.set_fontsize(7)
    tab.scale(1, 1.6)
    ax.set_title("mrc-sim at production shape (8 planes x 100 Gb/s, 1 us links, 128-256 EVs)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_shapes", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "sim-shapes")
    ap.add_argument("--quick", action="store_true", help=f"flow sizes x{QUICK_SCALE} (CI)")
    ap.add_argument("--scale", type=float, default=None, help="flow size factor (default 1, quick 0.25)")
    ap.add_argument("--only", action="append", default=[], help="only these scenarios (repeatable)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    factor = args.scale if args.scale is not None else (QUICK_SCALE if args.quick else 1.0)
    rows, report = [], {}
    started = time.monotonic()
    for name, (check, reference) in CHECKS.items():
        if args.only and name not in args.only:
            continue
        t0 = time.monotonic()
        sc = scaled(sf.load(sf.SCENARIO_DIR / f"{name}.toml"), factor)
        res = sf.run_scenario(sc)
        if reference == "no-faults":
            ref = sf.run_scenario(without_faults(sc))
        elif reference == "bystander-alone":
            ref = sf.run_scenario(only_items(sc, {"bystander"}))
        else:
            ref = {}
        row = check(sc, res, ref)
        line = {
            "scenario": name,
            "paper": sc.reproduces,
            "mrc": row["cells"].get("mrc", ""),
            "single-path": row["cells"].get("single-path", ""),
            "ecmp": row["cells"].get("ecmp", ""),
            "holds": bool(row["holds"]),
            # what every run states: data plane, fabric shape, link rate, seed, frame size, EVs
            "data_plane": "mrc-sim",
            "fabric": {
                "planes": sc.shape.planes,
                "t0": sc.shape.t0,
                "t1": sc.shape.t1,
                "hosts_per_t0": sc.shape.hosts_per_t0,
                "link_gbps": sc.shape.link_gbps,
            },
            "seed": sc.seed,
            "mtu": sc.mtu,
            "evs": sc.evs,
            "metrics": row["metrics"],
            "seconds": round(time.monotonic() - t0, 1),
        }
        rows.append(line)
        report[name] = {"result": res, "reference": ref}
        (args.out / f"{name}.json").write_text(json.dumps({"shape": line, **report[name]}, indent=1))
        scenario_png(res, args.out / f"{name}.png")
        print(f"[{name}] holds={line['holds']} ({line['seconds']} s)\n  MRC: {line['mrc']}")
        print(f"  single-path: {line['single-path']}\n  ECMP: {line['ecmp']}", flush=True)
    md = ["| paper's shape | MRC | single-path | ECMP | holds? |", "|---|---|---|---|---|"]
    md += [
        f"| {r['paper']} | {r['mrc']} | {r['single-path']} | {r['ecmp']} | {'yes' if r['holds'] else 'no'} |"
        for r in rows
    ]
    (args.out / "sim_shapes.md").write_text("\n".join(md) + "\n")
    summary = {"scale": factor, "seconds": round(time.monotonic() - started, 1), "rows": rows}
    (args.out / "sim_shapes.json").write_text(json.dumps(summary, indent=1))
    if rows:
        table_png(rows, args.out / "sim_shapes.png")
    print(f"wrote {args.out / 'sim_shapes.json'} ({summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
