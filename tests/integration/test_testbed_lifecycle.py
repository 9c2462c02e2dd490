"""Testbed life cycle: Ctrl-C and SIGTERM tear a run down, a crashed run is recovered by
``topologies.cleanup``, and twenty up/down cycles leave nothing behind.

Each test uses its own node prefix under ``tb`` (tbs, tbk, tbc) and its own runs root in a
temporary directory, and checks with ``topologies.leaks`` that no process, network
namespace, link or socket of its runs is left: only what the test started is looked at
(never ``mn -c``: other suites run on this machine at the same time).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from live_fabric import run_cleanup

from mrc_fabric.time_scale import scaled
from topologies.rundir import boot_ticks

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
UP_DEADLINE_S = 120.0
CYCLES = 20


@pytest.fixture
def runs_root() -> Iterator[Path]:
    """A runs directory of the test's own, removed afterwards (after any cleanup ran)."""
    root = Path(tempfile.mkdtemp(prefix="tb-life-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def start_testbed_process(
    prefix: str, root: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen, list[str]]:
    """``python -m topologies.testbed_main`` (``mrc-testbed``) in its own process; returns once the
    fabric is up."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "topologies.testbed_main",
            "--prefix",
            prefix,
            "--runs",
            str(root),
            "--target",
            "linux",
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=None if env is None else {**os.environ, **env},
    )
    lines: list[str] = []
    up = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("fabric up"):
                up.set()
        up.set()

    threading.Thread(target=read, daemon=True).start()
    if not up.wait(scaled(UP_DEADLINE_S)) or proc.poll() is not None:
        proc.kill()
        proc.wait()
        raise AssertionError("the testbed did not come up:\n" + "".join(lines))
    return proc, lines


def node_namespaces(run: Path) -> set[str]:
    from topologies.rundir import net_namespace, read_records

    out = set()
    for r in read_records(run):
        if r.kind == "node" and r.alive() and (ns := net_namespace(r.pid)):
            out.add(ns)
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_tears_the_whole_run_down(sig: signal.Signals, runs_root: Path) -> None:
    from topologies.leaks import leftovers
    from topologies.rundir import read_records

    root = runs_root
    proc, lines = start_testbed_process("tbs", root)
    run = (root / "latest").resolve()
    try:
        namespaces = node_namespaces(run)
        assert len(namespaces) == 12  # 4 hosts + 8 switches, each in its own namespace
        assert {r.kind for r in read_records(run)} == {"node", "shim", "launcher", "controller", "agent"}
        cutoff = boot_ticks()
        proc.send_signal(sig)
        proc.wait(timeout=scaled(60))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            subprocess.run([sys.executable, "-m", "topologies.cleanup", "--run-dir", str(run)], cwd=REPO)
    assert proc.returncode == (0 if sig == signal.SIGINT else 128 + sig), "".join(lines)
    assert leftovers(run, namespaces, "tbs", cutoff) == []


def test_a_crashed_run_is_recovered_by_cleanup(runs_root: Path) -> None:
    from topologies.leaks import leftovers

    root = runs_root
    proc, _lines = start_testbed_process("tbk", root)
    run = (root / "latest").resolve()
    namespaces = node_namespaces(run)
    cutoff = boot_ticks()
    try:
        proc.send_signal(signal.SIGKILL)  # no teardown at all
        proc.wait(timeout=scaled(30))
        left = leftovers(run, namespaces, "tbk", cutoff)
        assert any(x.startswith("process shim") for x in left), left  # the crash did leave things
        assert any(x.startswith("process agent") for x in left), left
        assert any(x.startswith("process controller") for x in left), left
        res = run_cleanup(["--runs", str(root)], REPO, 120)
        assert res.returncode == 0, res.stderr
        assert "killed shim tbkt0p0n0" in res.stdout, res.stdout
    finally:
        subprocess.run([sys.executable, "-m", "topologies.cleanup", "--run-dir", str(run)], cwd=REPO)
    assert leftovers(run, namespaces, "tbk", cutoff) == []


def test_cleanup_leaves_a_live_run_alone(runs_root: Path) -> None:
    """... and old runs are pruned around it: by the testbed as it starts, then by cleanup."""
    root = runs_root
    old = [root / "20000101-000000", root / "20000101-000001"]  # finished runs of an owner long gone
    for d in old:
        (d / "agents").mkdir(parents=True)
        (d / "run.json").write_text(json.dumps({"pid": 999_999_999, "pid_start_time": None}))
    (root / "notes").mkdir()  # not a run directory
    proc, lines = start_testbed_process("tbk", root, env={"MRC_KEEP_RUNS": "2"})
    run = (root / "latest").resolve()
    try:
        # the new run and the newest old one are the two kept
        assert not old[0].exists() and old[1].is_dir(), "".join(lines)
        res = run_cleanup(["--runs", str(root), "--keep", "1"], REPO, 120)
        assert res.returncode == 0 and "still running" in res.stdout, res.stdout
        from topologies.rundir import read_records

        assert all(r.alive() for r in read_records(run))
        assert not old[1].exists() and run.is_dir() and (root / "notes").is_dir(), res.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=scaled(60))


@pytest.mark.slow
def test_twenty_up_down_cycles_leave_nothing_behind(runs_root: Path) -> None:
    from topologies.leaks import leftovers
    from topologies.testbed import Testbed, TestbedConfig

    times = []
    for cycle in range(CYCLES):
        t0 = time.monotonic()
        tb = Testbed(TestbedConfig(prefix="tbc", runs_root=runs_root, target="linux"), say=lambda _m: None)
        with tb:
            assert len(tb.agents) == 4 and tb.controller is not None
            namespaces = set(tb.namespaces)
        times.append(time.monotonic() - t0)
        assert tb.run is not None
        assert leftovers(tb.run.path, namespaces, "tbc", tb.teardown_ticks) == [], f"cycle {cycle}"
    summary = {"cycles": CYCLES, "mean_s": sum(times) / len(times), "max_s": max(times), "min_s": min(times)}
    print(f"\nup/down cycle of the default fabric: {json.dumps(summary)}", file=sys.stderr)
