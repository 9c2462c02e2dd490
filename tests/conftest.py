"""Shared pytest setup: markers that skip with a reason the summary shows (-ra)."""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

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
    """One line for the BMv2 tests (marker ``bmv2``) alone, so a CI log shows they ran."""
    if not _bmv2_outcomes:
        return
    counts = Counter(_bmv2_outcomes.values())
    terminalreporter.write_line(
        "BMv2 tests: "
        + ", ".join(f"{counts[k]} {k}" for k in ("passed", "skipped", "failed"))
        + ("" if HAS_BMV2 else " (BMv2/p4c not installed)")
        + (" (MRC_REQUIRE_BMV2=1: skips count as failures)" if REQUIRE_BMV2 else "")
    )
