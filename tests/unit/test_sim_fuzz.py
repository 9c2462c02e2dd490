"""The scenario fuzzer: draws, the observer's figures, shrinking, replay, and the CI draws."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrc_host.sim import fuzz
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.cli import main
from mrc_host.sim.fabric import DATA_OVERHEAD
from mrc_host.sim.faults import KILLING_KINDS, parse_fault
from mrc_host.sim.fuzz_draw import MAX_BYTES_PER_PLANE, HypothesisDrawer, draw_table, table_toml
from mrc_host.sim.fuzz_observe import Observer
from mrc_host.sim.network import Network
from mrc_host.sim.report import summarise_network

# the CI draws: a fixed seed and a bounded count (well under a minute on two workers); the
# seed was fixed before any draw of it was looked at, and failing draws are findings
CI_SEED = 45
CI_DRAWS = 40


def scenario(text: str) -> sf.Scenario:
    return sf.load_text(text, "test")


def observed(sc: sf.Scenario) -> tuple[Network, list[Any], Observer]:
    net, jobs = sf.build(sc, sc.runs[0])
    obs = Observer(net, jobs)
    obs.arm()
    net.run(sc.time_limit_ns)
    return net, jobs, obs


FAULTY = """
seed = 3
faults = ["blackhole:p0-t0_0-t1_1@60us", "loss=0.02:p1-t0_1-t1_2@20us", "flap=30us:p1-t0_0-t1_3@40us-200us"]
[fabric]
planes = 2
t0 = 2
t1 = 4
[[traffic]]
pattern = "flow"
name = "a"
src = 0
dst = 1
size = "8MiB"
[[traffic]]
pattern = "flow"
name = "b"
src = 1
dst = 0
size = "4MiB"
start = "10us"
"""


def test_the_observer_changes_nothing_in_the_run() -> None:
    sc = scenario(FAULTY)
    plain, jobs = sf.build(sc, sc.runs[0])
    plain.run(sc.time_limit_ns)
    watched, wjobs, _ = observed(sc)
    a = summarise_network(plain, jobs, "mrc")
    b = summarise_network(watched, wjobs, "mrc")
    a.pop("events"), b.pop("events")  # the observer's own snapshot events
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_single_flows_floor_is_its_packets_per_path_in_a_base_rtt() -> None:
    net, _, obs = observed(scenario(FAULTY))
    fail = next(f for f in obs.observations()["failures"] if f["kind"] == "blackhole")
    row = next(x for x in fail["flows"] if x["flow"] == "a")
    conn = net.connections[0]
    # what the benches call the floor: the flow's BDP in packets over its paths (2 x 4)
    bdp = conn.base_rtt_ns * 200 / 8 / (4096 + DATA_OVERHEAD)
    assert bdp / 8 / 2 <= row["entered"] <= 2 * bdp / 8 + 1
    fault = net.faults[0]
    assert fail["lost"] == fault.data_dropped == sum(x["lost"] for x in fail["flows"])
    paths = {tuple(p["path"]) for p in obs.observations()["dead_paths"] if p["fault"] == fault.spec}
    assert paths == {(0, 1)}  # only what crosses the dead link, for both flows' data


def test_the_floor_counts_packets_queued_in_the_element_since_before_its_window() -> None:
    # an incast (four windows of 4 BDP each, no CC) holds a deep queue at the last hop when the
    # receiver's link dies: those packets entered more than a base RTT before the failure and
    # are lost whatever the transport does
    text = """
seed = 1
time_limit = "400us"
faults = ["down:h0-p0@150us"]
[fabric]
planes = 1
t0 = 5
t1 = 2
trim = "4MiB"
buffer = "8MiB"
[transport]
config = {cc_algorithm = "fixed"}
[[traffic]]
pattern = "incast"
name = "in"
dst = 0
senders = [1, 2, 3, 4]
size = "4MiB"
window_scale = 4.0
"""
    net, _, obs = observed(scenario(text))
    fail = obs.observations()["failures"][0]
    queued = sum(x["queued"] for x in fail["flows"])
    assert queued > 4 * max(x["entered"] for x in fail["flows"])
    fault = net.faults[0]
    assert queued <= fault.queued_dropped


def test_the_fabric_counts_each_connections_drops_and_trims() -> None:
    text = """
seed = 2
faults = ["loss=0.05:p0-t0_1-t1_0@0"]
[fabric]
planes = 1
t0 = 3
t1 = 1
hosts_per_t0 = 2
trim = "16KiB"
[[traffic]]
pattern = "incast"
name = "in"
dst = 0
senders = [2, 4]
size = "1MiB"
[[traffic]]
pattern = "flow"
name = "local"
src = 1
dst = 0
size = "1MiB"
"""
    net, jobs, obs = observed(scenario(text))
    flows = {f["name"]: f for f in obs.observations()["flows"]}
    assert flows["in/2->0"]["fabric_drops"] > 0  # it crosses the lossy link (T0 1 to the T1)
    assert flows["in/4->0"]["fabric_drops"] == 0 and flows["local"]["fabric_drops"] == 0
    for c in net.connections:
        assert flows[c.name]["fabric_trims"] == c.receiver.counters.trimmed_received
    assert sum(f["fabric_trims"] for f in flows.values()) > 0
    report = {f["name"]: f for f in summarise_network(net, jobs, "mrc")["flows"]}
    assert all(report[n]["fabric_drops"] == flows[n]["fabric_drops"] for n in flows)


def test_draws_are_deterministic_and_replay_from_their_choices() -> None:
    text, choices = fuzz.draw_scenario(None, 7, 3)
    assert fuzz.draw_scenario(None, 7, 3) == (text, choices)
    assert fuzz.draw_scenario(choices)[0] == text
    assert fuzz.draw_scenario(None, 7, 4)[0] != text
    # past its end a replay takes the simplest value of each choice: one plane, one item
    simplest = scenario(fuzz.draw_scenario([])[0])
    assert simplest.shape.planes == 1 and len(simplest.traffic) == 1 and not simplest.faults


def _paths_left(sc: sf.Scenario) -> bool:
    """Whether every pair of hosts keeps a path, as the fabric itself attaches the faults."""
    fab = Network(sc.shape).fabric
    for spec in sc.faults:
        fault = parse_fault(spec, sc.nominal_ns)
        if fault.kind in KILLING_KINDS:
            fab.attach(fault)
    s = sc.shape

    def ok(ports: list[Any]) -> bool:
        return not any(p.kill_faults for p in ports)

    for h in range(s.hosts):
        for g in range(s.hosts):
            if h == g:
                continue
            a, b = s.t0_of(h), s.t0_of(g)
            if not any(
                ok([fab.nic_up[h][p], fab.leaf_down[p][g]])
                and (a == b or any(ok([fab.leaf_up[p][a][j], fab.spine_down[p][j][b]]) for j in range(s.t1)))
                for p in range(s.planes)
            ):
                return False
    return True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_draw_is_a_valid_bounded_scenario_that_keeps_every_pair_connected(data: st.DataObject) -> None:
    table = draw_table(HypothesisDrawer(data))
    sc = scenario(table_toml(table))
    assert 1 <= sc.shape.planes <= 8 and 2 <= sc.shape.t1 <= 16 and sc.shape.hosts <= 16
    slow = [f for f in sc.faults if f.startswith("rate=")]  # a slow plane: rates, not failures
    assert 1 <= len(sc.traffic) <= 3 and len(sc.faults) - len(slow) <= 3
    assert len({re.findall(r"(?:^|-)(p\d+)", f.split(":")[1].split("@")[0])[0] for f in slow}) <= 2  # planes
    moved = sum(t.size * max(1, t.connections()) for t in sc.traffic)
    assert moved <= MAX_BYTES_PER_PLANE * sc.shape.planes
    assert sf.load_text(sf.to_toml(sc)) == sc
    assert _paths_left(sc)


def test_shrink_finds_the_smallest_failing_choices() -> None:
    def fails(c: list[int]) -> dict[str, Any] | None:
        return {"choices": c} if len(c) >= 2 and c[1] >= 4 else None

    best, result, runs = fuzz.shrink([5, 7, 9, 3, 8], fails, 200)
    assert best == [0, 4] and result == {"choices": [0, 4]} and runs < 200
    assert fuzz.shrink([5, 7, 9], fails, 0)[1] is None  # no budget: nothing run


def test_a_drawn_toml_replays_the_run_exactly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a draw with faults on a busy fabric; the file as a failing draw would be written
    idx = next(i for i in range(50) if scenario(fuzz.draw_scenario(None, 3, i)[0]).faults)
    r = fuzz.run_draw(3, idx)
    path = tmp_path / "draw.toml"
    path.write_text(fuzz.finding_toml(r | {"failed": []}, 3))
    assert main(["--scenario", str(path), "--json"]) in (0, 1)
    run = json.loads(capsys.readouterr().out)["runs"]["mrc"]
    sc = sf.load(path)
    net, _, obs = observed(sc)
    seen = obs.observations()
    assert [f["retransmissions"] for f in run["flows"]] == [
        c.sender.counters.retransmissions for c in net.connections
    ]
    assert [f["data_packets_lost"] for f in run["faults"]] == [f.data_dropped for f in net.faults]
    assert [f["fabric_drops"] for f in run["flows"]] == [f["fabric_drops"] for f in seen["flows"]]
    code = main(["fuzz", "--replay", str(path)])
    assert code == (1 if r["failed"] else 0)
    assert "judged" in capsys.readouterr().out


def test_findings_are_written_as_scenarios_that_load(tmp_path: Path) -> None:
    r = fuzz.run_draw(3, 0)
    case = {"subject": "f", "value": 3.0, "limit": 1.0, "bad": True, "detail": "made up"}
    failing = r | {
        "failed": ["floor"],
        "verdicts": r["verdicts"] | {"floor": {"checked": 1, "violations": [case], "worst": case}},
    }
    result = {
        "seed": 3,
        "results": [failing, r | {"index": 1, "failed": []}],
        "shrunk": {"floor": failing | {"runs": 5}},
    }
    written = fuzz.write_findings(result, tmp_path)
    assert [p.name for p in written] == ["draw-3-0.toml", "shrunk-3-floor.toml"]
    text = written[0].read_text()
    assert "# floor: f: 3.0 (limit 1.0) made up" in text and "mrc-sim fuzz --replay" in text
    assert sf.load(written[1]).traffic == scenario(r["scenario"]).traffic


def fuzz_cli(tmp_path: Path, name: str, *args: str) -> tuple[int, dict[str, Any], str]:
    """``mrc-sim fuzz`` in its own process (a Dask cluster leaves threads and garbage behind),
    its exit code, ``fuzz.json`` and its output."""
    out = tmp_path / name
    proc = subprocess.run(
        [sys.executable, "-m", "mrc_host.sim.cli", "fuzz", "--out", str(out), "--no-progress", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "DASK_TEMPORARY_DIRECTORY": str(tmp_path)},
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    return proc.returncode, json.loads((out / "fuzz.json").read_text()), proc.stdout


def test_a_campaign_gives_the_same_json_on_one_and_two_workers(tmp_path: Path) -> None:
    # draw 0 of seed 29 broke two invariants at once (on the core of 2846c32)
    args = ("--draws", "4", "--seed", "29", "--shrink-runs", "2")
    code1, one, _ = fuzz_cli(tmp_path, "one", *args, "--workers", "1")
    code2, _, text = fuzz_cli(tmp_path, "two", *args, "--workers", "2")
    assert (tmp_path / "one" / "fuzz.json").read_bytes() == (tmp_path / "two" / "fuzz.json").read_bytes()
    assert code1 == code2 and [r["index"] for r in one["results"]] == [0, 1, 2, 3]
    assert "on 2 workers" in text and set(one["summary"]) == set(fuzz.INVARIANTS)
    # every invariant that broke has its shrunk draw, even when two first broke on one draw
    assert set(one["shrunk"]) == {name for name, row in one["summary"].items() if row["failing_draws"]}


def test_a_campaign_under_transport_settings_carries_them_into_every_draw_and_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--transport`` runs every draw under ``[transport.config]`` settings, an experimental
    switch by its name included: a researcher measures a switch on every invariant without a
    build of their own. The settings are in fuzz.json and in each draw's TOML (its replay runs
    under them too); one the scenario file refuses is an exit-2 error naming it, before any
    draw runs."""
    text, choices = fuzz.draw_scenario(None, 7, 3, {"path_delay_losses": True, "sack_gap_threshold": 4})
    sc = scenario(text)
    assert sc.config == {"path_delay_losses": True, "sack_gap_threshold": 4}
    plain = scenario(fuzz.draw_scenario(choices)[0])
    assert plain.config == {} and plain.traffic == sc.traffic and plain.faults == sc.faults
    _, doc, _ = fuzz_cli(
        tmp_path, "on", "--draws", "1", "--seed", "7", "--shrink-runs", "0", "--workers", "1",
        "--transport", "path_delay_losses=true",
    )  # fmt: skip
    assert doc["transport"] == {"path_delay_losses": True}
    assert "[transport.config]\npath_delay_losses = true" in doc["results"][0]["scenario"]
    for bad, said in (
        ("congestion=1", "transport.config.congestion: unknown parameter"),
        ("path_delay_losses=1", "transport.config.path_delay_losses: must be bool"),
        ("path_delay_losses=yes", "the value is not JSON"),
        ("path_delay_losses", "not KEY=VALUE"),
    ):
        with pytest.raises(SystemExit) as stop:
            fuzz.main(["--out", str(tmp_path / "bad"), "--transport", bad])
        assert stop.value.code == 2 and not (tmp_path / "bad").exists()
        assert said in capsys.readouterr().err


# The CI draws that still break an invariant on this core: open transport findings, each with the
# worst value it reached when listed. Everything else must hold. The list only shrinks: a listed
# draw that now holds fails the test until it is taken off, and one that gets worse fails it too.
#   floor on 23: one flow over three planes, the sender's plane-2 port at 25 Gb/s and plane 0's
#   T1 links at 10 Gb/s (80 Gb/s in all against its port's 100). Weighed by its port
#   (``weigh_ports``), plane 0 takes as much of the window as plane 1, and a T0 of plane 1 going
#   down 36 us into the flow costs 26 packets against a limit of 21.8 (16 entered in the RTT
#   before). Plane 0's queue stands out only 76 us into the flow, and ``weigh_queues`` weighs
#   it down from then: too late for this fault
OPEN_FINDINGS: dict[tuple[int, str], float] = {
    (23, "floor"): 26.0,
}


def test_ci_draws_hold_every_invariant_but_the_open_findings(tmp_path: Path) -> None:
    """A bounded run of the fuzzer: every draw holds every invariant, except the open findings
    listed above, none of which may get worse. A failure prints each broken invariant with the
    command that reruns it; its draws' TOML replay it exactly."""
    _, result, _ = fuzz_cli(
        tmp_path,
        "ci",
        "--draws",
        str(CI_DRAWS),
        "--seed",
        str(CI_SEED),
        "--workers",
        "2",
        "--shrink-runs",
        "0",
    )
    broken = {
        (r["index"], name): max(c["value"] for c in r["verdicts"][name]["violations"])
        for r in result["results"]
        for name in r["failed"]
    }
    lines = [
        f"draw {r['index']}: {name}: {c['subject']}: {c['value']} (limit {c['limit']}) {c['detail']}"
        for r in result["results"]
        for name in r["failed"]
        if (r["index"], name) not in OPEN_FINDINGS
        or broken[r["index"], name] > OPEN_FINDINGS[r["index"], name]
        for c in r["verdicts"][name]["violations"][:3]
    ]
    fixed = sorted(set(OPEN_FINDINGS) - set(broken))
    assert not lines and not fixed, (
        f"new or worse broken invariants (rerun: {fuzz.command(CI_SEED, CI_DRAWS)} --out DIR, then "
        "mrc-sim fuzz --replay DIR/draw-*.toml):\n"
        + "\n".join(lines)
        + (f"\nnow holding, take them off OPEN_FINDINGS: {fixed}" if fixed else "")
    )
