"""The demo's PNG: goodput over time (with and without faults) above the sender's EV states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

STATE_COLOURS = {"GOOD": "#2ca02c", "SKIP": "#ffbf00", "ASSUMED_BAD": "#d62728", "DENIED": "#7f7f7f"}


def ev_segments(
    evs: list[dict[str, Any]], changes: list[dict[str, Any]], end: float
) -> dict[str, list[tuple[float, float, str]]]:
    """Per EV label: (start, end, state) segments from its first state and its changes."""
    out: dict[str, list[tuple[float, float, str]]] = {}
    for row in evs:
        ev = row["ev"]
        state, start = row["initial_state"], 0.0
        segs = []
        for c in changes:
            if c["ev"] != ev or c["t"] > end or c["old"] == c["new"]:
                continue
            segs.append((start, c["t"], state))
            state, start = c["new"], c["t"]
        segs.append((start, max(end, start), state))
        out[f"{ev} p{row['plane']} t1={row['t1']}"] = segs
    return out


def timeline_png(result: dict[str, Any], path: Path) -> None:
    faulted, clean = result["faulted"], result["clean"]
    fig, (ax1, ax2) = plt.subplots(
        2, 1, figsize=(10, 6.5), sharex=True, gridspec_kw={"height_ratios": [2, 3]}
    )
    for run, colour, label in ((clean, "#9e9e9e", "no faults"), (faulted, "#1f77b4", "with faults")):
        delivered = run.get("delivered_mbit_s") or []
        acked = run["goodput_mbit_s"]
        if len(delivered) > 1:  # delivered bytes: what the receiver got, holes or not
            ax1.step(
                [p[0] for p in delivered], [p[1] for p in delivered], where="pre", color=colour, label=label
            )
            label = f"{label}: cumulative ACK"
            style = ":"
        else:
            style = "-"
        if acked:
            ax1.step(
                [p[0] for p in acked],
                [p[1] for p in acked],
                where="pre",
                color=colour,
                label=label,
                linestyle=style,
            )
    ax1.set_ylabel("delivered (Mbit/s)")
    ax1.set_title(
        f"MRC live on {result['target'].upper()} switches: {result['src']} → {result['dst']}, "
        f"{result['size'] >> 20} MiB",
        fontsize=10,
    )
    ax1.legend(loc="lower right", fontsize=8)
    end = faulted["wall_s"]
    for f in faulted["faults"]:
        if f["injected_at"] is None:
            continue
        for ax in (ax1, ax2):
            ax.axvline(f["injected_at"], color="k", linestyle="--", linewidth=0.8)
        ax1.annotate(f" {f['label']}", (f["injected_at"], 0), xycoords=("data", "axes fraction"), fontsize=7)
    segs = ev_segments(faulted["evs"], faulted["ev_changes"], end)
    for row, (_label, parts) in enumerate(sorted(segs.items())):
        for start, stop, state in parts:
            width = max(stop - start, end * 0.003)
            ax2.broken_barh([(start, width)], (row - 0.4, 0.8), color=STATE_COLOURS.get(state, "k"))
    ax2.set_yticks(range(len(segs)))
    ax2.set_yticklabels(sorted(segs), fontsize=7, family="monospace")
    ax2.set_ylabel("sender EV")
    ax2.set_xlabel("seconds since the transfer started")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in STATE_COLOURS.values()]
    ax2.legend(handles, list(STATE_COLOURS), loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
