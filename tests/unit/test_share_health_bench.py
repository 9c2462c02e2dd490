"""bench.sim_share_health: each shape off and on, paired by seed, and a verdict per figure."""

from __future__ import annotations

import json
from pathlib import Path

from bench import sim_share_health
from bench.sim_share_health import verdict


def test_a_tie_is_equal_medians_or_ranges_overlapping_over_half_the_narrower() -> None:
    assert verdict([1, 2, 3], [1, 2, 3], lower=True) == "tie"
    assert verdict([1, 5, 9], [2, 2, 2], lower=True) == "tie"  # a point inside the other's range
    assert verdict([1, 2, 3], [2, 2.5, 3.5], lower=True) == "tie"  # overlap 1 of a width 1.5
    assert verdict([1, 2, 3], [2.5, 3, 4], lower=True) == "worse"  # overlap 0.5 of 1.5
    assert verdict([1, 2, 3], [4, 5, 6], lower=False) == "better"
    assert verdict([1, 1, 1], [2, 2, 2], lower=True) == "worse"  # two points apart


def test_a_fault_free_incast_is_the_same_run_shared_or_not(tmp_path: Path) -> None:
    # no fault: no path is ever proved dead, so there is nothing to share
    assert sim_share_health.main(["--out", str(tmp_path), "--seeds", "1", "--only", "fair"]) == 0
    data = json.loads((tmp_path / "sim_share_health.json").read_text())
    rows = {r["figure"]: r for r in data["rows"]}
    assert set(rows) == {"Jain", "sum Gb/s"}
    for r in rows.values():
        assert r["off"] == r["on"] and r["verdict"] == "tie"
    assert rows["sum Gb/s"]["off"][0] > 150  # 8 flows filled most of the host's 2 x 100 Gb/s
    assert "| fault-free 8->1, 2 planes | Jain (↑ better) |" in (tmp_path / "sim_share_health.md").read_text()
