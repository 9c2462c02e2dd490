"""How much one Read may ask for and get back.

A ReadRequest is untrusted input: one of 200 KB can list "every table" 50,000 times, and
answered naively that is the whole switch 50,000 times over (millions of entities, gigabytes,
the lock held for a minute while the controller's writes wait). So a Read is bounded twice:

- the *queries* collapse: two entities asking the same thing (the same table, default flag and
  match, or the same counter and index; fields the shim does not filter on are ignored) are
  one query, and more distinct queries than the answer may hold are refused up front;
- the *answer* collapses too: an entity already in it (a wildcard and a named table overlap)
  is not repeated, and an answer that would pass the cap is refused rather than built.

Both refusals are RESOURCE_EXHAUSTED and name the limit. The default cap is the most distinct
entities the P4Info lets a switch hold (every table full, its default entries, every counter
cell), so a read of everything always fits.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

import grpc
from finsy.proto import p4r

from mrc_fabric.p4info import P4InfoIndex

from .errors import P4RuntimeError


def capacity(index: P4InfoIndex) -> int:
    """The most distinct entities a Read can return: every table full plus its default entry,
    and every counter cell."""
    tables = sum(index.table(alias).size + 1 for alias in index.tables)
    return tables + sum(c.size for c in index.counters.values())


def query_key(entity: p4r.Entity) -> Hashable:
    """What a read entity asks for, ignoring fields the shim does not filter on."""
    kind = entity.WhichOneof("entity")
    if kind == "table_entry":
        q = entity.table_entry
        match = tuple(sorted(fm.SerializeToString(deterministic=True) for fm in q.match))
        return ("table", q.table_id, q.is_default_action, match)
    if kind == "counter_entry":
        q = entity.counter_entry
        return ("counter", q.counter_id, q.index.index if q.HasField("index") else None)
    return ("other", entity.SerializeToString(deterministic=True))


def distinct_queries(entities: Iterable[p4r.Entity], limit: int) -> list[p4r.Entity]:
    """The request's entities with repeats removed (first occurrence kept, in order); more than
    ``limit`` distinct ones is RESOURCE_EXHAUSTED."""
    seen: dict[Hashable, p4r.Entity] = {}
    for entity in entities:
        seen.setdefault(query_key(entity), entity)
        if len(seen) > limit:
            raise P4RuntimeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"entities: more than {limit} distinct entities in one ReadRequest (max_read_entities "
                f"{limit}: the most this switch returns in one Read); read fewer at a time",
            )
    return list(seen.values())


class ReadAnswer:
    """The entities of one Read's answer, each once, at most ``limit`` of them."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.entities: list[p4r.Entity] = []
        self._keys: set[Hashable] = set()

    def add(self, key: Hashable, entity: p4r.Entity) -> None:
        if key in self._keys:
            return
        if len(self.entities) >= self.limit:
            raise P4RuntimeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"entities: the answer would hold more than {self.limit} entities (max_read_entities); "
                "read fewer tables or counters at a time",
            )
        self._keys.add(key)
        self.entities.append(entity)
