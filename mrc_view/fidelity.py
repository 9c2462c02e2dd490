"""The run's fidelity verdict on the page: read from the run directory, recorded, shown.

The testbed's fidelity monitor (``topologies.fidelity``) rewrites ``<run>/fidelity.json``
every few seconds; the collector turns each new version into a ``fidelity`` record
(``mrc_fabric.recording``), so the live page and a replay show the verdict as it stood.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mrc_fabric.recording import FIDELITY_FILE


def read_record(run_dir: Path, t: float, seen: float) -> dict[str, Any] | None:
    """A ``fidelity`` record when the monitor wrote a verdict newer than ``seen`` (its
    ``updated_unix``), else None (no monitor, no new verdict, a file being replaced)."""
    try:
        data = json.loads((run_dir / FIDELITY_FILE).read_text())
        updated = float(data["updated_unix"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if updated <= seen:
        return None
    return {
        "k": "fidelity",
        "t": t,
        "updated_unix": updated,
        "faithful": bool(data.get("faithful")),
        "verdict": str(data.get("verdict", "")),
        "line": str(data.get("line", "")),
    }


def state(r: dict[str, Any]) -> dict[str, Any]:
    """What a frame carries of a ``fidelity`` record."""
    return {
        "faithful": bool(r.get("faithful")),
        "verdict": str(r.get("verdict", "")),
        "line": str(r.get("line", "")),
    }
