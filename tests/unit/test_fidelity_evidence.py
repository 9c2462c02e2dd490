"""The fidelity verdict in the evidence table and REPORT.md (bench/evidence.py, bench/report.py).

A live run the monitor did not pass is no evidence: the cell leaves it out, and with fewer
than three passed runs it says *not faithful here* with the monitor's reason; the report's
rows carry each run's verdict. Built on the recorded QUICK records in fixtures/quick_live.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import evidence, report

FIXTURES = Path(__file__).parent / "fixtures" / "quick_live"
STARVED = "bmv2 ext0p0n0 starved (wanted 100% of a core, waited for one 60% of the time) in 9 of 10 s"


def verdict(faithful: bool) -> dict[str, object]:
    reasons = [] if faithful else [STARVED]
    return {
        "faithful": faithful,
        "verdict": "faithful" if faithful else f"not faithful: {STARVED}",
        "reasons": reasons,
        "fabrics": [
            {"shape": "4x2x2x2 at 24 Mbit/s", "faithful": faithful, "reasons": reasons, "figures": {}}
        ],
    }


def lay_out(dest: Path, experiment: str, faithful: list[bool]) -> None:
    """One record per run of ``experiment`` (seeds 1..n), each with the given verdict."""
    data = json.loads((FIXTURES / f"{experiment}.json").read_text())
    for k, ok in enumerate(faithful, start=1):
        where = dest / experiment / "linux" / f"run{k}"
        where.mkdir(parents=True)
        (where / f"{experiment}.json").write_text(json.dumps({**data, "seed": k, "fidelity": verdict(ok)}))


def live_cell(results: Path, claim_start: str) -> str:
    text = report.render(results)
    section = text[text.index("## Evidence") : text.index("## Every number")]
    row = next(ln for ln in section.splitlines() if ln.startswith(f"| {claim_start}"))
    return row.strip("|").split(" | ")[2].strip()


def test_a_cell_whose_runs_were_not_faithful_says_so_with_the_reason(tmp_path: Path) -> None:
    lay_out(tmp_path, "e6", [True, False, True])
    cell = live_cell(tmp_path, "20 % drop on one EV")
    assert cell.startswith("e6: not faithful here ["), cell
    assert "1 of 3 runs not faithful; seed 2: " + STARVED in cell
    row = next(r for r in evidence.rows(tmp_path, report.load(tmp_path)[0]) if r["claim"].startswith("20 %"))
    assert row["linux"]["verdict"] == evidence.NOT_FAITHFUL
    # what the runs measured is shown, over all three, and said not to be evidence
    said = cell.split("; measured, not evidence: ")[1]
    first = next(
        f for f in json.loads((FIXTURES / "e6.json").read_text())["findings"] if f["holds"] is not None
    )
    assert said.startswith(f"{first['metric']} ({first['mode']}) "), said
    assert said.count(" of 3 runs") >= 1 and row["linux"].get("figures") == [], said


def test_only_passed_runs_are_judged_and_the_left_out_ones_are_counted(tmp_path: Path) -> None:
    lay_out(tmp_path, "e6", [True, True, False, True])
    cell = live_cell(tmp_path, "20 % drop on one EV")
    assert cell.startswith(("**holds**", "**does not hold**", "**ties**")), cell
    assert "3 runs, seeds 1,2,4, 1 not faithful and left out]" in cell


def test_a_cell_of_faithful_runs_says_so(tmp_path: Path) -> None:
    lay_out(tmp_path, "e6", [True, True, True])
    assert "3 runs, seeds 1,2,3, all faithful]" in live_cell(tmp_path, "20 % drop on one EV")


def test_every_live_row_of_the_report_carries_its_runs_verdict(tmp_path: Path) -> None:
    lay_out(tmp_path, "e6", [True, False, True])
    text = report.render(tmp_path)
    rows = [ln for ln in text.split("## Every number")[1].split("## Experiments")[0].splitlines()]
    findings = [ln for ln in rows if ln.startswith("| e6 |")]
    assert findings and all(
        ln.rstrip().endswith(("| faithful |", f"| not faithful: {STARVED} |")) for ln in findings
    )
    assert sum(STARVED in ln for ln in findings) == len(findings) // 3
    # a shape that failed in an unfaithful run is the emulation's, not MRC's
    gaps = text.split("## Where the emulation does not reproduce a shape")[1]
    for line in gaps.splitlines():
        if "(e6/linux/run2)" in line:
            assert "The emulation did not keep up" in line
        elif "(e6/linux/run" in line:
            assert "The run was faithful: a transport finding" in line
