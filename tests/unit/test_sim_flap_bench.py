"""bench.sim_flap: each seed's job time beside the same job with the link down throughout."""

from __future__ import annotations

import json
from pathlib import Path

from bench import sim_flap


def test_each_seed_is_shown_beside_the_link_down_throughout(tmp_path: Path) -> None:
    # seed 2 loads one T0's uplinks to the full rate: losing one of them for good costs time,
    # and a 1:1 flap is judged against half that cost (a run without the fault would be 1.0)
    out = tmp_path / "flap.json"
    args = ["--size", "8MiB", "--seeds", "2", "--period", "100us", "--json", str(out)]
    assert sim_flap.main(args) == 0
    data = json.loads(out.read_text())
    row = data["seeds"][0]
    assert row["down_jct_ratio"] > 1.05
    assert row["over_half_down"] == round(row["jct_ratio"] - (1 + (row["down_jct_ratio"] - 1) / 2), 4)
    assert data["summary"]["down_jct_ratio"]["max"] == row["down_jct_ratio"]
    # --no-reference runs the flap and the clean job only
    assert sim_flap.main([*args, "--no-reference"]) == 0
    data = json.loads(out.read_text())
    assert "down_jct_ratio" not in data["seeds"][0] and "down_jct_ratio" not in data["summary"]
