"""The usual P4 tools on a running BMv2 fabric that runs a user's own program.

The fabric runs examples/p4/ev_telemetry.p4 (``TestbedConfig.p4``, ``mrc-testbed --p4``).
Checked: ``simple_switch_CLI`` reaches a switch with nothing but what ``switches.json``
records (the command line, run by a shell without BMv2's environment) and lists the
controller's entries; ``mrc-testbed p4`` writes the program's own table; p4runtime-shell
(``make p4rt-shell``) reads as a backup, with its default election id and with the one the
CLI uses, and the controller stays primary; the controller taken over by its standby
reconciles every switch and leaves the program's own entries alone (a wildcard read over a
Thrift-written table fails in BMv2); a program that breaks the contract or does not compile
is refused before any switch starts, naming why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_fabric import fabric_leftovers

from mrc_fabric.time_scale import scaled
from topologies.switch_records import P4RT_SHELL_VENV, SwitchRecords, load_switch_records

pytestmark = [pytest.mark.root, pytest.mark.bmv2]

PREFIX = "swt"
ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "examples" / "p4" / "ev_telemetry.p4"
TABLE = "MrcIngress.user_ingress.ev_path"
BACKUP_READER = Path(__file__).parent / "p4rt_shell" / "backup_reader.py"


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from topologies.testbed import Testbed, TestbedConfig

    runs = tmp_path_factory.mktemp("swt-runs")
    config = TestbedConfig(
        prefix=PREFIX, target="bmv2", p4=PROGRAM, runs_root=runs, agents=False, fidelity=False
    )
    with Testbed(config, say=lambda _m: None) as tb:
        yield tb
    assert fabric_leftovers(PREFIX) == []


@pytest.fixture(scope="module")
def records(testbed: Any) -> SwitchRecords:
    return load_switch_records(testbed.run.path)


def test_switches_json_names_every_switch_and_the_program(testbed: Any, records: SwitchRecords) -> None:
    assert [s.name for s in records.switches] == [s.name for s in testbed.topology.switches]
    assert records.target == "bmv2" and records.p4_source == str(PROGRAM)
    assert Path(records.p4info).is_file() and Path(records.bmv2_json).is_file()
    assert records.controller_election_id == "2,0"
    for s in records.switches:
        node = testbed.net.get(s.name)
        assert (s.device_id, s.thrift_port, s.p4runtime) == (
            node.device_id,
            node.thrift_port,
            node.p4rt_address,
        )


def test_simple_switch_cli_reaches_a_switch_through_the_run_directory(records: SwitchRecords) -> None:
    data = json.loads((records.run_dir / "switches.json").read_text())
    sw = next(d for d in data["switches"] if d["name"] == f"{PREFIX}t0p0n0")
    # a root shell without /opt/p4bench/env.sh: the recorded command line carries what it needs
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    cmd = ["sh", "-c", sw["simple_switch_CLI"]]
    ask = "table_num_entries MrcIngress.usid_route\n"
    res = subprocess.run(cmd, input=ask, capture_output=True, text=True, timeout=scaled(60), env=env)
    assert res.returncode == 0, res.stderr
    # the controller's routes on T0 #0 of plane 0: both hosts under it, both T1s, the far T0
    lines = [ln.replace("RuntimeCmd: ", "").strip() for ln in res.stdout.splitlines()]
    assert "5" in lines, res.stdout


def mrc_testbed(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "topologies.testbed_main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(60))


def test_mrc_testbed_p4_writes_the_programs_own_table(testbed: Any, records: SwitchRecords) -> None:
    sw, run = f"{PREFIX}t0p0n0", str(records.run_dir)
    res = mrc_testbed("p4", "--run-dir", run, sw, "table_add", TABLE, "count_path", "1", "=>")
    assert res.returncode == 0 and "added with handle 0" in res.stdout, res.stdout + res.stderr
    res = mrc_testbed("p4", "--run-dir", run, sw, "table_add", "no_such_table", "x", "=>")
    assert res.returncode == 1 and "Invalid table name" in res.stdout, res.stdout + res.stderr
    res = mrc_testbed("p4", "--run-dir", run, "nosuch", "help")
    assert res.returncode == 2 and "no switch 'nosuch'" in res.stderr


@pytest.mark.parametrize("election", [None, "1,7"], ids=["default-id", "cli-id"])
def test_p4runtime_shell_reads_as_a_backup(
    testbed: Any, records: SwitchRecords, election: str | None
) -> None:
    python = P4RT_SHELL_VENV / "bin" / "python"
    if not python.exists():
        pytest.skip("p4runtime-shell not installed: make p4rt-shell (make setup runs it)")
    sw = records.switch(f"{PREFIX}t1p0n0")
    cmd = [str(python), str(BACKUP_READER), sw.p4runtime, str(sw.device_id), "MrcIngress.usid_route"]
    res = subprocess.run(
        cmd + ([election] if election else []), capture_output=True, text=True, timeout=scaled(120)
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"backup": True, "entries": 2}  # a T1 routes to each T0 of its plane
    health = testbed.controller.health()
    assert all(s.primary for s in health.switches), health  # the controller never lost a switch


def test_the_controllers_standby_takes_over_and_leaves_the_programs_table(
    testbed: Any, records: SwitchRecords
) -> None:
    from topologies.switch_tools import thrift

    sw = records.switch(f"{PREFIX}t0p1n0")
    ok, text = thrift(sw, [f"table_add {TABLE} count_path {1 << 10 | 1} =>"])
    assert ok, text
    old = testbed.controller_proc
    old.kill()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if testbed.controller_proc is not old:
            try:
                health = testbed.controller.health()
            except Exception:  # the new one is still starting
                health = None
            if health is not None and all(s.primary and not s.last_error for s in health.switches):
                break
        time.sleep(0.2)  # poll; the deadline bounds it
    else:
        pytest.fail(f"the standby did not take every switch over: {health}")
    ok, text = thrift(sw, [f"table_dump {TABLE}"])
    assert ok and "EXACT     0401" in text, text  # the user's entry survived the reconcile
    faults = testbed.controller.inject("blackhole", f"{PREFIX}t0p1n0-{PREFIX}t1p1n1")
    testbed.controller.clear(faults.id)  # the new controller writes as before
    assert "EXACT     0401" in thrift(sw, [f"table_dump {TABLE}"])[1]


def test_a_program_that_breaks_the_contract_is_refused_naming_each_gap(tmp_path: Path) -> None:
    from topologies.testbed import Testbed, TestbedConfig
    from topologies.user_p4 import P4ProgramError

    # mrc_switch.p4 with port_fault renamed: the controller's fault entries would have no table
    source = (ROOT / "p4src" / "mrc_switch.p4").read_text()
    broken = tmp_path / "no_port_fault.p4"
    broken.write_text(source.replace('#include "include/', f'#include "{ROOT}/p4src/include/').replace(
        "port_fault", "egress_fault"))  # fmt: skip
    config = TestbedConfig(prefix="swx", target="bmv2", p4=broken, runs_root=tmp_path / "runs", agents=False)
    with pytest.raises(P4ProgramError) as info:
        Testbed(config, say=lambda _m: None).__enter__()
    assert "table port_fault: missing" in str(info.value)
    assert fabric_leftovers("swx") == []

    syntax = tmp_path / "typo.p4"
    syntax.write_text("#include <core.p4>\ncontrol C() { apply { x = ; } }\n")
    with pytest.raises(P4ProgramError) as info:
        Testbed(
            TestbedConfig(prefix="swx", target="bmv2", p4=syntax, runs_root=tmp_path / "runs")
        ).__enter__()
    assert "p4c-bm2-ss failed" in str(info.value) and "typo.p4" in str(info.value)


def test_a_program_on_the_linux_target_is_refused() -> None:
    from topologies.target import TargetError
    from topologies.user_p4 import choose_target

    with pytest.raises(TargetError, match="only BMv2 runs a P4 program"):
        choose_target("linux", PROGRAM)
