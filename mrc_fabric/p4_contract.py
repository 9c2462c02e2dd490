"""Does a P4 program keep the MRC contract? What its P4Info lacks, one precise line each.

The controller programs every switch through the names of the committed P4Info
(``p4src/mrc_switch.p4info.txtpb``, docs/p4-pipeline.md): its tables with their match
fields (name, match kind, width) and actions, the actions with their parameters (name,
width), and the counters it reads. A user's own program (``mrc-testbed --p4``) may add
anything and number its objects as p4c likes -- the controller resolves names, never ids
-- but must keep all of those. :func:`contract_gaps` lists what it does not keep, so a
run refuses to start with every gap named at once instead of failing at the first write.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from finsy.proto import p4i as p4info_pb2

from mrc_fabric.p4info import P4InfoError, P4InfoIndex, TableInfo, default_index

MATCH_KINDS = {v: k for k, v in p4info_pb2.MatchField.MatchType.items()}


def _kind(mt: int) -> str:
    return str(MATCH_KINDS.get(mt, mt)).lower()


_T = TypeVar("_T")


def _found(find: Callable[[str], _T], name: str) -> _T | None:
    try:
        return find(name)
    except P4InfoError:
        return None


def _table_gaps(ref: P4InfoIndex, mine: P4InfoIndex, table: TableInfo, got: TableInfo) -> list[str]:
    """A contract table's match fields and actions that the user's table lacks or changed."""
    gaps = []
    for fname, mf in table.match_fields.items():
        have = got.match_fields.get(fname)
        want = f"{_kind(mf.match_type)} bit<{mf.bitwidth}>"
        if have is None:
            gaps.append(f"table {table.name}: match field {fname} ({want}) missing")
        elif (have.match_type, have.bitwidth) != (mf.match_type, mf.bitwidth):
            held = f"{_kind(have.match_type)} bit<{have.bitwidth}>"
            gaps.append(f"table {table.name}: match field {fname} is {held}, the contract's {want}")
    names = {a.name for a in mine.actions.values() if a.id in got.action_ids}
    for aid in sorted(table.action_ids):
        name = ref.action(aid).name
        if name not in names:
            gaps.append(f"table {table.name}: action {name} not among its actions")
    return gaps


def contract_gaps(user: p4info_pb2.P4Info, contract: P4InfoIndex | None = None) -> list[str]:
    """Every table, match field, action, parameter and counter of the contract that ``user``
    lacks or declares differently (empty: the controller can program it)."""
    ref = contract or default_index()
    mine = P4InfoIndex(user)
    gaps: list[str] = []
    for action in ref.actions.values():
        got = _found(mine.action, action.name)
        if got is None:
            gaps.append(f"action {action.name}: missing")
            continue
        for param, (_pid, width) in action.params.items():
            have = got.params.get(param)
            if have is None:
                gaps.append(f"action {action.name}: parameter {param} (bit<{width}>) missing")
            elif have[1] != width:
                gaps.append(
                    f"action {action.name}: parameter {param} is bit<{have[1]}>, the contract's bit<{width}>"
                )
    for table in ref.tables.values():
        got_t = _found(mine.table, table.name)
        if got_t is None:
            gaps.append(f"table {table.name}: missing")
            continue
        gaps += _table_gaps(ref, mine, table, got_t)
    for counter in ref.counters.values():
        got_c = _found(mine.counter, counter.name)
        if got_c is None:
            gaps.append(f"counter {counter.name}: missing")
        elif got_c.size < counter.size:
            gaps.append(f"counter {counter.name}: {got_c.size} cells, the contract needs {counter.size}")
    return gaps


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
