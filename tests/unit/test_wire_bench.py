"""The codec benchmark runs end to end and writes its JSON and PNG (no speed asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bench_codec import main


def test_bench_codec_writes_json_and_png(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path), "--seconds", "0.01"]) == 0
    report = json.loads((tmp_path / "codec.json").read_text())
    rows = report["results"]
    assert {(r["op"], r["impl"], r["packet"]) for r in rows} >= {
        ("encode", "fast", "DATA-1KiB"),
        ("decode", "fast", "DATA-1KiB"),
        ("encode", "scapy", "DATA-1KiB"),
        ("decode", "scapy", "DATA-1KiB"),
    }
    assert all(r["packets_per_s"] > 0 and r["iterations"] > 0 for r in rows)
    assert set(report["meets_targets"]) == {"encode", "decode"}
    assert (tmp_path / "codec.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
