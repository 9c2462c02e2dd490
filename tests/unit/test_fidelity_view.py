"""The run's fidelity verdict in ``mrc view``: read from fidelity.json, recorded, in every frame."""

from __future__ import annotations

import json
from pathlib import Path

from mrc_fabric import recording
from mrc_view import fidelity
from mrc_view.model import LiveModel


def write(run: Path, faithful: bool, updated: float) -> None:
    verdict = "faithful" if faithful else "not faithful: agent h0 starved"
    body = {
        "faithful": faithful,
        "verdict": verdict,
        "line": "12 s of traffic judged",
        "updated_unix": updated,
    }
    (run / recording.FIDELITY_FILE).write_text(json.dumps(body))


def test_each_new_verdict_becomes_one_record(tmp_path: Path) -> None:
    assert fidelity.read_record(tmp_path, 1.0, 0.0) is None  # no monitor (yet)
    write(tmp_path, False, 100.0)
    r = fidelity.read_record(tmp_path, 1.5, 0.0)
    assert r is not None and r["k"] == "fidelity" and r["t"] == 1.5 and not r["faithful"]
    assert fidelity.read_record(tmp_path, 2.0, 100.0) is None  # nothing newer
    (tmp_path / recording.FIDELITY_FILE).write_text('{"faithful": tr')  # a file half written
    assert fidelity.read_record(tmp_path, 2.5, 100.0) is None


def test_the_frame_carries_the_latest_verdict_and_a_recording_keeps_it(tmp_path: Path) -> None:
    head = recording.header("testbed", "t", 0.0, recording.graph(1, [], []), 0)
    model = LiveModel(head)
    assert model.frame()["fidelity"] == {}
    write(tmp_path, True, 10.0)
    first = fidelity.read_record(tmp_path, 1.0, 0.0)
    write(tmp_path, False, 20.0)
    second = fidelity.read_record(tmp_path, 3.0, 10.0)
    assert first is not None and second is not None
    path = tmp_path / "rec.jsonl"
    writer = recording.RecordingWriter(path, head)
    for r in (first, second):
        r.pop("updated_unix")
        model.apply(r)
        writer.write(r)
    writer.close()
    frame = model.frame()["fidelity"]
    assert frame == {
        "faithful": False,
        "verdict": "not faithful: agent h0 starved",
        "line": "12 s of traffic judged",
    }
    _head, records = recording.read(path)
    assert [r["faithful"] for r in records if r["k"] == "fidelity"] == [True, False]
