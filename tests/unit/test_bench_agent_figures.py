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


def test_configurations_put_the_common_flags_first_and_each_agent_once() -> None:
    from argparse import Namespace
    from pathlib import Path

    from bench.bench_agent import _configs

    args = Namespace(also=["--window 1M"], agent_flags="--ack-every 4")
    got = _configs(args, Path("b"), {"abc": Path("p")}, 4232)
    assert [c[0] for c in got] == [
        "before (today, MTU 1500)",
        "before, same frames",
        "previous (abc)",
        "after",
        "after, no ICRC check",
        "after, --window 1M",
    ]
    assert got[0][1] == 1500 and {c[1] for c in got[1:]} == {4232}
    assert got[4][3] == ("--ack-every", "4", "--no-icrc-check") and got[5][3][-2:] == ("--window", "1M")
    assert [c[0] for c in _configs(Namespace(also=[], agent_flags=""), None, {}, 4232)] == [
        "after",
        "after, no ICRC check",
    ]


def test_a_loop_s_ceiling_is_its_median_over_the_rounds() -> None:
    from bench.bench_agent import _ceilings

    rounds = [
        {"send_frames_per_s": v, "recv_frames_per_s": 2 * v, "payload_mbit_s_at_recv_rate": v,
         "send_cpu_us_per_frame": 1 / v, "recv_cpu_us_per_frame": 2 / v, "run": i}
        for i, v in enumerate((3.0, 1.0, 2.0))
    ]  # fmt: skip
    c = _ceilings({"mtu4232": rounds})["mtu4232"]
    assert c["recv_frames_per_s"] == 4.0 and c["send_cpu_us_per_frame"] == pytest.approx(0.5)
    assert c["run"] == 0 and c["rounds"] == rounds


def test_ratios_name_each_previous_agent_and_the_before_only_when_it_ran() -> None:
    from bench.bench_agent import _ratios

    def s(goodput: float) -> dict[str, Any]:
        return {"goodput_mbit_s": goodput, "fraction_of_recv_ceiling_bits": 0.5, "cpu_fraction_of_raw": 0.4,
                "fraction_of_socket_bits": 0.6}  # fmt: skip

    summary = {
        "after": s(100.0),
        "after, no ICRC check": s(125.0),
        "previous (a)": s(50.0),
        "previous (b)": s(200.0),
    }
    got = _ratios(summary, False, ["a", "b"])
    assert got["after_vs_previous"] == 2.0 and got["after_vs_previous_1"] == 0.5
    assert (
        got["icrc_check_goodput_cost"] == pytest.approx(0.2) and got["after_fraction_of_socket_bits"] == 0.6
    )
    assert not any(k.startswith("after_vs_before") for k in got)
    summary |= {"before (today, MTU 1500)": s(25.0), "before, same frames": s(50.0)}
    got = _ratios(summary, True, [])
    assert got["after_vs_before_today"] == 4.0 and got["after_vs_before_same_frames"] == 2.0
