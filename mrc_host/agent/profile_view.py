"""``mrc profile FILE``: an EV-profile file checked and shown without an agent.

What OCP's controller reads back with a profile query (its fields and its EV array), for a
fabric of a given shape: the EVs one connection would draw, each split into the format's
fields, with the ones the deny rules take out marked DENIED. A bad file exits with the
parser's message, which names the file and the key.
"""

from __future__ import annotations

import random
from typing import Any

from mrc_host.core import EvSet, EvState, PathSpace, TransportConfig
from mrc_host.core.ev_fields import field_values
from mrc_host.ev_profile import AgentEvProfile, field_dicts


def _kind(prof: AgentEvProfile) -> str:
    v = prof.values
    if v.generated is not None:
        return "generated"
    if v.fielded is not None:
        return "explicit range" if not v.fielded.values else "explicit (fields)"
    return "explicit" if v.explicit else "random entropy"


def describe(prof: AgentEvProfile, planes: int, t1: int, seed: int = 0) -> dict[str, Any]:
    """The profile and one connection's EVs on a fabric of ``planes`` x ``t1`` paths
    (ValueError when the profile does not fit that fabric)."""
    cfg = TransportConfig(**prof.transport_overrides())
    evset = EvSet(cfg, PathSpace(planes, t1), random.Random(seed))
    v = prof.values
    fielded = v.generated or v.fielded
    rows = []
    for value, e in sorted(evset.entries.items()):
        state = e.state.value if e.state is not EvState.GOOD else ("active" if e.active else "backup")
        fields = field_values(value, prof.format)
        rows.append({"ev": f"{value:08x}", "plane": e.plane, "t1": e.t1, "state": state, "fields": fields})
    return {
        "kind": _kind(prof),
        "format": list(prof.format),
        "fields": None if fielded is None else field_dicts(fielded.fields),
        "profile_evs": fielded.ev_count if fielded is not None else (len(v.explicit) or None),
        "evs": cfg.max_evs,
        "min_active": evset.min_active,
        "fabric": {"planes": planes, "t1": t1},
        "drawn": rows,
    }


def render(d: dict[str, Any], all_rows: bool) -> Any:
    """A rich table: one row per path (or per EV with ``all_rows``)."""
    from rich.table import Table

    fab = d["fabric"]
    title = (
        f"{d['kind']} profile, format {d['format']}, {d['evs']} EVs per connection "
        f"(min_active {d['min_active']}) on {fab['planes']} planes x {fab['t1']} T1"
    )
    if d["profile_evs"] is not None:
        title += f"; the profile has {d['profile_evs']}"
    t = Table(title=title)
    if all_rows:
        for col in ("ev", "plane", "t1", "state", "fields"):
            t.add_column(col)
        for r in d["drawn"]:
            fields = " ".join(f"{x:#x}" for x in r["fields"])
            t.add_row(r["ev"], str(r["plane"]), str(r["t1"]), r["state"], fields)
        return t
    per: dict[tuple[int, int], dict[str, int]] = {}
    for r in d["drawn"]:
        row = per.setdefault((r["plane"], r["t1"]), {})
        row[r["state"]] = row.get(r["state"], 0) + 1
    states = ("active", "backup", "DENIED")
    for col in ("plane", "t1", *states):
        t.add_column(col, justify="right")
    for (plane, t1), row in sorted(per.items()):
        t.add_row(str(plane), str(t1), *(str(row.get(s, 0)) for s in states))
    return t
