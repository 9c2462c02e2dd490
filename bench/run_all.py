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

from bench import provenance
from bench.experiments import EXPERIMENTS


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    quick_args: tuple[str, ...]
    full_args: tuple[str, ...] = ()
    needs_root: bool = False
    takes_target: bool = False  # live-testbed experiments: --target and --seed are passed on
    repeat: bool = True  # a live experiment: run --runs times per data plane (seeds 1..N)
    targets: tuple[str, ...] = ("linux", "bmv2")  # the data planes it runs on
    status_json: str = ""  # a JSON it writes whose "status" says whether it ran or was skipped
    calibrates: bool = False  # link-rate calibration: --target is the data planes the live ones use


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
    # NSCC: 2, 4, 8 equal flows into one host, 1 and 2 planes, together or staggered: Jain
    Benchmark("sim-fair", "bench.sim_fair", ("--seeds", "3"), ("--seeds", "10")),
    # the same with receiver credits (nscc+rccc), and two RTT classes (4.7, 9.4 us) with each
    Benchmark(
        "sim-fair-credits",
        "bench.sim_fair",
        ("--seeds", "3", "--cc", "nscc+rccc"),
        ("--seeds", "10", "--cc", "nscc+rccc"),
    ),
    Benchmark("sim-fair-rtts", "bench.sim_fair", ("--seeds", "3", "--rtts"), ("--seeds", "10", "--rtts")),
    Benchmark(
        "sim-fair-rtts-credits",
        "bench.sim_fair",
        ("--seeds", "3", "--rtts", "--cc", "nscc+rccc"),
        ("--seeds", "10", "--rtts", "--cc", "nscc+rccc"),
    ),
    # gray failures: a slow plane, a flapping link, stale knowledge, loss under a queue (seeds)
    Benchmark("sim-gray", "bench.sim_gray", ("--quick",)),
    # the paper's shapes at production scale in the simulator (8 planes x 100G, 128-256 EVs)
    Benchmark("sim-shapes", "bench.sim_shapes", ("--quick",)),
    # mrc-sim side by side with UEC's htsim_uec on one fabric (skipped where htsim is not found)
    Benchmark("htsim-xcheck", "bench.htsim_xcheck", ("--quick",), status_json="htsim_xcheck.json"),
    # a fault-free all-to-all beside htsim_uec over seeds: timeouts, trims, resends
    Benchmark("htsim-a2a", "bench.htsim_a2a", ("--quick",), ("--seeds", "10")),
    # simulated packets per second against a git worktree of the base commit
    Benchmark("sim-speed", "bench.sim_speed", ("--quick",)),
    # the highest faithful link rate per data plane and shape here (topologies.fidelity.calibrate),
    # cached in runs/calibration.json for the live experiments after it: JSON + PNG
    Benchmark(
        "calibrate",
        "topologies.fidelity.calibrate",
        ("--planes", "4"),
        ("--planes", "2", "--planes", "4"),
        needs_root=True,
        calibrates=True,
    ),
    # the paper's results in shape, on the live testbed (bench/experiments, docs/experiments.md);
    # each writes its JSON even when it is skipped, so they need no root check here
    *(
        Benchmark(e.id, e.module, ("--quick",), takes_target=True, repeat=e.claim, targets=e.targets)
        for e in EXPERIMENTS
    ),
]
RUNS = 3  # a live cell's verdict needs the spread of at least three runs (docs/results.md)


LIVE_TARGETS = ("linux", "bmv2")


def live_targets(asked: str) -> tuple[list[str], dict[str, str]]:
    """The data planes the live experiments run on, and why any is left out.

    ``both`` (the default) is the Linux target and BMv2 where BMv2 and the compiled program
    are found; a data plane that is missing still gets one run of each experiment, which
    records the skip and its reason, so its column says why it is empty."""
    from topologies.target import bmv2_missing

    if asked == "auto":
        from topologies.target import choose_target

        return [choose_target("auto").target.value], {}
    if asked != "both":
        return [asked], {}
    missing = bmv2_missing()
    return list(LIVE_TARGETS), ({"bmv2": "; ".join(missing)} if missing else {})


def host_blocked(targets: list[str], only: set[str]) -> str:
    """Why no live experiment can run on this machine ("" when they can): the pre-flight's
    findings (topologies.preflight), printed once for all of them."""
    from mrc_fabric.topology import Target
    from topologies.preflight import PreflightError, check

    if not any(b.needs_root and (not only or b.name in only) for b in BENCHMARKS):
        return ""
    missing = [m for t in dict.fromkeys(targets) if t in ("linux", "bmv2") for m in check(Target(t))]
    if not missing:
        return ""
    print(f"make bench: {PreflightError(list(dict.fromkeys(missing)))}", file=sys.stderr, flush=True)
    return "the machine lacks what a live fabric needs (the pre-flight above)"


def load(module: str) -> Any:
    """A benchmark's module (its ``main(argv)`` is what runs)."""
    return importlib.import_module(module)


def run_one(bench: Benchmark, out: Path, extra: tuple[str, ...]) -> int:
    print(f"== {bench.name} -> {out}", flush=True)
    try:
        rc: int = load(bench.module).main(["--out", str(out), *extra])
    except Exception as exc:  # report and go on with the others
        print(f"   {bench.name} failed: {exc!r}", file=sys.stderr)
        rc = 1
    return rc


def said_status(bench: Benchmark, out: Path, rc: int) -> str:
    status = "ok" if rc == 0 else "failed"
    said = bench.status_json or (f"{bench.name}.json" if bench.takes_target else "")
    if said and rc == 0:  # it says itself whether it ran or was skipped
        try:
            status = str(json.loads((out / said).read_text())["status"])
        except (OSError, ValueError, KeyError):
            status = "failed"
    return status


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="make bench", description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="results directory (default results/<timestamp>)")
    ap.add_argument("--quick", action="store_true", help="short versions of every benchmark")
    ap.add_argument(
        "--only", action="append", default=[], help="run only these benchmarks (by name; repeat or a,b)"
    )
    ap.add_argument(
        "--target",
        choices=("both", "auto", "linux", "bmv2"),
        default="both",
        help="data plane of the live experiments (both: Linux and, where installed, BMv2)",
    )
    ap.add_argument(
        "--runs",
        type=int,
        default=RUNS,
        help=f"runs of each live experiment per data plane, seeds 1..N (default {RUNS})",
    )
    ap.add_argument("--link-rate", help="Mbit/s per link of every live experiment (0: unlimited)")
    ap.add_argument(
        "--keep-runs",
        action="store_true",
        help="keep every live experiment's testbed run directories (agent logs) under its results",
    )
    return ap


def _only(ap: argparse.ArgumentParser, args: argparse.Namespace) -> set[str]:
    """The benchmarks ``--only`` names (none: all); an unknown name or ``--runs`` < 1 is an error."""
    only = {name for item in args.only for name in item.split(",") if name}
    known = {b.name for b in BENCHMARKS}
    if only - known:
        ap.error(
            f"--only: unknown {', '.join(sorted(only - known))} "
            f"(known: {', '.join(b.name for b in BENCHMARKS)})"
        )
    if args.runs < 1:
        ap.error(f"--runs: at least 1, got {args.runs}")
    return only


def _run_live(
    bench: Benchmark,
    args: argparse.Namespace,
    out: Path,
    extra: tuple[str, ...],
    targets: list[str],
    missing: dict[str, str],
) -> tuple[str, int]:
    """A live experiment on each data plane, ``--runs`` times (seeds 1..N; once where its data
    plane is missing): the statuses it said, and how many runs failed."""
    statuses = []
    failed = 0
    for target in [t for t in targets if t in bench.targets]:
        runs = 1 if target in missing or not bench.repeat else args.runs
        for k in range(1, runs + 1):
            where = out / bench.name / target / f"run{k}"
            rate = ("--link-rate", args.link_rate) if args.link_rate is not None else ()
            keep = ("--keep-runs",) if args.keep_runs else ()
            rc = run_one(bench, where, (*extra, "--target", target, "--seed", str(k), *rate, *keep))
            failed += rc != 0
            statuses.append(said_status(bench, where, rc))
    return ",".join(sorted(set(statuses))) or "not run", failed


def _write_summary(out: Path, summary: dict[str, dict[str, Any]]) -> None:
    """``summary.json``: a run that adds to its commit's directory keeps what earlier runs recorded."""
    try:
        earlier = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        earlier = {}
    (out / "summary.json").write_text(json.dumps({**earlier, **summary}, indent=2))


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    only = _only(ap, args)
    out = args.out or Path("results") / time.strftime("%Y%m%d-%H%M%S")
    targets, missing = live_targets(args.target)
    try:
        prov = provenance.claim(out, provenance.collect(targets, args.runs, argv, args.quick))
    except provenance.ProvenanceError as exc:
        print(f"make bench: {exc}", file=sys.stderr)
        return 2
    print(f"results in {out}: commit {prov['commit']}, live data planes {', '.join(targets)}", flush=True)
    summary: dict[str, dict[str, Any]] = {}
    failed = 0
    live_blocked = "needs root" if os.geteuid() != 0 else host_blocked(targets, only)
    for bench in BENCHMARKS:
        if only and bench.name not in only:
            continue
        if bench.needs_root and live_blocked:
            print(f"== {bench.name}: skipped ({live_blocked})")
            summary[bench.name] = {"status": "skipped", "reason": live_blocked}
            continue
        started = time.monotonic()
        extra = bench.quick_args if args.quick else bench.full_args
        if bench.calibrates:
            extra = (*extra, "--target", targets[0] if len(targets) == 1 else "both")
        if not bench.takes_target:
            rc = run_one(bench, out / bench.name, extra)
            failed += rc != 0
            summary[bench.name] = {"status": said_status(bench, out / bench.name, rc)}
        else:
            status, live_failed = _run_live(bench, args, out, extra, targets, missing)
            failed += live_failed
            summary[bench.name] = {"status": status}
        summary[bench.name]["seconds"] = time.monotonic() - started
    _write_summary(out, summary)
    from bench.report import write_report

    report = write_report(out)
    print(f"results in {out} (report: {report})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
