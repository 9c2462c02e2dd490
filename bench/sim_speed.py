"""mrc-sim speed: simulated DATA packets per second and whole runs, this tree against a base commit.

Why: the simulator is where production scale is shown, so its speed bounds what can be
shown. The base commit is checked out with ``git worktree add`` into a temporary
directory and both trees run the same work in fresh interpreters, alternately,
``--repeats`` times each; the best run of each counts (the machine is shared, the best run
is the least disturbed). CPU time is read with ``getrusage`` (microseconds, where
``os.times`` counts 10 ms ticks, as long as a short run's differences).

- in process: one connection's transfer (2 planes x 4 T1, 64 MiB by default), timed
  around ``scenario.run`` (build, run and summary);
- end to end: ``mrc-sim ... --json`` on the 2 x 4 and 8 x 16 fabrics with 0.2 % loss on
  every link, at each ``--e2e-mib`` size, start-up and JSON output included;
- start-up: ``mrc-sim --size 1KiB --json``, nearly nothing but start-up.

Both trees' modules are byte-compiled first, as an install does: a fresh worktree (or
``PYTHONDONTWRITEBYTECODE``) would otherwise compile every module again on every start.
Writes ``sim_speed.json`` and ``sim_speed.png`` under ``--out``.

    python -m bench.sim_speed --out results/sim-speed [--quick] [--base fbde7b5] [--e2e-mib 16 64]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

REPO = Path(__file__).resolve().parent.parent
BASE = "fbde7b5"
PROBE = """
import json, sys, time
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.scenario import SimConfig, run
size = int(sys.argv[1])
t, c = time.perf_counter(), time.process_time()
r = run(SimConfig(shape=FabricShape(planes=2, t1=4), size=size))
dt, dc = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"seconds": dt, "cpu_seconds": dc, "data_packets": r["data_packets_sent"],
                  "events": r["events"], "completed": r["completed"] and r["data_ok"]}))
"""


def probe(tree: Path, size: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(size)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["data_packets_per_s"] = result["data_packets"] / result["seconds"]
    result["data_packets_per_cpu_s"] = result["data_packets"] / result["cpu_seconds"]
    return result


# end to end: the CLI in a fresh interpreter, start-up and JSON output included
E2E_SHAPES: dict[str, list[str]] = {
    "2x4": ["--planes", "2", "--t1", "4"],
    "8x16": ["--planes", "8", "--t1", "16"],
}
E2E_LOSS = "loss=0.002:all"
STARTUP = ["--size", "1KiB"]  # a run that is nearly all start-up


def e2e_runs(sizes_mib: list[int]) -> dict[str, list[str]]:
    """The end-to-end command lines (mrc-sim's arguments) by name."""
    runs = {"start-up 1 KiB": STARTUP}
    for mib in sizes_mib:
        for name, shape in E2E_SHAPES.items():
            runs[f"{name} {mib} MiB"] = [*shape, "--size", f"{mib}MiB", "--fault", E2E_LOSS, "--seed", "1"]
    return runs


def end_to_end(tree: Path, args: list[str]) -> dict[str, Any]:
    """Wall and CPU seconds of one ``mrc-sim ... --json`` run (start-up and output included)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "mrc_host.sim.cli", *args, "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        completed = bool(json.loads(out.stdout).get("completed"))
    except json.JSONDecodeError:
        completed = False
    return {"seconds": seconds, "cpu_seconds": cpu, "completed": completed, "returncode": out.returncode}


def e2e_table(base_tree: Path, repeats: int, sizes_mib: list[int]) -> dict[str, Any]:
    """Both trees, alternately, each run ``repeats`` times; the least disturbed run counts."""
    out: dict[str, Any] = {}
    for name, args in e2e_runs(sizes_mib).items():
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        for _ in range(repeats):
            runs["base"].append(end_to_end(base_tree, args))
            runs["this"].append(end_to_end(REPO, args))
        cpu = {k: min(r["cpu_seconds"] for r in v) for k, v in runs.items()}
        wall = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
        row = out[name] = {
            "command": f"mrc-sim {' '.join(args)} --json",
            "runs": runs,
            "cpu_seconds": cpu,
            "wall_seconds": wall,
            "speedup_cpu": cpu["base"] / cpu["this"],
            "speedup_wall": wall["base"] / wall["this"],
        }
        print(
            f"   {name:16} CPU {cpu['base']:.3f} s -> {cpu['this']:.3f} s x{row['speedup_cpu']:.2f}, "
            f"wall {wall['base']:.3f} s -> {wall['this']:.3f} s x{row['speedup_wall']:.2f}",
            flush=True,
        )
    return out


def byte_compile(tree: Path) -> None:
    """Write the tree's bytecode caches, as installing it would."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "mrc_host", "mrc_fabric"],
        cwd=tree,
        env={k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
        capture_output=True,
        check=True,
    )


def in_process(base_tree: Path, repeats: int, size: int) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
    for _ in range(repeats):
        runs["base"].append(probe(base_tree, size))
        runs["this"].append(probe(REPO, size))
    return runs


def plot(out: Path, result: dict[str, Any]) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    best = result["best"]
    labels = [f"base {result['base_commit']}", f"this {result['this_commit']}"]
    values = [best["base"]["data_packets_per_s"], best["this"]["data_packets_per_s"]]
    left.bar(labels, values, color=["#999999", "#2ca02c"])
    for i, v in enumerate(values):
        left.annotate(f"{v:,.0f}", (i, v), ha="center", va="bottom", fontsize=9)
    left.set_ylabel("simulated DATA packets per wall-clock second")
    left.set_title(
        f"in process: x{result['speedup']:.2f} wall, x{result['speedup_cpu']:.2f} CPU", fontsize=10
    )
    rows = result["end_to_end"]
    names = list(rows)
    xs = range(len(names))
    right.bar([x - 0.2 for x in xs], [rows[n]["cpu_seconds"]["base"] for n in names], 0.4, color="#999999")
    right.bar([x + 0.2 for x in xs], [rows[n]["cpu_seconds"]["this"] for n in names], 0.4, color="#2ca02c")
    for x, n in zip(xs, names, strict=True):
        top = rows[n]["cpu_seconds"]["base"]
        right.annotate(f"x{rows[n]['speedup_cpu']:.2f}", (x - 0.2, top), ha="center", va="bottom", fontsize=8)
    right.set_xticks(list(xs), names, rotation=20, fontsize=8)
    right.set_ylabel("CPU seconds per mrc-sim run (best)")
    right.set_title("end to end, base (grey) and this tree", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "sim_speed.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_speed", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "sim-speed")
    ap.add_argument("--base", default=BASE, help=f"commit to compare against (default {BASE})")
    ap.add_argument("--size-mib", type=int, default=64, help="in-process transfer (MiB)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="8 MiB in process, 4 MiB end to end, 2 repeats")
    ap.add_argument(
        "--e2e-mib", type=int, nargs="+", default=[16], help="end-to-end runs: bytes written (MiB)"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mib, args.repeats, args.e2e_mib = 8, 2, [4]
    args.out.mkdir(parents=True, exist_ok=True)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="mrc-sim-base-") as tmp:
        base_tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base_tree), args.base], cwd=REPO, check=True
        )
        try:
            for tree in (base_tree, REPO):
                byte_compile(tree)
            runs = in_process(base_tree, args.repeats, args.size_mib << 20)
            e2e = e2e_table(base_tree, args.repeats, args.e2e_mib)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=REPO, check=False)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=False)
    best = {k: max(v, key=lambda r: r["data_packets_per_s"]) for k, v in runs.items()}
    ratio = best["this"]["data_packets_per_s"] / best["base"]["data_packets_per_s"]
    best_cpu = {k: max(r["data_packets_per_cpu_s"] for r in v) for k, v in runs.items()}
    cpu_ratio = best_cpu["this"] / best_cpu["base"]
    result = {
        "workload": f"mrc-sim --planes 2 --t1 4 --size {args.size_mib}MiB (one connection, mrc)",
        "base_commit": args.base,
        "this_commit": head,
        "repeats": args.repeats,
        "best": best,
        "runs": runs,
        "speedup": ratio,  # wall clock, best run of each
        "speedup_cpu": cpu_ratio,  # CPU time, best run of each (steadier on a shared machine)
        "data_packets_per_cpu_s": best_cpu,
        "end_to_end": e2e,
        "all_completed": all(r["completed"] for v in runs.values() for r in v)
        and all(r["completed"] for row in e2e.values() for v in row["runs"].values() for r in v),
    }
    (args.out / "sim_speed.json").write_text(json.dumps(result, indent=1))
    plot(args.out, result)
    print(
        f"in process ({args.size_mib} MiB): {best['base']['data_packets_per_s']:,.0f} -> "
        f"{best['this']['data_packets_per_s']:,.0f} pkt/s, x{ratio:.2f} wall, x{cpu_ratio:.2f} CPU "
        f"({args.out / 'sim_speed.json'})"
    )
    return 0 if result["all_completed"] else 1


if __name__ == "__main__":
    sys.exit(main())
