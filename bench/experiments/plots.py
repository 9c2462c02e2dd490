"""The experiments' plots (matplotlib, Agg backend): goodput timelines and grouped bars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLOURS = {"mrc": "#2ca02c", "single-path": "#d62728", "ecmp": "#1f77b4", "tcp": "#9467bd"}


def timelines(
    path: Path,
    title: str,
    series: dict[str, list[tuple[float, float]]],
    faults: Mapping[str, Sequence[tuple[float, float | None]]] | None = None,
    ylabel: str = "goodput (Mbit/s)",
) -> Path:
    """One panel per series (mode): goodput over time, fault windows shaded."""
    n = max(1, len(series))
    fig, axes = plt.subplots(n, 1, figsize=(8, 2.2 * n + 0.6), squeeze=False)  # own time axis per mode
    for ax, (name, points) in zip(axes[:, 0], series.items(), strict=False):
        if points:
            # each point is (bin end, rate over the bin): draw every bin from its start, the first from 0
            xs = [0.0, *(p[0] for p in points)]
            ys = [points[0][1], *(p[1] for p in points)]
            ax.step(xs, ys, where="pre", color=COLOURS.get(name.split(" ")[0], "#444"), label=name)
            ax.set_ylim(bottom=0)
        for start, end in (faults or {}).get(name, []):
            ax.axvspan(start, end if end is not None else start + 0.05, color="#ff7f0e", alpha=0.2)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.legend(loc="upper right", fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the transfer started (shaded: fault active; own scale per panel)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def bars(
    path: Path,
    title: str,
    groups: dict[str, dict[str, float]],
    ylabel: str,
    reference: float | None = None,
) -> Path:
    """Grouped bars: ``groups[group][series] = value`` (series coloured by mode)."""
    fig, ax = plt.subplots(figsize=(8, 3.6))
    names = list(groups)
    series = sorted(
        {s for g in groups.values() for s in g}, key=lambda s: list(COLOURS).index(s) if s in COLOURS else 99
    )
    width = 0.8 / max(1, len(series))
    for i, s in enumerate(series):
        xs = [j + i * width for j in range(len(names))]
        ys = [groups[g].get(s, 0.0) or 0.0 for g in names]
        ax.bar(xs, ys, width, label=s, color=COLOURS.get(s))
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(names))])
    ax.set_xticklabels(names, fontsize=8)
    if reference is not None:
        ax.axhline(reference, color="#444", ls="--", lw=1)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def lines(
    path: Path, title: str, xs: list[Any], series: dict[str, list[float]], xlabel: str, ylabel: str
) -> Path:
    fig, ax = plt.subplots(figsize=(8, 3.6))
    for name, ys in series.items():
        ax.plot(xs[: len(ys)], ys, marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
