"""An agent's EVs summed per path: what ``mrc evs`` and the Mininet CLI's ``evs`` print first.

A connection draws many EVs per path (128 or more over a few planes x T1s), so a table
with one row per EV runs to hundreds of rows; what a reader wants first is, per path
(connection, plane, T1), how many EVs are in each state and what the path carried and
lost. ``--all`` still prints one row per EV (``ev_table`` in the CLIs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mrc_host.core.counters import RETX_CAUSES

STATES = ("GOOD", "SKIP", "ASSUMED_BAD", "DENIED")
STATE_COLOURS = {"GOOD": "green", "SKIP": "yellow", "ASSUMED_BAD": "red", "DENIED": "magenta"}


@dataclass
class PathRow:
    """One path of one connection: its EVs counted by state, its packet counters summed."""

    peer: str
    conn: str
    mode: str
    plane: int
    t1: int
    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    backups: int = 0  # GOOD EVs outside the rotation (spares)
    data_sent: int = 0
    delivered: int = 0
    lost: int = 0
    ecn: int = 0
    trims: int = 0

    @property
    def evs(self) -> int:
        return sum(self.states.values())


def path_rows(rows: list[dict[str, Any]]) -> list[PathRow]:
    """Group ``evs`` reply rows by (peer, conn, mode, plane, T1), in that order."""
    paths: dict[tuple[str, str, str, int, int], PathRow] = {}
    for r in rows:
        key = (str(r["peer"]), str(r["conn"]), str(r["mode"]), int(r["plane"]), int(r["t1"]))
        p = paths.get(key)
        if p is None:
            p = paths[key] = PathRow(*key)
        state = str(r["state"])
        p.states[state] = p.states.get(state, 0) + 1
        if state == "GOOD" and not r.get("active", True):
            p.backups += 1
        for name in ("data_sent", "delivered", "lost", "ecn", "trims"):
            setattr(p, name, getattr(p, name) + int(r.get(name, 0)))
    return [paths[k] for k in sorted(paths)]


def path_table(rows: list[dict[str, Any]], title: str) -> Any:
    """A rich table with one row per path and a column per EV state (zero counts left blank)."""
    from rich.table import Table

    t = Table(title=title, caption="one row per path (plane, T1); --all: one row per EV")
    for col in ("peer", "conn", "mode", "plane", "t1", "EVs", *STATES, "backup", "data", "deliv", "lost",
                "ecn", "trims"):  # fmt: skip
        t.add_column(col, justify="left" if col in ("peer", "conn", "mode") else "right")
    for p in path_rows(rows):
        counts = [f"[{STATE_COLOURS[s]}]{p.states[s]}[/]" if p.states.get(s) else "" for s in STATES]
        t.add_row(
            p.peer, p.conn, p.mode, str(p.plane), str(p.t1), str(p.evs), *counts,
            str(p.backups or ""), str(p.data_sent), str(p.delivered), str(p.lost), str(p.ecn), str(p.trims),
        )  # fmt: skip
    return t


def retx_causes_text(summary: dict[str, Any]) -> str:
    """``gap 3 + timeout 1 + trim NACK 2``: a transfer summary's retransmissions by the loss kind
    behind each (they sum to its ``retransmissions``), or ``none``."""
    causes = summary.get("retransmissions_by_cause") or {}
    return " + ".join(f"{RETX_CAUSES.get(k, k)} {n:,}" for k, n in causes.items()) or "none"
