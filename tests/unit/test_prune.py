"""Pruning old run directories (topologies.prune, ``make clean``): keep the newest N, never
delete one still in use, never touch what is not a run directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from topologies import cleanup
from topologies.prune import (
    DEFAULT_KEEP_RUNS,
    DEFAULT_RUNS_MAX_MB,
    KEEP_RUNS_ENV,
    RUNS_MAX_MB_ENV,
    STARTING_GRACE_S,
    dir_bytes,
    keep_runs_from_env,
    parse_keep,
    prune_runs,
    run_dirs,
    runs_max_bytes_from_env,
)
from topologies.rundir import LATEST, RUN_FILE, RunDir, proc_start_time

REPO = Path(__file__).resolve().parents[2]


def make_run(root: Path, name: str, owner_pid: int = 999_999_999, aged: bool = True) -> Path:
    """A finished run directory: run.json naming an owner that is gone, some files."""
    path = root / name
    (path / "agents").mkdir(parents=True)
    (path / "agents" / "h0.log").write_text("log\n")
    (path / RUN_FILE).write_text(json.dumps({"pid": owner_pid, "pid_start_time": proc_start_time(owner_pid)}))
    if aged:
        old = time.time() - 3600
        os.utime(path, (old, old))
    return path


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "600"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def names(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def test_keeps_the_newest_n_by_timestamp_and_leaves_other_entries_alone(tmp_path: Path) -> None:
    runs = [
        "20260101-000000",
        "20260101-000000-1",
        "20260101-000000-2",
        "20260101-000000-10",  # newer than -2 although it sorts before it as text
        "20260102-120000",
    ]
    for n in runs:
        make_run(tmp_path, n)
    (tmp_path / "notes").mkdir()  # not a run directory: never pruned
    (tmp_path / "20260101-000000.txt").write_text("a file with a run-like name\n")
    (tmp_path / "demo-20250101").mkdir()
    assert names(run_dirs(tmp_path)) == [
        "20260102-120000",
        "20260101-000000-10",
        "20260101-000000-2",
        "20260101-000000-1",
        "20260101-000000",
    ]
    report = prune_runs(tmp_path, keep=2)
    assert sorted(names(report.removed)) == ["20260101-000000", "20260101-000000-1", "20260101-000000-2"]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["20260101-000000-10", "20260101-000000.txt", "20260102-120000", "demo-20250101", "notes"]


def test_dry_run_deletes_nothing(tmp_path: Path) -> None:
    for n in ("20260101-000000", "20260101-000001", "20260101-000002"):
        make_run(tmp_path, n)
    report = prune_runs(tmp_path, keep=1, dry_run=True)
    assert names(report.removed) == ["20260101-000001", "20260101-000000"]
    assert len(run_dirs(tmp_path)) == 3


def test_keep_all_deletes_nothing(tmp_path: Path) -> None:
    for n in ("20260101-000000", "20260101-000001"):
        make_run(tmp_path, n)
    assert prune_runs(tmp_path, keep=None).removed == []
    assert len(run_dirs(tmp_path)) == 2


def test_the_run_latest_points_at_is_kept(tmp_path: Path) -> None:
    old = make_run(tmp_path, "20260101-000000")
    for n in ("20260101-000001", "20260101-000002"):
        make_run(tmp_path, n)
    RunDir(old).point_latest()
    report = prune_runs(tmp_path, keep=1)
    assert names(report.removed) == ["20260101-000001"]
    assert old.is_dir() and (tmp_path / LATEST).resolve() == old.resolve()


def test_a_run_whose_owner_still_runs_is_never_pruned(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    live = make_run(tmp_path, "20260101-000000", owner_pid=sleeper.pid)
    make_run(tmp_path, "20260101-000001")
    report = prune_runs(tmp_path, keep=1)
    assert report.removed == []
    assert live.is_dir()
    assert len(report.kept_in_use) == 1 and "still running" in report.kept_in_use[0]
    sleeper.kill()
    sleeper.wait()
    assert names(prune_runs(tmp_path, keep=1).removed) == ["20260101-000000"]


def test_a_run_with_a_recorded_process_still_running_is_kept(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    old = make_run(tmp_path, "20260101-000000")
    make_run(tmp_path, "20260101-000001")
    assert RunDir(old).record(sleeper.pid, "agent", "h0") is not None
    report = prune_runs(tmp_path, keep=1)
    assert report.removed == [] and "agent h0" in report.kept_in_use[0]
    sleeper.kill()
    sleeper.wait()
    assert names(prune_runs(tmp_path, keep=1).removed) == ["20260101-000000"]


def test_a_fresh_directory_without_run_json_is_taken_for_a_starting_run(tmp_path: Path) -> None:
    starting = tmp_path / "20260101-000000"
    starting.mkdir()
    make_run(tmp_path, "20260101-000001")
    report = prune_runs(tmp_path, keep=1)
    assert report.removed == [] and "starting" in report.kept_in_use[0]
    old = time.time() - STARTING_GRACE_S - 1
    os.utime(starting, (old, old))
    assert names(prune_runs(tmp_path, keep=1).removed) == ["20260101-000000"]


def test_keep_counts_parse_strictly(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_keep("3") == 3 and parse_keep(" ALL ") is None
    for bad in ("0", "-1", "many", "2.5", ""):
        with pytest.raises(ValueError, match="keep"):
            parse_keep(bad)
    monkeypatch.delenv(KEEP_RUNS_ENV, raising=False)
    assert keep_runs_from_env() == DEFAULT_KEEP_RUNS
    monkeypatch.setenv(KEEP_RUNS_ENV, "4")
    assert keep_runs_from_env() == 4
    monkeypatch.setenv(KEEP_RUNS_ENV, "x" * 1000)
    with pytest.raises(ValueError, match=KEEP_RUNS_ENV) as err:
        keep_runs_from_env()
    assert len(str(err.value)) < 200  # the bad value is quoted, but only a prefix of it
    with pytest.raises(ValueError):
        prune_runs(Path("/nonexistent"), keep=0)


@pytest.mark.skipif(os.geteuid() != 0, reason="topologies.cleanup refuses to run without root")
def test_cleanup_command_prunes_with_keep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in ("20260101-000000", "20260101-000001", "20260101-000002"):
        make_run(tmp_path, n)
    assert cleanup.main(["--runs", str(tmp_path), "--keep", "2"]) == 0
    assert names(run_dirs(tmp_path)) == ["20260101-000002", "20260101-000001"]
    assert f"removed old run {tmp_path / '20260101-000000'}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cleanup.main(["--runs", str(tmp_path), "--keep", "0"])


def test_make_clean_runs_only_the_cleanup() -> None:
    """README: `make clean` removes what a crashed run left behind "and nothing else"."""
    out = subprocess.run(
        # --no-print-directory: under `make test` (a parent make) make -n also prints its
        # "Entering directory" lines
        ["make", "-n", "--no-print-directory", "clean", "KEEP_RUNS=3"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commands = [line for line in out.splitlines() if line.strip()]
    assert len(commands) == 1, commands
    assert "-m topologies.cleanup" in commands[0] and "--keep 3" in commands[0]
    for kept in ("p4src/build", ".pytest_cache", ".ruff_cache", "rm "):
        assert kept not in out


def test_testbed_config_takes_its_default_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from topologies.testbed import TestbedConfig

    monkeypatch.setenv(KEEP_RUNS_ENV, "all")
    assert TestbedConfig().keep_runs is None
    monkeypatch.setenv(KEEP_RUNS_ENV, "7")
    assert TestbedConfig().keep_runs == 7


def test_cleanup_module_runs_as_a_script_with_help() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "topologies.cleanup", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert out.returncode == 0 and "--keep" in out.stdout


def test_the_oldest_runs_go_until_all_fit_the_size_cap(tmp_path: Path) -> None:
    stamps = [f"20260101-00000{i}" for i in range(5)]  # oldest first
    for n in stamps:
        (make_run(tmp_path, n) / "big.bin").write_bytes(bytes(300_000))
    sizes = {n: dir_bytes(tmp_path / n) for n in stamps}
    report = prune_runs(tmp_path, keep=10, max_bytes=3 * 310_000)
    assert names(report.removed) == stamps[:2]  # 3 runs of ~300 kB fit, the two oldest do not
    assert sum(dir_bytes(p) for p in run_dirs(tmp_path)) <= 3 * 310_000 < sum(sizes.values())
    # the newest run stays, however big; a cap of nothing leaves just it
    assert names(prune_runs(tmp_path, keep=10, max_bytes=0).removed) == [stamps[2], stamps[3]]
    assert names(run_dirs(tmp_path)) == [stamps[4]]


def test_the_size_cap_keeps_runs_in_use(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    old = make_run(tmp_path, "20260101-000000", owner_pid=sleeper.pid)
    (old / "big.bin").write_bytes(bytes(100_000))
    make_run(tmp_path, "20260101-000001")
    report = prune_runs(tmp_path, keep=None, max_bytes=1)
    assert report.removed == [] and old.is_dir()


def test_the_size_cap_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUNS_MAX_MB_ENV, raising=False)
    assert runs_max_bytes_from_env() == DEFAULT_RUNS_MAX_MB << 20
    monkeypatch.setenv(RUNS_MAX_MB_ENV, "50")
    assert runs_max_bytes_from_env() == 50 << 20
    monkeypatch.setenv(RUNS_MAX_MB_ENV, "all")
    assert runs_max_bytes_from_env() is None
    for bad in ("-1", "lots"):
        monkeypatch.setenv(RUNS_MAX_MB_ENV, bad)
        with pytest.raises(ValueError, match=RUNS_MAX_MB_ENV):
            runs_max_bytes_from_env()
