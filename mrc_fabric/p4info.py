"""The P4Info of p4src/mrc_switch.p4: loading it and resolving names to ids.

The committed P4Info text file is the P4Runtime contract between the
controller and both data-plane targets (BMv2 and the Linux shim). Code refers
to tables, actions, match fields, parameters and counters by the short names
of docs/design.md §5 (``my_usid``, ``set_next_hop``...) and this module turns them into
the numeric ids that travel on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TypeVar

from finsy.proto import p4i as p4info_pb2
from google.protobuf import text_format

P4SRC = Path(__file__).resolve().parent.parent / "p4src"
P4INFO_PATH = P4SRC / "mrc_switch.p4info.txtpb"


class P4InfoError(KeyError):
    """A name that the P4Info does not define."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def load_p4info(path: Path = P4INFO_PATH) -> p4info_pb2.P4Info:
    """Parse a P4Info text file."""
    info = p4info_pb2.P4Info()
    text_format.Parse(path.read_text(), info)
    return info


@dataclass(frozen=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    match_type: int  # p4info_pb2.MatchField.MatchType


@dataclass(frozen=True)
class ActionInfo:
    id: int
    name: str
    alias: str
    params: dict[str, tuple[int, int]]  # name -> (id, bitwidth)

    def param_by_id(self, pid: int) -> tuple[str, int]:
        for name, (i, width) in self.params.items():
            if i == pid:
                return name, width
        raise P4InfoError(f"action {self.alias} has no parameter id {pid}")


@dataclass(frozen=True)
class TableInfo:
    id: int
    name: str
    alias: str
    match_fields: dict[str, MatchFieldInfo]
    action_ids: frozenset[int]
    default_only_action_ids: frozenset[int]
    size: int

    def field_by_id(self, fid: int) -> MatchFieldInfo:
        for mf in self.match_fields.values():
            if mf.id == fid:
                return mf
        raise P4InfoError(f"table {self.alias} has no match field id {fid}")


@dataclass(frozen=True)
class CounterInfo:
    id: int
    name: str
    alias: str
    size: int


_Info = TypeVar("_Info", TableInfo, ActionInfo, CounterInfo)


@dataclass
class P4InfoIndex:
    """Name ↔ id lookups over one P4Info; accepts full names and aliases."""

    p4info: p4info_pb2.P4Info
    tables: dict[str, TableInfo] = field(default_factory=dict)
    actions: dict[str, ActionInfo] = field(default_factory=dict)
    counters: dict[str, CounterInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for a in self.p4info.actions:
            action = ActionInfo(
                a.preamble.id,
                a.preamble.name,
                a.preamble.alias or a.preamble.name,
                {p.name: (p.id, p.bitwidth) for p in a.params},
            )
            self.actions[action.alias] = action
        for t in self.p4info.tables:
            table = TableInfo(
                t.preamble.id,
                t.preamble.name,
                t.preamble.alias or t.preamble.name,
                {m.name: MatchFieldInfo(m.id, m.name, m.bitwidth, m.match_type) for m in t.match_fields},
                frozenset(r.id for r in t.action_refs),
                frozenset(r.id for r in t.action_refs if r.scope == p4info_pb2.ActionRef.DEFAULT_ONLY),
                t.size,
            )
            self.tables[table.alias] = table
        for c in self.p4info.counters:
            counter = CounterInfo(c.preamble.id, c.preamble.name, c.preamble.alias or c.preamble.name, c.size)
            self.counters[counter.alias] = counter

    @staticmethod
    def _find(kind: str, items: Mapping[str, _Info], key: str | int) -> _Info:
        if isinstance(key, int):
            for v in items.values():
                if v.id == key:
                    return v
            raise P4InfoError(f"no {kind} with id {key}")
        if key in items:
            return items[key]
        for v in items.values():
            if v.name == key:
                return v
        raise P4InfoError(f"no {kind} named {key!r}")

    def table(self, key: str | int) -> TableInfo:
        return self._find("table", self.tables, key)

    def action(self, key: str | int) -> ActionInfo:
        return self._find("action", self.actions, key)

    def counter(self, key: str | int) -> CounterInfo:
        return self._find("counter", self.counters, key)


@cache
def default_index() -> P4InfoIndex:
    """The index of the committed P4Info (cached: it never changes at run time)."""
    return P4InfoIndex(load_p4info())
