"""The neighbours of the most-paths-dead row: size, fault time and how many T1s die, per seed.

Why: ``bench.sim_faults``' ``most_dead`` row (8 MiB, three of four T1s of both planes at
200 us) holds, while a transfer's tail caught by the same faults did not. Each row here is one
shape (size; fault time; dead T1s of the four, in one plane or both) over seeds 0-9: the median
and worst job time against the same seed without faults, the worst loss in one element against
its limit (1.3 x BDP / 8 + 1: each T1 of a plane carried an eighth of the flight) and the
timeouts fired. Writes ``sim_most_dead.json`` and ``sim_most_dead.png`` under ``--out``.

    python -m bench.sim_most_dead --out results/ [--quick]
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.sim_bench import finish, record_head, save_figure, start
from bench.sim_faults import most_dead_shape
from mrc_host.sim.fabric import DATA_OVERHEAD
from mrc_host.sim.scenario import SimConfig, Simulation

SIZES_MIB = (1, 2, 4, 8)
AT_US = (25, 40, 50, 60, 75, 100, 125, 150, 200)
DEAD = ((2, 1), (3, 1), (2, 2), (3, 2))  # (T1s 1..n dead, in planes 0..k-1)


def row(mib: int, at_us: int, dead_t1: int, planes: int, clean: dict[int, float]) -> dict[str, Any]:
    shape = most_dead_shape()
    faults = [f"switch-down:p{p}-t1_{t}@{at_us}us" for p in range(planes) for t in range(1, dead_t1 + 1)]
    jobs, losses, rtos = [], [], []
    limit = 0.0
    for seed, base in clean.items():
        s = Simulation(SimConfig(shape=shape, size=mib << 20, faults=faults, seed=seed))
        r = s.run()
        bdp = s.base_rtt_ns * shape.link_gbps * shape.planes / 8 / (4096 + DATA_OVERHEAD)
        limit = 1.3 * bdp / (shape.planes * shape.t1) + 1
        done = r["completed"] and r["data_ok"]
        jobs.append(r["completion_time_us"] / base if done else float("inf"))
        losses.append(max(f["data_packets_lost"] for f in r["faults"]))
        rtos.append(r["losses"]["rto_fired"])
    return {
        "size_mib": mib,
        "at_us": at_us,
        "dead": f"{dead_t1}/4 x{planes}p",
        "job_over_clean": jobs,
        "median": statistics.median(jobs),
        "worst": max(jobs),
        "lost": losses,
        "limit": round(limit, 2),
        "worst_loss_over_limit": max(losses) / limit,
        "seeds_over_limit": sum(1 for x in losses if x > limit),
        "rtos": sum(rtos),
    }


def table(seeds: range, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    print(" MiB   at     dead  median  worst  loss/limit  over  RTOs", flush=True)
    for mib in sizes:
        shape = most_dead_shape()
        clean = {s: Simulation(SimConfig(shape=shape, size=mib << 20, seed=s)).run() for s in seeds}
        base = {s: float(r["completion_time_us"]) for s, r in clean.items()}
        for at in AT_US:
            if at >= min(base.values()):
                continue  # (the transfer ends before the fault)
            for n, k in DEAD:
                r = row(mib, at, n, k, base)
                rows.append(r)
                print(
                    f"{mib:>4} {at:>4} {r['dead']:>8} {r['median']:7.3f} {r['worst']:6.3f}"
                    f" {r['worst_loss_over_limit']:11.2f} {r['seeds_over_limit']:>5} {r['rtos']:>5}",
                    flush=True,
                )
    return rows


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    rows = data["rows"]
    xs = range(len(rows))
    ax.plot(xs, [r["median"] for r in rows], "o", label="median")
    ax.plot(xs, [r["worst"] for r in rows], "x", label="worst")
    ax.axhline(1.3, color="grey", lw=0.5)
    names = [f"{r['size_mib']}M@{r['at_us']} {r['dead']}" for r in rows]
    ax.set_xticks(list(xs), names, rotation=90, fontsize=5)
    ax.set_ylabel("job time / fault-free")
    ax.legend()
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    args = start("python -m bench.sim_most_dead", __doc__, "1 and 2 MiB only", argv)
    data: dict[str, Any] = record_head(args.quick)
    data["rows"] = rows = table(range(10), SIZES_MIB[:2] if args.quick else SIZES_MIB)
    data["targets"] = {
        "no_timeout": all(r["rtos"] == 0 for r in rows),
        "loss_within_limit": all(r["seeds_over_limit"] == 0 for r in rows),
    }
    return finish(args.out, "sim_most_dead", data, plot)


if __name__ == "__main__":
    raise SystemExit(main())
