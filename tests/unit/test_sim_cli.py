"""mrc-sim command line and fault grammar."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mrc_host.sim.cli import main, parse_size
from mrc_host.sim.faults import FaultSpecError, parse_fault

REPO = Path(__file__).resolve().parents[2]


def test_fault_grammar() -> None:
    f = parse_fault("blackhole:p0-t0_0-t1_1@30%", ideal_ns=1000)
    assert (f.kind, f.target, f.start_ns, f.end_ns) == ("blackhole", "p0-t0_0-t1_1", 300, None)
    f = parse_fault("loss=0.01:all@5us-1ms", ideal_ns=1)
    assert (f.value, f.start_ns, f.end_ns) == (0.01, 5000, 1_000_000)
    f = parse_fault("flap=20us:p1-t0_1-t1_0", ideal_ns=1)
    assert f.value == 20_000 and f.active(0) and not f.active(20_000) and f.active(40_000)
    for bad in ("blackhole", "loss=2:all", "melt:p0-t1_0", "flap:p0-t0_0-t1_0", "down:x@5", "down:x@5us-1us"):
        with pytest.raises(FaultSpecError):
            parse_fault(bad, ideal_ns=1000)


def test_sizes() -> None:
    assert parse_size("8MiB") == 8 << 20 and parse_size("64KiB") == 65536 and parse_size("1000") == 1000


def test_example_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "--planes",
            "2",
            "--t1",
            "4",
            "--size",
            "8MiB",
            "--fault",
            "blackhole:p0-t0_0-t1_1@30%",
            "--mode",
            "mrc",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["completed"] and out["data_ok"]
    assert out["faults"][0]["data_packets_lost"] <= 8
    assert len(out["t1_uplink_bytes"]) == 8
    assert any(e["new"] == "ASSUMED_BAD" for e in out["ev_timeline"])
    assert out["goodput_timeline"] and out["completion_time_us"] > 0


def test_human_summary_and_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--size", "256KiB", "--mode", "ecmp"]) == 0
    assert "completed in" in capsys.readouterr().out
    for argv in (["--fault", "melt:p0-t1_0"], ["--fault", "blackhole:p7-t0_0-t1_0"], ["--planes", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
    assert "p7-t0_0-t1_0" in capsys.readouterr().err


def test_demo_writes_json_and_png(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from mrc_host.sim import demo

    assert demo.main(["--out", str(tmp_path), "--size-mib", "4"]) == 0
    (run_dir,) = list(tmp_path.iterdir())
    assert run_dir.name.startswith("demo-")
    result = json.loads((run_dir / "result.json").read_text())
    assert result["mrc"]["completed"] and result["mrc"]["data_ok"]
    assert (run_dir / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert "SIMULATOR" in out and "ASSUMED_BAD" in out


def test_progress_bar_run_gives_the_same_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--size", "512KiB", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["--size", "512KiB", "--json", "--progress"]) == 0
    with_bar = json.loads(capsys.readouterr().out)
    assert with_bar == plain  # the bar pauses the loop between slices without changing the run


def test_list_shipped_scenarios(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-scenarios"]) == 0
    out = capsys.readouterr().out
    assert "incast-bystander" in out and "ring-allreduce-256-paths" in out


def test_rate_fault_parses_and_targets_links_switches_and_planes() -> None:
    from mrc_host.sim.faults import FaultSpecError, ns_per_byte, parse_fault, rate_hits

    f = parse_fault("rate=50:p0@0", ideal_ns=1000)
    assert f.kind == "rate" and f.value == 50 and f.start_ns == 0
    assert rate_hits(f, "p0-t0_1-t1_2", "p0-t0_1", "p0-t1_2") and rate_hits(f, "h3-p0", "h3:p0", "p0-t0_1")
    assert not rate_hits(f, "p1-t0_1-t1_2", "p1-t0_1", "p1-t1_2") and not rate_hits(
        f, "h3-p10", "h3:p10", "x"
    )
    assert ns_per_byte([f], 5, 0.08) == pytest.approx(0.16)
    with pytest.raises(FaultSpecError):
        parse_fault("rate=0:p0", ideal_ns=1000)


def test_cc_flag_selects_the_congestion_control(capsys: pytest.CaptureFixture[str]) -> None:
    runs = {}
    for cc in ("nscc", "window"):
        assert main(["--size", "2MiB", "--fault", "ecn:p0-t0_0-t1_1@0", "--cc", cc, "--json"]) == 0
        runs[cc] = json.loads(capsys.readouterr().out)
        assert runs[cc]["completed"], runs[cc]
    assert runs["nscc"]["counters"]["sender"] != runs["window"]["counters"]["sender"]
    with pytest.raises(SystemExit):
        main(["--cc", "cubic"])


@pytest.mark.parametrize(
    ("args", "code"), [(["--size", "1KiB"], 0), (["--size", "1MiB", "--time-limit-us", "1"], 1)]
)
def test_the_command_flushes_its_json_and_exit_code_before_its_quick_exit(args: list[str], code: int) -> None:
    """``python -m mrc_host.sim.cli`` (like the ``mrc-sim`` script) ends with ``os._exit``:
    the JSON on stdout must still be whole, and the code the run's."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # MRC_PURE_PYTHON too, where it is set
    cmd = [sys.executable, "-m", "mrc_host.sim.cli", *args, "--json"]
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == code, out.stderr
    assert json.loads(out.stdout)["completed"] is (code == 0)
