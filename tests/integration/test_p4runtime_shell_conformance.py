"""The Linux shim driven by a third-party P4Runtime client: p4runtime-shell (p4lang).

p4runtime-shell pins an old protobuf and grpcio, so it gets its own venv (made once
per session under a temp dir with pip) and runs as a subprocess script
(``p4rt_shell/driver.py``) that prints what it saw as JSON. Skipped, with the reason,
when PyPI is unreachable or the install fails.

Checked: the pipeline push and P4Info fetch, write / read / modify, the default entry
read without ever being modified, a refused update and a batch of refused updates
shown as p4runtime-shell's per-update list (which needs UNKNOWN at top level and one
p4.v1.Error per update), and arbitration (a backup may read but not write, a higher
election id takes over, the old primary is primary again when it leaves).

p4runtime-shell 0.0.6 loops forever on a batch that mixes OK and failed updates (its
error iterator ``continue``s on an OK detail without advancing), so the batch here
has only failures; mixed batches are checked with our own client in
test_linux_shim_conformance.py::test_batch_reports_each_update.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from linux_lab import NetnsLab, leftovers

from mrc_fabric.p4info import P4INFO_PATH
from mrc_fabric.time_scale import scaled
from topologies.switch_records import P4RT_SHELL_VENV

pytestmark = pytest.mark.root

P4RUNTIME_SHELL = "p4runtime-shell==0.0.6"
DRIVER = Path(__file__).parent / "p4rt_shell" / "driver.py"
NS = "ls-ps"
PORTS = {1: "ls-ps-p1", 2: "ls-ps-p2"}
DEVICE_ID = 7
INSTALL_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def shell_python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The project's p4runtime-shell venv (`make p4rt-shell`, which setup runs), else one made
    here with pip (removed afterwards), or skip saying why."""
    if (P4RT_SHELL_VENV / ".installed").exists():
        yield P4RT_SHELL_VENV / "bin" / "python"
        return
    venv = tmp_path_factory.mktemp("p4rt-shell-venv")
    try:
        yield _make_venv(venv)
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def _make_venv(venv: Path) -> Path:
    python = venv / "bin" / "python"
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120
        )
        res = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", P4RUNTIME_SHELL],
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"could not make a venv for {P4RUNTIME_SHELL}: {exc}")
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.skip(f"pip install {P4RUNTIME_SHELL} failed (PyPI unreachable?): {tail[0]}")
    return python


@pytest.fixture(scope="module")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with NetnsLab(tmp_path_factory.mktemp("ls-ps")) as lab:
        lab.switch_ns(NS, PORTS, "ls-ps-q")
        yield lab.start_shim(NS, "ls-ps0", DEVICE_ID, PORTS)
    assert leftovers("ls-ps") == []


def test_p4runtime_shell_reads_writes_errors_and_arbitration(shell_python: Path, shim: str) -> None:
    res = subprocess.run(
        [str(shell_python), str(DRIVER), shim, str(DEVICE_ID), str(P4INFO_PATH)],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    route = ipaddress.IPv6Network("fcbb:bb00:8000::/48").network_address.packed.hex()
    assert got["read"] == [[route, 48, "MrcIngress.set_next_hop"]], got
    assert got["modified_port"] == 2
    assert got["default"] == [[True, "MrcIngress.drop_no_route"]]
    assert [e[:2] for e in got["duplicate"]] == [[0, "ALREADY_EXISTS"]]
    assert "At index 0: ALREADY_EXISTS" in got["duplicate_text"]
    assert [e[:2] for e in got["batch"]] == [[0, "ALREADY_EXISTS"], [1, "NOT_FOUND"]]
    assert got["backup_write"] == "PERMISSION_DENIED"
    assert got["backup_read"] == 1
    assert got["demoted_write"] == "PERMISSION_DENIED"
    assert got["promoted"] is True
    assert got["write_after_takeover"] == "accepted"
