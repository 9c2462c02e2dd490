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


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    quick_args: tuple[str, ...]
    full_args: tuple[str, ...] = ()
    needs_root: bool = False


BENCHMARKS = [
    Benchmark("codec", "bench.bench_codec", ("--quick",)),
    Benchmark("core", "bench.bench_core", ("--quick",)),
    Benchmark("agent", "bench.bench_agent", ("--quick",), needs_root=True),
    Benchmark("sim-figures", "mrc_host.sim.figures", ("--size-mib", "2", "--seeds", "1", "--no-sensitivity")),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make bench", description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="results directory (default results/<timestamp>)")
    ap.add_argument("--quick", action="store_true", help="short versions of every benchmark")
    ap.add_argument("--only", action="append", default=[], help="run only these benchmarks (by name)")
    args = ap.parse_args(argv)
    out = args.out or Path("results") / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict] = {}
    failed = 0
    for bench in BENCHMARKS:
        if args.only and bench.name not in args.only:
            continue
        if bench.needs_root and os.geteuid() != 0:
            print(f"== {bench.name}: skipped (needs root)")
            summary[bench.name] = {"status": "skipped", "reason": "needs root"}
            continue
        print(f"== {bench.name}", flush=True)
        started = time.monotonic()
        extra = bench.quick_args if args.quick else bench.full_args
        try:
            rc = importlib.import_module(bench.module).main(["--out", str(out / bench.name), *extra])
        except Exception as exc:  # report and go on with the others
            print(f"   {bench.name} failed: {exc!r}", file=sys.stderr)
            rc = 1
        failed += rc != 0
        summary[bench.name] = {"status": "ok" if rc == 0 else "failed", "seconds": time.monotonic() - started}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    print(f"results in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
