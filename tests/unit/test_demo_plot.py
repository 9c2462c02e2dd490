"""The demo's timeline PNG plots delivered bytes (and the cumulative ACK dotted) when it has them."""

from __future__ import annotations

from pathlib import Path

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
