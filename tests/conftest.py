"""Shared pytest setup: markers that skip with a reason the summary shows (-ra); the pre-flight
before any live test; time limits scaled to this machine; and, at the end of the session, a
check that the suite left the machine as it found it (``host_state``)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from host_state import HostState, left, mark_session, snapshot

IS_ROOT = os.geteuid() == 0
HAS_BMV2 = bool(shutil.which("simple_switch_grpc")) and bool(shutil.which("p4c-bm2-ss"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_root = pytest.mark.skip(reason="needs root: network namespaces, veths and raw sockets")
    skip_bmv2 = pytest.mark.skip(
        reason="needs BMv2 (simple_switch_grpc) and p4c-bm2-ss from p4lang's package repository; "
        "not installed on this machine (see README: 'BMv2')"
    )
    for item in items:
        # markers, not keywords: keywords also hold the names of every parent node, so a checkout
        # in a directory named "root" or "bmv2" would match them all
        if item.get_closest_marker("root") and not IS_ROOT:
            item.add_marker(skip_root)
        if item.get_closest_marker("bmv2") and not HAS_BMV2:
            item.add_marker(skip_bmv2)


# -- CI with BMv2 installed: every BMv2 test must run ---------------------------------------------
# .ci/run sets MRC_REQUIRE_BMV2=1 where it installed BMv2 and p4c: a BMv2 test that skips there
# (a tool missing after all, a fixture's own skip) fails instead, so a broken install cannot hide.
REQUIRE_BMV2 = os.environ.get("MRC_REQUIRE_BMV2") == "1"
_bmv2_outcomes: dict[str, str] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    if not item.get_closest_marker("bmv2"):
        return
    rep = outcome.get_result()  # type: ignore[attr-defined]
    if rep.skipped and REQUIRE_BMV2:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"MRC_REQUIRE_BMV2=1: this BMv2 test must run here, but it skipped: {reason}"
    seen = _bmv2_outcomes.get(item.nodeid)
    if rep.failed:
        _bmv2_outcomes[item.nodeid] = "failed"
    elif rep.skipped and seen is None:
        _bmv2_outcomes[item.nodeid] = "skipped"
    elif rep.when == "call" and seen is None:
        _bmv2_outcomes[item.nodeid] = "passed"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """One line for the BMv2 tests (marker ``bmv2``) alone, so a CI log shows they ran; what the
    session left behind, if anything."""
    _report_leftovers(terminalreporter)
    if not _bmv2_outcomes:
        return
    counts = Counter(_bmv2_outcomes.values())
    terminalreporter.write_line(
        "BMv2 tests: "
        + ", ".join(f"{counts[k]} {k}" for k in ("passed", "skipped", "failed"))
        + ("" if HAS_BMV2 else " (BMv2/p4c not installed)")
        + (" (MRC_REQUIRE_BMV2=1: skips count as failures)" if REQUIRE_BMV2 else "")
    )


# -- the machine: pre-flight, time scale, and what the session leaves -----------------------------
_host: dict[str, Any] = {}


def pytest_configure(config: pytest.Config) -> None:
    """Every process the tests start inherits the session's tag and, for live tests, the time
    scale measured once here (mrc_fabric.time_scale: the limits of live waits on this machine)."""
    _host["tag"] = mark_session()
    if IS_ROOT:
        from mrc_fabric.time_scale import settle

        settle()


def pytest_sessionstart(session: pytest.Session) -> None:
    _host["before"] = snapshot()


def _preflight_problems() -> str:
    """The pre-flight's message for a live fabric on the Linux target ("" when all is there),
    looked at once per session."""
    if "preflight" not in _host:
        from mrc_fabric.topology import Target
        from topologies.preflight import PreflightError, check

        missing = check(Target.LINUX)
        _host["preflight"] = str(PreflightError(missing)) if missing else ""
    return str(_host["preflight"])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """A live test on a machine that cannot run a fabric fails with the pre-flight's one
    message (every missing item), before its fixtures start anything."""
    if IS_ROOT and item.get_closest_marker("root") and not item.get_closest_marker("skip"):
        _host["live"] = True  # the end-of-session check looks at the whole machine then
        problems = _preflight_problems()
        if problems:
            pytest.fail(f"pre-flight: {problems}", pytrace=False)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    before = _host.get("before")
    if not isinstance(before, HostState):
        return
    leftovers = left(before, str(_host["tag"]), live=bool(_host.get("live")))
    _host["left"] = leftovers
    if leftovers and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _report_leftovers(terminalreporter: Any) -> None:
    leftovers = _host.get("left") or []
    if leftovers:
        n = len(leftovers)
        terminalreporter.write_line(
            f"the test session left {n} thing{'s' if n > 1 else ''} behind (it must leave the machine "
            "as it found it):",
            red=True,
        )
        for line in leftovers[:40]:
            terminalreporter.write_line(f"  {line}", red=True)
