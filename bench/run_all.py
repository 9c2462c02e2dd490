"""``make bench``: run every benchmark into one results directory.

Each benchmark is a module with ``main(argv) -> int`` that takes ``--out DIR`` (and
``--quick`` where it has a short version) and writes JSON plus a PNG there. This runner
only sequences them, so a benchmark stays runnable on its own.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.experiments import EXPERIMENTS


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    quick_args: tuple[str, ...]
    full_args: tuple[str, ...] = ()
    needs_root: bool = False
    takes_target: bool = False  # live-testbed experiments: --target is passed on
    status_json: str = ""  # a JSON it writes whose "status" says whether it ran or was skipped


BENCHMARKS = [
    Benchmark("codec", "bench.bench_codec", ("--quick",)),
    Benchmark("core", "bench.bench_core", ("--quick",)),
    Benchmark("agent", "bench.bench_agent", ("--quick",), needs_root=True),
    # what the live web view (mrc view) costs the fabric in CPU, view off and on alternately
    Benchmark("view", "bench.bench_view", ("--rounds", "3", "--seconds", "5"), needs_root=True),
    Benchmark("sim-figures", "mrc_host.sim.figures", ("--size-mib", "2", "--seeds", "1", "--no-sensitivity")),
    Benchmark("sim-transport", "bench.sim_transport", ("--quick",)),
    # faults that add up, paths that come back, dead reverse EVs
    Benchmark("sim-faults", "bench.sim_faults", ("--quick",)),
    # NSCC: jittery fabrics, two RTTs into one host, the 8->1 incast, over 5 seeds
    Benchmark("sim-nscc", "bench.sim_nscc", ("--seeds", "5")),
    # the paper's shapes at production scale in the simulator (8 planes x 100G, 128-256 EVs)
    Benchmark("sim-shapes", "bench.sim_shapes", ("--quick",)),
    # mrc-sim side by side with UEC's htsim_uec on one fabric (skipped where htsim is not found)
    Benchmark("htsim-xcheck", "bench.htsim_xcheck", ("--quick",), status_json="htsim_xcheck.json"),
    # simulated packets per second against a git worktree of the base commit
    Benchmark("sim-speed", "bench.sim_speed", ("--quick",)),
    # the paper's results in shape, on the live testbed (bench/experiments, docs/experiments.md);
    # each writes its JSON even when it is skipped, so they need no root check here
    *(Benchmark(e.id, e.module, ("--quick",), takes_target=True) for e in EXPERIMENTS),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make bench", description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="results directory (default results/<timestamp>)")
    ap.add_argument("--quick", action="store_true", help="short versions of every benchmark")
    ap.add_argument(
        "--only", action="append", default=[], help="run only these benchmarks (by name; repeat or a,b)"
    )
    ap.add_argument(
        "--target", choices=("auto", "linux", "bmv2"), default="linux", help="data plane of experiments"
    )
    args = ap.parse_args(argv)
    only = {name for item in args.only for name in item.split(",") if name}
    known = {b.name for b in BENCHMARKS}
    if only - known:
        ap.error(
            f"--only: unknown {', '.join(sorted(only - known))} "
            f"(known: {', '.join(b.name for b in BENCHMARKS)})"
        )
    out = args.out or Path("results") / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict[str, Any]] = {}
    failed = 0
    for bench in BENCHMARKS:
        if only and bench.name not in only:
            continue
        if bench.needs_root and os.geteuid() != 0:
            print(f"== {bench.name}: skipped (needs root)")
            summary[bench.name] = {"status": "skipped", "reason": "needs root"}
            continue
        print(f"== {bench.name}", flush=True)
        started = time.monotonic()
        extra = bench.quick_args if args.quick else bench.full_args
        if bench.takes_target:
            extra = (*extra, "--target", args.target)
        try:
            rc = importlib.import_module(bench.module).main(["--out", str(out / bench.name), *extra])
        except Exception as exc:  # report and go on with the others
            print(f"   {bench.name} failed: {exc!r}", file=sys.stderr)
            rc = 1
        failed += rc != 0
        status = "ok" if rc == 0 else "failed"
        said = bench.status_json or (f"{bench.name}.json" if bench.takes_target else "")
        if said and rc == 0:  # it says itself whether it ran or was skipped
            try:
                status = json.loads((out / bench.name / said).read_text())["status"]
            except (OSError, ValueError, KeyError):
                status = "failed"
        summary[bench.name] = {"status": status, "seconds": time.monotonic() - started}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    from bench.report import write_report

    report = write_report(out)
    print(f"results in {out} (report: {report})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
