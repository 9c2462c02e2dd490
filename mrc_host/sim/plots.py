"""Matplotlib (Agg) figures from mrc-sim results: goodput over time and EV states over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

# One colour per EV state for every figure (simulator and live demo). GOOD is a light green so
# that ASSUMED_BAD and SKIP stand out across 128-256 rows.
STATE_COLOURS = {"GOOD": "#8fd18f", "SKIP": "#ffbf00", "ASSUMED_BAD": "#d62728", "DENIED": "#5f5f5f"}


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


def draw_ev_states(
    ax: Any, segments: dict[str, list[tuple[float, float, str]]], min_width: float, ylabel: str = "sender EV"
) -> None:
    """One row per EV, coloured by state over time: the EV timeline every MRC figure shares.

    ``segments`` maps an EV label to its (start, end, state) pieces, in any time unit;
    ``min_width`` keeps one-rotation states (SKIP) visible. Used by the simulator's
    figures and meant for the live demo's (topologies/demo_plot.py) as well.
    """
    rows = sorted(segments)
    for row, label in enumerate(rows):
        for start, stop, state in segments[label]:
            colour = STATE_COLOURS.get(state.split("/")[0], "k")
            ax.broken_barh([(start, max(stop - start, min_width))], (row - 0.4, 0.8), color=colour)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=7, family="monospace")
    ax.set_ylabel(ylabel)
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in STATE_COLOURS.values()]
    # beside the panel, never over the bars (a row per EV fills the whole panel)
    ax.legend(
        handles,
        list(STATE_COLOURS),
        loc="upper left",
        bbox_to_anchor=(1.005, 1.0),
        fontsize=7,
        title="EV state",
        title_fontsize=7,
        frameon=False,
    )


def mark_faults(ax: Any, faults: list[dict[str, Any]], label: bool = True) -> None:
    """A dashed line at each fault's start, named by its spec at the top of the panel."""
    for f in faults:
        ax.axvline(f["start_us"], color="k", linestyle="--", linewidth=0.8)
        if label:
            ax.annotate(
                f"fault: {f['spec']}",
                (f["start_us"], 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, -3),
                textcoords="offset points",
                va="top",
                fontsize=7,
            )


def zero_based(ax: Any, values: list[float]) -> None:
    """A rate axis from 0 (a dip of 92 against 97 must not look like a collapse), room above."""
    top = max(values, default=0.0)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1.0)


def timeline_png(result: dict[str, Any], path: Path, title: str) -> None:
    fig, (ax1, ax2) = plt.subplots(
        2, 1, figsize=(10, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 3]}
    )
    tl = result["goodput_timeline"]
    ax1.step([p["t_us"] for p in tl], [p["gbps"] for p in tl], where="post", color="#1f77b4", label="goodput")
    ax1.set_ylabel("goodput (Gb/s)")
    ax1.set_title(title)
    zero_based(ax1, [p["gbps"] for p in tl])
    mark_faults(ax1, result["faults"])
    mark_faults(ax2, result["faults"], label=False)
    # SKIP lasts one rotation: drawn anyway, at least 0.3 us wide
    draw_ev_states(ax2, ev_intervals(result), min_width=0.3)
    ax2.set_xlabel("time (us, simulated)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


RUN_COLOURS = ["#2ca02c", "#d62728", "#1f77b4", "#9467bd", "#ff7f0e", "#8c564b"]


def flow_timeline(gbps: list[float], bucket_us: float, elapsed_us: float) -> list[float]:
    """A flow's goodput per bucket, the last bucket's rate over the time it covered: a run
    ending a third into a bucket must not draw a drop to a third at its end."""
    out = list(gbps)
    covered = elapsed_us - (len(out) - 1) * bucket_us
    if out and 0 < covered < bucket_us:
        out[-1] *= bucket_us / covered
    return out


def scenario_png(result: dict[str, Any], path: Path, max_flows: int = 8) -> None:
    """One panel per run (goodput of its first flows over time) and one bar chart of job times."""
    fig = scenario_figure(result, max_flows)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def scenario_figure(result: dict[str, Any], max_flows: int = 8) -> Any:
    """:func:`scenario_png`'s figure: a legend names every flow line and every run's bar."""
    runs = result["runs"]
    first_run = next(iter(runs.values()))
    flow = first_run["flows"][0]
    changed = sorted({e["ev"] for e in flow["ev_events"]})[:32]
    panels = len(runs) + 1 + (1 if changed else 0)
    fig, axes = plt.subplots(panels, 1, figsize=(10, 2.6 * panels), squeeze=False)
    for ax, (name, r) in zip(axes[:, 0], runs.items(), strict=False):
        width = r["timeline_bucket_us"]
        drawn: list[float] = []
        for f in r["flows"][:max_flows]:
            tl = flow_timeline(f["goodput_timeline_gbps"], width, r["elapsed_us"])
            drawn += tl
            label = f"{f['name']}: h{f['src']} -> h{f['dst']} ({f['mode']})"
            # each bucket drawn over its own time, the last one too (to the run's end)
            xs = [i * width for i in range(len(tl))] + [r["elapsed_us"]]
            ax.step(xs, [*tl, tl[-1]] if tl else [0.0], where="post", label=label, linewidth=1)
        mark_faults(ax, r["faults"])
        zero_based(ax, drawn)
        shown = min(len(r["flows"]), max_flows)
        of = f", first {shown} of {len(r['flows'])} flows" if shown < len(r["flows"]) else ""
        ax.set_title(f"{result['scenario']} [{name}]: goodput per flow{of}", fontsize=9)
        ax.set_ylabel("Gb/s")
        if shown:  # every line drawn is named, however many flows the run had
            ax.legend(fontsize=6, ncol=2, loc="lower right")
    axes[len(runs) - 1, 0].set_xlabel("time (us, simulated)")
    if changed:  # the EVs of the first flow that left GOOD (retired, restored, denied)
        segments: dict[str, list[tuple[float, float, str]]] = {}
        for ev in changed:
            state, start, parts = "GOOD", 0.0, []
            for e in flow["ev_events"]:
                if e["ev"] == ev:
                    parts.append((start, e["t_us"], state))
                    state, start = e["new"], e["t_us"]
            parts.append((start, first_run["elapsed_us"], state))
            segments[ev] = parts
        ax = axes[len(runs), 0]
        draw_ev_states(ax, segments, min_width=first_run["elapsed_us"] * 0.003, ylabel="EV")
        ax.set_title(f"{flow['name']} [{next(iter(runs))}]: sender EVs that changed state", fontsize=9)
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
    ax.set_xlabel("job")
    ax.set_title(f"{result['scenario']}: completion time per job and run", fontsize=9)
    ax.legend(fontsize=7, title="run", title_fontsize=7)
    fig.tight_layout()
    return fig
