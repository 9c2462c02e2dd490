"""A rich progress bar for long simulations: the loop runs in slices of events between redraws."""

from __future__ import annotations

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .network import Network

SLICE_EVENTS = 200_000


def run_with_progress(net: Network, limit_ns: int, label: str) -> None:
    """``net.run(limit_ns)`` with a bar of bytes placed (stderr, only when it is a terminal)."""
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.percentage:>5.1f}%"),
        TextColumn("sim {task.fields[sim_us]:>10.1f} us"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=True) as bar:
        task = bar.add_task(label, total=1.0, sim_us=0.0)
        while not net.run(limit_ns, max_events=SLICE_EVENTS):
            bar.update(task, completed=net.progress, sim_us=net.elapsed_ns / 1e3)
