"""The evidence table: one row per published MRC result, three columns of evidence.

Why a module of its own: ``bench.report`` stays the single report writer, but which
experiment and which simulator scenario stand for which claim of the paper, and how a
verdict is read from many seeds and runs, is a contract of its own (docs/results.md
quotes it). Nothing here measures: every cell is read from the JSON a benchmark wrote
(``sim-shapes/sim_shapes.json``; the live experiments' ``<id>/<target>/run<k>/<id>.json``).

Verdicts (``bench.intervals``):

- simulator: each figure's 95 % bootstrap interval over seeds against its bar;
- live: each judged figure over the runs (seeds 1..N, at least :data:`MIN_RUNS`): *holds*
  only when every run holds, so the runs' spread clears the bar; a comparison with a
  baseline whose runs fall on both sides of parity *ties* with that baseline; anything
  else *does not hold*. Fewer runs than :data:`MIN_RUNS` give numbers but no verdict. Only
  runs the fidelity monitor passed count (``topologies.fidelity``): with fewer than
  :data:`MIN_RUNS` of them the cell is *not faithful here*, with the monitor's reason.

:func:`rows` gives the table as data (written to ``evidence.json``), :func:`table` as
Markdown, :func:`figures` one PNG per row under ``evidence/``.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.intervals import FAILS, HOLDS, TIES

MIN_RUNS = 3  # a live verdict needs the spread of at least this many runs (docs/design.md §8)
NO_VERDICT = "no verdict"
CANNOT = "cannot be shown here"
NOT_FAITHFUL = "not faithful here"  # fewer than MIN_RUNS runs the fidelity monitor passed
TARGETS = ("linux", "bmv2")


@dataclass(frozen=True)
class Claim:
    """One published result and where this project measures it."""

    claim: str
    scenarios: tuple[str, ...]  # bench.sim_shapes scenario names (production scale)
    experiments: tuple[str, ...]  # live experiment ids
    metric_has: str = ""  # only the findings whose metric contains this (e9 holds two claims)

    @property
    def slug(self) -> str:
        return "-".join(re.findall(r"[a-z0-9]+", self.claim.lower())[:5])


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
    Claim(
        "several faults in a row (a black hole, then a T1 failure): each costs no more than alone, "
        "no dead path keeps traffic",
        ("compound-faults",),
        ("e12",),
    ),
    Claim("20 % drop on one EV: that EV inactive at once, rate holds", ("ev-drop-20pct",), ("e6",)),
    Claim(
        "second flow forced onto the same EV: ECN moves one, both near line rate",
        ("two-flows-one-ev",),
        ("e13",),
    ),
    Claim(
        "incast with a bystander: single-path RoCE (PFC pauses) costs the bystander 25-75 %, MRC none",
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


def combine(verdicts: list[str]) -> str:
    """A cell over its figures: does not hold if any does not, else ties if any ties, else holds."""
    if not verdicts:
        return NO_VERDICT
    if FAILS in verdicts:
        return FAILS
    if NOT_FAITHFUL in verdicts:
        return NOT_FAITHFUL
    if NO_VERDICT in verdicts:
        return NO_VERDICT
    return TIES if TIES in verdicts else HOLDS


def _num(v: float | None, digits: int = 3) -> str:
    if v is None:
        return "n/a"
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.{digits}g}"


# -- the simulator column --------------------------------------------------------------------


def load_shapes(results: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads((results / "sim-shapes" / "sim_shapes.json").read_text())
    except (OSError, ValueError):
        return None
    return data


def sim_column(claim: Claim, shapes: dict[str, Any] | None) -> dict[str, Any]:
    """The claim's scenarios over seeds: their judged figures and one verdict."""
    if shapes is None:
        return {
            "verdict": NO_VERDICT,
            "text": "not run in this results directory (make bench ONLY=sim-shapes)",
        }
    by_name = {r["scenario"]: r for r in shapes.get("rows", [])}
    figures, parts, verdicts = [], [], []
    for name in claim.scenarios:
        r = by_name.get(name)
        if r is None:
            parts.append(f"`{name}`: not run")
            verdicts.append(NO_VERDICT)
            continue
        verdicts.append(str(r.get("verdict", HOLDS if r.get("holds") else FAILS)))
        for f in r.get("figures", []):
            if f.get("verdict") is not None:
                figures.append({**f, "scenario": name, "source": "mrc-sim"})
        parts.append(
            f"`{name}`: MRC {r['mrc']}; baseline single-path {r['single-path'] or 'n/a'}"
            + (f"; ECMP {r['ecmp']}" if r.get("ecmp") else "")
            + f"; {r.get('verdict_text', verdicts[-1])}"
            + _sim_context(r)
        )
    scale = shapes.get("scale")
    text = "; ".join(parts) + (f" (flow sizes x{scale})" if scale not in (None, 1, 1.0) else "")
    return {"verdict": combine(verdicts), "text": text, "figures": figures}


def _sim_context(r: dict[str, Any]) -> str:
    f = r.get("fabric")
    if not f:
        return ""
    seeds = r.get("seeds") or [r.get("seed")]
    return (
        f" [{r.get('data_plane', 'mrc-sim')}, {f['planes']}p x {f['t0']} T0 x {f['t1']} T1, "
        f"{f['link_gbps']:g} Gb/s, {r.get('evs')} EVs, MTU {r.get('mtu')}, "
        f"{len(seeds)} seeds {seeds[0]}..{seeds[-1]}, median [95 % interval]]"
    )


# -- the live columns ------------------------------------------------------------------------


def _run_holds(f: dict[str, Any]) -> bool | None:
    h = f.get("holds")
    return None if h is None else bool(h)


def _cannot(f: dict[str, Any]) -> bool:
    """A run that could not show the figure says so in its ``expect`` (and judges nothing)."""
    return f.get("holds") is None and str(f.get("expect", "")).startswith(CANNOT)


def judge_runs(found: list[dict[str, Any]], runs: int) -> dict[str, Any]:
    """One judged figure over the runs that measured it (``found``: its finding per run).

    A run that judged it and failed fails the figure (or ties it, against a baseline, when
    other runs hold); a run that could not show it here leaves the figure *cannot be shown
    here* (in k of n runs) when every other run holds; a run that measured nothing at all
    leaves no verdict."""
    values = [f.get("value") for f in found]
    have = [float(v) for v in values if v is not None]
    holds = [_run_holds(f) for f in found if not _cannot(f)]
    cannot = [f for f in found if _cannot(f)]
    first = next((f for f in found if not _cannot(f)), found[0])
    out: dict[str, Any] = {
        "label": first["metric"],
        "mode": first.get("mode", ""),
        "values": values,
        "median": statistics.median(have) if have else None,
        "min": min(have) if have else None,
        "max": max(have) if have else None,
        "bar": first.get("bar"),
        "expect": first.get("expect", ""),
        "versus": first.get("versus", ""),
        "runs_holding": sum(1 for h in holds if h),
        "runs_cannot": len(cannot),
        "runs": len(found),
    }
    if runs < MIN_RUNS or len(found) < runs:
        out["verdict"] = NO_VERDICT
    elif holds and all(holds) and not cannot:
        out["verdict"] = HOLDS
    elif not all(holds):
        out["verdict"] = TIES if out["versus"] and any(holds) else FAILS
    else:  # every run that could judge it holds, the others could not show it here
        out["verdict"] = CANNOT
        out["expect"] = f"{cannot[0]['expect']} (in {len(cannot)} of {len(found)} runs)"
    return out


def _fmt_run_fig(j: dict[str, Any]) -> str:
    spread = f" ({_num(j['min'])}-{_num(j['max'])})" if j["runs"] > 1 and j["min"] is not None else ""
    if j["verdict"] == CANNOT:
        return f"{j['label']} ({j['mode']}) {_num(j['median'])}{spread}: {j['expect']}"
    return (
        f"{j['label']} ({j['mode']}) {_num(j['median'])}{spread}, want {j['expect']}: "
        f"{j['runs_holding']} of {j['runs']} runs"
    )


def _context(e: dict[str, Any]) -> str:
    f = e.get("fabric") or {}
    shape = f"{f.get('planes')}p x {f.get('t0')} T0 x {f.get('t1')} T1" if f else "fabric n/a"
    rate = f.get("link_rate_mbit_s")
    return f"{e.get('target') or f.get('target') or '?'}, {shape}, {rate or 'unlimited'} Mbit/s"


def live_column(claim: Claim, by_exp: dict[str, list[dict[str, Any]]], target: str) -> dict[str, Any]:
    """The claim's experiments on one data plane over their runs."""
    parts, verdicts, figures = [], [], []
    for eid in claim.experiments:
        runs = by_exp.get(eid, [])
        ok = [e for e in runs if e.get("status") == "ok"]
        if not runs:  # the directory's JSON decides the cell, never what this machine has installed
            on, flag = (" on BMv2", "TARGET=bmv2 ") if target == "bmv2" else ("", "")
            parts.append(f"{eid}: not run{on} in this results directory (make bench {flag}ONLY={eid})")
            verdicts.append(NO_VERDICT)
            continue
        if not ok:
            e = runs[0]
            parts.append(f"{eid}: {CANNOT}: {e.get('status')}: {e.get('reason') or 'no reason given'}")
            verdicts.append(CANNOT)
            continue
        unfaithful = [e for e in ok if not faithful(e)]
        ok = [e for e in ok if faithful(e)]
        if unfaithful and len(ok) < MIN_RUNS:
            measured = [judge_runs(found, len(found)) for found in _judged_findings(claim, ok + unfaithful)]
            parts.append(_not_faithful(eid, unfaithful, len(ok) + len(unfaithful), measured))
            verdicts.append(NOT_FAITHFUL)
            continue
        judged = [judge_runs(found, len(runs) - len(unfaithful)) for found in _judged_findings(claim, ok)]
        figures += [{**j, "experiment": eid, "source": target} for j in judged]
        verdicts += [j["verdict"] for j in judged] or [NO_VERDICT]
        failed = len(runs) - len(ok) - len(unfaithful)
        seeds = sorted(int(e.get("seed", 0)) for e in ok)
        parts.append(
            f"{eid} [{_context(ok[0])}, {len(ok)} runs, seeds {','.join(map(str, seeds))}"
            + (f", {failed} failed" if failed else "")
            + _fidelity_note(ok, unfaithful)
            + "]: "
            + ("; ".join(_fmt_run_fig(j) for j in judged[:4]) or "no judged number")
        )
    real = [v for v in verdicts if v != CANNOT]
    return {
        "verdict": combine(real) if real else CANNOT,
        "text": " / ".join(parts),
        "figures": figures,
    }


def _judged_findings(claim: Claim, runs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The claim's judged figures over ``runs``: per (metric, mode), its finding in each run."""
    keyed: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for e in runs:
        for f in e.get("findings", []):
            if claim.metric_has.lower() in str(f.get("metric", "")).lower() and (
                f.get("holds") is not None or _cannot(f)
            ):
                keyed.setdefault((str(f["metric"]), str(f.get("mode", ""))), []).append(f)
    return list(keyed.values())


def faithful(e: dict[str, Any]) -> bool:
    """Did the fidelity monitor pass this run? A record from before the monitor counts as passed
    (its cell then says the fidelity was not recorded)."""
    v = e.get("fidelity")
    return not v or bool(v.get("faithful"))


def _fidelity_note(ok: list[dict[str, Any]], unfaithful: list[dict[str, Any]]) -> str:
    if unfaithful:
        return f", {len(unfaithful)} not faithful and left out"
    judged = sum(1 for e in ok if e.get("fidelity"))
    if not judged:
        return ""  # records from before the monitor
    return ", all faithful" if judged == len(ok) else f", fidelity recorded for {judged} of {len(ok)}"


def _not_faithful(
    eid: str, unfaithful: list[dict[str, Any]], runs: int, measured: list[dict[str, Any]] | None = None
) -> str:
    """A live cell the emulation could not carry: how many runs, the monitor's reason, and what
    every run measured (so a reader sees what was at stake; none of it is evidence)."""
    first = unfaithful[0]
    reasons = first.get("fidelity", {}).get("reasons") or ["?"]
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    said = "; ".join(_fmt_run_fig(j) for j in (measured or [])[:4])
    return (
        f"{eid}: {NOT_FAITHFUL} [{_context(first)}]: {len(unfaithful)} of {runs} runs not faithful; "
        f"seed {first.get('seed')}: {reasons[0]}{more}"
        + (f"; measured, not evidence: {said}" if said else "")
    )


def load_live(experiments: list[dict[str, Any]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Experiment records by data plane, then by experiment id (a list: one per run)."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {t: {} for t in TARGETS}
    for e in experiments:
        t = str(e.get("target") or (e.get("fabric") or {}).get("target") or "linux")
        out.setdefault(t, {}).setdefault(str(e["experiment"]), []).append(e)
    return out


# -- the table -------------------------------------------------------------------------------


def rows(results: Path, experiments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evidence table as data: per claim, each column's verdict, text and judged figures."""
    shapes = load_shapes(results)
    live = load_live(experiments)
    return [
        {
            "claim": c.claim,
            "slug": c.slug,
            "mrc-sim": sim_column(c, shapes),
            **{t: live_column(c, live.get(t, {}), t) for t in TARGETS},
        }
        for c in CLAIMS
    ]


def consistent(row: dict[str, Any]) -> list[str]:
    """What is wrong with a row's verdicts: a column that says *holds* while one of its
    judged figures' interval (simulator) or runs (live) crosses the bar."""
    wrong = []
    for col in ("mrc-sim", *TARGETS):
        cell = row[col]
        if cell["verdict"] != HOLDS:
            continue
        for f in cell.get("figures", []):
            if col == "mrc-sim":
                bad = f.get("claim", True) and f.get("verdict") != HOLDS
            elif f.get("verdict") == CANNOT:  # shown by no run that could judge it: decides nothing
                bad = f.get("runs_holding", 0) + f.get("runs_cannot", 0) != f.get("runs")
            else:
                bad = f.get("runs_holding") != f.get("runs") or f.get("runs", 0) < MIN_RUNS
            if bad:
                wrong.append(
                    f"{row['claim']} / {col}: says holds, but {f.get('label')} "
                    f"({f.get('mode') or f.get('run')}) does not"
                )
    return wrong


def _cell(col: dict[str, Any], png: str | None) -> str:
    verdict = col["verdict"]
    if verdict in (CANNOT, NOT_FAITHFUL):
        head = ""  # the text says why, experiment by experiment
    elif verdict == NO_VERDICT:
        head = f"no verdict (fewer than {MIN_RUNS} runs): " if col.get("figures") else ""
    else:
        head = f"**{verdict}**: "
    link = f" ([figure]({png}))" if png and col.get("figures") else ""
    return (head + str(col["text"]) + link).replace("|", "\\|").replace("\n", " ")


def table(results: Path, experiments: list[dict[str, Any]]) -> list[str]:
    """Markdown lines of the evidence table for one results directory (and ``evidence.json``)."""
    data = rows(results, experiments)
    (results / "evidence.json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    pngs = figures(results, data)
    lines = [
        "| published result | mrc-sim, production scale (8 planes x 100 Gb/s, 128-256 EVs) "
        "| live, Linux SRv6 target | live, BMv2 |",
        "|---|---|---|---|",
    ]
    for r in data:
        png = pngs.get(r["slug"])
        cells = [r["claim"], *(_cell(r[c], png) for c in ("mrc-sim", *TARGETS))]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def figures(results: Path, data: list[dict[str, Any]]) -> dict[str, str]:
    """One PNG per row under ``evidence/``: every judged figure's per-seed (simulator) and
    per-run (live) values against its bar. Returns the relative paths by row slug."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out: dict[str, str] = {}
    (results / "evidence").mkdir(exist_ok=True)
    colours = {HOLDS: "#2ca02c", TIES: "#ff7f0e", FAILS: "#d62728", NO_VERDICT: "#7f7f7f"}
    for r in data:
        figs = [f for c in ("mrc-sim", *TARGETS) for f in r[c].get("figures", [])][:12]
        if not figs:
            continue
        fig, axes = plt.subplots(1, len(figs), figsize=(2.2 * len(figs) + 1, 3.2), squeeze=False)
        for ax, f in zip(axes[0], figs, strict=True):
            vals = [v for v in f.get("values", []) if v is not None]
            ax.scatter(range(len(vals)), vals, s=14, color=colours.get(f.get("verdict"), "#7f7f7f"))
            levels = f.get("levels") or f.get("bar")
            for level in levels.values() if isinstance(levels, dict) else ():
                ax.axhline(level, color="k", lw=0.8, ls="--")
            mode = f.get("mode") or f.get("run", "")
            ax.set_title(f"{f['source']}\n{f['label'][:34]}\n{mode}: {f.get('verdict')}", fontsize=6)
            ax.set_xlabel("seed" if f["source"] == "mrc-sim" else "run", fontsize=6)
            ax.tick_params(labelsize=6)
        fig.suptitle(r["claim"][:110], fontsize=8)
        fig.tight_layout()
        path = results / "evidence" / f"{r['slug']}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out[r["slug"]] = str(path.relative_to(results))
    return out
