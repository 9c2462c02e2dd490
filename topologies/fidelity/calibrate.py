"""``mrc-testbed calibrate``: the highest link rate a fabric stays faithful at on this machine.

For one data plane and fabric shape it brings a fabric up at a link rate, sends one MRC
transfer across it (from the first host under the first T0 to the last host under the last
T0, spraying every plane: the demo's and the fault experiments' load) and asks the fidelity
monitor for its verdict; it doubles the rate while the verdict is *faithful*, then narrows
the step between the last faithful rate and the first that was not (two halvings, so within
about 20 %). A step that was not faithful while other work loaded the machine is run again
once. The rate it caches is :data:`MARGIN` of the highest faithful one, so a run at it keeps
some headroom for the machine's noise, in ``<runs>/calibration.json`` (``rates.py``), with
every step's verdict, goodput and per-process CPU; ``--out DIR`` also writes
``calibration.json`` and ``calibration.png`` there (``make bench``). Fabric prefix ``cal``.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from topologies.fidelity.rates import CACHE_FILE, machine, shape_key, write_entry

START_MBIT = 10.0
MAX_MBIT = 640.0
MIN_MBIT = 1.25
NARROWING = 2  # geometric halvings of the interval between faithful and not
MARGIN = 0.8  # the cached rate is this share of the highest faithful one
STEP_SECONDS = 6.0  # a step's transfer lasts about this long at full rate
MIN_STEP_BYTES = 4 << 20
MAX_STEP_BYTES = 256 << 20
WARMUP_BYTES = 1 << 20
NOISY_CORES = 0.5  # a step that failed while other work used this much CPU is tried again


@dataclass
class Step:
    rate_mbit_s: float
    faithful: bool
    verdict: str
    goodput_mbit_s: float
    transfer_ok: bool
    seconds: float
    outside_cores: float | None
    processes: dict[str, float] = field(default_factory=dict)  # label -> median cores


@dataclass
class Shape:
    target: str
    planes: int = 2
    t0: int = 2
    t1: int = 2
    hosts_per_t0: int = 2
    placement: str | None = None  # topologies.placement policy (None: the default)

    @property
    def key(self) -> str:
        return shape_key(self.target, self.planes, self.t0, self.t1, self.hosts_per_t0)


def run_step(shape: Shape, rate: float, prefix: str = "cal") -> Step:
    """One fabric at ``rate``, one transfer over every plane, the monitor's verdict on it."""
    from topologies.testbed import Testbed, TestbedConfig

    runs = Path(tempfile.mkdtemp(prefix="mrc-calibrate-"))
    cfg = TestbedConfig(
        planes=shape.planes,
        t0=shape.t0,
        t1=shape.t1,
        hosts_per_t0=shape.hosts_per_t0,
        link_rate=rate,
        target=shape.target,
        prefix=prefix,
        runs_root=runs,
        latest=False,
        pcap=False,
        keep_runs=None,
        placement=shape.placement,
    )
    size = int(min(MAX_STEP_BYTES, max(MIN_STEP_BYTES, shape.planes * rate * 1e6 / 8 * STEP_SECONDS)))
    started = time.monotonic()
    try:
        with Testbed(cfg, say=lambda _m: None) as tb:
            topo = tb.topology
            assert topo is not None and tb.fidelity is not None
            src = next(h.name for h in topo.hosts if h.t0_index == 0)
            dst = [h.name for h in topo.hosts if h.t0_index == topo.t0_per_plane - 1][-1]
            tb.send(src, dst, WARMUP_BYTES)  # opens the connection: the step measures steady state
            mark = tb.fidelity.mark()
            summary = tb.send(src, dst, size)
            verdict = tb.fidelity.verdict(since=mark)
    finally:
        shutil.rmtree(runs, ignore_errors=True)
    ok = bool(summary.get("ok"))
    procs = {k: float(v["cpu_median"]) for k, v in verdict.figures["processes"].items()}
    return Step(
        rate,
        verdict.faithful and ok,
        verdict.text if ok else f"transfer failed ({summary.get('error', '?')}); {verdict.text}",
        float(summary.get("goodput_mbit_s") or 0.0),
        ok,
        round(time.monotonic() - started, 1),
        verdict.figures.get("outside_cores_median"),
        procs,
    )


def search(shape: Shape, say: Any = print, start: float = START_MBIT) -> list[Step]:
    """Every step of the search, in the order run (see the module docstring)."""
    steps: list[Step] = []

    def at(rate: float) -> bool:
        step = run_step(shape, rate)
        if not step.faithful and (step.outside_cores or 0) >= NOISY_CORES:
            say(
                f"  {rate:g} Mbit/s: not faithful while other work used {step.outside_cores:.1f} cores; again"
            )
            steps.append(step)
            step = run_step(shape, rate)
        steps.append(step)
        say(
            f"  {rate:g} Mbit/s: {step.verdict} "
            f"(goodput {step.goodput_mbit_s:.1f} Mbit/s, {step.seconds:.0f} s)"
        )
        return step.faithful

    lo, hi = 0.0, 0.0
    rate = start
    if at(rate):
        lo = rate
        while lo * 2 <= MAX_MBIT and at(lo * 2):
            lo *= 2
        hi = lo * 2 if lo * 2 <= MAX_MBIT else 0.0
    else:
        hi = rate
        while hi / 2 >= MIN_MBIT and not at(hi / 2):
            hi /= 2
        lo = hi / 2 if hi / 2 >= MIN_MBIT else 0.0
    for _ in range(NARROWING if lo and hi else 0):
        mid = round(math.sqrt(lo * hi), 1)
        if at(mid):
            lo = mid
        else:
            hi = mid
    return steps


def highest_faithful(steps: list[Step]) -> float | None:
    """The highest rate found faithful below every rate found not faithful (a rate that was
    faithful on a retry counts; one above a failure does not)."""
    failed = [s.rate_mbit_s for s in steps if not s.faithful and not _retried(steps, s)]
    ceiling = min(failed) if failed else math.inf
    good = [s.rate_mbit_s for s in steps if s.faithful and s.rate_mbit_s < ceiling]
    return max(good) if good else None


def _retried(steps: list[Step], step: Step) -> bool:
    return any(s is not step and s.rate_mbit_s == step.rate_mbit_s and s.faithful for s in steps)


def calibrate(shape: Shape, cache: Path, say: Any = print) -> dict[str, Any]:
    """Search, then cache the entry for ``shape`` in ``cache``; returns the entry."""
    started = time.monotonic()
    say(f"calibrating {shape.key}: one MRC transfer per step, {STEP_SECONDS:g} s at full rate")
    steps = search(shape, say)
    best = highest_faithful(steps)
    rate = None if best is None else max(MIN_MBIT, math.floor(best * MARGIN * 10) / 10)
    at_best = next((s for s in steps if s.rate_mbit_s == best and s.faithful), None)
    entry = {
        "key": shape.key,
        "rate_mbit_s": rate,
        "highest_faithful_mbit_s": best,
        "margin": MARGIN,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.monotonic() - started, 1),
        "machine": machine(),
        "bmv2": _bmv2_build() if shape.target == "bmv2" else "",
        "placement": _placement(shape.placement),
        "processes_at_rate": at_best.processes if at_best else {},
        "steps": [asdict(s) for s in steps],
    }
    write_entry(cache, shape.key, entry)
    say(
        f"{shape.key}: "
        + (f"faithful up to {best:g} Mbit/s per link; cached {rate:g}" if rate else "no faithful rate found")
        + f" ({entry['seconds']:.0f} s) -> {cache}"
    )
    return entry


def _placement(name: str | None) -> str:
    from topologies.placement import chosen

    return chosen(name).name


def _bmv2_build() -> str:
    from topologies.bmv2_build import describe, switch_binary

    return describe(switch_binary())


def plot(entries: list[dict[str, Any]], path: Path) -> Path:
    """Per calibrated shape: each step's goodput against its rate (faithful or not), and the
    CPU of every process at the rate found."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(entries), 2, figsize=(11, 3.2 * len(entries)), squeeze=False)
    for (ax, bars), e in zip(axes, entries, strict=True):
        for s in e["steps"]:
            ax.scatter(
                s["rate_mbit_s"], s["goodput_mbit_s"], color="#2ca02c" if s["faithful"] else "#d62728", s=22
            )
        if e.get("highest_faithful_mbit_s"):
            ax.axvline(e["highest_faithful_mbit_s"], color="k", lw=0.8, ls="--", label="highest faithful")
        if e.get("rate_mbit_s"):
            ax.axvline(e["rate_mbit_s"], color="#1f77b4", lw=1.2, label=f"cached {e['rate_mbit_s']:g}")
        ax.set_xscale("log")
        ax.set_xlabel("link rate (Mbit/s); green faithful, red not", fontsize=8)
        ax.set_ylabel("goodput (Mbit/s)", fontsize=8)
        ax.set_title(f"{e['key']}: {e['seconds']:.0f} s", fontsize=9)
        ax.legend(fontsize=7)
        procs = sorted(e.get("processes_at_rate", {}).items(), key=lambda kv: -kv[1])[:14]
        bars.barh([k for k, _ in procs], [v for _, v in procs], color="#7f7f7f")
        bars.set_xlabel("cores (median) at the highest faithful rate", fontsize=8)
        bars.tick_params(labelsize=7)
        bars.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    import json
    import os

    ap = argparse.ArgumentParser(prog="mrc-testbed calibrate", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--target",
        choices=("linux", "bmv2", "both"),
        default="both",
        help="data plane(s); both: BMv2 where installed",
    )
    ap.add_argument(
        "--planes", type=int, action="append", help="planes (repeat for several shapes; default 2)"
    )
    ap.add_argument("--t0", type=int, default=2)
    ap.add_argument("--t1", type=int, default=2)
    ap.add_argument("--hosts-per-t0", type=int, default=2)
    ap.add_argument("--placement", default=None, help="CPU placement policy (topologies.placement)")
    ap.add_argument(
        "--runs", type=Path, default=Path("runs"), help="where the cache goes: <runs>/calibration.json"
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="also write calibration.json and calibration.png here"
    )
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("mrc-testbed calibrate: needs root (network namespaces)", file=sys.stderr)
        return 2
    from mininet.log import setLogLevel

    from topologies.target import bmv2_missing

    setLogLevel("critical")
    targets = ["linux", "bmv2"] if args.target == "both" else [args.target]
    if "bmv2" in targets and bmv2_missing():
        print(f"calibrate: BMv2 left out: {'; '.join(bmv2_missing())}", file=sys.stderr)
        targets.remove("bmv2")
    cache = args.runs / CACHE_FILE
    entries = [
        calibrate(Shape(t, p, args.t0, args.t1, args.hosts_per_t0, args.placement), cache)
        for t in targets
        for p in (args.planes or [2])
    ]
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "calibration.json").write_text(
            json.dumps({"entries": entries, "cache": str(cache)}, indent=1) + "\n"
        )
        if entries:
            plot(entries, args.out / "calibration.png")
        print(f"written: {args.out / 'calibration.json'}, {args.out / 'calibration.png'}")
    return 0 if all(e["rate_mbit_s"] for e in entries) else 1


if __name__ == "__main__":
    sys.exit(main())
