"""The paper's results in shape, at production scale, in mrc-sim, over seeds (MRC against its baselines).

Why: one machine cannot emulate 8 planes of 100 Gb/s ports with 128-256 EVs per
connection, but the simulator runs the very same core on that shape; and a shape seen on
one seed is an anecdote. Each shipped scenario (mrc_host/sim/scenarios/, named after the
result it reproduces) runs every mode side by side on every seed; where a result needs a
reference (the same run without its faults, a bystander flow alone) that runs too, on the
same seed. All of it is one sweep on Dask (``mrc_host.sim.sweep``: an embedded cluster
with a worker per core, or ``--scheduler``). Each figure of a shape gets its per-seed
values, median and 95 % bootstrap interval (``bench.intervals``); the shape holds only
when every interval of its claim clears its bar, and a comparison whose interval holds
parity is a tie. Flow sizes are scaled down so the whole set finishes in minutes on two
cores (``--quick``: a quarter of the sizes, 5 seeds); the fabric keeps its shape.

Writes ``sim_shapes.json`` (the shape table: per figure its per-seed values, median,
interval and verdict), ``sim_shapes.md``, ``sim_shapes.png`` (the table),
``sim_shapes_seeds.png`` (the per-seed spread of every figure) and, per scenario,
``<scenario>.json`` and ``<scenario>.png`` (the first seed's runs).

    python -m bench.sim_shapes --out results/sim-shapes [--quick] [--seeds N] [--only NAME]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bench.intervals import HOLDS, TIES, Bar, judge, row_verdict
from mrc_fabric.ev import EV
from mrc_host.sim import scenario_file as sf
from mrc_host.sim import sweep
from mrc_host.sim.fabric import DATA_OVERHEAD
from mrc_host.sim.network import base_rtt_ns
from mrc_host.sim.plots import scenario_png

QUICK_SCALE = 0.25
MIN_SIZE = 256 * 1024
SEEDS, QUICK_SEEDS = 10, 5


# ---- the scenario tables each point runs (TOML as read, changed before it is parsed) ----
def scaled(table: dict[str, Any], factor: float) -> dict[str, Any]:
    """The same scenario with every traffic size times ``factor`` (fabric unchanged)."""
    t = copy.deepcopy(table)
    if factor != 1:
        for item in t["traffic"]:
            item["size"] = max(MIN_SIZE, int(sf.parse_size(item["size"]) * factor))
    return t


def without_faults(table: dict[str, Any]) -> dict[str, Any]:
    return {**table, "faults": []}


def only_items(table: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """The items named, alone (a ``share_ev_with`` naming an item left out is dropped: alone,
    in an idle fabric, every path is alike)."""
    kept = [dict(t) for t in table["traffic"] if t["name"] in names]
    for t in kept:
        if t.get("share_ev_with") not in names:
            t.pop("share_ev_with", None)
            t.pop("share_ev_modes", None)
    return {**table, "traffic": kept}


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
            "jct_over_no_fault": _ratio(jct, clean),
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
                "jct_over_no_fault": _ratio(jct, clean),
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


def check_compound(sc: sf.Scenario, res: dict[str, Any], ref: dict[str, Any]) -> Row:
    """Faults in a row: the job against the same job without faults, steady goodput after
    the last fault against the no-fault run's, and each fault's lost packets against its
    floor (the packets in flight on the dead paths: BDP / paths, + 1)."""
    last_us = max(f["start_us"] for f in res["runs"]["mrc"]["faults"])
    paths = sc.shape.planes * sc.shape.t1
    bdp_pkts = base_rtt_ns(sc.shape, sc.mtu, same_t0=False) * sc.shape.link_gbps * sc.shape.planes / 8
    floor = bdp_pkts / (sc.mtu + DATA_OVERHEAD) / paths + 1
    cells: dict[str, str] = {}
    extra: dict[str, dict[str, Any]] = {}
    for mode, run in res["runs"].items():
        jct, clean = _job(run, "flow"), _job(ref["runs"][mode], "flow")
        _, after = _steady(run, "flow", last_us) if jct is not None else (None, None)
        steady = _ratio(after, _clean_steady(ref["runs"][mode], "flow"))
        lost = [int(f["data_packets_lost"]) for f in run["faults"]]
        extra[mode] = {
            "jct_us": jct,
            "jct_no_fault_us": clean,
            "jct_over_no_fault": _ratio(jct, clean),
            "steady_after_over_no_fault": steady,
            "lost_per_fault": lost,
            "worst_fault_lost_over_floor": max(lost) / floor if lost else None,
        }
        cells[mode] = (
            f"JCT x{_fmt(_ratio(jct, clean))} of no-fault, steady after {_fmt(steady)}, "
            f"lost per fault {lost} (floor {floor:.1f})"
            if jct is not None
            else "stalled: did not complete"
        )
    steady, worst = extra["mrc"]["steady_after_over_no_fault"], extra["mrc"]["worst_fault_lost_over_floor"]
    holds = isinstance(steady, float) and steady >= 0.9 and isinstance(worst, float) and worst <= 1.3
    return {"cells": cells, "holds": holds, "metrics": extra}


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
        extra[mode] = {
            "jct_us": jct,
            "jct_no_fault_us": clean,
            "jct_over_no_fault": _ratio(jct, clean),
            "retired_after_us": after,
        }
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
        # a run that did not finish took at least its whole time: a lower bound for comparisons
        extra[name] = {"jct_us": jct, "jct_or_elapsed_us": jct if jct is not None else run["elapsed_us"]}
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
    "compound-faults": (check_compound, "no-faults"),
    "ev-drop-20pct": (check_ev_drop, "no-faults"),
    "two-flows-one-ev": (check_shared_ev, "none"),
    "incast-bystander": (check_bystander, "bystander-alone"),
    "random-loss-1pct": (check_loss, "no-faults"),
    "ring-allreduce-256-paths": (check_ring, "none"),
    "spray-balance": (check_spray, "none"),
}


# ---- figures over seeds ------------------------------------------------------------------
@dataclass(frozen=True)
class Fig:
    """One number of a shape, measured on every seed: ``metrics[run][metric]`` of the judge.

    ``versus``: a comparison with MRC's run instead -- the baseline's value over MRC's
    (``lower_better``) or MRC's over the baseline's, so that above 1 means MRC is better.
    ``claim``: the paper's claim rests on it (its verdict decides the shape's); otherwise
    it is context (a baseline's value, a comparison the claim does not make).
    ``none_as``: the value of a seed whose run gave none (e.g. a transfer that never ended)."""

    label: str
    run: str
    metric: str
    bar: Bar | None = None
    claim: bool = True
    versus: str | None = None  # MRC's run name
    lower_better: bool = False
    none_as: float | None = None
    digits: int = 2

    def value(self, metrics: dict[str, Any]) -> float | None:
        v = metrics[self.run][self.metric]
        if self.versus is None:
            return self.none_as if v is None else float(v)
        m = metrics[self.versus][self.metric]
        if v is None or m is None or not (m if self.lower_better else v):
            return None
        return float(v) / float(m) if self.lower_better else float(m) / float(v)


def _ctx(label: str, run: str, metric: str, **kw: Any) -> Fig:
    return Fig(label, run, metric, claim=False, **kw)


def _per_mode(label: str, metric: str, bar: Bar, **kw: Any) -> list[Fig]:
    """MRC's figure with its bar, and the same figure of each baseline as context."""
    return [Fig(label, "mrc", metric, bar, **kw)] + [
        _ctx(label, m, metric, **kw) for m in ("single-path", "ecmp")
    ]


MRC_VS = "MRC vs "
FIGURES: dict[str, list[Fig]] = {
    "link-flaps-allreduce": [
        *_per_mode("JCT / no-fault", "jct_over_no_fault", Bar(hi=1.05)),
        Fig(
            "pkts lost per link-down per connection",
            "mrc",
            "lost_per_flap_per_connection",
            Bar(hi=4),
            digits=1,
        ),
        _ctx("pkts lost per link-down per connection", "ecmp", "lost_per_flap_per_connection", digits=1),
    ],
    "t1-silent-stop": [
        *_per_mode("steady after fault / no-fault", "steady_after_over_no_fault", Bar(lo=0.93)),
        _ctx("dip / no-fault", "mrc", "dip_over_no_fault"),
    ],
    "t0-down": [
        Fig("steady after fault / no-fault", "mrc", "steady_after_over_no_fault", Bar(lo=0.805, hi=0.945)),
        _ctx("JCT / no-fault", "single-path", "jct_over_no_fault"),
        _ctx("steady after fault / no-fault", "ecmp", "steady_after_over_no_fault"),
        _ctx("JCT / no-fault", "mrc", "jct_over_no_fault"),
        _ctx("JCT / no-fault", "ecmp", "jct_over_no_fault"),
    ],
    "compound-faults": [
        *_per_mode("steady after faults / no-fault", "steady_after_over_no_fault", Bar(lo=0.9)),
        Fig("worst fault's lost pkts / floor", "mrc", "worst_fault_lost_over_floor", Bar(hi=1.3)),
        _ctx("JCT / no-fault", "mrc", "jct_over_no_fault"),
        _ctx("JCT / no-fault", "single-path", "jct_over_no_fault"),
    ],
    "ev-drop-20pct": [
        *_per_mode("JCT / no-fault", "jct_over_no_fault", Bar(hi=1.05)),
        Fig("EV retired after (us)", "mrc", "retired_after_us", Bar(hi=100), digits=1),
    ],
    "two-flows-one-ev": [
        Fig("a of line rate", "mrc", "a_of_line_rate", Bar(lo=0.8)),
        Fig("b of line rate", "mrc", "b_of_line_rate", Bar(lo=0.8)),
        Fig("a's ECN echoes", "mrc", "a_ecn_echoes", Bar(lo=1), digits=0),
        *(_ctx(f"{f} of line rate", m, f"{f}_of_line_rate") for m in ("single-path", "ecmp") for f in "ab"),
    ],
    "incast-bystander": [
        Fig("bystander cost", "mrc", "cost", Bar(hi=0.10)),
        Fig("bystander cost", "single-path", "cost", Bar(lo=0.25, hi=0.75)),
        _ctx("bystander cost", "ecmp", "cost"),
    ],
    "random-loss-1pct": [
        Fig("of line rate", "mrc", "of_line_rate", Bar(lo=0.3)),
        Fig("of line rate", "single-path", "of_line_rate", Bar(hi=0.1), none_as=0.0),
        _ctx("of line rate", "ecmp", "of_line_rate", none_as=0.0),
        _ctx(MRC_VS + "ECMP, goodput", "ecmp", "goodput_gbps", bar=Bar(parity=1), versus="mrc"),
    ],
    "ring-allreduce-256-paths": [
        _ctx("JCT (us)", "mrc-1qp", "jct_us", digits=1),
        _ctx("JCT (us)", "single-path-16qp", "jct_us", digits=1),
        _ctx("JCT (us)", "ecmp-16qp", "jct_us", digits=1),
        Fig(
            MRC_VS + "16 single-path QPs, JCT",
            "single-path-16qp",
            "jct_or_elapsed_us",
            Bar(parity=1),
            versus="mrc-1qp",
            lower_better=True,
        ),
        _ctx(
            MRC_VS + "16 ECMP QPs, JCT",
            "ecmp-16qp",
            "jct_or_elapsed_us",
            bar=Bar(parity=1),
            versus="mrc-1qp",
            lower_better=True,
        ),
    ],
    "spray-balance": [
        *_per_mode("uplink max/mean", "uplink_max_over_mean", Bar(hi=1.15)),
        Fig(
            MRC_VS + "ECMP, uplink max/mean",
            "ecmp",
            "uplink_max_over_mean",
            Bar(parity=1),
            versus="mrc",
            lower_better=True,
        ),
    ],
}


def column(run: str) -> str:
    """The table column of a run (``mrc-1qp`` -> mrc, ``single-path-16qp`` -> single-path)."""
    return "single-path" if run.startswith("single") else run.split("-")[0]


def _fmt_fig(f: Fig, j: dict[str, Any]) -> str:
    if j["median"] is None:
        return f"{f.label}: no value on any seed (did not complete)"
    d = f.digits
    text = f"{f.label} {j['median']:.{d}f} [{j['ci95'][0]:.{d}f}, {j['ci95'][1]:.{d}f}]"
    if j.get("missing"):
        text += f" (did not complete on {j['missing']} seeds)"
    if j["verdict"] is not None:
        text += f" ({j['bar']}: {j['verdict']})"
    return text


def judge_seeds(name: str, per_seed: list[Row]) -> dict[str, Any]:
    """Figures of one shape over its seeds: per-seed values, median, interval, verdicts, cells."""
    figures = []
    cells: dict[str, list[str]] = {"mrc": [], "single-path": [], "ecmp": []}
    claim_verdicts, ties = [], []
    for f in FIGURES[name]:
        j = judge([f.value(row["metrics"]) for row in per_seed], f.bar)
        j.update(label=f.label, run=f.run, metric=f.metric, claim=f.claim, versus=f.versus)
        figures.append(j)
        cells[column(f.run)].append(_fmt_fig(f, j))
        if f.claim and j["verdict"] is not None:
            claim_verdicts.append(j["verdict"])
        if j["verdict"] == TIES:
            ties.append(f.run)
    verdict = row_verdict(claim_verdicts)
    text = verdict + (f" (ties with {', '.join(ties)})" if ties and verdict != TIES else "")
    if verdict == TIES:
        text = f"ties with {', '.join(ties)}"
    return {
        "figures": figures,
        "cells": {k: "; ".join(v) for k, v in cells.items()},
        "verdict": verdict,
        "verdict_text": text,
        "holds": verdict == HOLDS,
    }


def table_png(rows: list[dict[str, Any]], path: Path) -> None:
    cols = ["paper's shape", "MRC", "single-path", "ECMP", "verdict"]
    wrap = 55
    cells = [
        [
            "\n".join(r["paper"][i : i + wrap] for i in range(0, min(len(r["paper"]), 2 * wrap), wrap)),
            *(
                "\n".join(c[i : i + wrap] for i in range(0, len(c), wrap))
                for c in (r["mrc"], r["single-path"], r["ecmp"])
            ),
            r["verdict_text"],
        ]
        for r in rows
    ]
    lines = max((c.count("\n") + 1 for row in cells for c in row), default=1)
    fig, ax = plt.subplots(figsize=(24, 0.3 * lines * (len(rows) + 1) + 0.8))
    ax.axis("off")
    tab = ax.table(
        cellText=cells, colLabels=cols, loc="center", cellLoc="left", colWidths=[0.2, 0.24, 0.24, 0.24, 0.08]
    )
    tab.auto_set_font_size(False)
    tab.set_fontsize(6)
    tab.scale(1, 0.9 * lines)
    ax.set_title(
        "mrc-sim at production shape (8 planes x 100 Gb/s, 1 us links, 128-256 EVs): "
        "median [95 % interval] over seeds"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def seeds_png(rows: list[dict[str, Any]], path: Path) -> None:
    """Every figure's per-seed values (dots), median (bar) and 95 % interval, with its bar shaded."""
    n = len(rows)
    fig, axes = plt.subplots(n, 1, figsize=(11, 2.3 * n), squeeze=False)
    for ax, r in zip(axes[:, 0], rows, strict=True):
        figs = r["figures"]
        for i, f in enumerate(figs):
            vals = [v for v in f["values"] if v is not None]
            xs = [i + (k - (len(vals) - 1) / 2) * 0.04 for k in range(len(vals))]
            colour = "#2ca02c" if f["verdict"] == HOLDS else "#d62728" if f["verdict"] else "#7f7f7f"
            ax.scatter(xs, vals, s=10, color=colour, alpha=0.7, zorder=3)
            if f["median"] is not None:
                lo, hi = f["ci95"]
                ax.errorbar(
                    [i + 0.3],
                    [f["median"]],
                    yerr=[[f["median"] - lo], [hi - f["median"]]],
                    fmt="s",
                    color="black",
                    markersize=4,
                    capsize=3,
                    zorder=4,
                )
        ax.set_xticks(range(len(figs)))
        ax.set_xticklabels([f"{f['run']}\n{f['label']}"[:48] for f in figs], fontsize=6)
        ax.set_yscale("symlog", linthresh=1)
        ax.set_title(f"{r['scenario']}: {r['verdict_text']}", fontsize=8, loc="left")
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(
        "per-seed values (green: figure holds, red: does not / ties, grey: context); "
        "black: median and 95 % bootstrap interval",
        fontsize=8,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- the sweep ---------------------------------------------------------------------------
def points(names: list[str], seeds: list[int], factor: float) -> list[sweep.Point]:
    """Each scenario's run and its reference run, on every seed: the sweep's points."""
    out: list[sweep.Point] = []
    for name in names:
        path = sf.SCENARIO_DIR / f"{name}.toml"
        table = scaled(tomllib.loads(path.read_text()), factor)
        reference = CHECKS[name][1]
        variants = {"run": table}
        if reference == "no-faults":
            variants["reference"] = without_faults(table)
        elif reference == "bystander-alone":
            variants["reference"] = only_items(table, {"bystander"})
        for seed in seeds:
            for variant, t in variants.items():
                params = {"scenario": name, "variant": variant, "seed": seed}
                out.append(sweep.Point(len(out), params, {**t, "seed": seed}, str(path), name))
    return out


def _row(name: str, sc: sf.Scenario, seeds: list[int], results: dict[tuple[str, int], dict[str, Any]]) -> Row:
    check = CHECKS[name][0]
    per_seed, errors = [], []
    for seed in seeds:
        res, ref = (
            results.get(("run", seed)),
            results.get(("reference", seed), {"status": "ok", "result": {}}),
        )
        if res is None or res["status"] != "ok" or ref["status"] != "ok":
            errors.append(f"seed {seed}: {(res or {}).get('error') or ref.get('error')}")
            continue
        per_seed.append({"seed": seed, **check(sc, res["result"], ref["result"])})
    judged: dict[str, Any] = (
        judge_seeds(name, per_seed)
        if per_seed
        else {
            "figures": [],
            "cells": {},
            "verdict": "does not hold",
            "verdict_text": "no seed ran",
            "holds": False,
        }
    )
    metrics: dict[str, dict[str, list[Any]]] = {}
    for row in per_seed:
        for run, values in row["metrics"].items():
            for key, v in values.items():
                metrics.setdefault(run, {}).setdefault(key, []).append(v)
    return {
        "scenario": name,
        "paper": sc.reproduces,
        "mrc": judged["cells"].get("mrc", ""),
        "single-path": judged["cells"].get("single-path", ""),
        "ecmp": judged["cells"].get("ecmp", ""),
        "holds": judged["holds"],
        "verdict": judged["verdict"],
        "verdict_text": judged["verdict_text"] + (f"; {len(errors)} seeds failed" if errors else ""),
        "figures": judged["figures"],
        "seed_holds": [bool(r["holds"]) for r in per_seed],  # the one-seed judge, per seed
        "errors": errors,
        # what every run states: data plane, fabric shape, link rate, seeds, frame size, EVs
        "data_plane": "mrc-sim",
        "fabric": {
            "planes": sc.shape.planes,
            "t0": sc.shape.t0,
            "t1": sc.shape.t1,
            "hosts_per_t0": sc.shape.hosts_per_t0,
            "link_gbps": sc.shape.link_gbps,
        },
        "seeds": [r["seed"] for r in per_seed],
        "mtu": sc.mtu,
        "evs": sc.evs,
        "metrics": metrics,  # per run, per metric: the per-seed values
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_shapes", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "sim-shapes")
    ap.add_argument(
        "--quick", action="store_true", help=f"flow sizes x{QUICK_SCALE}, {QUICK_SEEDS} seeds (CI)"
    )
    ap.add_argument("--scale", type=float, default=None, help="flow size factor (default 1, quick 0.25)")
    ap.add_argument(
        "--seeds", type=int, default=None, help=f"seeds 1..N (default {SEEDS}, quick {QUICK_SEEDS})"
    )
    ap.add_argument("--only", action="append", default=[], help="only these scenarios (repeatable)")
    ap.add_argument(
        "--workers", type=int, default=None, help="embedded Dask cluster: workers (default: cores)"
    )
    ap.add_argument("--scheduler", default=None, help="a running Dask scheduler (tcp://HOST:8786)")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    factor = args.scale if args.scale is not None else (QUICK_SCALE if args.quick else 1.0)
    seeds = list(range(1, (args.seeds or (QUICK_SEEDS if args.quick else SEEDS)) + 1))
    names = [n for n in CHECKS if not args.only or n in args.only]
    pts = points(names, seeds, factor)
    run = sweep.run_points(pts, args.scheduler, args.workers, args.progress, label="sim-shapes")
    by: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for pt, res in zip(pts, run.results, strict=True):
        by.setdefault(pt.params["scenario"], {})[(pt.params["variant"], pt.params["seed"])] = res
    rows = []
    for name in names:
        sc = sf.parse(
            scaled(tomllib.loads((sf.SCENARIO_DIR / f"{name}.toml").read_text()), factor),
            str(sf.SCENARIO_DIR / f"{name}.toml"),
            name,
        )
        line = _row(name, sc, seeds, by[name])
        rows.append(line)
        first = by[name].get(("run", seeds[0]))
        if first is not None and first["status"] == "ok":
            ref = by[name].get(("reference", seeds[0]), {}).get("result", {})
            doc = {"shape": line, "seed": seeds[0], "result": first["result"], "reference": ref}
            (args.out / f"{name}.json").write_text(json.dumps(doc, indent=1))
            scenario_png(first["result"], args.out / f"{name}.png")
        print(f"[{name}] {line['verdict_text']}\n  MRC: {line['mrc']}")
        print(f"  single-path: {line['single-path']}\n  ECMP: {line['ecmp']}", flush=True)
    md = [
        f"Median [95 % bootstrap interval] over seeds {seeds[0]}..{seeds[-1]}; verdicts from the intervals.",
        "",
        "| paper's shape | MRC | single-path | ECMP | verdict |",
        "|---|---|---|---|---|",
    ]
    md += [
        f"| {r['paper']} | {r['mrc']} | {r['single-path']} | {r['ecmp']} | {r['verdict_text']} |"
        for r in rows
    ]
    (args.out / "sim_shapes.md").write_text("\n".join(md) + "\n")
    summary = {
        "scale": factor,
        "seeds": seeds,
        "sweep": {
            "points": len(pts),
            "failed": len(run.failed),
            "workers": run.workers,
            "scheduler": run.scheduler,
            "seconds": round(run.seconds, 1),
        },
        "rows": rows,
    }
    (args.out / "sim_shapes.json").write_text(json.dumps(summary, indent=1))
    if rows:
        table_png(rows, args.out / "sim_shapes.png")
        seeds_png(rows, args.out / "sim_shapes_seeds.png")
    print(
        f"wrote {args.out / 'sim_shapes.json'} "
        f"({len(pts)} points on {run.workers} workers, {run.seconds:.1f} s)"
    )
    return 1 if run.failed else 0


if __name__ == "__main__":
    sys.exit(main())
