"""bench_agent's figures from its rows: medians, and the after agent set against the previous
one round by round (no root: synthetic rows)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_agent import PAIRED, paired, summarise


def _row(run: int, scale: float, mode: str = "mrc") -> dict[str, Any]:
    row: dict[str, Any] = {"run": run, "mode": mode, "goodput_mbit_s": 1000.0 / scale, "packets_per_s": 3e4,
                           "retransmissions": 0, "raw_recv_frames_per_s": 1e5}  # fmt: skip
    for side in ("sender", "receiver"):
        row[f"{side}_user_us_per_packet"] = 6.0 * scale
        row[f"{side}_sys_us_per_packet"] = 4.0 * scale
        row[f"{side}_cpu_us_per_packet"] = 10.0 * scale
    return row


def test_paired_ratios_set_each_round_against_its_own() -> None:
    prev = [_row(0, 1.0), _row(1, 2.0), _row(2, 1.0)]
    after = [_row(0, 0.9), _row(1, 2.2), _row(2, 1.0), _row(3, 5.0)]  # round 3 has no previous run
    got = paired(after, prev)
    assert set(got) == set(PAIRED)
    cpu = got["sender_cpu_us_per_packet"]
    assert cpu["rounds"] == 3 and cpu["min"] == pytest.approx(0.9) and cpu["max"] == pytest.approx(1.1)
    assert cpu["median"] == pytest.approx(1.0)
    assert got["goodput_mbit_s"]["min"] == pytest.approx(1 / 1.1)


def test_modes_are_paired_with_their_own_mode() -> None:
    got = paired([_row(0, 2.0, "ecmp"), _row(0, 1.0)], [_row(0, 1.0), _row(0, 4.0, "ecmp")])
    assert got["receiver_cpu_us_per_packet"]["min"] == pytest.approx(0.5)
    assert got["receiver_cpu_us_per_packet"]["max"] == pytest.approx(1.0)


def test_summary_has_the_user_and_system_parts() -> None:
    s = summarise([_row(0, 1.0), _row(1, 3.0), _row(2, 2.0)], 4096)
    assert s["sender_cpu_us_per_packet"] == pytest.approx(20.0)
    assert s["receiver_user_us_per_packet"] == pytest.approx(12.0)
    assert s["receiver_sys_us_per_packet"] == pytest.approx(8.0)
