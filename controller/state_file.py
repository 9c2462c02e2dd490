"""What a restarted controller needs to carry on: the switches its routes were installed on,
the faults in force and the next fault id, in one JSON file in the run directory.

Why: the switches keep their tables when the controller dies, and the first thing a new
controller does on each switch is make the tables match its desired state. A controller
that had forgotten the routes and faults would delete them, and every packet would meet no
route until someone installed them again. Saved after every change (written to a temporary
file and renamed, so a crash mid-write leaves the previous state), read once at start.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.faults import Direction, FaultKind, FaultSpec

__all__ = ["ControllerState", "SavedFault", "StateFileError", "load_state", "save_state"]

VERSION = 1


class StateFileError(ValueError):
    """The state file is not one this controller wrote."""


@dataclass(frozen=True)
class SavedFault:
    id: str
    spec: FaultSpec
    created_at: float  # wall clock (time.time())
    expires_at: float = 0.0  # 0: until cleared


@dataclass
class ControllerState:
    routes_installed: list[str] = field(default_factory=list)
    faults: list[SavedFault] = field(default_factory=list)
    next_id: int = 1


def save_state(path: Path, state: ControllerState) -> None:
    doc = {
        "version": VERSION,
        "routes_installed": sorted(state.routes_installed),
        "next_id": state.next_id,
        "faults": [
            {
                **asdict(f),
                "spec": {**asdict(f.spec), "kind": str(f.spec.kind), "direction": str(f.spec.direction)},
            }
            for f in state.faults
        ],
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, path)


def load_state(path: Path) -> ControllerState:
    """The saved state; StateFileError names what is wrong with a file this controller cannot read."""
    try:
        doc: Any = json.loads(path.read_text())
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            raise StateFileError(f"{path}: version: not {VERSION}")
        faults = [
            SavedFault(
                str(f["id"]),
                FaultSpec(
                    FaultKind(f["spec"]["kind"]),
                    str(f["spec"]["target"]),
                    Direction(f["spec"]["direction"]),
                    float(f["spec"]["probability"]),
                    float(f["spec"]["period_s"]),
                    float(f["spec"]["duration_s"]),
                ),
                float(f["created_at"]),
                float(f["expires_at"]),
            )
            for f in doc["faults"]
        ]
        return ControllerState([str(s) for s in doc["routes_installed"]], faults, int(doc["next_id"]))
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, StateFileError):
            raise
        raise StateFileError(f"{path}: {exc!r}") from exc
