"""mrc-sim at scale: how long an all-to-all takes to set up and to run, end to end.

Why: the largest all-to-all that ends within a minute is the simulator's reach on one
core (docs/simulator.md, "Speed"), and set-up alone was once most of a run. For each host
count the bench writes a scenario file (8 planes x 8 T0 x 8 T1, the hosts spread over the
T0s, 256 EVs per connection, a 64 KiB write from every host to every other, seed 1) and
measures, each in a fresh interpreter:

- set-up: CPU seconds to load the file and build the network (every connection's
  endpoints and EV tables) the way ``mrc-sim --scenario`` does;
- end to end: ``mrc-sim --scenario FILE --json`` (start-up, build, run, summary and JSON
  written to a file): CPU and wall seconds, peak memory, and whether it completed.

Writes ``sim_all_to_all.json`` under ``--out``.

    python -m bench.sim_all_to_all --out results/sim-all-to-all [--hosts 64 88]
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

REPO = Path(__file__).resolve().parent.parent
SCENARIO = """name = "all-to-all-{hosts}"
seed = 1
[fabric]
planes = 8
t0 = 8
t1 = 8
hosts_per_t0 = {per_t0}
[transport]
evs = 256
[[traffic]]
pattern = "all-to-all"
name = "a2a"
size = "64KiB"
"""
SETUP = """
import json, sys, time
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.gc_pause import collector_paused
t = time.process_time()
sc = sf.load(sys.argv[1])
with collector_paused():
    net, jobs = sf.build(sc, sc.runs[0])
print(json.dumps({"setup_cpu_seconds": time.process_time() - t, "connections": len(net.connections)}))
"""
# mrc-sim's own main with stdout in a file, then its peak memory; it ends as mrc-sim does
# (os._exit: the run's objects are not freed one by one)
RUN = """
import json, os, resource, sys
from mrc_host.sim.cli import main
with open(sys.argv[1], "w") as out:
    sys.stdout = out
    code = main(sys.argv[2:])
sys.stdout = sys.__stdout__
print(json.dumps({"code": code, "max_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
sys.stdout.flush()
os._exit(0)
"""


def _python(code: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=REPO, env=env, capture_output=True, text=True, check=True
    )
    doc: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def measure(hosts: int, tmp: Path) -> dict[str, Any]:
    """Set-up and end-to-end figures of the all-to-all among ``hosts`` hosts."""
    if hosts % 8 or hosts < 16:
        raise ValueError(f"--hosts: a multiple of 8 from 16 up (8 T0s), got {hosts}")
    path = tmp / f"all-to-all-{hosts}.toml"
    path.write_text(SCENARIO.format(hosts=hosts, per_t0=hosts // 8))
    row = _python(SETUP, str(path))
    json_out = tmp / "result.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    run = _python(RUN, str(json_out), "--scenario", str(path), "--json")
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    doc = json.loads(json_out.read_text())
    row.update(
        hosts=hosts,
        command=f"mrc-sim --scenario {path.name} --json",
        cpu_seconds=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        wall_seconds=seconds,
        max_rss_mib=run["max_rss_kib"] / 1024,
        json_mib=json_out.stat().st_size / (1 << 20),
        completed=run["code"] == 0 and all(r["completed"] for r in doc["runs"].values()),
    )
    json_out.unlink()
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_all_to_all", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results") / "sim-all-to-all")
    ap.add_argument("--hosts", type=int, nargs="+", default=[64], help="host counts (multiples of 8)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="mrc-sim-a2a-") as tmp:
        for hosts in args.hosts:
            row = measure(hosts, Path(tmp))
            rows.append(row)
            print(
                f"{hosts} hosts, {row['connections']} connections: "
                f"set-up {row['setup_cpu_seconds']:.2f} s CPU, "
                f"end to end {row['cpu_seconds']:.1f} s CPU ({row['wall_seconds']:.1f} s wall), "
                f"{row['max_rss_mib']:,.0f} MiB peak, completed {row['completed']}",
                flush=True,
            )
    (args.out / "sim_all_to_all.json").write_text(json.dumps({"runs": rows}, indent=1))
    return 0 if all(r["completed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
