"""Median, 95 % bootstrap interval and verdict of a figure measured over seeds.

Why: a shape measured on one seed is an anecdote. Each figure of a shape is measured on
every seed; its median and a percentile-bootstrap 95 % interval of that median say where
it lies, and the verdict is read from the interval, never from the median alone:

- *holds*: the whole interval clears the figure's bar;
- *does not hold*: some of the interval lies outside the bar;
- *ties*: a comparison with a baseline (MRC's figure over the baseline's, parity 1) whose
  interval contains parity: neither is better on these seeds.

The bootstrap draws from a fixed seed, so the same values give the same interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

RESAMPLES = 4000
LEVEL = 0.95

HOLDS, TIES, FAILS = "holds", "ties", "does not hold"


@dataclass(frozen=True)
class Interval:
    median: float
    lo: float
    hi: float


def bootstrap(values: list[float], resamples: int = RESAMPLES, level: float = LEVEL) -> Interval:
    """The median of ``values`` and a percentile-bootstrap interval of it (fixed draw)."""
    if not values:
        raise ValueError("no values")
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(20261124)
    draws = np.median(x[rng.integers(0, len(x), size=(resamples, len(x)))], axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return Interval(float(np.median(x)), float(lo), float(hi))


@dataclass(frozen=True)
class Bar:
    """What a figure must be: at least ``lo`` and/or at most ``hi``; ``parity`` marks a
    comparison (MRC over a baseline, oriented so that above parity means MRC is better)."""

    lo: float | None = None
    hi: float | None = None
    parity: float | None = None

    def text(self) -> str:
        if self.parity is not None:
            return f"> {self.parity:g} (MRC better)"
        if self.lo is not None and self.hi is not None:
            return f"{self.lo:g}..{self.hi:g}"
        return f">= {self.lo:g}" if self.lo is not None else f"<= {self.hi:g}"

    def clears(self, lo: float, hi: float) -> bool:
        if self.parity is not None:
            return lo > self.parity
        return (self.lo is None or lo >= self.lo) and (self.hi is None or hi <= self.hi)

    def verdict(self, iv: Interval) -> str:
        if self.clears(iv.lo, iv.hi):
            return HOLDS
        if self.parity is not None and iv.lo <= self.parity <= iv.hi:
            return TIES
        return FAILS


def _levels(bar: Bar | None) -> dict[str, float] | None:
    """The bar's numbers by name (lo, hi, parity), for plots and checks."""
    if bar is None:
        return None
    return {k: v for k, v in (("lo", bar.lo), ("hi", bar.hi), ("parity", bar.parity)) if v is not None}


def judge(values: list[float | None], bar: Bar | None) -> dict[str, Any]:
    """A figure's per-seed values, median, interval and verdict (JSON-able).

    A seed without a value (a run that did not complete) makes the figure *does not hold*:
    the interval cannot be said to clear a bar it was not measured against."""
    have = [v for v in values if v is not None and math.isfinite(v)]
    out: dict[str, Any] = {"values": values, "bar": bar.text() if bar else None, "levels": _levels(bar)}
    if not have:
        return {**out, "median": None, "ci95": None, "verdict": FAILS if bar else None}
    iv = bootstrap(have)
    out.update(median=iv.median, ci95=[iv.lo, iv.hi])
    if bar is None:
        out["verdict"] = None
    elif len(have) < len(values):
        out["verdict"] = FAILS
        out["missing"] = len(values) - len(have)
    else:
        out["verdict"] = bar.verdict(iv)
    return out


def row_verdict(verdicts: list[str]) -> str:
    """A shape over its claim figures: holds if all hold, ties if the rest hold and some tie."""
    if any(v == FAILS for v in verdicts) or not verdicts:
        return FAILS
    return TIES if TIES in verdicts else HOLDS
