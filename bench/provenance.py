"""Where a results directory came from: commit, machine, data planes, seeds, command.

Why: a table of verdicts means nothing without what produced it, and a directory that
mixes two commits' runs means less than nothing. ``make bench`` writes
``provenance.json`` first; it refuses a directory that already holds results of another
commit (or results with no provenance), so a report is always one commit's.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FILE = "provenance.json"
REPO = Path(__file__).resolve().parent.parent


class ProvenanceError(RuntimeError):
    """The directory holds another commit's results."""


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit() -> str:
    """HEAD's hash, with ``+dirty`` where tracked files differ from it ('unknown' outside git)."""
    head = _git("rev-parse", "HEAD") or "unknown"
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def _os_name() -> str:
    try:
        return platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        return ""


def machine() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        mem_kib = 0
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": _os_name(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
    }


def collect(targets: list[str], runs: int, argv: list[str] | None, quick: bool) -> dict[str, Any]:
    """``argv``: the bench's arguments; None (``python -m bench.run_all``, ``make bench``)
    takes them from the process, so the command is one a reader can run again."""
    if argv is None:
        argv = sys.argv[1:]
    return {
        "commit": commit(),
        "machine": machine(),
        "live_data_planes": targets,
        "live_runs": runs,
        "live_seeds": list(range(1, runs + 1)),
        "quick": quick,
        "command": "python -m bench.run_all " + shlex.join(argv),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def read(results: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((results / FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def claim(results: Path, prov: dict[str, Any]) -> dict[str, Any]:
    """Write ``prov`` into ``results``, unless it holds another commit's results."""
    if results.exists() and any(results.iterdir()):
        old = read(results)
        if old is None:
            raise ProvenanceError(
                f"{results} already holds results without {FILE}: choose a new --out (or remove it)"
            )
        if old.get("commit") != prov["commit"] or prov["commit"].endswith("+dirty"):
            raise ProvenanceError(
                f"{results} holds results of commit {old.get('commit')}, this tree is {prov['commit']}: "
                "a report is one commit's; choose a new --out"
            )
        prov = {**old, "command": old.get("command", "") + " ; " + prov["command"]}
    results.mkdir(parents=True, exist_ok=True)
    (results / FILE).write_text(json.dumps(prov, indent=1) + "\n")
    return prov
