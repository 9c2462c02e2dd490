"""What the simulator benches (``bench.sim_faults``, ``bench.sim_transport``) share: their
command line, the head of their JSON record and how a figure is written."""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any


def start(prog: str, description: str | None, quick_help: str, argv: list[str] | None) -> argparse.Namespace:
    """The parsed ``--out`` / ``--quick`` command line, the ``--out`` folder made."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help=quick_help)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def record_head(quick: bool) -> dict[str, Any]:
    """Where and how a result was measured: the machine, the Python, the short run or not."""
    return {"machine": platform.node(), "python": platform.python_version(), "quick": quick}


def finish(out: Path, name: str, data: dict[str, Any], plot: Callable[[dict[str, Any], Path], None]) -> int:
    """Writes ``<out>/<name>.json`` and its figure ``<name>.png``, prints each target met or
    missed; the exit status (0: the numbers are the result, a miss is not an error)."""
    (out / f"{name}.json").write_text(json.dumps(data, indent=1))
    plot(data, out / f"{name}.png")
    for k, v in data["targets"].items():
        print(f"   {'ok  ' if v else 'MISS'} {k}")
    return 0


def save_figure(fig: Any, path: Path, dpi: int = 100) -> None:
    """Lays ``fig`` out, writes it to ``path`` and frees it (pyplot keeps every open figure)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
