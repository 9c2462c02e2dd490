"""Two gray-failure records set side by side seed by seed (``bench.gray_paired``): which way
each figure went, on how many seeds, where a median moved by half a packet or not at all."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench import gray_paired, sim_gray


def record(lost: list[int], back: list[int | None], capacity: list[float]) -> dict[str, Any]:
    seeds = range(1, len(lost) + 1)
    slow = [
        {"seed": s, "of_capacity": c, "share_error": 0.01, "vs_dead": 0.9}
        for s, c in zip(seeds, capacity, strict=True)
    ]
    heal = [{"seed": s, "heal_back_rtts": b, "lost_known": 0} for s, b in zip(seeds, back, strict=True)]
    faults = [{"seed": s, "lost": n, "oracle_sent": 4} for s, n in zip(seeds, lost, strict=True)]
    faults.append({"seed": 2, "lost": 1, "oracle_sent": 1})  # (seed 2 had two faults: summed)
    return {
        "slow_plane": {"2p": {"per_seed": slow}},
        "knowledge": {"per_seed": heal},
        "oracle": {"8to1": {"per_seed": faults}},
    }


def by_figure(rows: list[gray_paired.Paired]) -> dict[tuple[str, str], gray_paired.Paired]:
    return {(p.row, p.figure): p for p in rows}


def test_each_figure_counts_seeds_better_same_and_worse_by_its_own_direction() -> None:
    old = record([10, 12, 9, 20], [4, 5, None, 3], [0.90, 0.80, 0.95, 0.70])
    new = record([10, 13, 8, 22], [4, None, 5, 3], [0.90, 0.85, 0.95, 0.60])
    got = by_figure(gray_paired.compare(old, new))
    lost = got[("oracle 8to1", "lost")]
    assert (lost.better, lost.same, lost.worse) == (1, 1, 2)  # fewer lost is better
    assert lost.median_change == 0.5  # (0, +1, -1, +2)
    cap = got[("slow plane 2p", "goodput ÷ capacity")]
    assert (cap.better, cap.same, cap.worse) == (1, 2, 1)  # more of the capacity is better
    back = got[("heal in an 8→1 incast", "RTTs back")]
    # never back (None) is the worst: seed 2 got worse, seed 3 better; the change over the rest
    assert (back.better, back.same, back.worse) == (1, 2, 1) and back.median_change == 0
    known = got[("15→1, dead link", "DATA lost once known")]
    assert (known.better, known.same, known.worse) == (0, 4, 0)


def test_only_seeds_and_figures_both_records_hold_are_compared() -> None:
    old = record([10, 12], [4, 4], [0.9, 0.9])
    new = record([11, 12, 30], [4, 4, 4], [0.9, 0.9, 0.9])
    del new["slow_plane"]
    got = by_figure(gray_paired.compare(old, new))
    assert ("slow plane 2p", "goodput ÷ capacity") not in got
    lost = got[("oracle 8to1", "lost")]
    assert (lost.better, lost.same, lost.worse) == (0, 1, 1)  # (seed 3 is in one record only)
    assert math.isfinite(lost.median_change)
    text = gray_paired.table(list(got.values()))
    assert text.splitlines()[2].startswith("| oracle 8to1 | lost | 0 | 1 | 1 |")  # worse rows first


def test_a_record_to_compare_with_is_checked_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ``--against`` file is read before minutes of simulation: missing, not JSON, not a
    record, a row not as sim_gray writes it, or no figure per seed -- each a clear error naming
    the file, and sim_gray exits 2 before it runs (or creates) anything."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(record([10], [4], [0.9])))
    assert gray_paired.load_record(good)["oracle"]["8to1"]["per_seed"][0]["lost"] == 10
    cases = {
        "missing.json": None,
        "text.json": "not json {",
        "list.json": "[1, 2]",
        "no_seed.json": json.dumps({"oracle": {"8to1": {"per_seed": [{"lost": 3, "oracle_sent": 1}]}}}),
        "old.json": json.dumps({"oracle": {"8to1": {"lost": {"median": 3}}}, "knowledge": {"seeds": 10}}),
    }
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(gray_paired.RecordError, match=name):
            gray_paired.load_record(path)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        sim_gray.main(["--out", str(out), "--against", str(tmp_path / "old.json")])
    assert stop.value.code == 2 and not out.exists()
    assert "no figure per seed" in capsys.readouterr().err


def test_transport_overrides_are_checked_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--transport`` reaches every row (the gray failures under another congestion control,
    or with an experimental switch); a key neither TransportConfig nor its switches know, or
    a value that is not JSON, is an exit-2 error naming it before minutes of simulation,
    never a TypeError after them."""
    out = tmp_path / "out"
    for bad, said in (
        ("congestion=1", "'congestion=1': not key=value with a TransportConfig field"),
        ("cc_algorithm", "'cc_algorithm': not key=value"),
        ("cc_algorithm=nscc+rccc", "the value is not JSON (a string goes in quotes"),
    ):
        with pytest.raises(SystemExit) as stop:
            sim_gray.main(["--out", str(out), "--transport", bad])
        assert stop.value.code == 2 and not out.exists()
        assert said in capsys.readouterr().err
    ap = sim_gray.argparse.ArgumentParser()
    got = sim_gray.transport_overrides(ap, ['cc_algorithm="nscc+rccc"', "ev_min_active=0"])
    assert got == {"cc_algorithm": "nscc+rccc", "ev_min_active": 0}
    # an experimental switch by its own name, as a scenario's table names it (was refused)
    assert sim_gray.transport_overrides(ap, ["path_delay_losses=true"]) == {"path_delay_losses": True}
