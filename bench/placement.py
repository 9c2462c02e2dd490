"""Which CPU placement keeps a live fabric faithful longest: calibration under each policy.

    sudo .venv/bin/python -m bench.placement --out results/placement --target bmv2 --rounds 2

For each round and each policy of ``topologies.placement`` (in turn, so the machine's noise
falls on all of them alike) it runs the link-rate calibration of one data plane and shape
(``topologies.fidelity.calibrate``: one MRC transfer per step, rate doubled while faithful,
then narrowed) and records the highest faithful rate. Writes ``placement.json`` (every step of
every calibration) and ``placement.png`` (each policy's rates over the rounds). Without the
BMv2 build without debug logging it says so; ``--debug-build`` adds the default policy on the
debug build, for the build's own share. Not part of ``make bench`` (about 1.5 min a calibration).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any


def measure(target: str, policy: str, planes: int, debug_build: bool) -> dict[str, Any]:
    from topologies.bmv2_build import BUILD_ENV
    from topologies.fidelity.calibrate import Shape, highest_faithful, search

    old = os.environ.get(BUILD_ENV)
    if debug_build:
        os.environ[BUILD_ENV] = "debug"
    try:
        started = time.monotonic()
        steps = search(Shape(target, planes, placement=policy), say=print)
    finally:
        if debug_build and old is None:
            os.environ.pop(BUILD_ENV, None)
        elif debug_build and old is not None:
            os.environ[BUILD_ENV] = old
    return {
        "policy": policy + (" (debug build)" if debug_build else ""),
        "highest_faithful_mbit_s": highest_faithful(steps),
        "seconds": round(time.monotonic() - started, 1),
        "steps": [asdict(s) for s in steps],
    }


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(dict.fromkeys(r["policy"] for r in rows))
    fig, ax = plt.subplots(figsize=(1.6 * len(policies) + 2, 3.4))
    for i, p in enumerate(policies):
        vals = [r["highest_faithful_mbit_s"] or 0 for r in rows if r["policy"] == p]
        ax.scatter([i] * len(vals), vals, color="#1f77b4", s=24)
        ax.hlines(statistics.median(vals), i - 0.25, i + 0.25, color="k", lw=1)
    ax.set_xticks(range(len(policies)), policies, rotation=20, fontsize=7)
    ax.set_ylabel("highest faithful link rate (Mbit/s)", fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from topologies.placement import DEFAULT, POLICIES

    ap = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "placement")
    ap.add_argument("--target", choices=("bmv2", "linux"), default="bmv2")
    ap.add_argument("--planes", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--policy", action="append", choices=sorted(POLICIES), help="only these (repeat)")
    ap.add_argument("--debug-build", action="store_true", help=f"also {DEFAULT} on BMv2's debug build")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench.placement: needs root", file=sys.stderr)
        return 2
    from mininet.log import setLogLevel

    setLogLevel("critical")
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for k in range(1, args.rounds + 1):
        plan = [(p, False) for p in (args.policy or list(POLICIES))]
        if args.debug_build and args.target == "bmv2":
            plan.append((DEFAULT, True))
        for policy, debug in plan:
            print(f"== round {k}: {policy}{' (debug build)' if debug else ''}", flush=True)
            rows.append({"round": k, **measure(args.target, policy, args.planes, debug)})
    title = f"{args.target}, {args.planes} planes x 2 T0 x 2 T1: highest faithful rate per placement"
    (args.out / "placement.json").write_text(json.dumps({"title": title, "rows": rows}, indent=1) + "\n")
    plot(rows, args.out / "placement.png", title)
    for p in dict.fromkeys(r["policy"] for r in rows):
        vals = [r["highest_faithful_mbit_s"] for r in rows if r["policy"] == p]
        print(f"{p:32} {vals}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
