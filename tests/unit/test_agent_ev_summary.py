"""``mrc evs`` and the CLI's ``evs`` print one row per path with the EVs counted by state."""

from __future__ import annotations

import io

from rich.console import Console

from mrc_host.agent.ev_summary import path_rows, path_table


def row(ev: int, plane: int, t1: int, state: str, active: bool = True, sent: int = 10, lost: int = 0) -> dict:
    return {"peer": "h3", "conn": "send", "mode": "mrc", "ev": f"{ev:08x}", "plane": plane, "t1": t1,
            "state": state, "active": active, "data_sent": sent, "delivered": sent - lost, "lost": lost,
            "ecn": 0, "trims": 0}  # fmt: skip


def test_272_ev_rows_become_one_row_per_path_with_counts_per_state() -> None:
    rows = []
    for i in range(272):
        plane, t1 = i % 2, (i // 2) % 4
        state = "ASSUMED_BAD" if (plane, t1) == (0, 1) and i % 3 else "GOOD"
        rows.append(row(i, plane, t1, state, active=i < 256, lost=1 if state == "ASSUMED_BAD" else 0))
    rows.append({**row(999, 1, 3, "DENIED"), "peer": "h1"})
    paths = path_rows(rows)
    assert [(p.peer, p.plane, p.t1) for p in paths] == [
        *(("h1", 1, 3),),
        *(("h3", p, t) for p in (0, 1) for t in range(4)),
    ]
    hole = next(p for p in paths if (p.peer, p.plane, p.t1) == ("h3", 0, 1))
    assert hole.evs == 34 and hole.states["ASSUMED_BAD"] == 23 and hole.states["GOOD"] == 11
    assert hole.lost == 23 and hole.data_sent == 340
    assert sum(p.backups for p in paths) == 15  # GOOD and outside the rotation (16, one retired)
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(path_table(rows, "EVs of h0"))
    lines = [ln for ln in out.getvalue().splitlines() if " mrc " in ln]
    assert len(lines) == 9  # 8 paths to h3 + 1 to h1, not 273 rows
    assert "DENIED" in out.getvalue() and "ASSUMED_BAD" in out.getvalue()
