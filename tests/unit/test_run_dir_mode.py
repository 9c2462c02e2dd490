"""The run directory is its owner's (issue 44: it was world-readable, host configs and logs
included): mode 0700, or 0750 for the group ``$MRC_RUN_GROUP`` names; and the Thrift guard's
rules refuse every socket not owned by root and every interface but loopback."""

from __future__ import annotations

import grp
import os
from pathlib import Path

import pytest

from topologies.listener_guard import ruleset
from topologies.rundir import RUN_GROUP_ENV, RunDir


def test_a_run_directory_is_0700(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_GROUP_ENV, raising=False)
    old = os.umask(0)  # whatever the caller's umask
    try:
        run = RunDir.create(tmp_path, latest=False)
    finally:
        os.umask(old)
    assert run.path.stat().st_mode & 0o777 == 0o700


def test_a_run_group_may_read_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    group = grp.getgrgid(os.getegid()).gr_name
    monkeypatch.setenv(RUN_GROUP_ENV, group)
    run = RunDir.create(tmp_path, latest=False)
    st = run.path.stat()
    assert st.st_mode & 0o777 == 0o750 and st.st_gid == os.getegid()
    monkeypatch.setenv(RUN_GROUP_ENV, "no-such-group-mrc")
    with pytest.raises(KeyError):
        RunDir.create(tmp_path, latest=False)


def test_the_thrift_guard_refuses_other_users_and_other_interfaces() -> None:
    rules = ruleset(23456)
    assert "tcp dport 23456 meta skuid != 0" in rules and "reject with tcp reset" in rules
    assert 'tcp dport 23456 iifname != "lo"' in rules and "drop" in rules
