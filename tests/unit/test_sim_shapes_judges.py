"""The shape judges of bench.sim_shapes on hand-made results: each compares with the right
baseline and can say "does not hold"."""

from __future__ import annotations

from typing import Any

from bench import sim_shapes
from mrc_host.sim import scenario_file as sf


def _sc(name: str) -> sf.Scenario:
    return sf.load(sf.SCENARIO_DIR / f"{name}.toml")


def _uplinks(per_path: list[int]) -> dict[str, Any]:
    return {"t0_uplink_data_bytes": {"0": [per_path[p * 16 : (p + 1) * 16] for p in range(8)]}}


def test_spray_judge_wants_mrc_even_and_ecmp_above_it() -> None:
    sc = _sc("spray-balance")
    even, lumpy = [100] * 128, [300, 0, 0] * 42 + [100, 100]
    res = {"runs": {"mrc": _uplinks(even), "ecmp": _uplinks(lumpy), "single-path": _uplinks([0] * 127 + [5])}}
    row = sim_shapes.check_spray(sc, res, {})
    assert row["holds"] and row["metrics"]["mrc"]["uplink_max_over_mean"] == 1.0
    assert row["metrics"]["single-path"]["uplinks_used"] == 1
    res["runs"]["mrc"], res["runs"]["ecmp"] = _uplinks(lumpy), _uplinks(even)
    assert not sim_shapes.check_spray(sc, res, {})["holds"]


def _flow_run(timeline: list[float], jct: float) -> dict[str, Any]:
    return {
        "jobs": {"flow": {"completion_time_us": jct}},
        "flows": [{"name": "flow", "goodput_timeline_gbps": timeline}],
        "timeline_bucket_us": 10.0,
        "faults": [{"start_us": 30.0}],
    }


def test_switch_judge_compares_with_the_no_fault_run_not_the_ramp_before_the_fault() -> None:
    sc = _sc("t0-down")
    # before the fault the flow is still ramping (300-500): a before/after ratio would say 1.4
    fault = _flow_run([300, 400, 500] + [700] * 16 + [100], 200.0)
    clean = _flow_run([300] + [800] * 18 + [100], 180.0)
    runs = {m: fault for m in ("mrc", "single-path", "ecmp")}
    row = sim_shapes.check_switch("one-plane")(sc, {"runs": runs}, {"runs": {m: clean for m in runs}})
    assert row["metrics"]["mrc"]["steady_after_over_no_fault"] == 700 / 800 and row["holds"]
    row = sim_shapes.check_switch("no-steady-loss")(sc, {"runs": runs}, {"runs": {m: clean for m in runs}})
    assert not row["holds"]  # a T1 down must not cost an eighth


def test_flap_judge_counts_a_down_then_up_fault_as_one_flap() -> None:
    sc = _sc("link-flaps-allreduce")

    def run(jct: float, lost: int) -> dict[str, Any]:
        faults = [
            {"kind": "down", "spec": "down:p0-t0_0-t1_3@5%-35%", "start_us": 10.0, "data_packets_lost": lost},
            {"kind": "down", "spec": "down:p1-t0_1-t1_7@90%-99%", "start_us": 500.0, "data_packets_lost": 0},
            {
                "kind": "flap",
                "spec": "flap=20us:p2-t0_1-t1_7@1%",
                "start_us": 20.0,
                "data_packets_lost": lost,
            },
        ]
        for f in faults:
            f["target"] = f["spec"].split(":")[1].split("@")[0]
        flows = [{"src": 0, "dst": 4}, {"src": 4, "dst": 8}]  # T0 0 -> T0 1 -> T0 2
        return {
            "jobs": {"allreduce": {"completion_time_us": jct}},
            "faults": faults,
            "elapsed_us": jct,
            "flows": flows,
        }

    res = {"runs": {m: run(101.0, 2) for m in ("mrc", "single-path", "ecmp")}}
    ref = {"runs": {m: run(100.0, 0) for m in ("mrc", "single-path", "ecmp")}}
    row = sim_shapes.check_flaps(sc, res, ref)
    # one down before the job ended, one after (not counted), a 20 us flap over 81 us: 3 downs
    assert row["metrics"]["mrc"]["flaps"] == 1 + 3 and row["metrics"]["mrc"]["lost_per_flap"] == 1.0
    # the T0 0 link meets one connection, the T0 1 flap two (one ends there, one starts)
    assert row["metrics"]["mrc"]["lost_per_flap_per_connection"] == 4 / (1 * 1 + 3 * 2)
    assert row["holds"]
    res["runs"]["mrc"] = run(120.0, 2)
    assert not sim_shapes.check_flaps(sc, res, ref)["holds"]


def test_compound_judge_wants_every_fault_near_its_floor_and_the_rate_back() -> None:
    sc = _sc("compound-faults")

    def run(lost: list[int], after: float) -> dict[str, Any]:
        r = _flow_run([300] + [800] * 3 + [after] * 15 + [100], 200.0)
        r["faults"] = [{"start_us": 30.0, "data_packets_lost": n} for n in lost]
        return r

    clean = {"runs": {m: run([], 800) for m in ("mrc", "single-path", "ecmp")}}
    good = sim_shapes.check_compound(sc, {"runs": {m: run([2, 3], 790) for m in clean["runs"]}}, clean)
    assert good["holds"] and good["metrics"]["mrc"]["lost_per_fault"] == [2, 3]
    # the second fault lost three times what the first did: above its floor
    bad = sim_shapes.check_compound(sc, {"runs": {m: run([2, 9], 790) for m in clean["runs"]}}, clean)
    assert not bad["holds"] and bad["metrics"]["mrc"]["worst_fault_lost_over_floor"] > 1.3
    slow = sim_shapes.check_compound(sc, {"runs": {m: run([2, 3], 600) for m in clean["runs"]}}, clean)
    assert not slow["holds"] and slow["metrics"]["mrc"]["steady_after_over_no_fault"] == 0.75
