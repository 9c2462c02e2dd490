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

from finsy.proto import p4i as p4info_pb2

from mrc_fabric.p4info import P4InfoError, P4InfoIndex, default_index

MATCH_KINDS = {v: k for k, v in p4info_pb2.MatchField.MatchType.items()}


def _kind(mt: int) -> str:
    return str(MATCH_KINDS.get(mt, mt)).lower()


def contract_gaps(user: p4info_pb2.P4Info, contract: P4InfoIndex | None = None) -> list[str]:
    """Every table, match field, action, parameter and counter of the contract that ``user``
    lacks or declares differently (empty: the controller can program it)."""
    ref = contract or default_index()
    mine = P4InfoIndex(user)
    gaps: list[str] = []
    for action in ref.actions.values():
        try:
            got = mine.action(action.name)
        except P4InfoError:
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
        try:
            got_t = mine.table(table.name)
        except P4InfoError:
            gaps.append(f"table {table.name}: missing")
            continue
        for fname, mf in table.match_fields.items():
            have_f = got_t.match_fields.get(fname)
            want = f"{_kind(mf.match_type)} bit<{mf.bitwidth}>"
            if have_f is None:
                gaps.append(f"table {table.name}: match field {fname} ({want}) missing")
            elif (have_f.match_type, have_f.bitwidth) != (mf.match_type, mf.bitwidth):
                held = f"{_kind(have_f.match_type)} bit<{have_f.bitwidth}>"
                gaps.append(f"table {table.name}: match field {fname} is {held}, the contract's {want}")
        ids = {mine.actions[a].id: a for a in mine.actions}
        names = {mine.actions[ids[i]].name for i in got_t.action_ids if i in ids}
        for aid in sorted(table.action_ids):
            name = ref.action(aid).name
            if name not in names:
                gaps.append(f"table {table.name}: action {name} not among its actions")
    for counter in ref.counters.values():
        try:
            got_c = mine.counter(counter.name)
        except P4InfoError:
            gaps.append(f"counter {counter.name}: missing")
            continue
        if got_c.size < counter.size:
            gaps.append(f"counter {counter.name}: {got_c.size} cells, the contract needs {counter.size}")
    return gaps


def contract_table_names(contract: P4InfoIndex | None = None) -> frozenset[str]:
    """The full names of the tables the controller owns; every other table is the user's."""
    return frozenset(t.name for t in (contract or default_index()).tables.values())
