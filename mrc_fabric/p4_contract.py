"""Which program a run's BMv2 switches run, and which of its tables the controller owns.

A user's own program (``mrc-testbed --p4``) may add anything and number its objects as p4c
likes -- the controller resolves names, never ids -- but must keep the contract's names
(:func:`mrc_fabric.p4names.missing_contract_names` lists what it lacks, so a run refuses to
start with every gap named at once). The controller owns only the contract's tables; every
other table is the user's to fill.
"""

from __future__ import annotations

import json
from pathlib import Path

from mrc_fabric.p4info import P4InfoIndex, default_index

PIPELINE_FILE = "p4/pipeline.json"  # in a run directory: the program its BMv2 switches run


def read_pipeline(run_dir: Path) -> dict[str, str] | None:
    """``<run>/p4/pipeline.json`` (written by ``mrc-testbed --p4``): the program's ``source``, its
    ``bmv2_json`` and ``p4info``; None when the run uses the committed program. A file that is
    there but unreadable raises ValueError naming it: a run must not fall back to another program."""
    path = run_dir / PIPELINE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    keys = ("source", "bmv2_json", "p4info")
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in keys):
        raise ValueError(f"{path}: expected an object with the strings {', '.join(keys)}")
    return {k: data[k] for k in keys}


def contract_table_names(contract: P4InfoIndex | None = None) -> frozenset[str]:
    """The full names of the tables the controller owns; every other table is the user's."""
    return frozenset(t.name for t in (contract or default_index()).tables.values())
