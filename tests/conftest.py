"""Shared pytest setup: markers that skip with a reason the summary shows (-ra)."""

from __future__ import annotations

import os
import shutil

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
        if "root" in item.keywords and not IS_ROOT:
            item.add_marker(skip_root)
        if "bmv2" in item.keywords and not HAS_BMV2:
            item.add_marker(skip_bmv2)
