"""mrc-sim speed: simulated DATA packets per second and whole runs, this tree against a base commit.

Why: the simulator is where production scale is shown, so its speed bounds what can be
shown. The base commit (and any ``--also`` commits, say the one before a change) is
checked out with ``git worktree add`` into a temporary directory and every tree runs the
same work in fresh interpreters, in turn, ``--repeats`` times each; the best run of each
counts (the machine is shared, the best run is the least disturbed). CPU time is read
with ``getrusage`` (microseconds, where ``os.times`` counts 10 ms ticks, as long as a
short run's differences).

- in process: one connection's transfer (2 planes x 4 T1, 64 MiB by default), timed
  around ``scenario.run`` (build, run and summary);
- end to end: ``mrc-sim ... --json`` on the 2 x 4 and 8 x 16 fabrics with 0.2 % loss on
  every link, at each ``--e2e-mib`` size, start-up and JSON output included;
- start-up: ``mrc-sim --size 1KiB --json``, nearly nothing but start-up.

Every tree's modules are byte-compiled first, as an install does: a fresh worktree (or
``PYTHONDONTWRITEBYTECODE``) would otherwise compile every module again on every start.
This tree runs as it is built; a checked-out commit runs as its sources unless ``--build``
compiles its mypyc modules too (for commits that have them: the default base has none).
Writes ``sim_speed.json`` and ``sim_speed.png`` under ``--out``.

    python -m bench.sim_speed --out results/sim-speed [--quick] [--base fbde7b5] [--also COMMIT ...]
        [--e2e-mib 16 64]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    run, stdout = timed_child(tree, [sys.executable, "-m", "mrc_host.sim.cli", *args, "--json"])
    try:
        run["completed"] = bool(json.loads(stdout).get("completed"))
    except json.JSONDecodeError:
        run["completed"] = False
    return run


def interpreter_floor(tree: Path, repeats: int) -> float:
    """CPU seconds of ``python -c pass`` with the same interpreter, site hooks and path as
    the runs (best of ``repeats``). Why: every end-to-end run pays it, whatever the tree,
    so no tree can run faster than it and a ratio of two runs is bounded by the base's
    time over it. It is the machine's, not the simulator's: the interpreter and the site
    hooks installed beside it (an editable install's finder, a system ``.pth``)."""
    runs = [timed_child(tree, [sys.executable, "-c", "pass"])[0] for _ in range(repeats)]
    return min(float(r["cpu_seconds"]) for r in runs)


def timed_child(tree: Path, cmd: list[str]) -> tuple[dict[str, Any], str]:
    """Wall and CPU seconds of one child process run in ``tree``, and what it printed."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"seconds": seconds, "cpu_seconds": cpu, "returncode": out.returncode}, out.stdout


def e2e_table(trees: dict[str, Path], repeats: int, sizes_mib: list[int]) -> dict[str, Any]:
    """Every tree in turn, each run ``repeats`` times; the least disturbed run counts."""
    out: dict[str, Any] = {}
    floor = interpreter_floor(trees["this"], max(repeats, 3))
    print(f"   interpreter floor (python -c pass): {floor:.3f} CPU s", flush=True)
    for name, args in e2e_runs(sizes_mib).items():
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
        for _ in range(repeats):
            for label, tree in trees.items():
                runs[label].append(end_to_end(tree, args))
        cpu = {k: min(r["cpu_seconds"] for r in v) for k, v in runs.items()}
        wall = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
        row = out[name] = {
            "command": f"mrc-sim {' '.join(args)} --json",
            "runs": runs,
            "cpu_seconds": cpu,
            "wall_seconds": wall,
            "speedup_cpu": cpu["base"] / cpu["this"],
            "speedup_wall": wall["base"] / wall["this"],
            # this tree against each tree measured (CPU): base, any --also commit, itself
            "speedup_cpu_vs": {k: v / cpu["this"] for k, v in cpu.items()},
            # the interpreter's own start-up, and the ratio a tree doing nothing else would reach
            "interpreter_floor_cpu_seconds": floor,
            "speedup_cpu_ceiling": cpu["base"] / floor,
        }
        times = ", ".join(f"{k} {v:.3f}" for k, v in cpu.items())
        print(
            f"   {name:16} CPU s: {times}; x{row['speedup_cpu']:.2f} CPU, x{row['speedup_wall']:.2f} wall"
            f" (at most x{row['speedup_cpu_ceiling']:.1f}: the interpreter floor)",
            flush=True,
        )
    return out


def prepare(tree: Path, build: bool) -> None:
    """Write the tree's bytecode caches, as installing it would, and with ``build`` its
    compiled (mypyc) modules where it has any (``setup.py``): a checkout has none, so
    without it a commit that compiles them runs as its sources."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MRC_PURE_PYTHON")}
    if build and (tree / "setup.py").exists():
        cmd = [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]
        subprocess.run(cmd, cwd=tree, env=env, capture_output=True, check=True)
    cmd = [sys.executable, "-m", "compileall", "-q", "mrc_host", "mrc_fabric"]
    subprocess.run(cmd, cwd=tree, env=env, capture_output=True, check=True)


@contextmanager
def measuring(lock: Path | None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock`` (if given): benchmarks that take the same
    lock do not run while this one measures."""
    if lock is None:
        yield
        return
    with lock.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def in_process(trees: dict[str, Path], repeats: int, size: int) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
    for _ in range(repeats):
        for label, tree in trees.items():
            runs[label].append(probe(tree, size))
    return runs


def plot(out: Path, result: dict[str, Any]) -> None:
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    best = result["best"]
    labels = list(best)
    colours = ["#999999" if k == "base" else "#2ca02c" if k == "this" else "#c7c7c7" for k in labels]
    values = [best[k]["data_packets_per_s"] for k in labels]
    names = {"base": f"base {result['base_commit']}", "this": f"this {result['this_commit']}"}
    left.bar([names.get(k, k) for k in labels], values, color=colours)
    for i, v in enumerate(values):
        left.annotate(f"{v:,.0f}", (i, v), ha="center", va="bottom", fontsize=9)
    left.set_ylabel("simulated DATA packets per wall-clock second")
    ratios = f"x{result['speedup']:.2f} wall, x{result['speedup_cpu']:.2f} CPU"
    left.set_title(f"in process: {ratios}", fontsize=10)
    rows = result["end_to_end"]
    width = 0.8 / len(labels)
    for i, (k, colour) in enumerate(zip(labels, colours, strict=True)):
        xs = [x + (i - (len(labels) - 1) / 2) * width for x in range(len(rows))]
        right.bar(
            xs, [row["cpu_seconds"][k] for row in rows.values()], width, color=colour, label=names.get(k, k)
        )
    for x, row in enumerate(rows.values()):
        top = max(row["cpu_seconds"].values())
        right.annotate(f"x{row['speedup_cpu']:.2f}", (x, top), ha="center", va="bottom", fontsize=8)
    right.set_xticks(list(range(len(rows))), list(rows), rotation=20, fontsize=8)
    right.set_ylabel("CPU seconds per mrc-sim run (best)")
    right.set_title("end to end (this tree against the base)", fontsize=10)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "sim_speed.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_speed", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "sim-speed")
    ap.add_argument("--base", default=BASE, help=f"commit to compare against (default {BASE})")
    ap.add_argument("--also", nargs="*", default=[], metavar="COMMIT", help="more commits measured alongside")
    ap.add_argument("--build", action="store_true", help="compile the other trees' mypyc modules (minutes)")
    ap.add_argument("--lock", type=Path, help="hold flock(FILE) while measuring (a shared machine)")
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
        commits = {"base": args.base, **{c: c for c in args.also}}
        trees = {label: Path(tmp) / f"tree-{i}" for i, label in enumerate(commits)}
        try:
            for label, commit in commits.items():
                git = ["git", "worktree", "add", "--detach", "-q", str(trees[label]), commit]
                subprocess.run(git, cwd=REPO, check=True)
            trees["this"] = REPO
            for label, tree in trees.items():
                prepare(tree, args.build and label != "this")
            with measuring(args.lock):
                runs = in_process(trees, args.repeats, args.size_mib << 20)
                e2e = e2e_table(trees, args.repeats, args.e2e_mib)
        finally:
            for label in commits:
                git = ["git", "worktree", "remove", "--force", str(trees[label])]
                subprocess.run(git, cwd=REPO, check=False)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO, check=False)
    best = {k: max(v, key=lambda r: r["data_packets_per_s"]) for k, v in runs.items()}
    ratio = best["this"]["data_packets_per_s"] / best["base"]["data_packets_per_s"]
    best_cpu = {k: max(r["data_packets_per_cpu_s"] for r in v) for k, v in runs.items()}
    cpu_ratio = best_cpu["this"] / best_cpu["base"]
    result = {
        "workload": f"mrc-sim --planes 2 --t1 4 --size {args.size_mib}MiB (one connection, mrc)",
        "base_commit": args.base,
        "also_commits": args.also,
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
