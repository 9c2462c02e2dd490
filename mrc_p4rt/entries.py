"""Switch table entries as plain values: what the compiler produces and P4Runtime clients write.

Entries name tables, actions and parameters by their P4Info aliases (docs/design.md §5); the
P4Runtime client resolves them to ids, so nothing here depends on numeric ids.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True)
class Lpm:
    value: int
    prefix_len: int


MatchValue = Exact | Lpm


@dataclass(frozen=True, slots=True)
class TableEntry:
    """One table entry: ``match`` and ``params`` are (name, value) pairs in P4Info order."""

    table: str
    match: tuple[tuple[str, MatchValue], ...]
    action: str
    params: tuple[tuple[str, int], ...] = ()
    priority: int = 0

    @property
    def key(self) -> tuple[str, tuple[tuple[str, MatchValue], ...], int]:
        """What identifies the entry inside its table (P4Runtime: table id + match + priority)."""
        return (self.table, self.match, self.priority)

    def param(self, name: str) -> int:
        for n, v in self.params:
            if n == name:
                return v
        raise KeyError(f"{self.action} has no parameter {name!r}")

    def field(self, name: str) -> MatchValue:
        for n, v in self.match:
            if n == name:
                return v
        raise KeyError(f"{self.table} has no match field {name!r}")

    def describe(self) -> str:
        def fmt(v: MatchValue) -> str:
            return f"{v.value:#x}/{v.prefix_len}" if isinstance(v, Lpm) else f"{v.value:#x}"

        match = ",".join(f"{n}={fmt(v)}" for n, v in self.match)
        params = ",".join(f"{n}={v:#x}" for n, v in self.params)
        return f"{self.table}[{match}] -> {self.action}({params})"
