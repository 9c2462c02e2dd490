"""``mrc-sim fuzz``: generated scenarios against the transport's invariants, on Dask.

Why: benches check the cases someone named; the defects that matter hide in the ones nobody
did (equal flows split 80/5/5/5, a failure during an incast found late). Here draw ``i`` of
seed ``S`` is a scenario (``fuzz_draw.py``: fabric, traffic, faults), run by the real core
with an ``Observer`` (``fuzz_observe.py``) and judged by ``invariants.py``. Draws are
independent and deterministic, so they run as points on the sweep engine (``sweep.py``:
an embedded ``LocalCluster`` or any Dask scheduler) and the JSON is the same on any number
of workers. A draw that breaks an invariant is shrunk (its recorded choices made smaller
while the same invariant still breaks) and written as a scenario TOML that ``mrc-sim
--scenario FILE`` replays exactly and ``mrc-sim fuzz --replay FILE`` judges again.
"""

from __future__ import annotations

import argparse
import json
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import invariants
from . import scenario_file as sf
from .fuzz_draw import RandomDrawer, ReplayDrawer, draw_rng, draw_table, table_toml
from .fuzz_observe import Observer
from .gc_pause import collector_paused
from .invariants import CHECKS, check_all

INVARIANTS = (*CHECKS, "crash")
GRADED = (
    "floor",
    "oracle",
    "resend",
    "dead_ev",
    "jain",
    "slow_plane",
    "flap",
)  # a worst case says something even when it holds
DEFAULT_SHRINK_RUNS = 150


def run_checked(sc: sf.Scenario) -> dict[str, Any]:
    """Run the scenario's first run with an observer; the verdicts (and a crash, as one)."""
    try:
        with collector_paused():
            net, jobs = sf.build(sc, sc.runs[0])
        obs = Observer(net, jobs)
        obs.arm()
        net.run(sc.time_limit_ns)
        observations = obs.observations()
        observations["flap_jobs"] = flap_jobs(sc, jobs)
    except Exception as exc:  # a crash of the simulation or the core is a finding too
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(tb.filename).name}:{tb.lineno}"
        return {
            "verdicts": {"crash": {"checked": 1, "violations": [_crash(exc, where)], "worst": None}},
            "failed": ["crash"],
            "connections": None,
        }
    verdicts = {name: v.as_dict() for name, v in check_all(observations).items()}
    verdicts["crash"] = {"checked": 1, "violations": [], "worst": None}
    return {
        "verdicts": verdicts,
        "failed": [name for name, v in verdicts.items() if v["violations"]],
        "connections": len(observations["flows"]),
    }


def flap_jobs(sc: sf.Scenario, jobs: list[Any]) -> list[dict[str, Any]]:
    """With links flapping, each job's time against the same draw's without the flaps (run
    again, unobserved): what ``invariants.check_flap`` judges. Nothing without a flap."""
    if not any(spec.startswith("flap=") for spec in sc.faults):
        return []
    calm = replace(sc, faults=[f for f in sc.faults if not f.startswith("flap=")])
    with collector_paused():
        net, clean = sf.build(calm, calm.runs[0])
    net.run(calm.time_limit_ns)
    out = []
    for job, ref in zip(jobs, clean, strict=True):
        if job.completion_ns is None or ref.completion_ns is None:
            continue
        out.append(
            {
                "job": job.name,
                "flap_ns": job.completion_ns,
                "clean_ns": ref.completion_ns,
                "base_rtt_ns": max(c.base_rtt_ns for c in job.connections),
            }
        )
    return out


def _crash(exc: Exception, where: str) -> dict[str, Any]:
    text = f"{type(exc).__name__}: {exc} (at {where})"
    return {"subject": "simulation", "value": 1.0, "limit": 0.0, "bad": True, "detail": text}


def draw_scenario(
    choices: list[int] | None = None, seed: int = 1, index: int = 0, transport: dict[str, Any] | None = None
) -> tuple[str, list[int]]:
    """The TOML of draw ``index`` of ``seed`` (or of recorded ``choices``) and its choices;
    ``transport``: ``[transport.config]`` settings every draw runs under (none: the defaults)."""
    drawer: RandomDrawer | ReplayDrawer = (
        ReplayDrawer(choices) if choices is not None else (RandomDrawer(draw_rng(seed, index)))
    )
    table = draw_table(drawer)
    if transport:
        table["transport"] = dict(transport)
    return table_toml(table), drawer.choices


def run_draw(
    seed: int, index: int, choices: list[int] | None = None, transport: dict[str, Any] | None = None
) -> dict[str, Any]:
    text, used = draw_scenario(choices, seed, index, transport)
    sc = sf.load_text(text, f"draw {index}")
    out = run_checked(sc)
    return {"index": index, "choices": used, "scenario": text, **out}


@dataclass(frozen=True)
class FuzzPoint:
    """One draw of a campaign (what a Dask worker runs)."""

    index: int
    seed: int
    params: dict[str, Any]
    transport: dict[str, Any] = field(default_factory=dict)


def fuzz_point(pt: FuzzPoint) -> dict[str, Any]:
    import gc

    try:
        return {"status": "ok", "params": pt.params, **run_draw(pt.seed, pt.index, None, pt.transport)}
    finally:
        gc.collect()  # as sweep.run_point: a worker stays at one network's size


@dataclass(frozen=True)
class ShrinkPoint:
    """Shrinking one draw for one invariant (a Dask task; ``index`` names the task: two
    invariants may first break on the same draw)."""

    index: int
    draw: int
    invariant: str
    seed: int
    choices: tuple[int, ...]
    runs: int
    params: dict[str, Any]
    transport: dict[str, Any] = field(default_factory=dict)


def shrink(
    choices: list[int], fails: Callable[[list[int]], dict[str, Any] | None], budget: int
) -> tuple[list[int], dict[str, Any] | None, int]:
    """The smallest choices found (shorter first, then lower values) for which ``fails``
    still returns a result, that result, and the runs it took. The passes are those
    Hypothesis' shrinker makes on its choice sequences: cut the tail (a replay past the end
    draws the simplest values), set single choices to their lowest, delete blocks, halve."""
    best, result, runs = list(choices), None, 0

    def better(cand: list[int]) -> bool:
        nonlocal best, result, runs
        if runs >= budget or (len(cand), cand) >= (len(best), best):
            return False
        runs += 1
        got = fails(cand)
        if got is None:
            return False
        best, result = cand, got
        return True

    improved = True
    while improved and runs < budget:
        improved = False
        for n in (len(best) // 4, len(best) // 2, 3 * len(best) // 4, len(best) - 1):
            improved |= better(best[:n])
        for i in range(len(best)):
            improved |= i < len(best) and better([*best[:i], 0, *best[i + 1 :]])
        for k in (8, 4, 2, 1):
            i = 0
            while i + k <= len(best) and runs < budget:
                if better(best[:i] + best[i + k :]):
                    improved = True
                else:
                    i += k
        for i in range(len(best)):
            for value in (best[i] // 2, best[i] - 1):
                if i < len(best) and 0 <= value < best[i] and better([*best[:i], value, *best[i + 1 :]]):
                    improved = True
                    break
    return best, result, runs


def shrink_point(pt: ShrinkPoint) -> dict[str, Any]:
    """Shrink one failing draw while ``pt.invariant`` still breaks (a Dask task)."""

    def fails(cand: list[int]) -> dict[str, Any] | None:
        try:
            r = run_draw(pt.seed, pt.draw, cand, pt.transport)
        except Exception:  # a draw that cannot even be built is not the failure we keep
            return None
        return r if pt.invariant in r["failed"] else None

    _choices, result, runs = shrink(list(pt.choices), fails, pt.runs)
    if result is None:  # nothing smaller fails: the draw itself
        result = run_draw(pt.seed, pt.draw, list(pt.choices), pt.transport)
    return {"status": "ok", "params": pt.params, "invariant": pt.invariant, "runs": runs, **result}


# ---- a campaign -------------------------------------------------------------------------
def campaign(
    seed: int,
    draws: int,
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = False,
    shrink_runs: int = DEFAULT_SHRINK_RUNS,
    transport: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``draws`` draws of ``seed`` on Dask, judged; the first failing draw of each invariant
    shrunk. The same dict (and JSON) whatever the workers. ``transport``: the settings every
    draw runs under (``draw_scenario``), recorded with the results."""
    from .sweep import run_points

    settings = dict(transport or {})
    points = [FuzzPoint(i, seed, {"seed": seed, "draw": i}, settings) for i in range(draws)]
    run = run_points(points, scheduler, workers, progress, label=f"fuzz-{seed}", fn=fuzz_point)
    results = [_tidy(r) for r in run.results]
    firsts: dict[str, dict[str, Any]] = {}
    for r in results:
        for name in r.get("failed", []):
            firsts.setdefault(name, r)
    shrunk: dict[str, Any] = {}
    if firsts and shrink_runs > 0:
        todo = [
            ShrinkPoint(
                k, r["index"], name, seed, tuple(r["choices"]), shrink_runs, {"invariant": name}, settings
            )
            for k, (name, r) in enumerate(sorted(firsts.items()))
        ]
        srun = run_points(todo, scheduler, workers, progress, label=f"shrink-{seed}", fn=shrink_point)
        shrunk = {r["params"]["invariant"]: _tidy(r) for r in srun.results}
    return {
        "seed": seed,
        "draws": draws,
        "transport": settings,
        "summary": summarise(results),
        "shrunk": shrunk,
        "results": results,
        "_workers": run.workers,
        "_seconds": run.seconds,
    }


def _tidy(r: dict[str, Any]) -> dict[str, Any]:
    """A point's result; a point Dask lost (a worker died) becomes a crash of that draw."""
    if r.get("status") == "ok":
        return {k: v for k, v in r.items() if k not in ("status", "params")}
    crash = {"subject": "worker", "value": 1.0, "limit": 0.0, "bad": True, "detail": r.get("error", "")}
    return {
        "index": r["params"].get("draw", r.get("index")),
        "failed": ["crash"],
        "verdicts": {"crash": {"checked": 1, "violations": [crash], "worst": None}},
    }


def summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per invariant: subjects judged, failing draws, violations and the worst case of all."""
    out: dict[str, Any] = {}
    for name in INVARIANTS:
        row: dict[str, Any] = {"checked": 0, "failing_draws": [], "violations": 0, "worst": None}
        worst_key = float("-inf")
        for r in results:
            v = r["verdicts"].get(name)
            if v is None:
                continue
            row["checked"] += v["checked"]
            row["violations"] += len(v["violations"])
            if v["violations"]:
                row["failing_draws"].append(r["index"])
            case = v["worst"] or (v["violations"][0] if v["violations"] else None)
            if case is not None:
                key = _badness(name, case)
                if key > worst_key:
                    worst_key = key
                    row["worst"] = {"draw": r["index"], **case}
        out[name] = row
    return out


def _badness(name: str, case: dict[str, Any]) -> float:
    if name == "jain":
        return -float(case["value"])
    if name in ("floor", "oracle"):
        return float(case["value"]) / float(case["limit"])
    return float(case["value"])


# ---- the command ------------------------------------------------------------------------
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mrc-sim fuzz",
        description="Generated scenarios against the transport's invariants (docs/simulator.md).",
        epilog=(invariants.__doc__ or "").split("\n\n", 1)[-1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--draws", type=int, default=100, help="how many draws (default 100)")
    p.add_argument("--seed", type=int, default=1, help="the campaign's seed (default 1)")
    p.add_argument("--out", default="results/fuzz", help="writes fuzz.json and failing draws' TOML here")
    p.add_argument("--scheduler", metavar="tcp://HOST:8786", help="a running Dask scheduler")
    p.add_argument("--workers", type=int, default=None, help="embedded cluster: worker processes")
    p.add_argument(
        "--shrink-runs",
        type=int,
        default=DEFAULT_SHRINK_RUNS,
        help=f"runs to shrink the first failing draw per invariant (0: none; default {DEFAULT_SHRINK_RUNS})",
    )
    p.add_argument("--replay", metavar="FILE", help="judge one scenario file (a failing draw) and exit")
    p.add_argument(
        "--transport",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="every draw under this [transport.config] setting (VALUE in JSON; an experimental "
        "switch by its name, e.g. path_delay_losses=true); repeatable",
    )
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    return p


def main(argv: list[str]) -> int:
    """0 when every draw holds every invariant, 1 when some broke one (each reported), 2 on bad use."""
    p = parser()
    args = p.parse_args(argv)
    if args.replay:
        try:
            sc = sf.load(args.replay)
        except sf.ScenarioError as exc:
            p.error(str(exc))
        r = run_checked(sc)
        print(report_draw(r, args.replay))
        return 1 if r["failed"] else 0
    if args.draws < 1 or (args.workers is not None and (args.workers < 1 or args.scheduler)):
        p.error("--draws at least 1; --workers at least 1 and only for the embedded cluster")
    transport = transport_settings(p, args.transport, args.seed)
    result = campaign(
        args.seed, args.draws, args.scheduler, args.workers, args.progress, args.shrink_runs, transport
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    written = write_findings(result, out)
    doc = {k: v for k, v in result.items() if not k.startswith("_")}
    (out / "fuzz.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(report(result, written))
    print(
        f"fuzz: {args.draws} draws of seed {args.seed} on {result['_workers']} workers in "
        f"{result['_seconds']:.1f} s -> {out / 'fuzz.json'}"
    )
    return 1 if any(r["failed"] for r in result["results"]) else 0


def transport_settings(p: argparse.ArgumentParser, items: list[str], seed: int) -> dict[str, Any]:
    """``--transport`` as ``[transport.config]`` settings, checked before any draw runs: not
    key=value, a value that is not JSON, or a setting the scenario file refuses (an unknown
    parameter, a wrong type: its message names it) is an exit-2 error."""
    out: dict[str, Any] = {}
    for item in items:
        key, eq, _ = item.partition("=")
        if not eq or not key:
            p.error(f"--transport {item!r}: not KEY=VALUE")
        try:
            out.update(sf.key_values([item]))
        except ValueError:
            p.error(f"--transport {item!r}: the value is not JSON (a string goes in quotes: {key}='\"...\"')")
    if out:
        try:  # (the first draw under them: the scenario file's own checks)
            sf.load_text(draw_scenario(None, seed, 0, out)[0], "--transport")
        except sf.ScenarioError as exc:
            p.error(str(exc))
    return out


def command(seed: int, draws: int) -> str:
    return f"mrc-sim fuzz --draws {draws} --seed {seed}"


def finding_toml(r: dict[str, Any], seed: int, invariant: str | None = None) -> str:
    """A failing draw as a scenario file, with what broke and how to replay it on top."""
    lines = [
        f"mrc-sim fuzz: seed {seed}, draw {r['index']}" + (f", shrunk for {invariant}" if invariant else "")
    ]
    for name in r["failed"]:
        for case in r["verdicts"][name]["violations"][:5]:
            lines.append(
                f"{name}: {case['subject']}: {case['value']} (limit {case['limit']}) {case['detail']}"
            )
    lines += [
        "replay the run: mrc-sim --scenario THIS_FILE; judge it again: mrc-sim fuzz --replay THIS_FILE",
        f"choices: {r['choices']}",
    ]
    return "\n".join(f"# {line}" for line in lines) + "\n" + str(r["scenario"])


def write_findings(result: dict[str, Any], out: Path) -> list[Path]:
    """Every failing draw's TOML (``draw-<seed>-<i>.toml``) and each shrunk one
    (``shrunk-<seed>-<invariant>.toml``)."""
    seed = result["seed"]
    written = []
    for r in result["results"]:
        if r.get("failed") and "scenario" in r:
            path = out / f"draw-{seed}-{r['index']}.toml"
            path.write_text(finding_toml(r, seed))
            written.append(path)
    for name, r in sorted(result["shrunk"].items()):
        path = out / f"shrunk-{seed}-{name}.toml"
        path.write_text(finding_toml(r, seed, name))
        written.append(path)
    return written


def report_draw(r: dict[str, Any], label: str) -> str:
    lines = [f"{label}: " + (f"broke {', '.join(r['failed'])}" if r["failed"] else "every invariant holds")]
    for name, v in r["verdicts"].items():
        w = v["worst"]
        worst = f"; worst {w['subject']}: {w['value']} (limit {w['limit']})" if w else ""
        lines.append(f"  {name:10} {v['checked']:5} judged, {len(v['violations'])} violations{worst}")
        for case in v["violations"][:8]:
            lines.append(f"    {case['subject']}: {case['value']} (limit {case['limit']}) {case['detail']}")
    return "\n".join(lines)


def report(result: dict[str, Any], written: list[Path]) -> str:
    lines = [f"{command(result['seed'], result['draws'])}:"]
    for name, row in result["summary"].items():
        w = row["worst"]
        worst = (
            f"worst draw {w['draw']}: {w['subject']}: {w['value']} (limit {w['limit']}) {w['detail']}"
            if w and (w["bad"] or name in GRADED)
            else ""
        )
        lines.append(
            f"  {name:10} {row['checked']:6} judged, {len(row['failing_draws']):4} failing draws, "
            f"{row['violations']:5} violations. {worst}"
        )
    for name, r in sorted(result["shrunk"].items()):
        lines += [
            "",
            f"--- {name}: draw {r['index']} shrunk in {r['runs']} runs ---",
            finding_toml(r, result["seed"], name),
        ]
    if written:
        lines.append(f"{len(written)} scenario files written: {written[0].parent}/")
    return "\n".join(lines)
