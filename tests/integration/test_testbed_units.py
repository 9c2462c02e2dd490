"""Testbed pieces that need no root: run directory and process register, target choice, the
cleanup's safety rules, the ``mn --custom`` namespace, CLI parsing and tables."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live_fabric import run_cleanup
from rich.console import Console

from mrc_fabric.topology import Target
from topologies.cleanup import Report, clean_run, owner_alive
from topologies.cli import CommandError, evs_table, parse_size
from topologies.rundir import RunDir, proc_start_time, read_records
from topologies.target import BMV2_BASE_RTT_US, TargetChoice, TargetError, choose_target
from topologies.watch import completion_series, goodput_series

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "size"),
    [("4096", 4096), ("64M", 64 << 20), ("8MiB", 8 << 20), ("500k", 500 << 10), ("1.5G", 3 << 29)],
)
def test_sizes(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-1", "0", "1X", "1e9"])
def test_bad_sizes_name_the_field(text: str) -> None:
    with pytest.raises(CommandError, match="size"):
        parse_size(text)


def test_target_auto_says_why_it_falls_back_to_linux(tmp_path: Path) -> None:
    choice = choose_target("auto", pipeline_json=tmp_path / "missing.json")
    assert choice.target.value == "linux"
    assert "missing.json missing" in choice.reason
    assert "ECN marking, trimming and priority queues in an eBPF program" in choice.banner()
    assert choose_target("linux").reason == "asked for with --target linux"
    with pytest.raises(TargetError, match=r"missing\.json"):
        choose_target("bmv2", pipeline_json=tmp_path / "missing.json")
    with pytest.raises(TargetError, match="--target: 'warp'"):
        choose_target("warp")


def test_bmv2_agents_get_a_base_rtt_that_fits_a_software_switch() -> None:
    """BMv2's path RTT reaches tens of ms: its agents' timers derive from 25 ms, Linux's keep 10."""
    bmv2 = TargetChoice(Target.BMV2, "test")
    assert bmv2.agent_args() == ["--base-rtt-us", str(BMV2_BASE_RTT_US)] and BMV2_BASE_RTT_US == 25_000
    assert choose_target("linux").agent_args() == []


def test_run_directories_are_unique_and_latest_follows(tmp_path: Path) -> None:
    a, b = RunDir.create(tmp_path), RunDir.create(tmp_path)
    assert a.path != b.path and a.path.parent == b.path.parent == tmp_path.resolve()
    assert (tmp_path / "latest").resolve() == b.path
    assert os.readlink(tmp_path / "latest") == b.path.name  # relative: the tree can move
    a.point_latest()
    assert (tmp_path / "latest").resolve() == a.path


def test_process_register_survives_a_torn_line_and_checks_start_times(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path)
    me = run.record(os.getpid(), "controller", "me")
    assert me is not None and me.alive()
    with open(run.path / "pids", "a") as f:
        f.write('{"pid": 12')  # a crash mid-write
    records = read_records(run.path)
    assert records == [me]
    recycled = type(me)(me.pid, me.start_time + 1, "agent", "old")  # same pid, another process
    assert not recycled.alive()
    assert run.record(2**22 + 12345, "agent", "gone") is None  # no such process: nothing recorded


def test_cleanup_never_kills_a_recycled_pid(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        run = RunDir.create(tmp_path)
        start = proc_start_time(sleeper.pid)
        assert start is not None
        with open(run.path / "pids", "w") as f:
            f.write(json.dumps({"pid": sleeper.pid, "start_time": start - 1, "kind": "agent", "name": "h0"}))
        report = Report()
        clean_run(run.path, report, dry_run=False)
        assert report.killed == []
        assert sleeper.poll() is None  # the recorded pid now belongs to someone else: untouched
        with open(run.path / "pids", "w") as f:
            f.write(json.dumps({"pid": sleeper.pid, "start_time": start, "kind": "agent", "name": "h0"}))
        clean_run(run.path, report, dry_run=True)
        assert report.killed == [f"agent h0 (pid {sleeper.pid})"] and sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_run_whose_owner_lives_is_not_stale(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path)
    parent = os.getppid()
    run.write_run_info({"pid": parent, "pid_start_time": proc_start_time(parent)})
    assert owner_alive(run.path)
    run.write_run_info({"pid": parent, "pid_start_time": 1})  # a recycled pid
    assert not owner_alive(run.path)
    (run.path / "run.json").write_text("{not json")
    assert not owner_alive(run.path)


def test_mn_custom_leaves_mn_only_topos_cli_and_a_scoped_cleanup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "")  # the custom file sets it for mn's children; undone after
    monkeypatch.setattr(sys, "path", list(sys.path))
    source = (REPO / "topologies" / "mn_custom.py").read_text()
    namespace: dict = {}
    exec(compile(source, str(REPO / "topologies" / "mn_custom.py"), "exec"), namespace, namespace)
    assert str(REPO) in os.environ["PYTHONPATH"].split(os.pathsep)
    names = {n for n in namespace if not n.startswith("__")}
    assert names == {"topos", "CLI", "cleanup"}
    assert set(namespace["topos"]) == {"mrcclos"}
    assert namespace["cleanup"].__name__ == "mn_scoped_cleanup"
    from mininet.cli import CLI

    assert issubclass(namespace["CLI"], CLI)


def test_the_old_mn_custom_path_says_where_the_file_went() -> None:
    source = (REPO / "topologies" / "testbed.py").read_text()
    with pytest.raises(SystemExit, match=r"topologies/mn_custom\.py"):
        exec(compile(source, str(REPO / "topologies" / "testbed.py"), "exec"), {}, {})


def test_testbed_library_command_line_and_mn_file_are_separate_modules() -> None:
    import topologies.mn_custom
    import topologies.testbed
    import topologies.testbed_main

    assert not hasattr(topologies.testbed, "main") and not hasattr(topologies.testbed, "mn_topo")
    assert topologies.testbed_main.main is not None and topologies.mn_custom.mn_topo is not None
    res = subprocess.run(
        [sys.executable, "-m", "topologies.testbed_main", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert res.returncode == 0 and "--cli" in res.stdout and "--planes" in res.stdout


def test_mn_custom_with_a_bad_target_exits_without_an_exception() -> None:
    from topologies.mn_custom import mn_topo

    with pytest.raises(SystemExit):  # not an Exception: mn would answer one with `mn -c`
        mn_topo(target="warp")


def test_evs_table_shows_the_columns_that_matter() -> None:
    rows = [
        {"peer": "h3", "conn": "send", "mode": "mrc", "ev": "0003d9d2", "plane": 0, "t1": 0,
         "state": "ASSUMED_BAD", "active": False, "data_sent": 5, "delivered": 4, "lost": 1,
         "ecn": 0, "trims": 0, "control_sent": 9},
    ]  # fmt: skip
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(evs_table("h0", rows))
    text = out.getvalue()
    assert "ASSUMED_BAD" in text and "0003d9d2" in text and "control_sent" not in text


def test_goodput_series_from_cumulative_progress() -> None:
    series = goodput_series([(0.2, 250_000), (0.4, 500_000), (0.6, 500_000)], bin_s=0.2)
    assert series[0] == (0.0, 0.0)
    assert [round(v, 3) for _t, v in series[1:]] == [10.0, 10.0, 0.0]


def test_completion_series_averages_between_whole_writes() -> None:
    # 1 MiB WRITEs complete every 0.8 s, sampled every 0.2 s; then one waits 2.4 s behind a hole
    mib = 1 << 20
    samples = [(0.2 * i, (i // 4) * mib) for i in range(1, 17)] + [(3.4, 4 * mib), (5.6, 5 * mib)]
    rates = [v for _t, v in completion_series(samples)[1:]]
    assert rates[:4] == pytest.approx([mib * 8 / 0.8 / 1e6] * 4)  # no zero bins between them
    assert rates[4] == pytest.approx(mib * 8 / 2.4 / 1e6)  # the stall is a long, low step
    assert max(v for _t, v in goodput_series(samples[:16])) > 3 * rates[0]  # fixed bins: a comb


def test_cleanup_refuses_to_run_without_root_unless_dry(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("checks the non-root refusal")
    res = run_cleanup(["--runs", str(tmp_path)], REPO, 60)
    assert res.returncode == 2 and "needs root" in res.stderr


def test_rundir_names_are_utc_timestamps(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path)
    stamp = time.strftime("%Y%m%d", time.gmtime())
    assert run.path.name.startswith(stamp)
