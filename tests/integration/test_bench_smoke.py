"""``make bench QUICK=1`` restricted to two experiments (E1 black hole, E7 balance), end to end.

Runs the real Makefile target on the live testbed (Linux target, one run each, node prefix
``ex``), then checks what a user gets: one JSON per experiment and run in the shared schema
with real measurements (``<id>/linux/run1/<id>.json``), non-empty PNG plots, the run's
provenance, and a REPORT.md that lists both experiments. Timing is not asserted (numbers go
to the report, not into tests); the transfers must complete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
ONLY = ("e1", "e7")
MAKE_TIMEOUT_S = 300
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RESULT_KEYS = {
    "schema": str,
    "experiment": str,
    "title": str,
    "paper_shape": str,
    "status": str,
    "reason": str,
    "target": str,
    "quick": bool,
    "seed": int,
    "fabric": dict,
    "started_at": str,
    "seconds": float,
    "findings": list,
    "caveats": list,
    "data": dict,
    "plots": list,
}
FINDING_KEYS = {"metric", "value", "unit", "mode", "paper", "expect", "holds", "note"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from topologies.agents import agent_available

    ok, why = agent_available()
    if not ok:
        pytest.skip(f"the live host agent is not installed: {why}")
    out = tmp_path_factory.mktemp("bench-smoke")
    env = dict(os.environ, PY=sys.executable)
    # -o: do not rebuild the venv (make setup) from inside a test; use the interpreter running it.
    # Links at E1's 30 Mbit/s, as this test was timed for: the plumbing is under test, not a rate
    proc = subprocess.run(
        ["make", "-o", ".venv/.installed", "bench", "QUICK=1", f"ONLY={','.join(ONLY)}", "TARGET=linux",
         "RUNS=1", f"PY={sys.executable}", f"BENCH_ARGS=--out {out} --link-rate 30"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=MAKE_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (
        f"make bench failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return out


def run_dir(results: Path, experiment: str) -> Path:
    return results / experiment / "linux" / "run1"


@pytest.mark.parametrize("experiment", ONLY)
def test_result_json_has_the_schema_and_real_numbers(results: Path, experiment: str) -> None:
    data = json.loads((run_dir(results, experiment) / f"{experiment}.json").read_text())
    for key, kind in RESULT_KEYS.items():
        assert key in data, f"{experiment}.json lacks {key}"
        assert isinstance(data[key], kind | int if kind is float else kind), f"{key}: {type(data[key])}"
    assert data["schema"] == "mrc-experiment/1"
    assert data["experiment"] == experiment
    assert data["status"] == "ok", data["reason"]
    assert data["quick"] is True
    assert data["target"] == "linux"
    assert data["fabric"]["planes"] >= 2
    assert data["findings"], "no measured numbers"
    for f in data["findings"]:
        assert set(f) >= FINDING_KEYS, f
        assert f["holds"] in (True, False, None)
    assert any(f["value"] is not None for f in data["findings"])


def test_e1_measured_every_mode_against_its_clean_run(results: Path) -> None:
    data = json.loads((run_dir(results, "e1") / "e1.json").read_text())
    runs = data["data"]["runs"]
    assert set(runs) == {"mrc", "single-path", "ecmp"}
    for mode, r in runs.items():
        assert r["clean"]["ok"], f"clean {mode} transfer failed"
        assert r["faulted"]["faults"][0]["fault_id"], f"{mode}: the black hole was not injected"
        assert r["faulted"]["ok"], f"{mode}: the transfer did not complete after the fault ended"
    # the black hole was in place while MRC's transfer ran, on the uplink it used most, and MRC
    # noticed it: it lost data packets there, or (when its probes found the path dead before any
    # data went that way, e.g. while the path sat out an ECN penalty) it retired the path's EVs
    mrc = runs["mrc"]["faulted"]
    landed = mrc["faults"][0]["landed_at"]
    assert landed is not None and landed < mrc["wall_s"], f"the fault landed at {landed} s, after the end"
    retired = mrc["summary"]["evs_retired"]
    assert mrc["lost_packets"] > 0 or retired > 0, f"lost {mrc['lost_packets']}, EVs retired {retired}"


def test_e7_counted_bytes_on_every_uplink(results: Path) -> None:
    data = json.loads((run_dir(results, "e7") / "e7.json").read_text())
    for label, modes in data["data"]["cases"].items():
        for mode, case in modes.items():
            per_link = case["bytes_per_uplink"]
            assert len(per_link) == 8, f"{label} {mode}: {per_link}"
            assert sum(per_link.values()) > 0
            assert case["ok"]


@pytest.mark.parametrize("experiment", ONLY)
def test_plots_exist_and_are_pngs(results: Path, experiment: str) -> None:
    data = json.loads((run_dir(results, experiment) / f"{experiment}.json").read_text())
    assert data["plots"]
    for name in data["plots"]:
        png = run_dir(results, experiment) / name
        assert png.stat().st_size > 1000, f"{png} is (nearly) empty"
        assert png.read_bytes()[:8] == PNG_MAGIC


def test_report_lists_both_experiments(results: Path) -> None:
    report = (results / "REPORT.md").read_text()
    assert "Every number next to the shape it tests" in report
    for experiment in ONLY:
        assert f"| {experiment} | {experiment}/linux/run1 |" in report
        assert f"{experiment}/linux/run1/{experiment}.png" in report
    summary = json.loads((results / "summary.json").read_text())
    assert set(summary) == set(ONLY)
    prov = json.loads((results / "provenance.json").read_text())
    assert prov["live_data_planes"] == ["linux"] and prov["live_runs"] == 1
    assert f"- commit: `{prov['commit']}`" in report
