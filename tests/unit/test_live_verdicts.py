"""Live verdicts over runs, the check that no row says *holds* against its own numbers,
provenance, and the layout ``make bench`` gives repeated runs on several data planes.

Why: a live cell used to be one run's number; a verdict now needs the spread of at least
three runs, and a table that says *holds* must hold when someone else runs it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import evidence, provenance, run_all
from bench.experiments.common import Result, at_least, beats, write_result
from bench.intervals import FAILS, HOLDS, TIES


def _finding(value: float, **rule: Any) -> dict[str, Any]:
    return {"metric": "goodput / clean", "mode": "mrc", "value": value, **rule}


def test_every_run_must_hold_for_the_figure_to_hold() -> None:
    held = [_finding(v, **at_least(v, 0.8)) for v in (0.91, 0.85, 0.88)]
    assert evidence.judge_runs(held, 3)["verdict"] == HOLDS
    crossing = [_finding(v, **at_least(v, 0.8)) for v in (0.91, 0.79, 0.88)]
    j = evidence.judge_runs(crossing, 3)
    assert j["verdict"] == FAILS and j["runs_holding"] == 2
    assert (j["median"], j["min"], j["max"]) == (0.88, 0.79, 0.91)


def test_a_comparison_on_both_sides_of_parity_ties_with_its_baseline() -> None:
    runs = [_finding(v, **beats(v, "ECMP")) for v in (1.04, 0.97, 1.02)]
    j = evidence.judge_runs(runs, 3)
    assert j["verdict"] == TIES and j["versus"] == "ECMP"
    assert (
        evidence.judge_runs([_finding(v, **beats(v, "ECMP")) for v in (0.9, 0.95, 0.97)], 3)["verdict"]
        == FAILS
    )


def test_fewer_runs_than_the_minimum_give_no_verdict() -> None:
    runs = [_finding(v, **at_least(v, 0.8)) for v in (0.91, 0.93)]
    assert evidence.judge_runs(runs, 2)["verdict"] == evidence.NO_VERDICT
    # a run that did not measure the figure (it failed) leaves too few as well
    assert evidence.judge_runs(runs, 3)["verdict"] == evidence.NO_VERDICT


def _cannot(value: float) -> dict[str, Any]:
    return _finding(value, holds=None, expect=f"{evidence.CANNOT}: too small a BDP here")


def test_a_figure_some_runs_cannot_show_is_cannot_be_shown_not_no_verdict() -> None:
    """E5's single-path collapse on BMv2 held in one run and could not be shown in two (too
    small a BDP): the cell used to say "no verdict", as if runs were missing."""
    j = evidence.judge_runs([_finding(0.05, **at_least(0.05, 0.0)), _cannot(0.6), _cannot(0.7)], 3)
    assert j["verdict"] == evidence.CANNOT and j["runs_cannot"] == 2
    assert j["expect"].endswith("(in 2 of 3 runs)")
    # a run that judged the figure and failed still fails it
    failed = evidence.judge_runs([_finding(0.5, **at_least(0.5, 0.8)), _cannot(0.6), _cannot(0.7)], 3)
    assert failed["verdict"] == FAILS
    # no run could show it: cannot be shown here as well
    assert evidence.judge_runs([_cannot(0.6), _cannot(0.7), _cannot(0.8)], 3)["verdict"] == evidence.CANNOT
    # a run that measured nothing still leaves no verdict
    assert evidence.judge_runs([_finding(0.05, **at_least(0.05, 0.0)), _cannot(0.6)], 3)["verdict"] == (
        evidence.NO_VERDICT
    )


def test_a_cell_holds_beside_a_figure_its_runs_cannot_show() -> None:
    row = {
        "claim": "c",
        "mrc-sim": {"verdict": evidence.NO_VERDICT, "figures": []},
        "bmv2": {"verdict": evidence.NO_VERDICT, "figures": []},
    }
    cannot = evidence.judge_runs([_cannot(0.6), _cannot(0.7), _cannot(0.8)], 3)
    held = evidence.judge_runs([_finding(v, **at_least(v, 0.8)) for v in (0.91, 0.85, 0.88)], 3)
    row["linux"] = {"verdict": evidence.combine([HOLDS]), "figures": [cannot, held]}
    assert evidence.consistent(row) == []
    crossing = evidence.judge_runs([_finding(v, **at_least(v, 0.8)) for v in (0.91, 0.79, 0.88)], 3)
    row["linux"] = {"verdict": HOLDS, "figures": [cannot, crossing]}
    assert evidence.consistent(row)


def test_provenance_names_the_arguments_of_the_process_when_given_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``python -m bench.run_all --only e2`` calls main() with no argv: the command in
    provenance.json used to lose its arguments."""
    monkeypatch.setattr("sys.argv", ["run_all", "--only", "e2", "--runs", "3"])
    prov = provenance.collect(["linux"], 3, None, quick=False)
    assert prov["command"] == "python -m bench.run_all --only e2 --runs 3"
    assert provenance.collect(["linux"], 3, ["--quick"], quick=True)["command"].endswith("run_all --quick")


def _live_dir(tmp_path: Path, values: list[float]) -> list[dict[str, Any]]:
    records = []
    for k, v in enumerate(values, 1):
        res = Result("e6", "20 % drop on one EV", "", target="linux", seed=k)
        res.add("goodput / clean", v, mode="mrc", **at_least(v, 0.85))
        write_result(tmp_path / "e6" / "linux" / f"run{k}", res)
        records.append(json.loads((tmp_path / "e6" / "linux" / f"run{k}" / "e6.json").read_text()))
    return records


def test_a_row_that_says_holds_against_its_runs_is_caught(tmp_path: Path) -> None:
    rows = evidence.rows(tmp_path, _live_dir(tmp_path, [0.9, 0.84, 0.95]))
    row = next(r for r in rows if "20 % drop" in r["claim"])
    assert row["linux"]["verdict"] == FAILS  # one run of three misses the bar
    assert evidence.consistent(row) == []
    forged = {**row, "linux": {**row["linux"], "verdict": HOLDS}}
    assert evidence.consistent(forged) == [
        f"{row['claim']} / linux: says holds, but goodput / clean (mrc) does not"
    ]


def test_a_sim_row_that_says_holds_while_an_interval_crosses_its_bar_is_caught() -> None:
    fig = {"label": "of line rate", "run": "mrc", "claim": True, "verdict": TIES, "values": [1.0]}
    row = {
        "claim": "x",
        "mrc-sim": {"verdict": HOLDS, "figures": [fig]},
        "linux": {"verdict": evidence.NO_VERDICT},
        "bmv2": {"verdict": evidence.NO_VERDICT},
    }
    assert evidence.consistent(row) == ["x / mrc-sim: says holds, but of line rate (mrc) does not"]


def test_make_bench_refuses_a_directory_of_another_commit(tmp_path: Path) -> None:
    out = tmp_path / "results"
    first = {"commit": "a" * 40, "command": "python -m bench.run_all"}
    provenance.claim(out, first)
    (out / "summary.json").write_text("{}")
    with pytest.raises(provenance.ProvenanceError, match=r"holds results of commit a{40}"):
        provenance.claim(out, {"commit": "b" * 40, "command": "again"})
    # the same commit may add to its own directory
    assert provenance.claim(out, {"commit": "a" * 40, "command": "again"})["command"].endswith("again")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "REPORT.md").write_text("old")
    with pytest.raises(provenance.ProvenanceError, match=r"without provenance\.json"):
        provenance.claim(bare, first)


def test_live_runs_land_per_data_plane_and_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``make bench`` runs a claim's experiment ``--runs`` times on every data plane with seeds
    1..N, and a data plane that is missing once (its record says why)."""
    calls: list[list[str]] = []

    class Fake:
        @staticmethod
        def main(argv: list[str]) -> int:
            calls.append(argv)
            out = Path(argv[argv.index("--out") + 1])
            target, seed = argv[argv.index("--target") + 1], int(argv[argv.index("--seed") + 1])
            status = "skipped" if target == "bmv2" else "ok"
            write_result(out, Result("e6", "t", "", status=status, target=target, seed=seed))
            return 0

    monkeypatch.setattr(run_all, "load", lambda module: Fake)
    monkeypatch.setattr(run_all, "live_targets", lambda asked: (["linux", "bmv2"], {"bmv2": "not here"}))
    monkeypatch.setattr(run_all.provenance, "commit", lambda: "c" * 40)
    out = tmp_path / "r"
    assert run_all.main(["--out", str(out), "--only", "e6", "--runs", "3", "--quick"]) == 0
    seeds = {(a[a.index("--target") + 1], a[a.index("--seed") + 1]) for a in calls}
    assert seeds == {("linux", "1"), ("linux", "2"), ("linux", "3"), ("bmv2", "1")}
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("e6.json")) == [
        "e6/bmv2/run1/e6.json",
        "e6/linux/run1/e6.json",
        "e6/linux/run2/e6.json",
        "e6/linux/run3/e6.json",
    ]
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["commit"] == "c" * 40 and prov["live_seeds"] == [1, 2, 3]
    assert "- commit: `" + "c" * 40 + "`" in (out / "REPORT.md").read_text()


def test_make_bench_keeps_the_live_run_directories_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--keep-runs`` reaches every live run (its agents' logs are what explains a slow run)
    and nothing else; without it no experiment is asked to keep them."""
    seen: list[tuple[str, tuple[str, ...]]] = []

    def fake_run_one(bench: Any, out: Path, extra: tuple[str, ...]) -> int:
        seen.append((bench.name, extra))
        return 0

    monkeypatch.setattr(run_all, "run_one", fake_run_one)
    monkeypatch.setattr("bench.report.write_report", lambda out: out / "REPORT.md")
    argv = ["--only", "e6,codec", "--target", "linux", "--runs", "2"]
    assert run_all.main([*argv, "--out", str(tmp_path / "a"), "--keep-runs"]) == 0
    live = [extra for name, extra in seen if name == "e6"]
    assert len(live) == 2 and all(extra[-1] == "--keep-runs" for extra in live)
    assert all("--keep-runs" not in extra for name, extra in seen if name == "codec")
    seen.clear()
    assert run_all.main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert seen and all("--keep-runs" not in extra for _name, extra in seen)
