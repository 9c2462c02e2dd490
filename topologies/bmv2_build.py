"""Which ``simple_switch_grpc`` a BMv2 switch runs: the fast build where there is one.

BMv2 built with its debug/trace logging macros and event logger (p4lang's packages, and
``/opt/p4bench``) spends a good part of every packet on log calls even at ``--log-level
info``; BMv2's own performance guide says to configure it with ``--disable-logging-macros
--disable-elogger`` for throughput. A build like that forwarded about 1.4x the packets here
(docs/testbed.md, "Fidelity"). It is used whenever it is installed and nothing needs the
per-packet log lines: a switch asked for ``--log-level debug`` or ``trace`` (a test or a
user reading table hits in ``<name>.bmv2.txt``) keeps the debug build.

Where the fast build is found, in order: ``$MRC_BMV2_FAST`` (a path to its
``simple_switch_grpc``); ``<prefix>/perf/bin/simple_switch_grpc`` beside the debug build on
PATH (``<prefix>/bin/simple_switch_grpc``: the layout of ``/opt/p4bench``); or the build on
PATH itself when its version says ``-perf``. ``MRC_BMV2_BUILD=debug`` keeps the debug build
everywhere.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

SWITCH_BINARY = "simple_switch_grpc"
FAST_ENV = "MRC_BMV2_FAST"
BUILD_ENV = "MRC_BMV2_BUILD"  # "debug": never the fast build
NEEDS_DEBUG = ("debug", "trace")  # log levels whose lines only the debug build writes


def fast_binary() -> Path | None:
    """The fast build's simple_switch_grpc, if one is installed (see the module docstring)."""
    env = os.environ.get(FAST_ENV)
    if env:
        path = Path(env)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(SWITCH_BINARY)
    if found is None:
        return None
    beside = Path(found).resolve().parent.parent / "perf" / "bin" / SWITCH_BINARY
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    return Path(found) if "-perf" in version(found) else None


@functools.cache
def version(binary: str) -> str:
    """``simple_switch_grpc --version`` (empty when it cannot say)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.stdout or "").strip() or (out.stderr or "").strip()


def switch_binary(log_level: str = "info") -> str:
    """The simple_switch_grpc to run for a switch logging at ``log_level``."""
    if log_level in NEEDS_DEBUG or os.environ.get(BUILD_ENV) == "debug":
        return SWITCH_BINARY
    fast = fast_binary()
    return str(fast) if fast is not None else SWITCH_BINARY


def describe(binary: str) -> str:
    """What a run says about its BMv2: which build, where, which version."""
    path = shutil.which(binary) or binary
    ver = version(path)
    kind = "fast build (no debug logging)" if "-perf" in ver or "/perf/" in path else "debug build"
    return f"{kind}: {path} {ver}".strip()
