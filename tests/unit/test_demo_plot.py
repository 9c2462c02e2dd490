"""The demo's timeline PNG plots delivered bytes (and completed WRITEs dotted) when it has them."""

from __future__ import annotations

from pathlib import Path

import pytest

from topologies.demo_plot import timeline_png


def run(delivered: bool) -> dict[str, object]:
    acked = [(0.0, 0.0), (0.2, 50.0), (0.4, 0.0), (0.6, 120.0)]  # stalls behind a hole
    return {
        "goodput_mbit_s": acked,
        "delivered_mbit_s": [(0.0, 0.0), (0.2, 55.0), (0.4, 48.0), (0.6, 60.0)] if delivered else [],
        "wall_s": 0.6,
        "faults": [{"injected_at": 0.3, "label": "blackhole"}],
        "evs": [{"ev": "00040001", "plane": 0, "t1": 1, "initial_state": "GOOD"}],
        "ev_changes": [{"ev": "00040001", "t": 0.35, "old": "GOOD", "new": "ASSUMED_BAD"}],
    }


def test_timeline_png_with_and_without_delivered_series(tmp_path: Path) -> None:
    for delivered in (True, False):
        out = tmp_path / f"timeline-{delivered}.png"
        result = {
            "faulted": run(delivered),
            "clean": run(delivered),
            "target": "linux",
            "src": "h1",
            "dst": "h2",
        }
        result["size"] = 16 << 20
        timeline_png(result, out)
        assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"


def many_evs(n: int) -> dict[str, object]:
    """``n`` EVs over 2 planes x 4 T1s; a black hole on plane 0 / T1 1 retires that path's EVs."""
    evs, changes = [], []
    for i in range(n):
        plane, t1 = i % 2, (i // 2) % 4
        ev = f"{(plane << 28) | (t1 << 18) | i:08x}"
        evs.append({"ev": ev, "plane": plane, "t1": t1, "initial_state": "GOOD"})
        if (plane, t1) == (0, 1):
            changes.append({"ev": ev, "t": 0.3 + i / 1e4, "old": "GOOD", "new": "ASSUMED_BAD"})
            changes.append({"ev": ev, "t": 0.5, "old": "ASSUMED_BAD", "new": "GOOD"})
    fault = {"injected_at": 0.3, "label": "black hole"}
    return {"goodput_mbit_s": [(0.0, 0.0), (0.6, 100.0)], "delivered_mbit_s": [], "wall_s": 0.6,
            "faults": [fault], "evs": evs, "ev_changes": changes}  # fmt: skip


def test_evs_are_banded_by_path_with_one_label_per_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib.pyplot as plt

    from topologies.demo_plot import path_bands

    run256 = many_evs(256)
    bands = path_bands(run256["evs"])  # type: ignore[arg-type]
    assert [label.split("\n")[0] for label, _ in bands] == [
        f"plane {p} · T1 {t}" for p in (0, 1) for t in range(4)
    ]
    assert all(len(members) == 32 for _, members in bands)
    saved = []
    real_savefig = plt.Figure.savefig

    def keep(fig: plt.Figure, *args: object, **kw: object) -> None:
        saved.append([t.get_text() for t in fig.axes[1].get_yticklabels()])
        real_savefig(fig, *args, **kw)

    monkeypatch.setattr(plt.Figure, "savefig", keep)
    result = {"faulted": run256, "clean": many_evs(0), "target": "linux", "src": "h0", "dst": "h3",
              "size": 64 << 20}  # fmt: skip
    timeline_png(result, tmp_path / "timeline.png")
    assert len(saved[0]) == 8  # one label per path, not 256
