"""Time limits scale with the machine, and a run that runs out says so in one line
(mrc_fabric.time_scale, topologies.live_errors)."""

from __future__ import annotations

import itertools
import sys
from typing import Any

import grpc
import pytest

from mrc_fabric import time_scale
from mrc_fabric.time_scale import ENV, TimeLimitExceeded, measure, parse, scale, scaled, settle
from topologies.live_errors import EXIT_HOST, explain, run_explained


def test_the_scale_comes_from_the_environment_and_multiplies_every_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert scale() == 1.0 and scaled(20) == 20
    monkeypatch.setenv(ENV, "7.5")
    assert scale() == 7.5 and scaled(20) == 150
    monkeypatch.setenv(ENV, "fast")  # unreadable: 1, and settle() says so
    assert scale() == 1.0


@pytest.mark.parametrize("bad", ["0.5", "0", "-2", "1000", "x"])
def test_a_bad_scale_is_refused_naming_the_variable(bad: str) -> None:
    with pytest.raises(ValueError, match=ENV):
        parse(bad)


def test_measure_is_the_whole_span_against_the_reference() -> None:
    ticks = itertools.count(0.0, time_scale.REFERENCE_ROUND_S * 60 * 6)  # 6x the reference
    assert measure(rounds=60, clock=lambda: next(ticks)) == 6.0
    fast = itertools.count(0.0, 1e-9)
    assert measure(rounds=60, clock=lambda: next(fast)) == 1.0  # never below 1
    slow = itertools.count(0.0, 1e6)
    assert measure(rounds=2, clock=lambda: next(slow)) == time_scale.MAX_SCALE


def test_settle_keeps_a_users_scale_and_exports_a_measured_one(monkeypatch: pytest.MonkeyPatch) -> None:
    said: list[str] = []
    monkeypatch.setenv(ENV, "3")
    assert settle(said.append) == 3.0 and said == []
    monkeypatch.setenv(ENV, "nonsense")
    monkeypatch.setattr(time_scale, "measure", lambda: 12.0)
    assert settle(said.append) == 12.0
    assert said[0].startswith(f"{ENV}='nonsense': not a number") and "12x slower" in said[1]
    import os

    assert os.environ[ENV] == "12"  # the processes the run starts use it


def test_a_time_limit_says_what_ran_out_and_how_to_allow_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "4")
    text = str(TimeLimitExceeded("the shim of t0p0n0 starting", scaled(20)))
    assert text == (
        "the shim of t0p0n0 starting took longer than 80 s: this machine is too slow for the run "
        f"(time limits x4 here; {ENV}=8 allows more)"
    )
    assert "\n" not in text


class _Deadline(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED

    def details(self) -> str:
        return "Deadline Exceeded"


def test_the_machines_reasons_are_explained_and_a_bug_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from topologies.linux_switch import ShimStartError
    from topologies.preflight import Missing, PreflightError

    monkeypatch.setenv(ENV, "2")
    assert "ran past its deadline (Deadline Exceeded)" in str(explain(_Deadline()))
    assert explain(PreflightError([Missing("nft not on PATH", "apt-get install nftables")])) is not None
    shim = explain(
        ShimStartError("shim of t0 did not start: exited\n" + "\n".join(f"log {i}" for i in range(20)))
    )
    assert shim is not None and shim.splitlines()[0] == "shim of t0 did not start: exited"
    assert len(shim.splitlines()) == 1 + 4  # the last lines of its log, not all of it
    assert explain(KeyError("bug")) is None


def test_run_explained_prints_one_line_and_exits_with_the_hosts_code(capsys: Any) -> None:
    after: list[int] = []

    def slow() -> int:
        raise TimeLimitExceeded("mrc-controller's start", 30)

    assert run_explained("demo", slow, after=lambda: after.append(1)) == EXIT_HOST
    err = capsys.readouterr().err
    assert err.startswith("demo: stopped: mrc-controller's start took longer than 30 s") and after == [1]
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err

    def bug() -> int:
        raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        run_explained("demo", bug)
    assert sys.exc_info() == (None, None, None)
