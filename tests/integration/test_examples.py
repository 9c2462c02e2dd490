"""Every script in examples/ runs as a user runs it and does what its docstring says.

Each runs as a subprocess (``python examples/<script>.py``, as root) on the Linux target,
which runs everywhere, with a node-name prefix and a run directory of its own; the P4
example needs BMv2. A script's exit status is its own verdict (0: the transfer completed
and verified, and what the script shows held); the test checks what it printed as well,
and that the fabric left nothing behind.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from live_fabric import fabric_leftovers

pytestmark = pytest.mark.root

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TIMEOUT_S = 600


def run_example(script: str, prefix: str, tmp_path: Path, *args: str) -> str:
    res = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--prefix", prefix, "--runs", str(tmp_path / "runs"), *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert res.returncode == 0, f"{script} exited {res.returncode}:\n{res.stdout}\n{res.stderr[-3000:]}"
    assert fabric_leftovers(prefix) == []
    return res.stdout


def test_custom_fabric(tmp_path: Path) -> None:
    out = run_example("custom_fabric.py", "exf", tmp_path, "--target", "linux")
    assert "fabric: 3 planes x (2 T0, 3 T1), 2 hosts, 15 switches" in out
    assert "ping exfh0 <-> exfh1: 0 % lost" in out
    assert "9 paths exfh0 -> exfh1" in out and out.count(" ok") >= 9
    assert re.search(r"transfer: ok=True 2,097,152 bytes", out)


def test_fault_at_a_quarter_of_a_transfer(tmp_path: Path) -> None:
    out = run_example("fault_mid_transfer.py", "exb", tmp_path, "--target", "linux")
    assert "ok=True verified=True" in out
    m = re.search(r"blackhole exbt0p0n0-exbt1p0n0: due at 25%, fired at [\d.]+ s, (\d+)% acknowledged", out)
    assert m is not None, out
    assert 25 <= int(m.group(1)) < 100
    assert int(re.search(r"(\d+) packets dropped there", out).group(1)) > 0  # type: ignore[union-attr]


def test_link_rate_sweep(tmp_path: Path) -> None:
    out_dir = tmp_path / "sweep"
    out = run_example("link_rate_sweep.py", "exs", tmp_path, "--target", "linux", "--rates", "5", "10",
                      "--seconds", "1", "--out", str(out_dir))  # fmt: skip
    points = json.loads((out_dir / "sweep.json").read_text())
    assert [p["link_rate_mbit_s"] for p in points] == [5.0, 10.0]
    assert all(p["ok"] for p in points)
    # two planes of R Mbit/s: goodput below 2R, and a faster fabric is faster
    assert all(0 < p["goodput_mbit_s"] < 2 * p["link_rate_mbit_s"] for p in points), points
    assert points[1]["goodput_mbit_s"] > points[0]["goodput_mbit_s"]
    assert (out_dir / "sweep.png").stat().st_size > 0 and "written:" in out


def test_capture_read_back_with_scapy(tmp_path: Path) -> None:
    out = run_example("capture_scapy.py", "exc", tmp_path, "--target", "linux")
    m = re.search(r"(\d+) DataPacket", out)
    assert m is not None and int(m.group(1)) > 0, out
    # plane 0's link only: every MRC frame on it names plane 0, over both its T1s
    paths = re.search(r"by path \(plane, T1\): (.*)", out)
    assert paths is not None and "(0, 0)" in paths.group(1) and "(0, 1)" in paths.group(1)
    assert "(1, " not in paths.group(1)


@pytest.mark.bmv2
def test_p4_program_of_your_own_and_its_table(tmp_path: Path) -> None:
    out = run_example("p4_telemetry.py", "exp", tmp_path, "--target", "bmv2")
    rows = re.findall(r"expt0p(\d)n0 plane (\d) T1 (\d):\s+(\d+) packets", out)
    assert len(rows) == 4, out  # 2 planes x 2 T1s at the sender's T0s
    assert all(int(n) > 0 for *_k, n in rows)  # MRC sprays over every path; the table saw each
    assert all(sw == plane for sw, plane, _t1, _n in rows)
