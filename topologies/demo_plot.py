"""The demo's PNG: goodput over time (with and without faults) above the sender's EV states.

The EV states are one thin row per EV, grouped in one band per path (plane, T1) with one
label per band, so that 128-256 EVs read as a handful of paths: a fault on a path shows as
red across its band. GOOD is a light green so that ASSUMED_BAD and SKIP stand out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from mrc_host.sim.plots import STATE_COLOURS


def ev_segments(
    evs: list[dict[str, Any]], changes: list[dict[str, Any]], end: float
) -> dict[str, list[tuple[float, float, str]]]:
    """Per EV: (start, end, state) segments from its first state and its changes."""
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
        out[ev] = segs
    return out


def path_bands(evs: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """The EVs grouped by path, (label, EVs) per (plane, T1) in order: one band and one label each."""
    bands: dict[tuple[int, int], list[str]] = {}
    for row in evs:
        bands.setdefault((int(row["plane"]), int(row["t1"])), []).append(row["ev"])
    return [
        (f"plane {plane} · T1 {t1}\n{len(members)} EVs", sorted(members))
        for (plane, t1), members in sorted(bands.items())
    ]


def _draw_ev_bands(ax: Any, evs: list[dict[str, Any]], segs: dict[str, list[tuple[float, float, str]]],
                   end: float) -> None:  # fmt: skip
    """One thin row per EV, rows grouped in a band per path with one label per band."""
    row = 0
    ticks, labels = [], []
    for i, (label, members) in enumerate(path_bands(evs)):
        top = row
        for ev in members:
            for start, stop, state in segs.get(ev, []):
                width = max(stop - start, end * 0.003)
                ax.broken_barh([(start, width)], (row, 1.0), color=STATE_COLOURS.get(state, "k"))
            row += 1
        if i % 2:
            ax.axhspan(top, row, color="#000000", alpha=0.06, zorder=0, linewidth=0)
        ax.axhline(row, color="white", linewidth=1.5)
        ticks.append((top + row) / 2)
        labels.append(label)
    ax.set_ylim(row, 0)  # first path on top
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8)
    ax.tick_params(axis="y", length=0)


def timeline_png(result: dict[str, Any], path: Path) -> None:
    faulted, clean = result["faulted"], result["clean"]
    fig, (ax1, ax2) = plt.subplots(
        2, 1, figsize=(10, 7.5), sharex=True, gridspec_kw={"height_ratios": [2, 4]}
    )
    for run, colour, label in ((clean, "#9e9e9e", "no faults"), (faulted, "#1f77b4", "with faults")):
        delivered = run.get("delivered_mbit_s") or []
        acked = run["goodput_mbit_s"]
        if len(delivered) > 1:  # delivered bytes: what the receiver got, holes or not
            ax1.step(
                [p[0] for p in delivered], [p[1] for p in delivered], where="pre", color=colour, label=label
            )
            label = f"{label}: completed WRITEs"
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
    _draw_ev_bands(ax2, faulted["evs"], segs, end)
    ax2.set_ylabel(f"sender EVs ({len(segs)}), by path")
    ax2.set_xlabel("seconds since the transfer started")
    handles = [Rectangle((0, 0), 1, 1, color=c) for c in STATE_COLOURS.values()]
    ax2.legend(handles, list(STATE_COLOURS), loc="lower right", bbox_to_anchor=(1.0, 1.0), fontsize=7, ncol=4,
               frameon=False, borderaxespad=0.2)  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
