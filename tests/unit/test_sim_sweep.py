"""Sweeps on Dask: the same JSON whatever the worker count, failing points reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from mrc_host.sim import sweep
from mrc_host.sim.cli import main

SCENARIO = """
name = "tiny"
seed = 1
modes = ["mrc", "single-path"]
faults = ["loss=0.01:all"]
[fabric]
planes = 2
t0 = 2
t1 = 2
[[traffic]]
pattern = "flow"
name = "flow"
src = 0
dst = 1
size = "256KiB"
"""


def _files(tmp: Path, grid: str = '"fabric.t1" = [2, 4]') -> Path:
    (tmp / "tiny.toml").write_text(SCENARIO)
    path = tmp / "sw.toml"
    path.write_text(f'scenario = "tiny.toml"\nname = "sw"\nseeds = [1, 2, 3]\n[grid]\n{grid}\n')
    return path


def test_expand_points_in_a_fixed_order(tmp_path: Path) -> None:
    sw = sweep.load(_files(tmp_path))
    assert [p.params for p in sw.points][:4] == [
        {"seed": 1, "fabric.t1": 2},
        {"seed": 2, "fabric.t1": 2},
        {"seed": 3, "fabric.t1": 2},
        {"seed": 1, "fabric.t1": 4},
    ]
    assert sw.points[3].table["fabric"]["t1"] == 4 and sw.points[3].table["seed"] == 1
    with pytest.raises(sweep.SweepError, match="seeds"):
        (tmp_path / "bad.toml").write_text('scenario = "tiny.toml"\nseeds = "ten"\n')
        sweep.load(tmp_path / "bad.toml")


def test_same_json_on_one_and_two_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the embedded cluster's scratch space goes with it (Dask's default outlives the sweep)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    sw = sweep.load(_files(tmp_path))
    one = sweep.run_points(sw.points, workers=1, progress=False)
    two = sweep.run_points(sw.points, workers=2, progress=False)
    assert list(tmp.iterdir()) == []
    assert (one.workers, two.workers) == (1, 2)
    assert not one.failed
    a, b = sweep.sweep_json(sw, one), sweep.sweep_json(sw, two)
    assert a == b
    # the points differ from each other (the seed and the grid reach the simulation)
    runs = [json.dumps(p["result"]["runs"]) for p in json.loads(a)["points"]]
    assert len(set(runs)) == len(runs)


def test_failing_point_reported_and_sweep_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _files(tmp_path, '"fabric.t1" = [2, 0]\n"traffic.5.size" = ["1MiB"]')
    rc = main(["sweep", str(path), "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"])
    assert rc == 1
    doc = json.loads((tmp_path / "out" / "sw.json").read_text())
    assert len(doc["points"]) == 6 and doc["failed"] == list(range(6))
    err = capsys.readouterr().err
    assert "traffic.5: no such array element" in err
    path = _files(tmp_path, '"fabric.t1" = [2, 0]')
    rc = main(["sweep", str(path), "--out", str(tmp_path / "out"), "--workers", "2", "--no-progress"])
    assert rc == 1
    doc = json.loads((tmp_path / "out" / "sw.json").read_text())
    ok = [p for p in doc["points"] if p["status"] == "ok"]
    bad = [p for p in doc["points"] if p["status"] == "failed"]
    assert [p["params"] for p in ok] == [{"seed": s, "fabric.t1": 2} for s in (1, 2, 3)]
    assert all(p["result"]["runs"]["mrc"]["completed"] for p in ok)
    assert [p["params"] for p in bad] == [{"seed": s, "fabric.t1": 0} for s in (1, 2, 3)]
    assert all("fabric.t1: must be 1..1024, got 0" in p["error"] for p in bad)
    assert "fabric.t1: must be 1..1024, got 0" in capsys.readouterr().err


def _dask(*args: str, log: Path) -> subprocess.Popen[bytes]:
    """A ``dask`` CLI process whose scratch space lies beside its log (pytest removes it)."""
    exe = Path(sys.executable).with_name("dask")
    env = {**os.environ, "DASK_TEMPORARY_DIRECTORY": str(log.parent)}
    with log.open("wb") as f:
        return subprocess.Popen(
            [str(exe), *args], stdout=f, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )


def test_same_json_on_a_scheduler_with_two_worker_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``dask scheduler`` and two ``dask worker`` processes on loopback, as docs/simulator.md shows."""
    from distributed import Client

    sw = sweep.load(_files(tmp_path))
    local = sweep.sweep_json(sw, sweep.run_points(sw.points, workers=1, progress=False))
    info = tmp_path / "scheduler.json"
    procs = [
        _dask(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--scheduler-file",
            str(info),
            log=tmp_path / "scheduler.log",
        ),
    ]
    try:
        deadline = time.monotonic() + 120
        while not info.exists() and time.monotonic() < deadline and procs[0].poll() is None:
            time.sleep(0.1)
        assert info.exists(), (tmp_path / "scheduler.log").read_text()
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            procs.append(
                _dask(
                    "worker",
                    "--scheduler-file",
                    str(info),
                    "--host",
                    "127.0.0.1",
                    "--nworkers",
                    "1",
                    "--nthreads",
                    "1",
                    "--no-dashboard",
                    "--no-nanny",
                    log=tmp_path / f"worker{i}.log",
                )
            )
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        out = tmp_path / "remote"
        rc = main(
            ["sweep", str(tmp_path / "sw.toml"), "--out", str(out), "--scheduler", address, "--no-progress"]
        )
        assert rc == 0
        assert f"2 workers ({address})" in capsys.readouterr().out
        assert (out / "sw.json").read_text() == local
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait()


def test_two_embedded_clusters_at_once_serve_http_on_loopback_without_a_warning(tmp_path: Path) -> None:
    """The scheduler's health routes take a free loopback port, not 8787 on every sweep."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Port 8787 is already in use" would fail here
        with (
            sweep.local_cluster(1, str(tmp_path / "a")) as one,
            sweep.local_cluster(1, str(tmp_path / "b")) as two,
        ):
            servers = [c.scheduler.http_server for c in (one, two)]
            assert [s.address for s in servers] == ["127.0.0.1", "127.0.0.1"]
            assert servers[0].port != servers[1].port


def test_a_terminated_sweep_leaves_no_scratch_directory_or_worker(tmp_path: Path) -> None:
    """Defect: ``kill`` (SIGTERM) ended ``mrc-sim fuzz`` on the spot, and its embedded cluster's
    scratch directory (``mrc-sweep-*``) stayed in the temp directory. Now the sweep ends through
    its cleanup: the directory and the worker processes go with it."""
    import psutil

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    args = [
        sys.executable,
        "-m",
        "mrc_host.sim.cli",
        "fuzz",
        "--draws",
        "5000",
        "--workers",
        "1",
        "--no-progress",
    ]
    log = tmp_path / "fuzz.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([*args, "--out", str(tmp_path / "out")], env=env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 120
        workers: list[psutil.Process] = []
        # (polled: the sweep is under way once its worker has run draws for a second of CPU)
        while not workers or sum(w.cpu_times().user for w in workers) < 1.0:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            if not workers and list(tmp.glob("mrc-sweep-*/dask-scratch-space/worker-*")):
                workers = [
                    c for c in psutil.Process(proc.pid).children(recursive=True) if "python" in c.name()
                ]
            time.sleep(0.05)
        proc.terminate()
        try:
            assert proc.wait(timeout=60) != 0
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running a minute after SIGTERM: {log.read_text()}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert list(tmp.glob("mrc-sweep-*")) == []
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert alive == []
