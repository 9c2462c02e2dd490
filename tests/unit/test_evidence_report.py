"""The QUICK report's evidence table: every published result has a value or says why not.

Runs the real ``bench.sim_shapes --quick`` on two seeds (about a minute on two cores) into a results
directory, adds one real live-experiment record written by ``bench.experiments.common``
with a skip status (as an experiment does without root), renders the report with
``bench.report`` and checks every row and column of the evidence table.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import evidence, report, sim_shapes
from bench.experiments import EXPERIMENTS, common
from bench.experiments.common import Result, write_result


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quick")
    assert (
        sim_shapes.main(["--out", str(out / "sim-shapes"), "--quick", "--seeds", "2", "--no-progress"]) == 0
    )
    for e in EXPERIMENTS[:9]:
        res = Result(e.id, e.summary, "", status="skipped", reason="needs root", target="linux")
        write_result(out / e.id, res)
    return out


def _rows(text: str) -> list[list[str]]:
    section = text[text.index("## Evidence") : text.index("## Every number")]
    table = [ln for ln in section.splitlines() if ln.startswith("| ")]
    body = table[1:]  # header, then (after the separator, which starts with "|---") the rows
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in body]


def test_every_claim_has_a_row_with_a_value_or_a_reason(quick_results: Path) -> None:
    text = report.render(quick_results)
    rows = _rows(text)
    assert [r[0] for r in rows] == [c.claim for c in evidence.CLAIMS]
    recorded = {e.id for e in EXPERIMENTS[:9]}
    for (claim, sim, live, bmv2), c in zip(rows, evidence.CLAIMS, strict=True):
        assert "—" not in sim + live + bmv2, claim
        assert sim.startswith(("**holds**", "**ties**", "**does not hold**", "cannot be shown here:", "`")), (
            claim,
            sim,
        )
        if set(c.experiments) & recorded:
            assert "cannot be shown here:" in live and "needs root" in live, (claim, live)
        else:  # an experiment this directory has no record of: the cell says how to get one
            assert "not run in this results directory (make bench ONLY=e" in live, (claim, live)
        # no BMv2 record here: the cell says so and how to get one, whatever this machine has installed
        want = "not run on BMv2 in this results directory (make bench TARGET=bmv2 ONLY=e"
        assert want in bmv2, (claim, bmv2)


def test_a_sim_cell_carries_the_measured_number_and_its_baseline(quick_results: Path) -> None:
    rows = _rows(report.render(quick_results))
    loss = next(r for r in rows if r[0].startswith("1 % random loss"))
    assert "MRC of line rate" in loss[1] and "baseline single-path of line rate" in loss[1]
    # every cell states its data plane, fabric, link rate and seed
    assert "[mrc-sim, 8p x" in loss[1] and "100 Gb/s" in loss[1] and "2 seeds 1..2" in loss[1]
    # median [95 % interval] and the verdict of each judged figure
    assert "of line rate" in loss[1] and "(>= 0.3: " in loss[1] and "(<= 0.1: " in loss[1]


FIXTURES = Path(__file__).parent / "fixtures" / "quick_live"


def _recorded_runs(quick_results: Path, dest: Path, runs: int) -> None:
    """The recorded QUICK run's records as ``runs`` runs of each experiment (seeds 1..runs),
    laid out as ``make bench`` lays them out."""
    recorded = sorted(FIXTURES.glob("e*.json"))
    assert len(recorded) == 9, "tests/unit/fixtures/quick_live must hold e1..e9"
    shutil.copytree(quick_results / "sim-shapes", dest / "sim-shapes")
    for path in recorded:
        for k in range(1, runs + 1):
            where = dest / path.stem / "linux" / f"run{k}"
            where.mkdir(parents=True)
            data = json.loads(path.read_text())
            data["seed"] = k
            (where / path.name).write_text(json.dumps(data))


def test_recorded_live_quick_run_fills_every_live_cell(quick_results: Path, tmp_path: Path) -> None:
    """Live cells from a recorded QUICK run on the Linux target (as root, by ``make bench QUICK=1``;
    the JSON is the experiments' own output with its bulky ``data`` section dropped), three runs."""
    _recorded_runs(quick_results, tmp_path, 3)
    rows = _rows(report.render(tmp_path))
    recorded = {e.id for e in EXPERIMENTS[:9]}
    for (claim, _sim, live, bmv2), c in zip(rows, evidence.CLAIMS, strict=True):
        if not set(c.experiments) <= recorded:
            continue
        assert live.startswith(("**holds**", "**does not hold**", "**ties**")), (claim, live)
        assert "[linux, " in live and "Mbit/s, 3 runs, seeds 1,2,3]" in live, (claim, live)
        assert "of 3 runs" in live, (claim, live)
        assert bmv2.startswith("e") and "not run on BMv2" in bmv2, (claim, bmv2)
    data = json.loads((tmp_path / "evidence.json").read_text())
    assert [r["claim"] for r in data] == [c.claim for c in evidence.CLAIMS]
    assert all(evidence.consistent(r) == [] for r in data)
    assert any((tmp_path / "evidence").glob("*.png"))


def test_one_run_gives_numbers_but_no_live_verdict(quick_results: Path, tmp_path: Path) -> None:
    _recorded_runs(quick_results, tmp_path, 1)
    rows = _rows(report.render(tmp_path))
    flaps = next(r for r in rows if r[0].startswith("T0-T1 link flaps"))
    assert flaps[2].startswith("no verdict (fewer than 3 runs): e2 ["), flaps[2]


def test_a_skipped_bmv2_experiment_says_why_in_the_bmv2_column(
    quick_results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An experiment asked for BMv2 where it cannot run records the skip under target bmv2 (by
    ``experiment_main`` itself), so the BMv2 column gives the reason and the Linux column is untouched."""
    shutil.copytree(quick_results, tmp_path, dirs_exist_ok=True)
    why = "simple_switch_grpc not found"
    monkeypatch.setattr(common, "check_target", lambda asked: (None, f"{asked}: {why}"))
    ran: list[str] = []
    rc = common.experiment_main(
        "e6", "title", "shape", lambda ctx, res: ran.append(ctx.target),
        ["--out", str(tmp_path / "bmv2-e6"), "--target", "bmv2"], needs_root=False,
    )  # fmt: skip
    assert rc == 0 and ran == []
    rows = _rows(report.render(tmp_path))
    ev_drop = next(r for r in rows if r[0].startswith("20 % drop on one EV"))
    assert ev_drop[3] == "e6: cannot be shown here: skipped: bmv2: simple_switch_grpc not found", ev_drop
    assert "needs root" in ev_drop[2]  # the Linux record of e6 the fixture wrote, unchanged


def test_spray_balance_has_a_simulator_cell_with_mrc_against_ecmp(quick_results: Path) -> None:
    rows = _rows(report.render(quick_results))
    spray = next(r for r in rows if r[0].startswith("spray balance"))
    assert "`spray-balance`" in spray[1] and "uplink max/mean" in spray[1] and "ECMP" in spray[1]
    shapes = evidence.load_shapes(quick_results)
    assert shapes is not None
    m = next(r for r in shapes["rows"] if r["scenario"] == "spray-balance")["metrics"]
    # MRC's 128 EVs cover the 128 uplinks evenly; ECMP hashes the same EVs unevenly
    assert m["mrc"]["uplinks_used"] == m["mrc"]["uplinks"] == [128, 128]  # per seed
    assert max(m["mrc"]["uplink_max_over_mean"]) <= 1.15 < min(m["ecmp"]["uplink_max_over_mean"])
    assert m["single-path"]["uplinks_used"] == [2, 2]  # one uplink per flow
