"""A rich progress bar for long simulations: the loop runs in slices of events between redraws.

Slicing never changes a run (the loop only pauses between events). The bar appears only
when asked for, or, in ``auto`` mode, when stderr is a terminal and the run has already
taken more than ``AUTO_AFTER_S`` seconds of wall-clock time. Asked for where stderr is no
terminal (a log, a pipe, CI), it is a plain line every ``PLAIN_EVERY_S`` instead: a bar
redrawn in place means nothing in a file.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .network import Network

SLICE_EVENTS = 100_000
AUTO_AFTER_S = 3.0
PLAIN_EVERY_S = 2.0  # a progress line this often where stderr is no terminal


def plain_line(label: str, fraction: float, sim_us: float, wall_s: float) -> str:
    """One progress line for a log: how far, in simulated and in wall-clock time."""
    return f"{label}: {fraction:6.1%} of the bytes placed, {sim_us:,.1f} us simulated, {wall_s:.0f} s"


def _plain(net: Network, limit_ns: int, label: str, started: float) -> None:
    last = time.monotonic()
    while not net.run(limit_ns, max_events=SLICE_EVENTS):
        if time.monotonic() - last >= PLAIN_EVERY_S:
            last = time.monotonic()
            print(
                plain_line(label, net.progress, net.elapsed_ns / 1e3, last - started),
                file=sys.stderr,
                flush=True,
            )
    wall = time.monotonic() - started
    print(plain_line(label, net.progress, net.elapsed_ns / 1e3, wall), file=sys.stderr, flush=True)


def run_with_progress(net: Network, limit_ns: int, label: str, show: bool | None = True) -> None:
    """``net.run(limit_ns)`` with a bar of bytes placed on stderr; ``show=None``: automatic."""
    started = time.monotonic()
    if show and not sys.stderr.isatty():
        _plain(net, limit_ns, label, started)
        return
    if show is None:
        if not sys.stderr.isatty():
            net.run(limit_ns)
            return
        while time.monotonic() - started < AUTO_AFTER_S:
            if net.run(limit_ns, max_events=SLICE_EVENTS):
                return
    from rich.console import Console  # only once a bar shows: rich costs a run ~30 ms to import
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("sim {task.fields[sim_us]:>10.1f} us"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=1.0, sim_us=0.0)
        while not net.run(limit_ns, max_events=SLICE_EVENTS):
            bar.update(task, completed=net.progress, sim_us=net.elapsed_ns / 1e3)
