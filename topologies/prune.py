"""Prune old run directories: keep the newest N under ``runs/``, never one still in use.

Every testbed run leaves ``runs/<UTC timestamp>/`` behind (logs, pcaps, the process
register), so the directory only grows. ``prune_runs`` deletes all but the newest
``keep`` of them. Only names :class:`topologies.rundir.RunDir` creates are considered
(``YYYYmmdd-HHMMSS[-n]``); anything else under ``runs/`` is not ours to delete. A run is
never deleted while anything of it is left: its owner (the process that started it)
still runs, a recorded process or a stray one naming the directory still runs, or one of
its interfaces is still in the root namespace (``make clean`` ends those first, then
prunes). The run ``runs/latest`` points at is always kept, and so is a directory that
has no ``run.json`` yet but was made moments ago (a testbed starting right now).

``N`` comes from ``--keep`` (``python -m topologies.cleanup``, ``make clean KEEP_RUNS=N``),
``TestbedConfig.keep_runs`` or the environment variable ``MRC_KEEP_RUNS``
(default :data:`DEFAULT_KEEP_RUNS`; ``all`` keeps every run).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from topologies.cleanup import owner_alive, root_links, run_ifnames, stray_processes
from topologies.rundir import LATEST, RUN_FILE, read_records

KEEP_RUNS_ENV = "MRC_KEEP_RUNS"
DEFAULT_KEEP_RUNS = 10
KEEP_ALL = "all"
STARTING_GRACE_S = 120.0  # a run directory younger than this without run.json is starting up
RUN_NAME = re.compile(r"^(\d{8}-\d{6})(?:-(\d+))?$")


def parse_keep(text: str) -> int | None:
    """``"5"`` -> 5, ``"all"`` -> None (keep every run); anything else is a ValueError."""
    value = text.strip().lower()
    if value == KEEP_ALL:
        return None
    try:
        keep = int(value)
    except ValueError:
        raise ValueError(f"keep: {text[:40]!r} is neither a whole number >= 1 nor {KEEP_ALL!r}") from None
    if keep < 1:
        raise ValueError(f"keep: must be >= 1 (or {KEEP_ALL!r}), got {keep}")
    return keep


def keep_runs_from_env() -> int | None:
    """How many runs to keep: ``$MRC_KEEP_RUNS`` if set, else :data:`DEFAULT_KEEP_RUNS`."""
    text = os.environ.get(KEEP_RUNS_ENV)
    if text is None or not text.strip():
        return DEFAULT_KEEP_RUNS
    try:
        return parse_keep(text)
    except ValueError as exc:
        raise ValueError(f"${KEEP_RUNS_ENV}: {exc}") from None


def run_dirs(root: Path) -> list[Path]:
    """The run directories under ``root``, newest first (by the timestamp in their names)."""
    found: list[tuple[str, int, Path]] = []
    if not root.is_dir():
        return []
    for entry in root.iterdir():
        m = RUN_NAME.match(entry.name)
        if m is None or entry.is_symlink() or not entry.is_dir():
            continue
        found.append((m.group(1), int(m.group(2) or 0), entry))
    found.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [path for _stamp, _n, path in found]


def in_use(run_dir: Path, links: set[str] | None = None) -> str | None:
    """Why ``run_dir`` must not be deleted yet, or None when nothing of it is left."""
    if owner_alive(run_dir):
        return "its testbed is still running"
    info = run_dir / RUN_FILE
    if not info.exists():
        try:
            age = time.time() - run_dir.stat().st_mtime
        except OSError:
            return None
        if age < STARTING_GRACE_S:
            return "no run.json yet: a testbed may be starting in it"
    alive = [r for r in read_records(run_dir) if r.alive()]
    if alive:
        return (
            f"{len(alive)} of its processes still run ({alive[0].kind} {alive[0].name}, pid {alive[0].pid})"
        )
    strays = stray_processes(run_dir)
    if strays:
        return f"{len(strays)} stray processes name it (pid {strays[0][0]})"
    left = run_ifnames(run_dir) & (root_links() if links is None else links)
    if left:
        return f"its interfaces are still in the root namespace ({', '.join(sorted(left)[:3])})"
    return None


@dataclass
class PruneReport:
    removed: list[Path] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"removed old run {p}" for p in self.removed]
        return out + [f"kept old run {why}" for why in self.kept_in_use]


def prune_runs(root: Path, keep: int | None, dry_run: bool = False) -> PruneReport:
    """Delete every run directory under ``root`` but the newest ``keep`` (None: delete none)."""
    report = PruneReport()
    if keep is None:
        return report
    if keep < 1:
        raise ValueError(f"keep: must be >= 1, got {keep}")
    try:
        latest = (root / LATEST).resolve(strict=True)
    except OSError:
        latest = None
    links = root_links()
    for run_dir in run_dirs(root)[keep:]:
        if latest is not None and run_dir.resolve() == latest:
            continue
        why = in_use(run_dir, links)
        if why is not None:
            report.kept_in_use.append(f"{run_dir} ({why})")
            continue
        report.removed.append(run_dir)
        if not dry_run:
            shutil.rmtree(run_dir, ignore_errors=True)
    return report
