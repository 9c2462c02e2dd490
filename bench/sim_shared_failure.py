"""One T1 stops under an all-to-all: does every connection learn it alone, by timeout?

Why: a T1 is crossed by every connection of a host toward another T0. Learning alone, a
connection with a packet or two on the dead path often finds out only when its RTO fires.
``share_path_health`` lets the connections of one NIC share what they proved
(``mrc_host/core/path_health.py``). This bench runs the same all-to-all (8 planes x 4 T0 x 16
T1, 4 hosts per T0: 240 connections, 1 us links) with and without T1 5 of plane 2 stopping
silently at 30 % of the ideal time, with sharing on and off, per seed, and reports the RTOs
the fault added per connection and the job time against the fault-free run's (targets: at
most 5 % and 1.05 x, sharing on). Writes ``sim_shared_failure.json`` and ``.png``.

    python -m bench.sim_shared_failure --out results/ [--quick] [--size 1MiB]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench.sim_bench import record_head, save_figure
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.gc_pause import collector_paused

FAULT = "switch-down:p2-t1_5@30%"
SCENARIO = """name = "a2a-t1-stop"
seed = {seed}
modes = ["mrc"]
faults = [{faults}]
[fabric]
planes = 8
t0 = 4
t1 = 16
hosts_per_t0 = 4
link_gbps = 100
link_delay = "1us"
[transport]
config = {{ share_path_health = {share} }}
[[traffic]]
pattern = "all-to-all"
name = "a2a"
size = "{size}"
"""


def run_once(seed: int, size: str, fault: bool, share: bool) -> dict[str, Any]:
    """One all-to-all: its RTOs, resends, job time and what the fault dropped."""
    text = SCENARIO.format(
        seed=seed, size=size, faults=f'"{FAULT}"' if fault else "", share="true" if share else "false"
    )
    sc = sf.load_text(text)
    with collector_paused():
        net, jobs = sf.build(sc, sc.runs[0])
    net.run(sc.time_limit_ns)
    conns = net.connections
    senders = [c.sender.counters for c in conns]
    job = jobs[0]
    return {
        "completed": job.done and all(c.data_ok for c in conns),
        "jct_us": (job.completion_ns or 0) / 1e3,
        "rtos": sum(c.rto_fired for c in senders),
        "connections_with_rto": sum(1 for c in senders if c.rto_fired),
        "resends": sum(c.retransmissions for c in senders),
        "data_packets": sum(c.data_packets_sent for c in senders),
        "lost_in_fault": sum(f.as_dict()["data_packets_lost"] for f in net.faults),
        "nic_paths_retired": sum(
            c.sender.counters.nic_paths_dead + c.receiver.counters.nic_paths_dead for c in conns
        ),
        "nic_verdicts": sum(t.verdicts for t in net.path_health),
        "connections": len(conns),
    }


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(seeds: range, size: str) -> dict[str, Any]:
    rows = []
    for seed in seeds:
        row: dict[str, Any] = {"seed": seed}
        for share in (True, False):
            key = "shared" if share else "alone"
            free = run_once(seed, size, False, share)
            hit = run_once(seed, size, True, share)
            row[key] = {
                "fault_free": free,
                "faulted": hit,
                "added_rtos_per_connection": (hit["rtos"] - free["rtos"]) / hit["connections"],
                "jct_ratio": hit["jct_us"] / free["jct_us"],
            }
            print(
                f"seed {seed} {key:6}: RTOs {free['rtos']} -> {hit['rtos']} "
                f"(+{row[key]['added_rtos_per_connection']:.3f}/conn), job x{row[key]['jct_ratio']:.3f}",
                flush=True,
            )
        rows.append(row)
    out: dict[str, Any] = {"size": size, "fault": FAULT, "seeds": list(seeds), "rows": rows}
    for key in ("shared", "alone"):
        out[key] = {
            "added_rtos_per_connection": spread([r[key]["added_rtos_per_connection"] for r in rows]),
            "jct_ratio": spread([r[key]["jct_ratio"] for r in rows]),
            "fault_free_rtos": spread([r[key]["fault_free"]["rtos"] for r in rows]),
            "faulted_rtos": spread([r[key]["faulted"]["rtos"] for r in rows]),
            "lost_in_fault": spread([r[key]["faulted"]["lost_in_fault"] for r in rows]),
        }
    return out


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.5))
    seeds = [r["seed"] for r in data["rows"]]
    for key, marker in (("shared", "o"), ("alone", "x")):
        ax1.plot(seeds, [r[key]["added_rtos_per_connection"] for r in data["rows"]], marker, label=key)
        ax2.plot(seeds, [r[key]["jct_ratio"] for r in data["rows"]], marker, label=key)
    ax1.axhline(0.05, color="grey", lw=0.8, ls="--")
    ax2.axhline(1.05, color="grey", lw=0.8, ls="--")
    ax1.set(xlabel="seed", ylabel="RTOs added per connection", title="T1 stops under an all-to-all")
    ax2.set(xlabel="seed", ylabel="job time / fault-free")
    ax1.legend(fontsize=8)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_shared_failure", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="seeds 1-3, not 1-10")
    ap.add_argument("--size", default="1MiB", help="bytes each host writes to each other one")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    data = record_head(args.quick) | measure(range(1, 4) if args.quick else range(1, 11), args.size)
    data["seconds"] = round(time.monotonic() - started, 1)
    shared = data["shared"]
    data["targets"] = {
        "added_rtos_le_5pct_of_connections": shared["added_rtos_per_connection"]["max"] <= 0.05,
        "jct_le_1.05_fault_free": shared["jct_ratio"]["max"] <= 1.05,
    }
    (args.out / "sim_shared_failure.json").write_text(json.dumps(data, indent=1))
    plot(data, args.out / "sim_shared_failure.png")
    for k, v in data["targets"].items():
        print(f"   {'ok  ' if v else 'MISS'} {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
