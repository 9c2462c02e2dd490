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

Then a size cap: while the run directories left hold more than ``max_bytes`` in all
(``--max-mb``, ``MRC_RUNS_MAX_MB``, default :data:`DEFAULT_RUNS_MAX_MB`), the oldest of them
goes, by the same rules; the newest run is always kept, however big.
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
RUNS_MAX_MB_ENV = "MRC_RUNS_MAX_MB"
DEFAULT_RUNS_MAX_MB = 1024
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


def runs_max_bytes_from_env() -> int | None:
    """The size cap of all run directories: ``$MRC_RUNS_MAX_MB`` (MB, ``all``: none) or the default."""
    text = os.environ.get(RUNS_MAX_MB_ENV, "").strip()
    if not text:
        return DEFAULT_RUNS_MAX_MB << 20
    if text.lower() == KEEP_ALL:
        return None
    try:
        mb = float(text)
    except ValueError:
        raise ValueError(
            f"${RUNS_MAX_MB_ENV}: {text[:40]!r} is neither a size in MB nor {KEEP_ALL!r}"
        ) from None
    if mb <= 0:
        raise ValueError(f"${RUNS_MAX_MB_ENV}: must be > 0 MB, got {text}")
    return int(mb * (1 << 20))


def dir_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (symbolic links not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


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


def prune_runs(
    root: Path, keep: int | None, dry_run: bool = False, max_bytes: int | None = None
) -> PruneReport:
    """Delete every run directory under ``root`` but the newest ``keep`` (None: delete none), then
    the oldest of the rest while they hold more than ``max_bytes`` (None: no cap)."""
    report = PruneReport()
    if keep is not None and keep < 1:
        raise ValueError(f"keep: must be >= 1, got {keep}")
    try:
        latest = (root / LATEST).resolve(strict=True)
    except OSError:
        latest = None
    links = root_links()
    runs = run_dirs(root)
    doomed = runs[keep:] if keep is not None else []
    left = [r for r in runs if r not in doomed]
    if max_bytes is not None and left:
        sizes = {r: dir_bytes(r) for r in left}
        total = sum(sizes.values())
        for run_dir in reversed(left[1:]):  # oldest first; the newest always stays
            if total <= max_bytes:
                break
            if (latest is None or run_dir.resolve() != latest) and in_use(run_dir, links) is None:
                doomed.append(run_dir)
                total -= sizes[run_dir]
    for run_dir in doomed:
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
