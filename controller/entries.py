"""Every entry one switch should hold; the entry values themselves live in :mod:`mrc_p4rt.entries`."""

from __future__ import annotations

from dataclasses import dataclass, field

from mrc_p4rt.entries import Exact, Lpm, MatchValue, TableEntry

__all__ = ["Exact", "Lpm", "MatchValue", "SwitchEntries", "TableEntry"]


@dataclass
class SwitchEntries:
    """Every entry one switch should hold, in the order they are to be written."""

    switch: str
    entries: list[TableEntry] = field(default_factory=list)

    def table(self, name: str) -> list[TableEntry]:
        return [e for e in self.entries if e.table == name]
