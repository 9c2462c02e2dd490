"""``REPORT.md`` for one results directory: every experiment's numbers next to the paper's shapes.

    .venv/bin/python -m bench.report results/<timestamp>/

Reads every ``<dir>/*/<id>.json`` of schema ``mrc-experiment/1`` (bench/experiments) and
the micro-benchmarks' ``summary.json``, and writes ``<dir>/REPORT.md``: one table row per
measured number with the paper's shape it tests and whether the shape holds, then per
experiment its plots and caveats, then a plain list of where the emulation does not
reproduce a shape and why. Nothing here measures; it only reads JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench import evidence, provenance
from topologies.fidelity.report import cell as fidelity_cell
from topologies.fidelity.report import figures_line

SCHEMA = "mrc-experiment/1"

# What the emulation cannot show however the numbers come out (said once, in every report).
EMULATION_LIMITS = [
    "Absolute numbers are not comparable with the paper: the host agents are Python (about 200 Mbit/s, "
    "20k packets/s per transfer), links are htb-limited veths, timers are scaled to millisecond RTTs "
    "(base RTT 10 ms), so 'tens of microseconds' become tens of milliseconds.",
    "The Linux SRv6 target marks ECN and trims in an eBPF program per switch port in front of HTB, but "
    "has no propagation delay (no netem): RTTs are well under a millisecond, so queues of tens of "
    "packets look like loss to the reordering detector, and E9 gives its slowed ports low thresholds.",
    "Single-path connections use one NIC port (one plane), as a single-path RoCE QP does, so on a clean "
    "fabric they get 1/planes of MRC's bandwidth; completion ratios are against each mode's own clean run.",
    "The machine's 2 CPU cores are shared by all agents, switches and other work: repeated runs vary; "
    "clean references are the best of two runs in the full suite. Each run is judged by the fidelity "
    "monitor (docs/testbed.md, 'Fidelity'); a run it did not pass is no evidence, and a cell with fewer "
    "than three passed runs says 'not faithful here' with the monitor's reason.",
]


def load(results: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every experiment record under ``results`` (``<id>/<target>/run<k>/<id>.json``, or the
    flat ``<id>/<id>.json`` a single experiment writes), and the benchmarks' summary."""
    experiments = []
    for path in sorted(results.rglob("e*.json")):
        if "runs" in path.relative_to(results).parts:  # testbed run directories kept for logs
            continue
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("schema") == SCHEMA:
            data["_dir"] = str(path.parent.relative_to(results)) if path.parent != results else "."
            experiments.append(data)
    experiments.sort(
        key=lambda d: (int(str(d.get("experiment", "e0"))[1:] or 0), str(d.get("target")), d["_dir"])
    )
    try:
        summary = json.loads((results / "summary.json").read_text())
    except (OSError, ValueError):
        summary = {}
    return experiments, summary


def provenance_lines(results: Path) -> list[str]:
    prov = provenance.read(results)
    if prov is None:
        return ["Provenance: none recorded (this directory was not written by `make bench`)."]
    m = prov.get("machine", {})
    return [
        f"- commit: `{prov.get('commit')}`",
        f"- machine: {m.get('hostname')}, {m.get('os')}, kernel {m.get('kernel')}, {m.get('cpu')}, "
        f"{m.get('cores')} cores, {m.get('memory_gib')} GiB, Python {m.get('python')}",
        f"- live data planes: {', '.join(prov.get('live_data_planes', []))}; "
        f"{prov.get('live_runs')} runs each, agent seeds {prov.get('live_seeds')}",
        f"- command: `{prov.get('command')}`; started {prov.get('started_at')}",
        *(  # bench.merge: one line per directory the table was assembled from
            f"  - from `{src.get('dir')}`: commit `{src.get('commit')}`, `{src.get('command')}`, "
            f"started {src.get('started_at')}"
            if src.get("commit")
            else f"  - from `{src.get('dir')}`: no provenance.json"
            for src in prov.get("merged_from", [])
        ),
    ]


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit in ("packets",) or abs(value) >= 100:
        return f"{value:.0f} {unit}".strip()
    return f"{value:.3g} {unit}".strip()


def verdict(holds: bool | None) -> str:
    return {True: "yes", False: "**no**", None: "(context)"}[holds]


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def calibration_lines(results: Path) -> list[str]:
    """The link rates calibration found here (``calibrate/calibration.json``), if it ran."""
    try:
        data = json.loads((results / "calibrate" / "calibration.json").read_text())
    except (OSError, ValueError):
        return []
    lines = [
        "## Link-rate calibration on this machine",
        "",
        "The highest per-link rate at which a fabric under one MRC transfer stayed faithful "
        "(docs/testbed.md, 'Fidelity'); the live experiments ran at the cached rate.",
        "",
        "| data plane / shape | cached Mbit/s | highest faithful | steps | seconds | CPU at that rate |",
        "|---|---|---|---|---|---|",
    ]
    for e in data.get("entries", []):
        procs = sorted(e.get("processes_at_rate", {}).items(), key=lambda kv: -kv[1])[:4]
        lines.append(
            f"| {e.get('key')} | {e.get('rate_mbit_s') or 'none found'} | {e.get('highest_faithful_mbit_s')} "
            f"| {len(e.get('steps', []))} | {e.get('seconds', 0):.0f} "
            f"| {', '.join(f'{k} {v:.2f}' for k, v in procs)} |"
        )
    return [*lines, "", "![calibration](calibrate/calibration.png)", ""]


def _emulation_says(e: dict[str, Any]) -> str:
    """Whose finding a shape that did not hold is: the emulation's (the run was not faithful)
    or the transport's (it was)."""
    v = e.get("fidelity")
    if not v:
        return ""
    if v.get("faithful"):
        return "The run was faithful: a transport finding. "
    return f"The emulation did not keep up ({fidelity_cell(v)}): no evidence about MRC. "


def _head(results: Path, experiments: list[dict[str, Any]]) -> list[str]:
    """The title, the run's provenance and the evidence table."""
    quick = any(e.get("quick") for e in experiments)
    targets = sorted({str(e["target"]) for e in experiments if e.get("target")})
    return [
        f"# MRC testbed: the paper's results in shape — `{results.name}`",
        "",
        f"{'QUICK (short) run' if quick else 'Full run'}; data plane: {', '.join(targets) or 'none ran'}. "
        "Generated by `bench/report.py` from the JSON next to this file; the paper's shapes are quoted from "
        "`docs/mrc-facts.md` ('Results the testbed reproduces in shape'). "
        "docs/experiments.md explains each experiment.",
        "",
        *provenance_lines(results),
        "",
        "## Evidence: each published result, in simulation and on the live fabric",
        "",
        "One row per result of the paper (docs/mrc-facts.md); each cell is read from this directory's JSON "
        "(bench/evidence.py says which scenario and experiment stand for which result). Simulator: median "
        "[95 % bootstrap interval] over seeds, judged on the interval. Live: median (min-max) over runs "
        f"with agent seeds 1..N; holds only when every run holds, and at least {evidence.MIN_RUNS} ran; a "
        "comparison whose runs fall on both sides of parity ties. Each row's figure plots every value "
        "against its bar.",
        "",
        *evidence.table(results, experiments),
        "",
    ]


def _numbers(experiments: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Every finding next to the shape it tests, and the gaps: what did not run or did not hold."""
    lines = [
        "## Every number next to the shape it tests",
        "",
        "| exp | run | measured | mode | value | paper's shape | expected here | shape holds | emulation |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    gaps: list[str] = []
    for e in experiments:
        eid = e["experiment"]
        if e.get("status") != "ok":
            lines.append(
                f"| {eid} | {e['_dir']} | {cell(e['title'])} | | {e.get('status')} "
                f"| {cell(e.get('paper_shape', ''))} | | {cell(e.get('reason', ''))} | |"
            )
            gaps.append(f"**{eid}** ({e['title']}) {e.get('status')}: {e.get('reason', '')}")
            continue
        emulation = cell(fidelity_cell(e.get("fidelity")))
        for f in e.get("findings", []):
            note = f" ({f['note']})" if f.get("note") else ""
            paper = f.get("paper") or ""
            lines.append(
                f"| {eid} | {e['_dir']} | {cell(f['metric'])} | {f.get('mode', '')} "
                f"| {fmt_value(f.get('value'), f.get('unit', ''))}"
                f"{cell(note)} | {cell(paper)} | {cell(f.get('expect', ''))} | {verdict(f.get('holds'))} "
                f"| {emulation} |"
            )
            if f.get("holds") is False:
                why = "; ".join(e.get("caveats", [])) or "see the experiment's section"
                gaps.append(
                    f"**{eid}** ({e['_dir']}) {f['metric']} ({f.get('mode', '')}): measured "
                    f"{fmt_value(f.get('value'), f.get('unit', ''))}, expected {f.get('expect', '')} "
                    f"(paper: {paper or e.get('paper_shape', '')}). {_emulation_says(e)}Context: {why}"
                )
    return lines, gaps


def _sections(experiments: list[dict[str, Any]]) -> list[str]:
    """One section per experiment: its shape, status, fabric, fidelity, caveats and plots."""
    lines = ["", "## Experiments", ""]
    for e in experiments:
        lines.append(f"### {e['experiment']} ({e['_dir']}): {e['title']}")
        lines.append("")
        lines.append(f"- paper: {e.get('paper_shape', '')}")
        lines.append(
            f"- status: {e.get('status')}{' — ' + e['reason'] if e.get('reason') else ''}; "
            f"{e.get('seconds', 0):.0f} s; seed {e.get('seed')}; target {e.get('target') or '-'}"
        )
        if e.get("fabric"):
            lines.append(f"- fabric: {json.dumps(e['fabric'])}")
        if e.get("fidelity"):
            lines.append(f"- fidelity: {fidelity_cell(e['fidelity'])}")
            for fab in e["fidelity"].get("fabrics", []):
                lines.append(f"  - {fab.get('shape', '')}: {figures_line(fab)}")
        for c in e.get("caveats", []):
            lines.append(f"- caveat: {c}")
        for png in e.get("plots", []):
            lines.append(f"\n![{e['experiment']}]({e['_dir']}/{png})")
        lines.append("")
    return lines


def _gap_lines(gaps: list[str]) -> list[str]:
    """Where the emulation does not reproduce a shape, and the limits that hold for every run."""
    lines = ["## Where the emulation does not reproduce a shape, and why", ""]
    lines += [f"- {g}" for g in gaps] or [
        "- Every live experiment checked above holds in this run (the simulator's shapes are "
        "judged in their own table below)."
    ]
    lines += ["", "Limits of the emulation that hold for every run:", ""]
    lines += [f"- {limit}" for limit in EMULATION_LIMITS]
    return lines


def _simulator_lines(results: Path) -> list[str]:
    """bench/sim_shapes' table and sweep, and mrc-sim's speed, where those stages ran."""
    lines: list[str] = []
    shapes = results / "sim-shapes" / "sim_shapes.md"
    if shapes.exists():  # bench/sim_shapes: the same shapes at production scale, in mrc-sim
        lines += ["", "## In the simulator at production shape (mrc-sim, bench/sim_shapes.py)", ""]
        lines += [shapes.read_text().rstrip(), "", "![sim shapes](sim-shapes/sim_shapes.png)"]
        lines += ["", "Per-seed spread of every figure:", "", "![per seed](sim-shapes/sim_shapes_seeds.png)"]
        try:
            sw = json.loads((results / "sim-shapes" / "sim_shapes.json").read_text())["sweep"]
            lines += [
                "",
                f"The sweep: {sw['points']} simulations ({sw['failed']} failed) on {sw['workers']} Dask "
                f"workers ({sw['scheduler']}), {sw['seconds']:.0f} s.",
            ]
        except (OSError, ValueError, KeyError):
            pass
    speed = results / "sim-speed" / "sim_speed.json"
    if speed.exists():
        try:
            sp = json.loads(speed.read_text())
            lines += [
                "",
                f"mrc-sim speed against {sp['base_commit']}: x{sp['speedup']:.2f} wall clock, "
                f"x{sp['speedup_cpu']:.2f} CPU time ({sp['workload']}).",
            ]
        except (ValueError, KeyError):
            pass
    return lines


def render(results: Path) -> str:
    experiments, summary = load(results)
    numbers, gaps = _numbers(experiments)
    lines = _head(results, experiments) + numbers + _sections(experiments)
    lines += calibration_lines(results)
    lines += _gap_lines(gaps)
    lines += _simulator_lines(results)
    if summary:
        lines += ["", "## Benchmarks run", "", "| name | status | seconds |", "|---|---|---|"]
        for name, s in summary.items():
            lines.append(f"| {name} | {s.get('status')} | {s.get('seconds', 0):.0f} |")
    return "\n".join(lines) + "\n"


def write_report(results: Path) -> Path:
    path = results / "REPORT.md"
    path.write_text(render(results))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report", description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a results directory (results/<timestamp>/)")
    args = ap.parse_args(argv)
    if not args.results.is_dir():
        print(f"results: {args.results} is not a directory", file=sys.stderr)
        return 2
    print(write_report(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
