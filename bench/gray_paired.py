"""Two ``sim_gray.json`` records compared seed by seed: on how many seeds each figure got
better, stayed, or got worse.

Why: the gray-failure figures are medians over ten seeds of deterministic runs, and a change
that moves one packet on one seed moves a median by half a packet or not at all. Set side by
side per seed (the same seed, the same fault, two trees) the same runs say which way a change
went, and how often: "lost under the 15 -> 1 black hole: 2 seeds worse, 1 better, 7 the same"
is a finding where "median 16.5 -> 17.5" is not. Only seeds present in both records count.

    python -m bench.sim_gray --out NEW --against OLD/sim_gray.json
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

# relative difference below which two figures of one seed are the same (float noise)
SAME_WITHIN = 1e-3


@dataclass(frozen=True)
class Paired:
    """One figure of one row over the seeds both records hold."""

    row: str
    figure: str
    better: int
    same: int
    worse: int
    median_change: float  # new - old, the median over the seeds where both are finite


def per_seed(d: dict[str, Any]) -> dict[tuple[str, str], tuple[int, dict[int, float]]]:
    """Each (row, figure) of a ``sim_gray`` record with its direction (+1: higher is better,
    -1: lower is) and its value per seed (an oracle row's faults of one seed summed)."""
    out: dict[tuple[str, str], tuple[int, dict[int, float]]] = {}

    def put(row: str, figure: str, sense: int, seed: int, value: float | None) -> None:
        if value is None:  # (a heal never back: the worst a lower-is-better figure can be)
            value = math.inf
        values = out.setdefault((row, figure), (sense, {}))[1]
        values[seed] = values.get(seed, 0.0) + float(value)

    for name, row in d.get("slow_plane", {}).items():
        for r in row.get("per_seed", []):
            put(f"slow plane {name}", "goodput ÷ capacity", 1, r["seed"], r["of_capacity"])
            put(f"slow plane {name}", "share error", -1, r["seed"], r["share_error"])
            put(f"slow plane {name}", "time ÷ dead", -1, r["seed"], r["vs_dead"])
    for r in d.get("flap", {}).get("rows", []):
        put("flap", "JCT ÷ no flap", -1, r["seed"], r["jct_ratio"])
        put("flap", "worst phase ÷ limit", -1, r["seed"], r["worst_phase"])
        put("flap", "plane-failed EVs", -1, r["seed"], r["plane_failed_evs"])
    for r in d.get("knowledge", {}).get("per_seed", []):
        put("heal in an 8→1 incast", "RTTs back", -1, r["seed"], r["heal_back_rtts"])
        put("15→1, dead link", "DATA lost once known", -1, r["seed"], r["lost_known"])
    for name, row in d.get("oracle", {}).items():
        for r in row.get("per_seed", []):
            put(f"oracle {name}", "lost", -1, r["seed"], r["lost"])
            put(f"oracle {name}", "lost - oracle_sent", -1, r["seed"], r["lost"] - r["oracle_sent"])
    return out


class RecordError(ValueError):
    """An ``--against`` file that is not a ``sim_gray`` record with figures per seed."""


def load_record(path: Path) -> dict[str, Any]:
    """``path`` read as a ``sim_gray.json`` to compare with, checked before any run starts:
    a file that is missing, not JSON, or holds no figure per seed (one written before records
    kept them) is a ``RecordError`` naming the file and what is wrong, not a traceback after
    minutes of simulation."""
    try:
        d = json.loads(path.read_text())
    except OSError as e:
        raise RecordError(f"{path}: cannot read it ({e.strerror or e})") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: not JSON ({e})") from e
    if not isinstance(d, dict):
        raise RecordError(f"{path}: not a sim_gray record (a JSON object with its rows)")
    try:
        figures = per_seed(d)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise RecordError(f"{path}: a row is not as sim_gray writes it ({type(e).__name__}: {e})") from e
    if not figures:
        raise RecordError(f"{path}: no figure per seed (a record written before sim_gray kept them?)")
    return d


def compare(old: dict[str, Any], new: dict[str, Any]) -> list[Paired]:
    """Every figure both records hold, seed by seed (``new`` against ``old``)."""
    before = per_seed(old)
    out = []
    for key, (sense, now) in per_seed(new).items():
        if key not in before:
            continue
        was = before[key][1]
        seeds = sorted(set(was) & set(now))
        if not seeds:
            continue
        better = same = worse = 0
        for s in seeds:
            a, b = was[s], now[s]
            if a == b or (math.isfinite(a - b) and abs(b - a) <= SAME_WITHIN * max(abs(a), abs(b))):
                same += 1
            elif (b - a) * sense > 0:
                better += 1
            else:
                worse += 1
        finite = [now[s] - was[s] for s in seeds if math.isfinite(now[s]) and math.isfinite(was[s])]
        change = median(finite) if finite else math.nan
        out.append(Paired(key[0], key[1], better, same, worse, change))
    return out


def table(rows: list[Paired]) -> str:
    """The comparison as a markdown table, worse rows first."""
    lines = ["| row | figure | seeds better | same | worse | median change |", "|---|---|---|---|---|---|"]
    for p in sorted(rows, key=lambda p: (-p.worse, p.row, p.figure)):
        lines.append(f"| {p.row} | {p.figure} | {p.better} | {p.same} | {p.worse} | {p.median_change:+.3g} |")
    return "\n".join(lines) + "\n"
