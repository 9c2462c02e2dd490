"""``python -m mrc_host.sim.figures``: MRC vs single-path vs ECMP in mrc-sim.

(a) a black hole on a T0-T1 link in the middle of the transfer (for each mode the
    busiest uplink it uses, so every mode is hit), lasting twice the ideal transfer time;
(b) 1 % random loss on every link (NIC and fabric), several seeds;
(c) spray balance: max/mean data bytes over the source T0's T1 uplinks, no faults.
The main fabric has 16 paths (2 planes x 8 T1) and 1 us links; a sensitivity run repeats
everything with 8 paths (1 us and 200 ns links).
Writes figures.json and three PNGs into --out (default results/).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from mrc_host.core import Mode

from .fabric import FabricShape
from .scenario import SimConfig, run

MODES = [Mode.MRC, Mode.SINGLE_PATH, Mode.ECMP]
COLOURS = {"mrc": "#2ca02c", "single-path": "#d62728", "ecmp": "#1f77b4"}


def busiest_uplink(clean: dict[str, Any]) -> str:
    name = max(clean["t1_uplink_bytes"], key=lambda k: clean["t1_uplink_bytes"][k])
    src, dst = name.split(">")  # "p0-t0_0>p0-t1_1" -> "p0-t0_0-t1_1"
    return f"{src}-{dst.split('-')[1]}"


def scenario(shape: FabricShape, size: int, seeds: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {"clean": {}, "blackhole": {}, "loss": {}}
    for mode in MODES:
        clean = run(SimConfig(shape=shape, size=size, mode=mode, seed=seeds[0]))
        link = busiest_uplink(clean)
        if mode is Mode.MRC:
            link = "p0-t0_0-t1_1"  # all uplinks carry the same bytes: any one
        bh = run(
            SimConfig(shape=shape, size=size, mode=mode, seed=seeds[0], faults=[f"blackhole:{link}@30%-230%"])
        )
        losses = [
            run(SimConfig(shape=shape, size=size, mode=mode, seed=s, faults=["loss=0.01:all"])) for s in seeds
        ]
        out["clean"][mode.value] = {
            "completion_time_us": clean["completion_time_us"],
            "goodput_gbps": clean["goodput_gbps"],
            "balance": clean["t1_balance_max_over_mean"],
            "t1_uplink_bytes": clean["t1_uplink_bytes"],
        }
        out["blackhole"][mode.value] = {
            "link": link,
            "completed": bh["completed"] and bh["data_ok"],
            "completion_time_us": bh["completion_time_us"],
            "vs_no_fault": bh["completion_time_us"] / clean["completion_time_us"]
            if bh["completed"]
            else None,
            "data_packets_lost": bh["faults"][0]["data_packets_lost"],
            "retransmissions": bh["retransmissions"],
            "goodput_timeline": bh["goodput_timeline"],
            "fault_start_us": bh["faults"][0]["start_us"],
            "fault_end_us": bh["faults"][0]["end_us"],
        }
        times = [r["completion_time_us"] for r in losses if r["completed"] and r["data_ok"]]
        out["loss"][mode.value] = {
            "seeds": seeds,
            "completed": len(times),
            "completion_time_us": times,
            "mean_us": statistics.fmean(times) if times else None,
            "retransmissions": [r["retransmissions"] for r in losses],
        }
    loss = out["loss"]
    out["targets"] = {
        "a_mrc_vs_no_fault": out["blackhole"]["mrc"]["vs_no_fault"],
        "b_single_path_over_mrc": (loss["single-path"]["mean_us"] / loss["mrc"]["mean_us"])
        if loss["single-path"]["mean_us"] and loss["mrc"]["mean_us"]
        else None,
        "c_mrc_balance": out["clean"]["mrc"]["balance"],
    }
    return out


def _save(fig: Any, ax: Any, path: Path) -> Path:
    """Legend, layout, ``path`` written at the figures' one resolution, the figure freed."""
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot(res: dict[str, Any], out: Path, tag: str) -> list[Path]:
    paths = []
    fig, ax = plt.subplots(figsize=(9, 4))
    for mode, r in res["blackhole"].items():
        tl = r["goodput_timeline"]
        ax.step(
            [p["t_us"] for p in tl],
            [p["gbps"] for p in tl],
            where="post",
            color=COLOURS[mode],
            label=f"{mode}: {r['completion_time_us']:.0f} us, {r['data_packets_lost']} lost",
        )
    bh = next(iter(res["blackhole"].values()))  # every mode's fault has the same window
    start, end = bh.get("fault_start_us"), bh.get("fault_end_us")
    if start is not None:
        stop = end if end is not None else ax.get_xlim()[1]
        ax.axvspan(start, stop, color="k", alpha=0.08, label=f"black hole, {start:.0f}-{stop:.0f} us")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (us, simulated)")
    ax.set_ylabel("goodput (Gb/s)")
    ax.set_title(f"(a) black hole on a used T0-T1 link from 30 % for 2x ideal time [{tag}]")
    paths.append(_save(fig, ax, out / f"fig_a_blackhole_{tag}.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(res["loss"])
    means = [res["loss"][m]["mean_us"] or 0 for m in names]
    clean = [res["clean"][m]["completion_time_us"] for m in names]
    x = range(len(names))
    ax.bar([i - 0.2 for i in x], clean, 0.4, label="no fault", color="#cccccc")
    ax.bar([i + 0.2 for i in x], means, 0.4, label="1 % loss, all links", color=[COLOURS[m] for m in names])
    ax.set_xticks(list(x), names)
    ax.set_ylabel("completion time (us)")
    ax.set_title(f"(b) 1 % random loss [{tag}]")
    paths.append(_save(fig, ax, out / f"fig_b_loss_{tag}.png"))

    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(names)
    for k, mode in enumerate(names):
        ups = res["clean"][mode]["t1_uplink_bytes"]
        ax.bar(
            [i + k * width for i in range(len(ups))],
            [v / 2**20 for v in ups.values()],
            width,
            color=COLOURS[mode],
            label=f"{mode}: max/mean {res['clean'][mode]['balance']:.2f}",
        )
        labels = [n.split(">")[0].split("-")[0] + "-" + n.split(">")[1].split("-")[1] for n in ups]
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, fontsize=8)
    ax.set_ylabel("data MiB on uplink")
    ax.set_title(f"(c) bytes per T1 uplink of the source T0, no faults [{tag}]")
    paths.append(_save(fig, ax, out / f"fig_c_balance_{tag}.png"))
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mrc_host.sim.figures", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--size-mib", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--no-sensitivity", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(1, args.seeds + 1))
    # Main shape: 16 paths and 1 us per link (switch port-to-port latency plus cable, what a
    # 51.2T switch hop costs). Sensitivity: 8 paths, with 1 us and with 200 ns links. Fewer
    # paths or a larger BDP mean more packets in flight on a path when it dies.
    shapes = {"16paths-1us": FabricShape(planes=2, t0=2, t1=8, link_delay_ns=1000)}
    if not args.no_sensitivity:
        shapes["8paths-1us"] = FabricShape(planes=2, t0=2, t1=4, link_delay_ns=1000)
        shapes["8paths-200ns"] = FabricShape(planes=2, t0=2, t1=4, link_delay_ns=200)
    report: dict[str, Any] = {}
    for tag, shape in shapes.items():
        res = scenario(shape, args.size_mib << 20, seeds)
        report[tag] = res
        for p in plot(res, args.out, tag):
            print(f"wrote {p}")
        t = res["targets"]
        print(f"[{tag}] (a) MRC black hole / no fault = {t['a_mrc_vs_no_fault']:.3f} (target <= 1.3)")
        print(
            f"[{tag}] (b) single-path / MRC under 1 % loss = {t['b_single_path_over_mrc']:.2f} (target >= 3)"
        )
        print(f"[{tag}] (c) MRC spray balance max/mean = {t['c_mrc_balance']:.3f} (target <= 1.05)")
        for mode in res["blackhole"]:
            bh, ls = res["blackhole"][mode], res["loss"][mode]
            print(
                f"    {mode:12} clean {res['clean'][mode]['completion_time_us']:7.0f} us | black hole "
                f"{bh['completion_time_us'] or float('nan'):7.0f} us ({bh['data_packets_lost']} lost) | "
                f"1% loss mean {ls['mean_us'] or float('nan'):7.0f} us | "
                f"balance {res['clean'][mode]['balance']:.2f}"
            )
    slim = json.loads(json.dumps(report))
    for res in slim.values():
        for r in res["blackhole"].values():
            r["goodput_timeline"] = r["goodput_timeline"]
    (args.out / "sim_figures.json").write_text(json.dumps(slim, indent=1))
    print(f"wrote {args.out / 'sim_figures.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
