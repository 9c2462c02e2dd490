"""Matplotlib (Agg) figures from mrc-sim results: goodput over time and EV states over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

STATE_COLOURS = {"GOOD": "#2ca02c", "SKIP": "#ffbf00", "ASSUMED_BAD": "#d62728", "DENIED": "#7f7f7f"}


def ev_intervals(result: dict[str, Any], side: str = "sender") -> dict[str, list[tuple[float, float, str]]]:
    """Per EV: (start_us, end_us, state) segments from the state-change timeline."""
    end = result["completion_time_us"] or result["goodput_timeline"][-1]["t_us"]
    final = result["ev_final"][side]
    current: dict[str, tuple[float, str]] = {ev: (0.0, "GOOD") for ev in final}
    out: dict[str, list[tuple[float, float, str]]] = {ev: [] for ev in final}
    for e in result["ev_timeline"]:
        if e["side"] != side or e["ev"] not in current or e["old"] == e["new"]:
            continue
        start, state = current[e["ev"]]
        new = e["new"].split("/")[0]
        out[e["ev"]].append((start, e["t_us"], state))
        current[e["ev"]] = (e["t_us"], new)
    for ev, (start, state) in current.items():
        out[ev].append((start, end, state))
    return out


def timeline_png(result: dict[str, Any], path: Path, title: str) -> None:
    fig, (ax1, ax2) = plt.subplots(
        2, 1, figsize=(10, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 3]}
    )
    tl = result["goodput_timeline"]
    ax1.step([p["t_us"] for p in tl], [p["gbps"] for p in tl], where="post", color="#1f77b4")
    ax1.set_ylabel("goodput (Gb/s)")
    ax1.set_title(title)
    for f in result["faults"]:
        for ax in (ax1, ax2):
            ax.axvline(f["start_us"], color="k", linestyle="--", linewidth=0.8)
        ax1.annotate(f["spec"], (f["start_us"], ax1.get_ylim()[1] * 0.92), fontsize=7, rotation=0)
    segs = ev_intervals(result)
    # merge SKIP flickers visually: SKIP lasts one rotation, draw it anyway (thin in time)
    for row, (_ev, parts) in enumerate(sorted(segs.items())):
        for start, end, state in parts:
            ax2.broken_barh(
                [(start, max(end - start, 0.3))], (row - 0.4, 0.8), color=STATE_COLOURS.get(state, "k")
            )
    ax2.set_yticks(range(len(segs)))
    ax2.set_yticklabels(sorted(segs), fontsize=7, family="monospace")
    ax2.set_ylabel("sender EV")
    ax2.set_xlabel("time (us, simulated)")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in STATE_COLOURS.values()]
    ax2.legend(handles, list(STATE_COLOURS), loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


RUN_COLOURS = ["#2ca02c", "#d62728", "#1f77b4", "#9467bd", "#ff7f0e", "#8c564b"]


def scenario_png(result: dict[str, Any], path: Path, max_flows: int = 8) -> None:
    """One panel per run (goodput of its first flows over time) and one bar chart of job times."""
    runs = result["runs"]
    fig, axes = plt.subplots(len(runs) + 1, 1, figsize=(10, 2.6 * (len(runs) + 1)), squeeze=False)
    for ax, (name, r) in zip(axes[:, 0], runs.items(), strict=False):
        width = r["timeline_bucket_us"]
        for f in r["flows"][:max_flows]:
            tl = f["goodput_timeline_gbps"]
            ax.step([i * width for i in range(len(tl))], tl, where="post", label=f["name"], linewidth=1)
        for fault in r["faults"]:
            ax.axvline(fault["start_us"], color="k", linestyle="--", linewidth=0.8)
        ax.set_title(f"{result['scenario']} [{name}]", fontsize=9)
        ax.set_ylabel("Gb/s")
        if len(r["flows"]) <= max_flows:
            ax.legend(fontsize=6, ncol=4, loc="upper right")
    axes[-2, 0].set_xlabel("time (us, simulated)")
    ax = axes[-1, 0]
    jobs = [j for j, v in next(iter(runs.values()))["jobs"].items() if not v["background"]]
    width = 0.8 / max(len(runs), 1)
    for k, (name, r) in enumerate(runs.items()):
        values = [r["jobs"][j]["completion_time_us"] or 0.0 for j in jobs]
        ax.bar(
            [i + k * width for i in range(len(jobs))],
            values,
            width,
            color=RUN_COLOURS[k % len(RUN_COLOURS)],
            label=name,
        )
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(jobs))], jobs, fontsize=8)
    ax.set_ylabel("completion time (us)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
