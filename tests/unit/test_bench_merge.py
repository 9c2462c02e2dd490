"""bench.merge: results directories run one experiment and data plane at a time make one table.

Built on the recorded QUICK records in fixtures/quick_live, laid out as ``make bench`` lays
them out in two directories (Linux runs in one, BMv2 runs in the other, each with its own
provenance and summary); the merged report must fill both live cells of the row, name both
sources, and refuse a run that two sources hold.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import evidence, merge, provenance, report

FIXTURES = Path(__file__).parent / "fixtures" / "quick_live"


def bench_dir(root: Path, name: str, experiment: str, target: str, seeds: list[int]) -> Path:
    """A results directory as ``make bench ONLY=<experiment> TARGET=<target>`` writes it."""
    out = root / name
    data = json.loads((FIXTURES / f"{experiment}.json").read_text())
    for k in seeds:
        where = out / experiment / target / f"run{k}"
        where.mkdir(parents=True)
        fidelity = {"faithful": True, "verdict": "faithful", "reasons": [], "fabrics": []}
        record = {**data, "target": target, "seed": k, "fidelity": fidelity}
        (where / f"{experiment}.json").write_text(json.dumps(record))
    prov = {"commit": f"c0ffee-{name}", "live_data_planes": [target], "live_runs": len(seeds)}
    (out / provenance.FILE).write_text(json.dumps({**prov, "command": f"run {name}", "started_at": name}))
    (out / "summary.json").write_text(json.dumps({experiment: {"status": "ok", "seconds": 10.0}}))
    return out


def test_two_directories_make_one_table_with_both_live_cells(tmp_path: Path) -> None:
    linux = bench_dir(tmp_path, "a", "e6", "linux", [1, 2, 3])
    bmv2 = bench_dir(tmp_path, "b", "e6", "bmv2", [1, 2, 3])
    (linux / "calibrate").mkdir()
    entry = {
        "key": "linux/4x2x2x2",
        "rate_mbit_s": 60.0,
        "highest_faithful_mbit_s": 75.0,
        "steps": [],
        "seconds": 90,
    }
    (linux / "calibrate" / "calibration.json").write_text(json.dumps({"entries": [entry]}))
    by_hand = tmp_path / "by-hand"  # a calibration run on its own: no provenance.json
    (by_hand / "calibrate").mkdir(parents=True)
    (by_hand / "calibrate" / "calibration.json").write_text(json.dumps({"entries": []}))
    out = tmp_path / "merged"
    text = merge.merge([linux, bmv2, by_hand], out).read_text()
    assert f"from `{by_hand}`: no provenance.json" in text

    rows = json.loads((out / "evidence.json").read_text())
    row = next(r for r in rows if r["claim"].startswith("20 % drop"))
    for target in ("linux", "bmv2"):
        assert "3 runs, seeds 1,2,3, all faithful" in row[target]["text"], row[target]
        assert row[target]["verdict"] not in (evidence.NO_VERDICT, evidence.NOT_FAITHFUL)
    assert (out / "evidence" / f"{row['slug']}.png").stat().st_size > 0
    # the provenance names both sources and says the commits differ
    assert "several: c0ffee-a, c0ffee-b" in text
    assert "from `" + str(linux) + "`: commit `c0ffee-a`, `run a`" in text
    # summaries add up, calibration entries are carried over and plotted
    summary = json.loads((out / "summary.json").read_text())
    assert summary["e6"] == {"status": "ok", "seconds": 20.0}
    assert "| linux/4x2x2x2 | 60.0 | 75.0 |" in text
    assert (out / "calibrate" / "calibration.png").stat().st_size > 0
    # the merged directory reads like any other: re-rendering gives the same table
    assert report.render(out).split("## Every number")[0] == text.split("## Every number")[0]


def test_a_run_two_directories_hold_is_refused(tmp_path: Path) -> None:
    first = bench_dir(tmp_path, "a", "e6", "linux", [1, 2])
    again = bench_dir(tmp_path, "b", "e6", "linux", [2, 3])
    with pytest.raises(merge.MergeError, match=r"e6/linux/run2/e6.json is in .*a and in .*b"):
        merge.merge([first, again], tmp_path / "merged")
    assert merge.main(["--out", str(tmp_path / "other"), str(first), str(again)]) == 2


def test_a_destination_with_results_is_refused(tmp_path: Path) -> None:
    src = bench_dir(tmp_path, "a", "e6", "linux", [1])
    out = tmp_path / "merged"
    out.mkdir()
    (out / "keep.txt").write_text("someone's")
    with pytest.raises(merge.MergeError, match="not empty"):
        merge.merge([src], out)
    assert (out / "keep.txt").read_text() == "someone's"
