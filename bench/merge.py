"""Merge several ``make bench`` results directories into one, with one ``REPORT.md``.

    .venv/bin/python -m bench.merge --out results/evidence results/e3-linux results/e3-bmv2 ...

Why: the live experiments share one lock with everyone else's live work on the machine, so a
full evidence table is run as many short holds, one experiment and data plane each
(``make bench ONLY=e3 TARGET=linux BENCH_ARGS='--out results/e3-linux'``), into separate
directories. This copies every directory's records into ``--out`` as ``make bench`` lays them
out (``<id>/<target>/run<k>/``, ``calibrate/``, ``sim-shapes/`` ...), merges their
``summary.json`` and calibration entries, records every source's provenance, then writes the
report (``bench.report``: the evidence table, ``evidence.json``, ``evidence/*.png``).

A record that two sources both hold (the same experiment, data plane and run) is refused
rather than silently picked; sources from different commits are allowed and named in the
provenance, since a rerun of one cell after an unrelated commit is how a table gets finished.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from bench import provenance
from bench.report import write_report

CALIBRATION = Path("calibrate") / "calibration.json"
MERGED_FILES = ("summary.json", provenance.FILE, "REPORT.md", "evidence.json")  # rebuilt, not copied
REBUILT_DIRS = ("evidence", "calibrate")  # written here from the merged data


class MergeError(RuntimeError):
    """Two sources hold the same record, or the destination is not empty."""


def _copy_records(src: Path, out: Path, origin: dict[Path, Path]) -> None:
    """Copy ``src``'s records into ``out`` file by file (not the files rebuilt from all of
    them); a file two sources both hold is an error, never a silent pick."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or rel.parts[0] in MERGED_FILES or rel.parts[0] in REBUILT_DIRS:
            continue
        target = out / rel
        if target in origin:
            raise MergeError(
                f"{rel} is in {origin[target]} and in {src}: "
                "a merged table takes each run from one directory (leave one out)"
            )
        origin[target] = src
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _calibration_entries(sources: list[Path]) -> list[dict[str, Any]]:
    """Every source's calibration entries, one per shape key (the later source wins)."""
    by_key: dict[str, dict[str, Any]] = {}
    for src in sources:
        try:
            data = json.loads((src / CALIBRATION).read_text())
        except (OSError, ValueError):
            continue
        for e in data.get("entries", []):
            by_key[str(e.get("key"))] = e
    return list(by_key.values())


def merged_provenance(sources: list[Path]) -> dict[str, Any]:
    """One provenance for the merged directory: every source's, and what they share."""
    provs = [(src, provenance.read(src) or {}) for src in sources]
    commits = sorted({str(p["commit"]) for _, p in provs if p.get("commit")}) or ["unknown"]
    first = next((p for _, p in provs if p), {})
    planes = sorted({t for _, p in provs for t in p.get("live_data_planes", [])})
    runs = max((int(p.get("live_runs", 0)) for _, p in provs), default=0)
    started = sorted(str(p["started_at"]) for _, p in provs if p.get("started_at"))
    return {
        "commit": commits[0] if len(commits) == 1 else "several: " + ", ".join(commits),
        "machine": first.get("machine", {}),
        "live_data_planes": planes,
        "live_runs": runs,
        "live_seeds": list(range(1, runs + 1)),
        "quick": any(p.get("quick") for _, p in provs),
        "command": "python -m bench.merge " + " ".join(str(s) for s in sources),
        "started_at": started[0] if started else "",
        "merged_from": [
            {
                "dir": str(src),
                "commit": p.get("commit"),
                "command": p.get("command"),
                "started_at": p.get("started_at"),
            }
            if p
            else {"dir": str(src)}  # e.g. a calibration run by hand: no provenance.json
            for src, p in provs
        ],
    }


def merge(sources: list[Path], out: Path) -> Path:
    """Merge ``sources`` into the new directory ``out``; returns the written REPORT.md."""
    if out.exists() and any(out.iterdir()):
        raise MergeError(f"{out} is not empty: merge into a new directory")
    missing = [str(s) for s in sources if not s.is_dir()]
    if missing:
        raise MergeError(f"not a directory: {', '.join(missing)}")
    out.mkdir(parents=True, exist_ok=True)
    origin: dict[Path, Path] = {}
    summary: dict[str, Any] = {}
    for src in sources:
        _copy_records(src, out, origin)
        try:
            said = json.loads((src / "summary.json").read_text())
        except (OSError, ValueError):
            said = {}
        for name, s in said.items():
            summary[name] = _merge_status(summary.get(name), s)
    (out / provenance.FILE).write_text(json.dumps(merged_provenance(sources), indent=1) + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    entries = _calibration_entries(sources)
    if entries:
        (out / "calibrate").mkdir(exist_ok=True)
        (out / CALIBRATION).write_text(json.dumps({"entries": entries}, indent=1) + "\n")
        from topologies.fidelity.calibrate import plot

        plot(entries, out / "calibrate" / "calibration.png")
    return write_report(out)


def _merge_status(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A benchmark run in several sources (one data plane each): every status, summed seconds."""
    if old is None:
        return dict(new)
    statuses = sorted(set(str(old.get("status", "")).split(",")) | set(str(new.get("status", "")).split(",")))
    return {
        **old,
        "status": ",".join(s for s in statuses if s),
        "seconds": float(old.get("seconds", 0)) + float(new.get("seconds", 0)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.merge", description=__doc__.splitlines()[0])
    ap.add_argument("sources", type=Path, nargs="+", help="results directories written by make bench")
    ap.add_argument("--out", type=Path, required=True, help="a new directory for the merged results")
    args = ap.parse_args(argv)
    try:
        report = merge(args.sources, args.out)
    except MergeError as exc:
        print(f"bench.merge: {exc}", file=sys.stderr)
        return 2
    print(f"merged {len(args.sources)} directories into {args.out} (report: {report})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
