"""``mrc-sim``: the real MRC core over a simulated multi-plane fabric.

Two ways in: flags run one RDMA WRITE over one connection; ``--scenario FILE`` runs a
scenario file (many connections, collectives, faults, every mode side by side).
Deterministic for a given seed, needs no root and no network. Examples:
  mrc-sim --planes 2 --t1 4 --size 8MiB --fault blackhole:p0-t0_0-t1_1@30% --mode mrc --json
  mrc-sim --scenario incast-bystander            (a shipped scenario, by name)
  mrc-sim --scenario my.toml --mode ecmp --out results/
  mrc-sim sweep my-sweep.toml --out results/sweeps   (seeds x a parameter grid, on Dask)
  mrc-sim fuzz --draws 500 --seed 1                  (generated scenarios against invariants)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from mrc_host.core import DEFAULT_MAX_EVS, Mode
from mrc_host.core.cc_base import cc_names

from . import faults as faults_mod
from . import jsonout
from .fabric import CONTROL_BYTES, PROBE_BYTES_MAX, FabricShape
from .report import human, summarise
from .scenario import SimConfig, Simulation

if TYPE_CHECKING:  # imported where it records: a run without ``--record`` never loads it
    from .recording import SimRecorder

_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([KMG]i?B?|B)?$", re.IGNORECASE)
_MULT = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 1024,
    "ki": 1024,
    "m": 10**6,
    "mb": 10**6,
    "mib": 1 << 20,
    "mi": 1 << 20,
    "g": 10**9,
    "gb": 10**9,
    "gib": 1 << 30,
    "gi": 1 << 30,
}


def parse_size(text: str) -> int:
    m = _SIZE.match(text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"size {text!r}: use bytes or a unit such as 64KiB, 8MiB, 1MB")
    value = int(float(m[1]) * _MULT[(m[2] or "").lower()])
    if not 1 <= value <= 1 << 30:
        raise argparse.ArgumentTypeError(f"size {text!r} must be 1 B .. 1 GiB")
    return value


def _at_least_one(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _probe_bytes(text: str) -> int:
    n = int(text)
    if not 0 <= n <= PROBE_BYTES_MAX:
        raise argparse.ArgumentTypeError(f"must be 0..{PROBE_BYTES_MAX}, not {n}")
    return n


def _add_fabric_arguments(p: argparse.ArgumentParser) -> None:
    """The fabric's shape: its size, its links and queues, and what a probe weighs."""
    p.add_argument("--planes", type=int, default=2, help="planes = NIC ports per host (default 2)")
    p.add_argument("--t0", type=int, default=2, help="T0 (leaf) switches per plane (default 2)")
    p.add_argument("--t1", type=int, default=2, help="T1 (spine) switches per plane (default 2)")
    p.add_argument("--hosts-per-t0", type=int, default=1)
    p.add_argument("--link-gbps", type=float, default=100.0)
    p.add_argument("--link-delay-ns", type=int, default=200, help="propagation delay per link")
    p.add_argument("--buffer-kib", type=int, default=1024, help="switch egress buffer (drop tail)")
    p.add_argument("--ecn-kib", type=int, default=64, help="ECN marking threshold (not on last hop)")
    p.add_argument("--trim-kib", type=int, default=256, help="trimming threshold")
    probe = f"wire bytes of a PROBE or PROBE_ACK (default {CONTROL_BYTES}); 0: probing takes no wire time"
    p.add_argument("--probe-bytes", type=_probe_bytes, default=CONTROL_BYTES, help=probe)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mrc-sim",
        description="Deterministic discrete-event simulator of a multi-plane two-tier Clos running the real "
        "MRC transport core (mrc_host.core). One RDMA WRITE from --src to --dst.",
        epilog="FAULTS (--fault SPEC, repeatable): kind[=value]:target@start[-end]\n"
        + (faults_mod.__doc__ or "").split("\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_fabric_arguments(p)
    p.add_argument("--size", type=parse_size, default=parse_size("1MiB"), help="bytes to write (e.g. 8MiB)")
    p.add_argument("--mtu", type=int, default=4096, help="payload bytes per packet")
    p.add_argument(
        "--mode",
        choices=[m.value for m in Mode],
        default=None,
        help="connection mode (default mrc); with --scenario: one run, this mode on every connection",
    )
    p.add_argument(
        "--evs", type=int, default=DEFAULT_MAX_EVS, help="max EVs per connection (split across planes)"
    )
    p.add_argument("--cc", choices=cc_names(), help="congestion control (default: the core's, nscc)")
    p.add_argument("--backups", type=int, default=4, help="backup EVs per plane")
    p.add_argument(
        "--share-paths",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="MRC: each host's connections share path verdicts (the NIC's, docs/transport.md); "
        "--no-share-paths: each learns alone (default: the config's, alone; with --scenario: on "
        "every connection)",
    )
    p.add_argument("--fault", action="append", default=[], metavar="SPEC", help="see FAULTS below")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--src", type=int, default=0)
    p.add_argument("--dst", type=int, default=-1, help="default: the last host")
    p.add_argument("--initial-psn", type=int, default=0, help="first PSN (try 16777000 for wrap-around)")
    p.add_argument("--time-limit-us", type=float, default=0, help="0: 200 x ideal time + 10 ms")
    p.add_argument("--json", action="store_true", help="print the full result as JSON")
    p.add_argument(
        "--payload",
        choices=["auto", "real", "virtual"],
        default=None,
        help="what writes carry: real bytes (placed and compared) or virtual ones (a length and a "
        "check value per packet, no buffers; same results, less memory); default auto: real up to "
        "1 GiB of receive regions in all (with --scenario: the file's `payload`, else auto)",
    )
    p.add_argument(
        "--scenario",
        metavar="FILE",
        help="run a scenario file (TOML), or a shipped scenario by name (see --list-scenarios)",
    )
    p.add_argument("--list-scenarios", action="store_true", help="list the shipped scenarios and exit")
    p.add_argument(
        "--out", type=str, default=None, help="with --scenario: write <name>.json and <name>.png here"
    )
    p.add_argument(
        "--record",
        metavar="DIR",
        default=None,
        help="write a recording for `mrc view DIR` (replay with a time slider): DIR/recording.jsonl, "
        "with --scenario DIR/<scenario>.<run>.recording.jsonl",
    )
    bound = "bound on each recording (default 512): past it the recording stops, marked truncated"
    p.add_argument("--record-max-mib", type=_at_least_one, default=512, metavar="MIB", help=bound)
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar (rich) on stderr (default: on a terminal, for runs longer than a few seconds)",
    )
    return p


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """The transport options the command line sets for one connection."""
    out: dict[str, object] = {} if args.cc is None else {"cc_algorithm": args.cc}
    if args.share_paths is not None:
        out["share_path_health"] = args.share_paths
    return out


def _scenario_main(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from . import scenario_file as sf
    from .report import human_network

    single = [
        a.option_strings[0]
        for a in parser._actions
        if a.dest
        not in (
            "help",
            "scenario",
            "list_scenarios",
            "out",
            "progress",
            "mode",
            "json",
            "record",
            "record_max_mib",
            "payload",
            "share_paths",
        )
        and getattr(args, a.dest) != a.default
    ]
    if single:
        parser.error(f"{', '.join(single)}: only for one connection; a scenario file sets these itself")
    if args.list_scenarios:
        for path in sf.shipped():
            sc = sf.load(path)
            print(f"{path.stem:28} {sc.reproduces or sc.description}")
        return 0
    path = Path(args.scenario)
    if not path.exists() and (sf.SCENARIO_DIR / f"{args.scenario}.toml").exists():
        path = sf.SCENARIO_DIR / f"{args.scenario}.toml"
    try:
        sc = sf.load(path)
    except sf.ScenarioError as exc:
        parser.error(str(exc))
    if args.mode is not None:
        sc = sc.with_mode(Mode(args.mode))
    if args.payload is not None:
        sc = replace(sc, payload=args.payload)
    if args.share_paths is not None:
        sc = replace(sc, config={**sc.config, "share_path_health": args.share_paths})
    record = Path(args.record) if args.record else None
    result = sf.run_scenario(sc, args.progress, record, args.record_max_mib << 20)
    if args.out:
        from .plots import scenario_png

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{sc.name}.json").write_text(jsonout.dumps(result))
        scenario_png(result, out / f"{sc.name}.png")
    try:
        if args.json:
            sys.stdout.write(jsonout.dumps(result))  # one write, not one per token
            sys.stdout.write("\n")
        else:
            print(f"scenario {sc.name}: {sc.reproduces or sc.description}")
            for r in result["runs"].values():
                print(human_network(r))
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    runs = result["runs"].values()
    return 0 if all(r["completed"] and r["data_ok"] for r in runs) else 1


def sweep_parser() -> argparse.ArgumentParser:
    from . import sweep

    p = argparse.ArgumentParser(
        prog="mrc-sim sweep",
        description="Run a scenario over seeds and a parameter grid on Dask (docs/simulator.md, Sweeps).",
        epilog=(sweep.__doc__ or "").split("A sweep file (TOML)::", 1)[-1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="the sweep file (TOML)")
    p.add_argument("--out", type=str, default="results/sweeps", help="writes <name>.json here")
    p.add_argument(
        "--scheduler",
        metavar="tcp://HOST:8786",
        help="a running Dask scheduler (default: an embedded cluster)",
    )
    p.add_argument(
        "--workers", type=int, default=None, help="embedded cluster: worker processes (default: cores)"
    )
    p.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar (stderr)"
    )
    return p


def sweep_main(argv: list[str]) -> int:
    """``mrc-sim sweep FILE``: 0 when every point ran, 1 when some failed (all reported), 2 on a bad file."""
    from pathlib import Path

    from . import sweep

    parser = sweep_parser()
    args = parser.parse_args(argv)
    if args.workers is not None and (args.workers < 1 or args.scheduler):
        parser.error("--workers: at least 1, and only for the embedded cluster")
    try:
        sw = sweep.load(args.file)
    except sweep.SweepError as exc:
        parser.error(str(exc))
    run = sweep.run_points(sw.points, args.scheduler, args.workers, args.progress, label=sw.name)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{sw.name}.json"
    path.write_text(sweep.sweep_json(sw, run))
    for r in run.failed:
        print(f"point {r['index']} {json.dumps(r['params'])} failed: {r['error']}", file=sys.stderr)
    print(
        f"sweep {sw.name}: {len(run.results)} points, {len(run.failed)} failed, "
        f"{run.workers} workers ({run.scheduler}), {run.seconds:.1f} s -> {path}"
    )
    return 1 if run.failed else 0


def verb_main(argv: list[str]) -> int:
    """``mrc-sim sweep ...`` and ``mrc-sim fuzz ...`` (both on Dask)."""
    if argv[0] == "sweep":
        return sweep_main(argv[1:])
    from . import fuzz

    return fuzz.main(argv[1:])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["sweep"], ["fuzz"]):
        return verb_main(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.scenario or args.list_scenarios:
        return _scenario_main(parser, args)
    cfg = _one_transfer(parser, args)
    try:
        result, recorder = _simulate(cfg, args)
    except (ValueError, faults_mod.FaultSpecError) as exc:
        parser.error(str(exc))
    if recorder is not None:
        from pathlib import Path

        out = Path(args.record)
        recorder.write(out / "recording.jsonl")
        (out / "result.json").write_text(jsonout.dumps(result))
    _print_result(result, args.json)
    return 0 if result["completed"] and result["data_ok"] else 1


def _one_transfer(parser: argparse.ArgumentParser, args: argparse.Namespace) -> SimConfig:
    """The one transfer the flags describe (no ``--scenario``), its fabric's bounds checked."""
    for name in ("planes", "t0", "t1", "hosts_per_t0", "mtu", "evs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.planes > 16 or args.t1 > 1024 or args.t0 > 1024 or args.mtu > 9000 or args.hosts_per_t0 > 1024:
        parser.error("--planes <= 16, --t0/--t1/--hosts-per-t0 <= 1024, --mtu <= 9000")
    if args.t0 * args.hosts_per_t0 > 4096:
        parser.error("--t0 x --hosts-per-t0 must be at most 4096 hosts")
    shape = FabricShape(
        planes=args.planes,
        t0=args.t0,
        t1=args.t1,
        hosts_per_t0=args.hosts_per_t0,
        link_gbps=args.link_gbps,
        link_delay_ns=args.link_delay_ns,
        buffer_bytes=args.buffer_kib * 1024,
        ecn_bytes=args.ecn_kib * 1024,
        trim_bytes=args.trim_kib * 1024,
        probe_bytes=args.probe_bytes,
    )
    return SimConfig(
        shape=shape,
        size=args.size,
        mode=Mode(args.mode or Mode.MRC.value),
        mtu=args.mtu,
        max_evs=args.evs,
        backup_evs_per_plane=args.backups,
        faults=args.fault,
        seed=args.seed,
        src=args.src,
        dst=args.dst,
        initial_psn=args.initial_psn,
        time_limit_ns=int(args.time_limit_us * 1000),
        transport_overrides=_overrides(args),
        payload=args.payload or "auto",
    )


def _simulate(cfg: SimConfig, args: argparse.Namespace) -> tuple[dict[str, Any], SimRecorder | None]:
    """Run the transfer (with a progress line unless ``--no-progress``; recorded with
    ``--record``): its result, and the recorder to write out."""
    sim = Simulation(cfg)
    recorder = None
    if args.record:
        from .recording import SAMPLES, SimRecorder

        label = f"mrc-sim {cfg.mode.value} {cfg.size} B"
        recorder = SimRecorder(sim.net, sim.ideal_ns * 2 // SAMPLES, label, args.record_max_mib << 20)
        recorder.start()
    if args.progress is False:
        return sim.run(), recorder
    from .progress import run_with_progress

    sim.net.start()
    sim.write = sim.net.post(sim.conn, cfg.size)
    label = f"mrc-sim {cfg.mode.value} {cfg.size} B"
    run_with_progress(sim.net, sim.time_limit_ns, label, show=args.progress)
    return summarise(sim), recorder


def _print_result(result: dict[str, Any], as_json: bool) -> None:
    try:
        if as_json:
            sys.stdout.write(jsonout.dumps(result))  # one write, not one per token
            sys.stdout.write("\n")
        else:
            print(human(result))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head: not an error of the simulation
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet


def console_main() -> None:
    """The ``mrc-sim`` command (pyproject.toml): ``main()``, then ``os._exit`` with its code.

    Why: a normal exit tears the interpreter down, freeing one by one every object the run
    built (EV tables, packets, connections), about a tenth of a short run's time, while the
    process ends anyway. Output is flushed first and nothing else is open by then (results
    are written with ``write_text``). A sweep exits normally: its Dask cluster shuts down
    with the interpreter.
    """
    argv = sys.argv[1:]
    code = main(argv)
    if argv[:1] in (["sweep"], ["fuzz"]):
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    console_main()
