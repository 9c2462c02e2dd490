"""Table entries by name (:class:`~mrc_p4rt.entries.TableEntry`) to and from ``p4.v1.TableEntry``.

Ids come from the P4Info (:class:`mrc_fabric.p4info.P4InfoIndex`); byte strings are written
in the canonical, shortest form P4Runtime 1.3 asks for, which is also what a conforming
switch reads back, so an entry read from a switch compares equal to the one written.
"""

from __future__ import annotations

from collections.abc import Iterable

from finsy.proto import p4r

from mrc_fabric.p4info import P4InfoIndex

from .entries import Exact, Lpm, MatchValue, TableEntry

# A match value by name: an Exact/Lpm, or for hand-written entries an int (exact) or a
# (value, prefix length) tuple (LPM).
LooseMatch = MatchValue | int | tuple[int, int]


def canonical_bytes(value: int) -> bytes:
    """Shortest big-endian encoding; zero is one zero byte (P4Runtime 1.3 §8.4)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def build_entry(
    index: P4InfoIndex,
    table: str,
    match: Iterable[tuple[str, LooseMatch]] = (),
    action: str | None = None,
    params: Iterable[tuple[str, int]] = (),
    priority: int = 0,
) -> p4r.TableEntry:
    """A ``p4.v1.TableEntry`` by P4Info names; no action makes a key (delete, read query)."""
    info = index.table(table)
    msg = p4r.TableEntry(table_id=info.id, priority=priority)
    for name, value in match:
        fm = msg.match.add(field_id=info.match_fields[name].id)
        if isinstance(value, Lpm):
            fm.lpm.value, fm.lpm.prefix_len = canonical_bytes(value.value), value.prefix_len
        elif isinstance(value, tuple):
            fm.lpm.value, fm.lpm.prefix_len = canonical_bytes(value[0]), value[1]
        elif isinstance(value, Exact):
            fm.exact.value = canonical_bytes(value.value)
        else:
            fm.exact.value = canonical_bytes(value)
    if action is not None:
        ainfo = index.action(action)
        msg.action.action.action_id = ainfo.id
        for name, pvalue in params:
            msg.action.action.params.add(param_id=ainfo.params[name][0], value=canonical_bytes(pvalue))
    return msg


def encode_entry(index: P4InfoIndex, entry: TableEntry) -> p4r.TableEntry:
    return build_entry(index, entry.table, entry.match, entry.action, entry.params, entry.priority)


def decode_entry(index: P4InfoIndex, msg: p4r.TableEntry) -> TableEntry:
    """The named form of an entry read from a switch (not a default entry: it has no match)."""
    table = index.table(msg.table_id)
    match: list[tuple[str, MatchValue]] = []
    for fm in msg.match:
        mf = table.field_by_id(fm.field_id)
        kind = fm.WhichOneof("field_match_type")
        if kind == "lpm":
            match.append((mf.name, Lpm(int.from_bytes(fm.lpm.value, "big"), fm.lpm.prefix_len)))
        elif kind == "exact":
            match.append((mf.name, Exact(int.from_bytes(fm.exact.value, "big"))))
        else:
            raise ValueError(f"table {table.alias}: match kind {kind} is not used by this program")
    order = list(table.match_fields)
    match.sort(key=lambda m: order.index(m[0]))
    action = index.action(msg.action.action.action_id)
    params = sorted(
        (
            (action.param_by_id(p.param_id)[0], int.from_bytes(p.value, "big"))
            for p in msg.action.action.params
        ),
        key=lambda p: action.params[p[0]][0],
    )
    return TableEntry(table.alias, tuple(match), action.alias, tuple(params), msg.priority)
