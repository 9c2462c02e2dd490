"""bench.sim_fair: flows sized to have equal bytes left when the last starts, judged while all run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import sim_fair


def test_each_flow_is_sized_by_its_equal_share_before_the_last_start() -> None:
    # 100 Gb/s = 12.5 bytes/ns; starts 0, 800, 1600 ns: the first runs alone for 800 ns, then
    # shares with the second for 800 ns
    assert sim_fair.fair_sent([0, 800, 1_600], 100.0) == [10_000 + 5_000, 5_000, 0]
    assert sim_fair.fair_sent([0, 0, 0], 100.0) == [0, 0, 0]


def test_two_equal_flows_started_together_share_the_host(tmp_path: Path) -> None:
    args = ["--out", str(tmp_path), "--seeds", "1", "--flows", "2", "--planes", "1", "--only", "together"]
    assert sim_fair.main(args) == 0
    data = json.loads((tmp_path / "sim_fair.json").read_text())
    run = data["together_n2_p1"]["runs"][0]
    assert run["together_us"] > 100  # they overlapped for many base RTTs
    assert run["jain"] == pytest.approx(1.0, abs=0.01)
    assert sum(run["gbps"]) > 85  # and filled the host's 100 Gb/s between them
    assert (tmp_path / "sim_fair.png").read_bytes()[:4] == b"\x89PNG"


def test_two_rtt_classes_share_the_host_under_receiver_credits(tmp_path: Path) -> None:
    """Four flows from under the receiver's own leaf (4.7 us) and four across the spine (9.4 us),
    started together on one plane, under nscc+rccc: Jain's index and the short-RTT flows' share
    over the long ones' within the bars, in the files named after the congestion control."""
    args = ["--out", str(tmp_path), "--seeds", "1", "--rtts", "--planes", "1", "--only", "together"]
    assert sim_fair.main([*args, "--cc", "nscc+rccc"]) == 0
    data = json.loads((tmp_path / "sim_fair_rtts_nscc_rccc.json").read_text())
    row = data["rtts_together_n8_p1"]
    run = row["runs"][0]
    assert sum(run["short_rtt"]) == 4 and run["jain"] >= sim_fair.RTTS_JAIN_BAR
    lo, hi = sim_fair.RTTS_RATIO_BAR
    assert lo <= run["short_over_long"] <= hi and sum(run["gbps"]) > 85
    assert all(data["targets"].values()) and data["cc"] == "nscc+rccc"
