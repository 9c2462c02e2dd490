"""Validation and decoding of P4Runtime table entries against the P4Info.

Every field of a ``p4.v1.TableEntry`` is checked here before anything reaches
the kernel: ids, bitwidths, byte-string encoding, LPM prefix lengths, action
references. Errors are INVALID_ARGUMENT with a message naming the field, so a
controller author can tell what to fix. Accepted entries are returned in the
canonical form that a Read gives back (shortest byte strings, P4Runtime ≥ 1.3).
"""

from __future__ import annotations

from dataclasses import dataclass

from finsy.proto import p4i, p4r

from mrc_fabric.p4info import ActionInfo, P4InfoError, P4InfoIndex, TableInfo
from mrc_p4rt.codec import canonical_bytes

from .errors import invalid

__all__ = ["canonical_bytes"]  # re-exported: the one encoder, shared with the clients

MatchKey = tuple[tuple[int, int, int], ...]  # (field id, value, prefix length or -1 for exact)


@dataclass(frozen=True)
class ActionCall:
    """An action with its decoded parameter values (by parameter name)."""

    name: str  # the action alias (``set_next_hop``)
    params: dict[str, int]


@dataclass(frozen=True)
class TableRow:
    """One accepted table entry: decoded key and action plus the canonical proto."""

    table: str  # table alias
    key: MatchKey
    action: ActionCall
    proto: p4r.TableEntry

    def field(self, name: str, index: P4InfoIndex) -> tuple[int, int] | None:
        """(value, prefix length) of a match field by name, None when wildcarded."""
        fid = index.table(self.table).match_fields[name].id
        for i, value, plen in self.key:
            if i == fid:
                return value, plen
        return None


def decode_bytes(data: bytes, bitwidth: int, what: str) -> int:
    """Accept the canonical form or the full-width (legacy) form of a bitstring."""
    full = (bitwidth + 7) // 8
    if not data:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"{what}: value {data.hex()} does not fit in {bitwidth} bits")
    if len(data) != full and data != canonical_bytes(value):
        raise invalid(
            f"{what}: {len(data)}-byte string {data.hex()} is neither canonical nor {full} bytes wide"
        )
    return value


def _table(index: P4InfoIndex, table_id: int) -> TableInfo:
    if table_id == 0:
        raise invalid("table_id: 0 is a wildcard, not allowed in a write")
    try:
        return index.table(table_id)
    except P4InfoError as exc:
        raise invalid(f"table_id: {exc}") from exc


def _action(index: P4InfoIndex, table: TableInfo, action_id: int, is_default: bool) -> ActionInfo:
    try:
        action = index.action(action_id)
    except P4InfoError as exc:
        raise invalid(f"action_id: {exc}") from exc
    if action_id not in table.action_ids:
        raise invalid(f"action_id: action {action.alias} is not an action of table {table.alias}")
    if not is_default and action_id in table.default_only_action_ids:
        raise invalid(f"action_id: action {action.alias} is default-only in table {table.alias}")
    return action


def decode_match(index: P4InfoIndex, table: TableInfo, fields: list[p4r.FieldMatch]) -> MatchKey:
    """Check the match fields of an entry and return its key (sorted by field id)."""
    seen: dict[int, tuple[int, int, int]] = {}
    for fm in fields:
        try:
            info = table.field_by_id(fm.field_id)
        except P4InfoError as exc:
            raise invalid(f"match field_id: {exc}") from exc
        what = f"match field {info.name} ({table.alias})"
        if fm.field_id in seen:
            raise invalid(f"{what}: given twice")
        kind = fm.WhichOneof("field_match_type")
        if info.match_type == p4i.MatchField.EXACT:
            if kind != "exact":
                raise invalid(f"{what}: expected an exact match, got {kind}")
            seen[fm.field_id] = (fm.field_id, decode_bytes(fm.exact.value, info.bitwidth, what), -1)
        elif info.match_type == p4i.MatchField.LPM:
            if kind != "lpm":
                raise invalid(f"{what}: expected an lpm match, got {kind}")
            plen = fm.lpm.prefix_len
            if not 1 <= plen <= info.bitwidth:
                raise invalid(
                    f"{what}: prefix_len {plen} outside 1..{info.bitwidth} (a /0 match is expressed by "
                    "omitting the field)"
                )
            value = decode_bytes(fm.lpm.value, info.bitwidth, what)
            if value & ((1 << (info.bitwidth - plen)) - 1):
                raise invalid(f"{what}: bits beyond prefix_len {plen} are not zero")
            seen[fm.field_id] = (fm.field_id, value, plen)
        else:  # pragma: no cover - the committed P4Info has only exact and lpm fields
            raise invalid(f"{what}: match type {info.match_type} not supported by the Linux target")
    for info in table.match_fields.values():
        if info.match_type == p4i.MatchField.EXACT and info.id not in seen:
            raise invalid(f"match field {info.name} ({table.alias}): exact match field missing")
    return tuple(seen[k] for k in sorted(seen))


def decode_action(index: P4InfoIndex, table: TableInfo, entry: p4r.TableEntry) -> ActionCall:
    kind = entry.action.WhichOneof("type")
    if kind != "action":
        raise invalid(f"action: table {table.alias} takes a direct action, got {kind or 'none'}")
    action = _action(index, table, entry.action.action.action_id, entry.is_default_action)
    params: dict[str, int] = {}
    for p in entry.action.action.params:
        try:
            name, width = action.param_by_id(p.param_id)
        except P4InfoError as exc:
            raise invalid(f"action param_id: {exc}") from exc
        what = f"action {action.alias} param {name}"
        if name in params:
            raise invalid(f"{what}: given twice")
        params[name] = decode_bytes(p.value, width, what)
    missing = sorted(set(action.params) - set(params))
    if missing:
        raise invalid(f"action {action.alias}: missing param(s) {', '.join(missing)}")
    return ActionCall(action.alias, params)


def canonical_entry(
    table: TableInfo, key: MatchKey, action: ActionCall, index: P4InfoIndex, is_default: bool = False
) -> p4r.TableEntry:
    """The TableEntry a Read returns for an accepted row."""
    entry = p4r.TableEntry(table_id=table.id, is_default_action=is_default)
    for fid, value, plen in key:
        fm = entry.match.add(field_id=fid)
        if plen < 0:
            fm.exact.value = canonical_bytes(value)
        else:
            fm.lpm.value = canonical_bytes(value)
            fm.lpm.prefix_len = plen
    info = index.action(action.name)
    entry.action.action.action_id = info.id
    for name, (pid, _width) in sorted(info.params.items(), key=lambda kv: kv[1][0]):
        entry.action.action.params.add(param_id=pid, value=canonical_bytes(action.params[name]))
    return entry


def decode_entry(index: P4InfoIndex, entry: p4r.TableEntry, with_action: bool) -> TableRow:
    """Validate a written entry; ``with_action`` is False for DELETE (action ignored)."""
    table = _table(index, entry.table_id)
    if entry.priority != 0:
        raise invalid(f"priority: table {table.alias} has no ternary/range field, priority must be 0")
    if entry.HasField("meter_config") or entry.HasField("counter_data") or entry.idle_timeout_ns:
        raise invalid(f"table {table.alias}: direct meters, counters and idle timeouts are not in the P4Info")
    if entry.is_default_action:
        if entry.match:
            raise invalid(f"match: the default entry of {table.alias} has no match fields")
        key: MatchKey = ()
    else:
        key = decode_match(index, table, list(entry.match))
    if not with_action:
        return TableRow(table.alias, key, ActionCall("", {}), entry)
    action = decode_action(index, table, entry)
    return TableRow(
        table.alias, key, action, canonical_entry(table, key, action, index, entry.is_default_action)
    )
