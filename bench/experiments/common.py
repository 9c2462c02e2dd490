"""What every experiment shares: its context, its result record, the fabric it runs on.

An experiment is a function ``run(ctx) -> Result``. The context says where to write,
whether this is the short (``--quick``) version, which data plane to use and which seed
the agents draw their EVs and transfer ids from. The :class:`Result` is written as
``<out>/<id>.json`` with one schema for all experiments (``SCHEMA``), so ``bench/report.py``
can put each measured number next to the paper's shape it tests without knowing the
experiment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from topologies.fidelity.rates import link_rate_arg

SCHEMA = "mrc-experiment/1"
DEFAULT_CALIBRATION = Path("runs") / "calibration.json"  # where mrc-testbed calibrate caches rates
BMV2_QUEUE_PER_TRIM = 2  # BMv2 queues hold twice the trim threshold: room for trimming to act
PREFIX = "ex"  # Mininet node prefix of every fabric the experiments build: apart from other runs
STATUSES = ("ok", "skipped", "failed")

console = Console(stderr=True, highlight=False)


@dataclass
class Finding:
    """One measured number next to the paper's shape it tests.

    ``holds`` is True/False when the number can be compared with the shape (the rule is
    in ``expect``), None when it is context only (a clean-run time, a count).
    """

    metric: str
    value: float | None
    unit: str = ""
    mode: str = ""
    paper: str = ""
    expect: str = ""
    holds: bool | None = None
    note: str = ""
    # the rule behind ``holds`` as numbers, where it is one ({"lo": x} at least, {"hi": x} at
    # most, {"parity": x} a comparison with the baseline ``versus``): repeated runs are judged
    # on their spread against it (bench.evidence)
    bar: dict[str, float] | None = None
    versus: str = ""


@dataclass
class Result:
    experiment: str
    title: str
    paper_shape: str
    status: str = "ok"
    reason: str = ""
    target: str = ""
    quick: bool = False
    seed: int = 0
    fabric: dict[str, Any] = field(default_factory=dict)
    started_at: str = ""
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    plots: list[str] = field(default_factory=list)
    # the fidelity monitor's verdict on every fabric the experiment ran (topologies.fidelity):
    # {"faithful", "verdict", "reasons", "fabrics": [each fabric's verdict]}; {} when none ran
    fidelity: dict[str, Any] = field(default_factory=dict)

    def add(self, metric: str, value: float | None, **kw: Any) -> Finding:
        f = Finding(metric, None if value is None else float(value), **kw)
        self.findings.append(f)
        return f

    def info(self, metric: str, value: float | None, **kw: Any) -> Finding:
        """A finding that is context only: shown next to the paper's words, never judged."""
        return self.add(metric, value, expect="info", **kw)

    def verified(self, ok: bool, mode: str, paper: str, metric: str = "completed, bytes verified") -> Finding:
        """The finding that every transfer of ``mode`` completed with its bytes checked."""
        return self.add(metric, float(ok), mode=mode, paper=paper, expect="1", holds=ok)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = SCHEMA
        return d


@dataclass
class Context:
    out: Path
    quick: bool = False
    target: str = "linux"
    seed: int = 1
    keep_runs: bool = False  # keep the testbed run directories (logs) even when all went well
    calibration: Path | None = None  # the calibration cache (None: runs/calibration.json)
    link_rate: float | str | None = None  # --link-rate: overrides the experiment's own (calibrated)
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # each fabric's fidelity verdict

    def scale(self, full: float, quick: float) -> float:
        return quick if self.quick else full

    def size(self, full_mib: int, quick_mib: int) -> int:
        return (quick_mib if self.quick else full_mib) << 20


def fmt(value: float | None, digits: int = 2) -> str:
    """A number for a progress line ('-' for None)."""
    return "-" if value is None else f"{value:.{digits}f}"


def at_most(value: float | None, limit: float, expect: str = "") -> dict[str, Any]:
    """``expect`` and ``holds`` of a finding whose number must not exceed ``limit``.

    Why: the rule's words and its test are written once, so they cannot disagree; a
    missing number (None) never holds. ``expect`` replaces the words where they say more.
    """
    return {
        "expect": expect or f"<= {limit:g}",
        "holds": value is not None and value <= limit,
        "bar": {"hi": limit},
    }


def at_least(value: float | None, limit: float, expect: str = "") -> dict[str, Any]:
    """Like :func:`at_most`, for a number that must reach ``limit``."""
    return {
        "expect": expect or f">= {limit:g}",
        "holds": value is not None and value >= limit,
        "bar": {"lo": limit},
    }


def beats(value: float | None, versus: str, parity: float = 1.0, expect: str = "") -> dict[str, Any]:
    """A comparison with a baseline: ``value`` is MRC's figure over ``versus``'s, oriented so
    that above ``parity`` MRC is better. Runs on both sides of parity make a tie."""
    return {
        "expect": expect or f"> {parity:g} (MRC better than {versus})",
        "holds": value is not None and value > parity,
        "bar": {"parity": parity},
        "versus": versus,
    }


def step(msg: str) -> None:
    """A progress line on stderr (rich); experiments call it before every long step."""
    console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {msg}")


def check_target(requested: str) -> tuple[str | None, str]:
    """(target, '') when ``requested`` can run here, (None, why) otherwise."""
    from topologies.target import TargetError, choose_target

    try:
        return choose_target(requested).target.value, ""
    except TargetError as exc:
        return None, str(exc)


@contextlib.contextmanager
def fabric(ctx: Context, prefix: str = PREFIX, agents: bool = True, **shape: Any) -> Iterator[Any]:
    """A live :class:`topologies.testbed.Testbed` (controller, routes, seeded agents).

    The run directory lives in a temporary directory that is removed afterwards unless
    something failed or ``ctx.keep_runs``; then it is moved under ``<out>/runs/``.
    """
    from mininet.log import setLogLevel

    from topologies.testbed import Testbed, TestbedConfig

    setLogLevel("critical")  # htb's "quantum is big" warnings would bury the progress lines
    runs = Path(tempfile.mkdtemp(prefix=f"{prefix}-runs-"))
    if ctx.link_rate is not None and "link_rate" in shape:
        shape = {**shape, "link_rate": ctx.link_rate}
    cfg = TestbedConfig(
        prefix=prefix,
        target=ctx.target,
        runs_root=runs,
        latest=False,
        agents=agents,
        agent_args=["--seed", str(ctx.seed)],
        pcap=False,
        calibration=ctx.calibration or DEFAULT_CALIBRATION,
        **shape,
    )
    ok = False
    started = time.monotonic()
    tb = Testbed(cfg, say=lambda m: None)
    try:
        with tb:
            room_to_trim(tb)
            step(
                f"fabric up in {time.monotonic() - started:.1f} s: {cfg.planes} planes x "
                f"{cfg.t0} T0 x {cfg.t1} T1, {cfg.hosts_per_t0} hosts/T0, "
                f"link rate {cfg.link_rate or 'unlimited'} Mbit/s ({tb.rate_source}), "
                f"{tb.choice.target.value}"  # type: ignore[union-attr]
            )
            yield tb
        ok = True
    finally:
        if tb.fidelity_verdict is not None:
            ctx.verdicts.append({"shape": _shape_text(cfg), **tb.fidelity_verdict.as_dict()})
            step(f"fidelity: {tb.fidelity_verdict.text}")
        if ok and not ctx.keep_runs:
            shutil.rmtree(runs, ignore_errors=True)
        else:
            dest = ctx.out / "runs"
            dest.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.move(str(runs), str(dest / runs.name))


def room_to_trim(tb: Any) -> None:
    """BMv2: every egress queue deeper than the controller's trim threshold.

    simple_switch's queues hold 64 packets, the controller trims above 64 (as last dequeued),
    so a congested port's queue filled and tail-dropped before anything was trimmed: E7's
    receivers' T0s lost 53-288 frames in full queues (deepest 57-60) at 5 Mbit/s, a loss the
    design does not have (it trims). No-op on the Linux target (its egress program's buffer
    is set with its thresholds)."""
    from controller.compiler import CompileOptions

    if tb.choice.target.value != "bmv2":
        return
    depth = BMV2_QUEUE_PER_TRIM * CompileOptions().trim_threshold
    for sw in tb.net.switches:
        sw.set_queue_depth(None, depth)


def _shape_text(cfg: Any) -> str:
    rate = f"{cfg.link_rate:g} Mbit/s" if isinstance(cfg.link_rate, float | int) else "unlimited"
    return f"{cfg.planes}x{cfg.t0}x{cfg.t1}x{cfg.hosts_per_t0} at {rate}"


def fidelity_of(verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    """One experiment's fidelity over every fabric it ran: faithful only when each was."""
    if not verdicts:
        return {}
    reasons = [
        f"{v['shape']}: {r}" if len(verdicts) > 1 else r for v in verdicts for r in v.get("reasons", [])
    ]
    faithful = all(v.get("faithful") for v in verdicts)
    return {
        "faithful": faithful,
        "verdict": "faithful" if faithful else "not faithful: " + "; ".join(reasons),
        "reasons": reasons,
        "fabrics": verdicts,
    }


def fabric_info(tb: Any) -> dict[str, Any]:
    """The fabric a run measured: its shape, link rate and where that came from, data plane
    and (BMv2) which simple_switch_grpc build its switches ran."""
    cfg = tb.config
    return {
        "planes": cfg.planes,
        "t0": cfg.t0,
        "t1": cfg.t1,
        "hosts_per_t0": cfg.hosts_per_t0,
        "link_rate_mbit_s": cfg.link_rate,
        "link_rate_source": tb.rate_source,
        "target": tb.choice.target.value,
        "bmv2": bmv2_builds(tb),
    }


def bmv2_builds(tb: Any) -> list[str]:
    """Which simple_switch_grpc builds the fabric's BMv2 switches ran (none on Linux)."""
    from topologies.bmv2_build import describe

    binaries = {getattr(getattr(sw, "process", None), "binary", "") for sw in tb.net.switches}
    return sorted(describe(b) for b in binaries if b)


def write_result(out: Path, result: Result) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result.experiment}.json"
    path.write_text(json.dumps(result.to_json(), indent=1, default=str) + "\n")
    return path


def experiment_main(
    experiment: str,
    title: str,
    paper_shape: str,
    run: Callable[[Context, Result], None],
    argv: list[str] | None = None,
    needs_root: bool = True,
    target_override: str | None = None,
) -> int:
    """The ``main(argv)`` of one experiment module (what ``bench.run_all`` calls).

    Runs ``run(ctx, result)``, catches any failure into the result (status ``failed`` with
    the reason) and always writes ``<out>/<experiment>.json``. Exit status 1 on failure.
    ``target_override``: the data plane this experiment needs whatever ``--target`` says
    (none needs one today: both targets mark ECN and trim); skipped with the reason where it
    cannot run.
    """
    ap = argparse.ArgumentParser(prog=f"python -m bench.experiments.{experiment}", description=title)
    ap.add_argument("--out", type=Path, default=Path("results") / experiment)
    ap.add_argument("--quick", action="store_true", help="the short version")
    ap.add_argument("--target", choices=("auto", "linux", "bmv2"), default="linux")
    ap.add_argument("--seed", type=int, default=1, help="agent seed (EV draws); same for every mode")
    ap.add_argument("--keep-runs", action="store_true", help="keep the testbed run directories")
    ap.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help=f"the link-rate calibration cache (default {DEFAULT_CALIBRATION})",
    )
    ap.add_argument(
        "--link-rate",
        type=link_rate_arg,
        default=None,
        help="Mbit/s per link instead of the calibrated rate (0: unlimited); the monitor judges it",
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(
        args.out, args.quick, args.target, args.seed, args.keep_runs, args.calibration, args.link_rate
    )
    result = Result(experiment, title, paper_shape, quick=args.quick, seed=args.seed)
    result.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    started = time.monotonic()
    console.rule(f"[bold]{experiment}[/]: {title}")
    asked = target_override or args.target
    result.target = "" if asked == "auto" else asked  # a skip lands in the column of the target asked for
    if needs_root and os.geteuid() != 0:
        result.status, result.reason = "skipped", "needs root (network namespaces)"
    else:
        target, why = check_target(asked)
        if target is None:
            result.status, result.reason = "skipped", why
        else:
            ctx.target = result.target = target
            try:
                run(ctx, result)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # recorded; the other experiments go on
                result.status = "failed"
                result.reason = f"{type(exc).__name__}: {exc}"
                traceback.print_exc(file=sys.stderr)
    result.fidelity = fidelity_of(ctx.verdicts)
    result.seconds = round(time.monotonic() - started, 2)
    path = write_result(args.out, result)
    colour = {"ok": "green", "skipped": "yellow", "failed": "red"}[result.status]
    console.print(
        f"[{colour}]{experiment} {result.status}[/] in {result.seconds:.0f} s"
        + (f" ({result.reason})" if result.reason else "")
        + (f"; {result.fidelity['verdict']}" if result.fidelity else "")
        + f" -> {path}"
    )
    return 1 if result.status == "failed" else 0


class ExperimentMain(Protocol):
    def __call__(self, argv: list[str] | None = None) -> int: ...


def experiment_entry(
    experiment: str, title: str, paper_shape: str, run: Callable[[Context, Result], None]
) -> ExperimentMain:
    """The ``main(argv)`` an experiment module offers ``bench.run_all`` and its command line:
    :func:`experiment_main` bound to the module's own id, title, paper shape and ``run``."""

    def main(argv: list[str] | None = None) -> int:
        return experiment_main(experiment, title, paper_shape, run, argv)

    return main
