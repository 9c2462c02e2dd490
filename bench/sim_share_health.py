"""Path health shared among a NIC's connections, off and on, on every gray and fault shape.

Why: ``Experimental.share_path_health`` lets a NIC's connections retire a path one of them
proved dead (``mrc_host/core/path_health.py``). It is off by default, and becomes the default
only if it helps every shape, not just the all-to-all it was built for: a switch that saves
RTOs there and costs packets in an incast is a trade-off, not a default. This runs each shape
the gray-failure benches have -- every slow-plane case (``bench.sim_slow_plane``), the
flapping link (``bench.sim_flap``), stale knowledge (``bench.sim_knowledge``'s heal and skip),
the black hole under an incast (``bench.sim_gray``'s oracle shapes of
``bench.sim_incast_fault``), the all-to-all with a T1 stopping (``bench.sim_shared_failure``)
-- and one fault-free incast (``bench.sim_fair``), each seed with the switch off and then on,
in one process. Per shape and figure: median [min, max] over the seeds, off and on, the seeds
on which on did better and worse (same seed, paired), and a verdict: ``tie`` when the medians
are equal or the two ranges overlap over at least half of the narrower one, else ``better``
or ``worse`` by the medians. Writes ``sim_share_health.json`` and ``sim_share_health.md``.

    python -m bench.sim_share_health --out DIR [--quick] [--seeds 1-10] [--only SHAPE ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import sim_fair, sim_flap, sim_incast_fault, sim_knowledge, sim_shared_failure, sim_slow_plane
from bench.sim_bench import record_head
from bench.sim_gray import ORACLE_SHAPES
from bench.sim_incast_fault import seed_range, spread

ON: dict[str, object] = {"share_path_health": True}
OFF: dict[str, object] = {}
HEAVY_OVERLAP = 0.5  # of the narrower range: a tie
FLAP_PERIOD_NS = 500_000
FLAP_LINK = "p0-t0_0-t1_1"
NEVER = 99.0  # a heal whose share never came back (``back_rtts`` None)
FAIR_ROW = (8, 2, False)  # flows, planes, staggered: 8 -> 1 on 2 planes, together

# one figure of one run: (name, value, True when lower is better)
Figure = tuple[str, float, bool]
# one shape on one seed with these transport overrides: its figures
Runner = Callable[[int, dict[str, object]], list[Figure]]


def slow_plane(name: str, rates: tuple[float, ...], where: sim_slow_plane.Where) -> Runner:
    def run(seed: int, transport: dict[str, object]) -> list[Figure]:
        r = sim_slow_plane.case(name, rates, where, seed, transport)
        return [
            ("goodput/capacity", r["slow"]["of_capacity"], False),
            ("share error", r["slow"]["share_error"], True),
            ("time/dead", r["vs_dead"] or 0.0, True),
            ("resent", r["slow"]["resent"], True),
        ]

    return run


def flap(size: int) -> Runner:
    def run(seed: int, transport: dict[str, object]) -> list[Figure]:
        r = sim_flap.seed_row(seed, FLAP_PERIOD_NS, size, FLAP_LINK, transport)
        return [
            ("JCT/no flap", r["jct_ratio"] or 0.0, True),
            ("worst phase/limit", r["worst_phase"], True),
            ("up share", r["up_share"] or 0.0, False),
            ("resent", r["resent"], True),
            ("RTOs", r["rtos"], True),
            ("plane-failed EVs", r["plane_failed_evs"], True),
        ]

    return run


def heal(seed: int, transport: dict[str, object]) -> list[Figure]:
    r = sim_knowledge.heal(seed, 300, transport)
    return [("RTTs back to share", NEVER if r["back_rtts"] is None else r["back_rtts"], True)]


def skip(seed: int, transport: dict[str, object]) -> list[Figure]:
    r = sim_knowledge.skip(seed, transport)
    return [("lost once known", r["lost_known"], True), ("lost", r["lost"], True), ("RTOs", r["rtos"], True)]


def oracle(t1s: tuple[tuple[int, int], ...], senders: int, at_ns: int) -> Runner:
    def run(seed: int, transport: dict[str, object]) -> list[Figure]:
        r = sim_incast_fault.run(seed, t1s, senders, at_ns, transport=transport)
        lost = sum(f["lost"] for f in r["faults"])
        sent = sum(f["oracle_sent"] for f in r["faults"])
        return [
            ("lost", lost, True),
            ("lost/oracle_sent", round(lost / max(sent, 1), 3), True),
            ("RTOs", r["rtos"], True),
            ("JCT us", r["completion_us"], True),
        ]

    return run


def all_to_all(size: str) -> Runner:
    """``bench.sim_shared_failure``'s all-to-all, fault-free and with the T1 stopping (the
    switch given as its scenario's ``share_path_health``)."""

    def run(seed: int, transport: dict[str, object]) -> list[Figure]:
        share = bool(transport.get("share_path_health"))
        free = sim_shared_failure.run_once(seed, size, False, share)
        hit = sim_shared_failure.run_once(seed, size, True, share)
        return [
            ("added RTOs/conn", round((hit["rtos"] - free["rtos"]) / hit["connections"], 4), True),
            ("JCT/fault-free", round(hit["jct_us"] / free["jct_us"], 4), True),
            ("lost in fault", hit["lost_in_fault"], True),
            ("resent", hit["resends"], True),
            ("fault-free JCT us", free["jct_us"], True),
            ("fault-free RTOs", free["rtos"], True),
        ]

    return run


def fair(seed: int, transport: dict[str, object]) -> list[Figure]:
    n, planes, staggered = FAIR_ROW
    r = sim_fair.run_case(n, planes, staggered, seed, 3 << 19, transport=transport)
    return [("Jain", r["jain"] or 0.0, False), ("sum Gb/s", round(sum(r["gbps"]), 2), False)]


def shapes(quick: bool) -> Iterator[tuple[str, str, Runner]]:
    """(group, shape, runner) for every shape measured; the group is what ``--only`` names."""
    for name, rates, where in sim_slow_plane.CASES:
        yield "slow", f"slow {name}", slow_plane(name, rates, where)
    yield "flap", "flap (16-host permutation)", flap((32 if quick else 64) << 20)
    yield "knowledge", "heal in an 8->1 incast", heal
    yield "knowledge", "15->1, dead link (skip)", skip
    for name, t1s, senders, at, _, _ in ORACLE_SHAPES:
        yield "oracle", f"oracle {name}", oracle(t1s, senders, at)
    yield "a2a", "all-to-all, T1 stops", all_to_all("1MiB")
    yield "fair", "fault-free 8->1, 2 planes", fair


def verdict(off: list[float], on: list[float], lower: bool) -> str:
    """``tie`` when the medians are equal or the ranges overlap over at least ``HEAVY_OVERLAP``
    of the narrower one (a point inside the other's range: a tie); else which way on moved."""
    m_off, m_on = statistics.median(off), statistics.median(on)
    if m_off == m_on:
        return "tie"
    overlap = min(max(off), max(on)) - max(min(off), min(on))
    narrow = min(max(off) - min(off), max(on) - min(on))
    if overlap >= 0 and (narrow == 0 or overlap >= HEAVY_OVERLAP * narrow):
        return "tie"
    return "better" if (m_on < m_off) == lower else "worse"


def measure(seeds: range, quick: bool, only: list[str]) -> dict[str, Any]:
    """Each shape on each seed, off then on: per (shape, figure) the values and the verdict."""
    out: dict[str, Any] = {"rows": [], "seconds": {}}
    for group, shape, runner in shapes(quick):
        if only and group not in only:
            continue
        started = time.monotonic()
        per: dict[str, dict[str, Any]] = {}
        for seed in seeds:
            for key, transport in (("off", OFF), ("on", ON)):
                for name, value, lower in runner(seed, transport):
                    row = per.setdefault(name, {"lower_is_better": lower, "off": [], "on": []})
                    row[key].append(value)
            print(
                f"   {shape} seed {seed}: "
                + "; ".join(f"{k} {v['off'][-1]} -> {v['on'][-1]}" for k, v in per.items()),
                flush=True,
            )
        out["seconds"][shape] = round(time.monotonic() - started, 1)
        for name, row in per.items():
            off, on, lower = row["off"], row["on"], row["lower_is_better"]
            gain = [(b - a) * (-1 if lower else 1) for a, b in zip(off, on, strict=True)]
            out["rows"].append(
                {
                    "shape": shape,
                    "figure": name,
                    **row,
                    "off_spread": spread(off),
                    "on_spread": spread(on),
                    "on_better_seeds": sum(g > 0 for g in gain),
                    "on_worse_seeds": sum(g < 0 for g in gain),
                    "verdict": verdict(off, on, lower),
                }
            )
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as markdown: median [min, max] off and on, seeds on did better / worse, verdict."""

    def mr(s: dict[str, float]) -> str:
        return f"{s['median']:.4g} [{s['min']:.4g}, {s['max']:.4g}]"

    lines = [
        "| shape | figure | off | on | seeds on better / worse | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        arrow = "↓" if r["lower_is_better"] else "↑"
        lines.append(
            f"| {r['shape']} | {r['figure']} ({arrow} better) | {mr(r['off_spread'])} | "
            f"{mr(r['on_spread'])} | {r['on_better_seeds']} / {r['on_worse_seeds']} of {len(r['off'])} | "
            f"{r['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_share_health", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="seeds 1-3, a 32 MiB flap permutation")
    ap.add_argument("--seeds", help="first-last (default 1-10, --quick 1-3)")
    groups = ("slow", "flap", "knowledge", "oracle", "a2a", "fair")
    ap.add_argument(
        "--only", action="append", choices=groups, default=[], help="one group of shapes (repeatable)"
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = seed_range(args.seeds or ("1-3" if args.quick else "1-10"))
    started = time.monotonic()
    data: dict[str, Any] = {**record_head(args.quick), "seeds": [seeds.start, seeds.stop - 1]}
    data |= measure(seeds, args.quick, args.only)
    data["total_seconds"] = round(time.monotonic() - started, 1)
    verdicts = [r["verdict"] for r in data["rows"]]
    data["verdicts"] = {v: verdicts.count(v) for v in ("better", "tie", "worse")}
    (args.out / "sim_share_health.json").write_text(json.dumps(data, indent=1))
    text = table(data["rows"])
    (args.out / "sim_share_health.md").write_text(text)
    print(text)
    print(f"   verdicts: {data['verdicts']} in {data['total_seconds']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
