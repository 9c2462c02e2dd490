"""``mrc-sim --record`` is bounded: a run that goes on past its recording's bound keeps
running, the recording stops at the bound, says so, and stays readable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mrc_fabric import recording
from mrc_host.sim.cli import main as sim_main
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.recording import SimRecorder
from mrc_host.sim.scenario import SimConfig, Simulation

SIZE = 1 << 20


def recorded(
    tmp_path: Path, max_bytes: int, interval_ns: int = 2_000
) -> tuple[SimRecorder, Path, dict[str, Any]]:
    sim = Simulation(SimConfig(shape=FabricShape(planes=2, t1=4), size=SIZE, seed=3))
    rec = SimRecorder(sim.net, interval_ns, "bound", max_bytes)
    rec.start()
    result = sim.run()
    return rec, rec.write(tmp_path / "recording.jsonl"), result


def test_a_recording_within_its_bound_is_whole_and_unmarked(tmp_path: Path) -> None:
    rec, path, result = recorded(tmp_path, 1 << 30)
    head, records = recording.read(path)
    assert "truncated" not in head and rec.truncated is None
    assert not [r for r in records if r.get("kind") == "recording_truncated"]
    assert result["completed"] and result["data_ok"]
    samples = [r for r in records if r["k"] == "sample"]
    assert len(samples) == len(rec.samples) > 10


def test_a_recording_stops_at_its_bound_marked_truncated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole, _, whole_result = recorded(tmp_path / "whole", 1 << 30)
    bound = whole.sample_bytes // 3
    rec, path, result = recorded(tmp_path / "cut", bound)
    assert "reached its bound" in capsys.readouterr().err
    # the run itself is the same: recording only reads (its own sampling events aside)
    assert {**result, "events": 0} == {**whole_result, "events": 0}
    assert result["events"] < whole_result["events"]
    head, records = recording.read(path)
    body = path.read_bytes().split(b"\n", 1)[1]
    last = records[-1]
    assert head["truncated"] == rec.truncated == last["t"]
    assert last["k"] == "event" and last["kind"] == "recording_truncated" and last["level"] == "warn"
    assert len(body) - len(json.dumps(last, separators=(",", ":"))) - 1 <= bound
    assert all(r["t"] < last["t"] for r in records[:-1])
    # sampling stopped at the bound: fewer samples than the whole run's, and exactly its first ones
    lines = [line for line in body.decode().splitlines() if line.startswith('{"k":"sample"')]
    assert 0 < len(lines) < len(whole.samples)
    assert lines == [line.rstrip("\n") for _, line in whole.samples[: len(lines)]]


def test_the_cli_refuses_a_bound_below_one_mib(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        sim_main(["--record-max-mib", "0", "--size", "64KiB"])
    assert "--record-max-mib: must be at least 1, not 0" in capsys.readouterr().err
