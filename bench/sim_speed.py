"""mrc-sim speed: simulated DATA packets per wall-clock second, this tree against a base commit.

Why: the simulator is where production scale is shown, so its speed bounds what can be
shown. The base commit is checked out with ``git worktree add`` into a temporary
directory and both trees run the same single-connection transfer (2 planes x 4 T1,
64 MiB by default) in fresh interpreters, alternately, ``--repeats`` times each; the
best run of each counts (the machine is shared, the best run is the least disturbed).
Writes ``sim_speed.json`` and ``sim_speed.png`` under ``--out``.

It also times the CLI end to end (a fresh interpreter, start-up and ``--json`` output
included) on the 2 x 4 and 8 x 16 fabrics with 0.2 % loss on every link, in both trees.

    python -m bench.sim_speed --out results/sim-speed [--quick] [--base fbde7b5]
"""

from __future__ import annotations

import argparse
import json
import os
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
E2E_RUNS: dict[str, list[str]] = {
    "2x4": ["--planes", "2", "--t1", "4"],
    "8x16": ["--planes", "8", "--t1", "16"],
}
E2E_LOSS = "loss=0.002:all"


def end_to_end(tree: Path, shape: list[str], size_mib: int, seed: int) -> dict[str, Any]:
    """Wall and CPU seconds of one ``mrc-sim ... --json`` run (start-up and output included)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    cmd = [sys.executable, "-m", "mrc_host.sim.cli", *shape, "--size", f"{size_mib}MiB"]
    cmd += ["--fault", E2E_LOSS, "--seed", str(seed), "--json"]
    t = time.perf_counter()
    before = os.times()
    out = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=False)
    after = os.times()
    seconds = time.perf_counter() - t
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    try:
        doc = json.loads(out.stdout)
        completed = bool(doc.get("completed"))
    except json.JSONDecodeError:
        completed = False
    return {"seconds": seconds, "cpu_seconds": cpu, "completed": completed, "returncode": out.returncode}


def e2e_table(base_tree: Path, repeats: int, size_mib: int) -> dict[str, Any]:
    """Both trees, alternately, each E2E run ``repeats`` times; the least disturbed run counts."""
    out: dict[str, Any] = {}
    for name, shape in E2E_RUNS.items():
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        for _ in range(repeats):
            runs["base"].append(end_to_end(base_tree, shape, size_mib, 1))
            runs["this"].append(end_to_end(REPO, shape, size_mib, 1))
        best = {k: min(r["cpu_seconds"] for r in v) for k, v in runs.items()}
        wall = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
        out[name] = {
            "command": f"mrc-sim {' '.join(shape)} --size {size_mib}MiB --fault {E2E_LOSS} --seed 1 --json",
            "runs": runs,
            "speedup_cpu": best["base"] / best["this"],
            "speedup_wall": wall["base"] / wall["this"],
        }
        print(
            f"   e2e {name}: x{out[name]['speedup_cpu']:.2f} CPU, x{out[name]['speedup_wall']:.2f} wall",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_speed", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "sim-speed")
    ap.add_argument("--base", default=BASE, help=f"commit to compare against (default {BASE})")
    ap.add_argument("--size-mib", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="8 MiB, 2 repeats")
    ap.add_argument("--e2e-mib", type=int, default=16, help="end-to-end runs: bytes written (MiB)")
    args = ap.parse_args(argv)
    if args.quick:
        args.size_mib, args.repeats = 8, 2
    args.out.mkdir(parents=True, exist_ok=True)
    size = args.size_mib << 20
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="mrc-sim-base-") as tmp:
        base_tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base_tree), args.base], cwd=REPO, check=True
        )
        try:
            for _ in range(args.repeats):
                runs["base"].append(probe(base_tree, size))
                runs["this"].append(probe(REPO, size))
            e2e = e2e_table(base_tree, args.repeats, 4 if args.quick else args.e2e_mib)
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
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"base {args.base}", f"this {head}"]
    values = [best["base"]["data_packets_per_s"], best["this"]["data_packets_per_s"]]
    ax.bar(labels, values, color=["#999999", "#2ca02c"])
    for i, v in enumerate(values):
        ax.annotate(f"{v:,.0f}", (i, v), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("simulated DATA packets per wall-clock second")
    ax.set_title(
        f"mrc-sim speed, {args.size_mib} MiB, 2 planes x 4 T1: x{ratio:.2f} (CPU time x{cpu_ratio:.2f})"
    )
    fig.tight_layout()
    fig.savefig(args.out / "sim_speed.png", dpi=110)
    plt.close(fig)
    print(
        f"base {args.base}: {values[0]:,.0f} pkt/s, this {head}: {values[1]:,.0f} pkt/s, ratio x{ratio:.2f}; "
        f"per CPU second {best_cpu['base']:,.0f} vs {best_cpu['this']:,.0f}, ratio x{cpu_ratio:.2f} "
        f"({args.out / 'sim_speed.json'})"
    )
    return 0 if result["all_completed"] else 1


if __name__ == "__main__":
    sys.exit(main())
