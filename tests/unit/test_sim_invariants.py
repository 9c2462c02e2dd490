"""Each fuzzer invariant judged on hand-made observations that break it, and on ones that hold."""

from __future__ import annotations

import copy
from typing import Any

from mrc_host.sim import invariants as inv

RTT = 3_000


def flow(name: str = "f", **kw: Any) -> dict[str, Any]:
    row = {
        "name": name,
        "src": 0,
        "dst": 1,
        "base_rtt_ns": RTT,
        "writes": 1,
        "writes_done": 1,
        "data_ok": True,
        "resends": 0,
        "fabric_drops": 0,
        "fabric_trims": 0,
        "posted_ns": 1_000,
        "done_ns": 90_000,
    }
    return row | kw


def failure(flows: list[dict[str, Any]], reached: bool = True, kind: str = "blackhole") -> dict[str, Any]:
    return {
        "fault": f"{kind}:p0-t0_0-t1_1@50us",
        "kind": kind,
        "phase": 0,
        "start_ns": 51_000,
        "end_ns": None,
        "reached": reached,
        "flows": flows,
        "floor": sum(x["floor"] for x in flows),
        "lost": sum(x["lost"] for x in flows),
    }


def floor_row(lost: int, floor: float, flow_name: str = "f") -> dict[str, Any]:
    return {
        "flow": flow_name,
        "floor": floor,
        "entered": floor,
        "queued": 0,
        "first_rtt": 0,
        "lost": lost,
        "srtt_ns": None,
    }


def dead_path(alive: list[list[int]], until: int = 200_000, rtt: int = RTT) -> dict[str, Any]:
    return {
        "fault": "blackhole:p0-t0_0-t1_1@50us",
        "phase": 0,
        "flow": "f",
        "path": [0, 1],
        "first_loss_ns": 52_000,
        "base_rtt_ns": RTT,
        "rtt_ns": rtt,
        "until_ns": until,
        "evs": 4,
        "alive_ns": alive,
    }


def group(jain: float | None, skipped: str | None = None) -> dict[str, Any]:
    return {
        "dst": 1,
        "flows": ["a", "b"],
        "jain": jain,
        "skipped": skipped,
        "start_ns": 1_000,
        "end_ns": 101_000,
        "base_rtt_ns": RTT,
        "gbps": [180.0, 20.0],
    }


def obs(**kw: Any) -> dict[str, Any]:
    return {"now_ns": 0, "flows": [], "failures": [], "dead_paths": [], "fair_groups": []} | kw


def test_data_breaks_on_a_missing_write_and_on_wrong_bytes() -> None:
    good = inv.check_data(obs(flows=[flow()]))
    assert good.checked == 1 and not good.violations
    v = inv.check_data(obs(flows=[flow("a", writes_done=0), flow("b", data_ok=False), flow("c")]))
    assert [c.subject for c in v.violations] == ["a", "b"]
    assert "1 of 1 writes not done" in v.violations[0].detail and v.violations[1].detail == "bytes differ"


def test_floor_limit_is_inclusive_per_connection_and_skips_failures_never_reached() -> None:
    # 1.3 x 10 + 1 = 14: 14 holds, 15 breaks; a second connection is judged on its own floor
    held = inv.check_floor(obs(failures=[failure([floor_row(14, 10)])]))
    assert held.checked == 1 and not held.violations and held.worst is not None
    v = inv.check_floor(
        obs(failures=[failure([floor_row(15, 10), floor_row(1, 0, "g"), floor_row(2, 0, "h")])])
    )
    assert [c.subject.split()[0] for c in v.violations] == ["f", "h"]
    assert v.violations[0].limit == 14.0 and v.violations[0].value == 15.0
    assert v.worst is not None and v.worst.subject.startswith("h")  # 2 / 1 beats 15 / 14
    unreached = inv.check_floor(obs(failures=[failure([floor_row(0, 0)], reached=False)]))
    assert unreached.checked == 0


def test_resend_breaks_only_where_nothing_of_the_connection_was_dropped_or_trimmed() -> None:
    v = inv.check_resend(
        obs(
            flows=[
                flow("clean", resends=3),
                flow("dropped", resends=5, fabric_drops=1),
                flow("trimmed", resends=5, fabric_trims=2),
                flow("quiet"),
            ]
        )
    )
    assert v.checked == 2  # the harmed ones are not judged
    assert [c.subject for c in v.violations] == ["clean"] and v.violations[0].value == 3.0


def test_dead_ev_breaks_when_alive_past_five_rtts_or_back_before_the_path_is() -> None:
    lost = 52_000
    deadline = lost + 5 * RTT
    retired_in_time = inv.check_dead_ev(obs(dead_paths=[dead_path([[lost, deadline]])]))
    assert retired_in_time.checked == 1 and not retired_in_time.violations
    assert retired_in_time.worst is not None and retired_in_time.worst.value == 5.0
    late = inv.check_dead_ev(obs(dead_paths=[dead_path([[lost, deadline + 1]])]))
    assert len(late.violations) == 1
    back = inv.check_dead_ev(
        obs(dead_paths=[dead_path([[lost, lost + RTT], [lost + 9 * RTT, lost + 10 * RTT]])])
    )
    assert len(back.violations) == 1 and "[9.0, 10.0]" in back.violations[0].detail
    # back in the rotation while still dead is a violation even before the deadline
    early = inv.check_dead_ev(
        obs(
            dead_paths=[
                dead_path([[lost, lost + RTT], [lost + 2 * RTT, lost + 3 * RTT]], until=lost + 4 * RTT)
            ]
        )
    )
    assert len(early.violations) == 1 and "back while dead" in early.violations[0].detail
    # the connection finished (or the path came back) before the deadline: nothing to judge
    short = inv.check_dead_ev(obs(dead_paths=[dead_path([[lost, deadline - 10]], until=deadline)]))
    assert short.checked == 0
    # the deadline counts in the connection's RTT at the loss (a standing queue), not the base
    slow = inv.check_dead_ev(obs(dead_paths=[dead_path([[lost, lost + 8 * RTT]], rtt=2 * RTT)]))
    assert slow.checked == 1 and not slow.violations


def test_dead_ev_names_a_connection_born_into_the_failure_and_an_rtt_that_grew() -> None:
    lost = 52_000
    late = [[lost, lost + 8 * RTT]]
    plain = inv.check_dead_ev(
        obs(dead_paths=[dead_path(late) | {"born_after_ns": -10_000, "rtt_late_ns": RTT}])
    )
    assert len(plain.violations) == 1 and "began" not in plain.violations[0].detail
    assert "at the deadline" not in plain.violations[0].detail
    grew = inv.check_dead_ev(obs(dead_paths=[dead_path(late) | {"born_after_ns": 0, "rtt_late_ns": 3 * RTT}]))
    assert (
        len(grew.violations) == 1
        and f"RTT {3 * RTT / 1e3:.1f} us at the deadline" in grew.violations[0].detail
    )
    # a connection that began after the failure had nothing to learn it from: not judged
    # (issue 66: dead_ev is for a connection alive at the failure)
    born = dead_path(late) | {"born_after_ns": 300_000, "rtt_late_ns": 3 * RTT}
    assert inv.check_dead_ev(obs(dead_paths=[born])).checked == 0


def oracle_row(lost: int, sent: int, queue_ns: int) -> dict[str, Any]:
    row = floor_row(lost, 2.0) | {"oracle_sent": sent, "queue_ns": queue_ns}
    return row | {"under_queue": queue_ns * 4 >= RTT}


def test_loss_under_a_queue_is_judged_by_the_oracle_not_the_floor() -> None:
    """Issue 66: where the receiver's last hop queued, a failure costs at most 1.25 x the
    oracle's ``oracle_sent`` + 2 (the floor, one base RTT of entries, says little there)."""
    queued = obs(failures=[failure([oracle_row(27, 20, RTT)])])
    assert not inv.check_floor(queued).checked  # under a queue: the oracle's to judge
    v = inv.check_oracle(queued)
    assert v.checked == 1 and not v.violations  # 27 <= 1.25 x 20 + 2
    worse = inv.check_oracle(obs(failures=[failure([oracle_row(28, 20, RTT)])]))
    assert len(worse.violations) == 1 and "oracle_sent 20" in worse.violations[0].detail
    calm = obs(failures=[failure([oracle_row(28, 20, RTT // 8)])])
    assert not inv.check_oracle(calm).checked and inv.check_floor(calm).violations


def test_slow_plane_breaks_when_shares_stray_from_capacity_and_skips_short_flows() -> None:
    row = {
        "flow": "f",
        "capacity_gbps": [100.0, 50.0],
        "capacity_share": [0.6667, 0.3333],
        "share": [0.54, 0.46],
        "goodput_gbps": 100.0,
        "ideal_rtts": 40.0,
    }
    v = inv.check_slow_plane(obs(slow_planes=[row]))
    assert v.checked == 1 and len(v.violations) == 1 and v.violations[0].value == 0.1267
    ok = inv.check_slow_plane(obs(slow_planes=[row | {"share": [0.65, 0.35]}]))
    assert ok.checked == 1 and not ok.violations
    assert not inv.check_slow_plane(obs(slow_planes=[row | {"ideal_rtts": 5.0}])).checked


def test_flap_breaks_past_1_1_x_the_job_time_without_it() -> None:
    job = {"job": "perm", "flap_ns": 1_150_000, "clean_ns": 1_000_000, "base_rtt_ns": RTT}
    v = inv.check_flap(obs(flap_jobs=[job]))
    assert v.checked == 1 and len(v.violations) == 1 and v.violations[0].value == 1.15
    assert not inv.check_flap(obs(flap_jobs=[job | {"flap_ns": 1_090_000}])).violations
    assert not inv.check_flap(obs(flap_jobs=[job | {"clean_ns": 40 * RTT}])).checked


def test_jain_breaks_below_0_9_and_skipped_groups_are_not_judged() -> None:
    v = inv.check_jain(obs(fair_groups=[group(0.6), group(0.95), group(None, "ran together less than 10")]))
    assert v.checked == 2 and len(v.violations) == 1 and v.violations[0].value == 0.6
    assert v.worst is not None and v.worst.value == 0.6
    assert not inv.check_jain(obs(fair_groups=[group(0.9)])).violations


def test_check_all_judges_every_invariant_and_reads_only_its_input() -> None:
    o = obs(flows=[flow(resends=1)], failures=[failure([floor_row(3, 1)])])
    before = copy.deepcopy(o)
    out = inv.check_all(o)
    assert set(out) == set(inv.CHECKS)
    assert out["resend"].violations and out["floor"].violations and not out["data"].violations
    assert o == before
