"""The evidence table: one row per published MRC result, three columns of evidence.

Why a module of its own: ``bench.report`` stays the single report writer, but which
experiment and which simulator scenario stand for which claim of the paper is a
contract of its own (docs/results.md quotes it). Nothing here measures: every cell
is read from the JSON a benchmark wrote (``sim-shapes/sim_shapes.json`` and the live
experiments' ``<id>/<id>.json``). A cell says the measured number, the baseline
beside it, and holds / does not hold / cannot be shown here (with the reason).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Claim:
    """One published result and where this project measures it."""

    claim: str
    scenarios: tuple[str, ...]  # bench.sim_shapes scenario names (production scale)
    experiments: tuple[str, ...]  # live experiment ids
    metric_has: str = ""  # only the findings whose metric contains this (e9 holds two claims)


CLAIMS = [
    Claim(
        "T0-T1 link flaps: no measurable impact; a few packets per flap, often one",
        ("link-flaps-allreduce",),
        ("e2",),
    ),
    Claim(
        "T1 silently stops forwarding: dip and recovery; T0 down: one plane's share lost; "
        "T1 down: no steady loss",
        ("t1-silent-stop", "t0-down"),
        ("e3", "e4"),
    ),
    Claim("20 % drop on one EV: that EV inactive at once, rate holds", ("ev-drop-20pct",), ("e6",)),
    Claim(
        "second flow forced onto the same EV: ECN moves one, both near line rate",
        ("two-flows-one-ev",),
        ("e9",),
        "ECN",
    ),
    Claim(
        "incast with a bystander: single-path RoCE costs the bystander 25-75 %, MRC none",
        ("incast-bystander",),
        ("e9",),
        "bystander",
    ),
    Claim(
        "1 % random loss: single-path RoCE unusable, MRC about a third of line rate or better",
        ("random-loss-1pct",),
        ("e5",),
    ),
    Claim(
        "one MRC connection over 256 paths beats 16 single-path connections on ring all-reduce",
        ("ring-allreduce-256-paths",),
        ("e8",),
    ),
    Claim("spray balance over T1 uplinks: MRC even, ECMP uneven with few flows", ("spray-balance",), ("e7",)),
]


def _verdict(holds: list[bool]) -> str:
    if not holds:
        return "no verdict here"
    return "**holds**" if all(holds) else "**does not hold**"


def _num(v: Any, unit: str = "") -> str:
    if v is None:
        return "n/a"
    v = float(v)
    text = f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{text} {unit}".strip()


def sim_cell(claim: Claim, shapes: dict[str, Any] | None) -> str:
    """Each scenario's verdict over seeds and its figures: median [95 % interval] per mode."""
    if not claim.scenarios:
        return "cannot be shown here: no mrc-sim scenario for this result"
    if shapes is None:
        return "not run in this results directory (make bench ONLY=sim-shapes)"
    rows = {r["scenario"]: r for r in shapes.get("rows", [])}
    parts, verdicts = [], []
    for name in claim.scenarios:
        r = rows.get(name)
        if r is None:
            parts.append(f"`{name}`: not run")
            continue
        verdicts.append(str(r.get("verdict", "holds" if r["holds"] else "does not hold")))
        parts.append(
            f"`{name}`: MRC {r['mrc']}; baseline single-path {r['single-path'] or 'n/a'}"
            + (f", ECMP {r['ecmp']}" if r.get("ecmp") else "")
            + f"; {r.get('verdict_text', verdicts[-1])}"
            + _sim_context(r)
        )
    scale = shapes.get("scale")
    if not verdicts:
        head = "no verdict here"
    elif "does not hold" in verdicts:
        head = "**does not hold**"
    else:
        head = "**ties**" if "ties" in verdicts else "**holds**"
    return f"{head}: " + "; ".join(parts) + (f" (flow sizes x{scale})" if scale not in (None, 1, 1.0) else "")


def _sim_context(r: dict[str, Any]) -> str:
    f = r.get("fabric")
    if not f:
        return ""
    return (
        f" [{r.get('data_plane', 'mrc-sim')}, {f['planes']}p x {f['t0']} T0 x {f['t1']} T1, "
        f"{f['link_gbps']:g} Gb/s, {r.get('evs')} EVs, MTU {r.get('mtu')}, {_seeds(r)}]"
    )


def _seeds(r: dict[str, Any]) -> str:
    seeds = r.get("seeds")
    if not seeds:
        return f"seed {r.get('seed')}"
    return f"{len(seeds)} seeds {seeds[0]}..{seeds[-1]}, median [95 % interval]"


def _context(e: dict[str, Any]) -> str:
    f = e.get("fabric") or {}
    shape = f"{f.get('planes')}p x {f.get('t0')} T0 x {f.get('t1')} T1" if f else "fabric n/a"
    rate = f.get("link_rate_mbit_s")
    plane = e.get("target") or f.get("target") or "?"
    return f"{plane}, {shape}, {rate or 'unlimited'} Mbit/s, seed {e.get('seed')}"


def live_cell(claim: Claim, experiments: dict[str, dict[str, Any]], target: str) -> str:
    parts, holds = [], []
    for eid in claim.experiments:
        e = experiments.get(eid)
        if e is None:  # the directory's JSON decides the cell, never what this machine has installed
            on, flag = (" on BMv2", "TARGET=bmv2 ") if target == "bmv2" else ("", "")
            parts.append(f"{eid}: not run{on} in this results directory (make bench {flag}ONLY={eid})")
            continue
        if e.get("status") != "ok":
            parts.append(
                f"{eid}: cannot be shown here: {e.get('status')}: {e.get('reason') or 'no reason given'}"
            )
            continue
        found = [
            f for f in e.get("findings", []) if claim.metric_has.lower() in str(f.get("metric", "")).lower()
        ]
        judged = [f for f in found if f.get("holds") is not None]
        base = [f for f in found if f.get("mode") not in ("mrc", "") and f.get("value") is not None]
        holds += [bool(f["holds"]) for f in judged]
        meas = (
            "; ".join(
                f"{f['metric']} {_num(f.get('value'), f.get('unit', ''))} "
                f"(want {f.get('expect')}: {'yes' if f['holds'] else 'NO'})"
                for f in judged[:3]
            )
            or "no judged number"
        )
        bl = "; ".join(
            f"{f['mode']} {f['metric']} {_num(f.get('value'), f.get('unit', ''))}"
            + (f" ({f['expect']})" if str(f.get("expect", "")).startswith("cannot be shown here") else "")
            for f in base[:2]
        )
        parts.append(f"{eid} [{_context(e)}]: {meas}" + (f"; baseline: {bl}" if bl else ""))
    return (f"{_verdict(holds)}: " if holds else "") + " / ".join(parts)


def load_shapes(results: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((results / "sim-shapes" / "sim_shapes.json").read_text())
    except (OSError, ValueError):
        return None
    return data


def table(results: Path, experiments: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of the evidence table for one results directory."""
    shapes = load_shapes(results)
    by_target: dict[str, dict[str, dict[str, Any]]] = {"linux": {}, "bmv2": {}}
    for e in experiments:
        t = str(e.get("target") or (e.get("fabric") or {}).get("target") or "linux")
        by_target.setdefault(t, {})[str(e["experiment"])] = e
    lines = [
        "| published result | mrc-sim, production scale (8 planes x 100 Gb/s, 128-256 EVs) "
        "| live, Linux SRv6 target | live, BMv2 |",
        "|---|---|---|---|",
    ]
    for c in CLAIMS:
        cells = [
            c.claim,
            sim_cell(c, shapes),
            live_cell(c, by_target["linux"], "linux"),
            live_cell(c, by_target["bmv2"], "bmv2"),
        ]
        lines.append("| " + " | ".join(x.replace("|", "\\|").replace("\n", " ") for x in cells) + " |")
    return lines
