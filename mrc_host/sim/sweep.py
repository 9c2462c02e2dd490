"""Sweeps: one scenario over seeds and a parameter grid, its points run on Dask.

Why Dask: every point of a sweep is an independent, deterministic simulation, so a sweep is
embarrassingly parallel; ``dask.distributed`` runs it on the cores of this machine (an
embedded ``LocalCluster``, one single-threaded worker process per core) or on any cluster
whose scheduler it is given (``tcp://HOST:8786``: workers started by hand or by
dask-jobqueue on Slurm). Nothing about a point depends on where or when it ran: a point is
a scenario table (the TOML file as read, the point's overrides applied) and its seed, the
worker parses and runs it, and the results are put back in point order, so the JSON of a
sweep is the same byte for byte on one worker or on many.

A point that fails (a bad parameter value, an exception inside the simulation, a worker
that died) is recorded with its parameters and its error; the other points go on.

A sweep file (TOML)::

    scenario = "incast-bystander"     # a shipped scenario's name, or a path (relative to this file)
    name = "incast-ecn"               # default: the file's name
    seeds = 10                        # seeds 1..10; or a list: [1, 2, 7]
    [grid]                            # each key a dotted path into the scenario file; every
    "fabric.ecn" = ["32KiB", "64KiB"] # combination of the values runs, for every seed
    "traffic.1.size" = ["4MiB", "8MiB"]
"""

from __future__ import annotations

import copy
import gc
import itertools
import json
import os
import shutil
import signal
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

SWEEP_KEYS = {"scenario", "name", "seeds", "grid"}
MAX_POINTS = 100_000


class SweepError(ValueError):
    """A sweep file that cannot be expanded: which file, which key, why."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        super().__init__(f"{file}: {key}: {reason}")


@dataclass(frozen=True)
class Point:
    """One simulation of a sweep: a scenario table with its overrides, and a seed.

    ``params`` names what varies (the seed and each grid key's value) for the report;
    ``table`` is what the worker parses (``scenario_file.parse``) and runs."""

    index: int
    params: dict[str, Any]
    table: dict[str, Any]
    file: str
    name: str


class Task(Protocol):
    """What ``run_points`` runs: a ``Point``, or any picklable task with an index and the
    parameters it is reported with (the fuzzer's draws)."""

    @property
    def index(self) -> int: ...

    @property
    def params(self) -> dict[str, Any]: ...


@dataclass
class Sweep:
    name: str
    file: str
    scenario_file: str
    seeds: list[int]
    grid: dict[str, list[Any]]
    points: list[Point] = field(default_factory=list)


def set_path(table: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.2.c`` in a TOML table (a number indexes an array); KeyError if it cannot."""
    keys = dotted.split(".")
    node: Any = table
    for i, key in enumerate(keys[:-1]):
        if isinstance(node, list):
            if not key.isdigit() or int(key) >= len(node):
                raise KeyError(f"{'.'.join(keys[: i + 1])}: no such array element")
            node = node[int(key)]
        else:
            node = node.setdefault(key, {})
        if not isinstance(node, dict | list):
            raise KeyError(f"{'.'.join(keys[: i + 1])} is a value, not a table")
    last = keys[-1]
    if isinstance(node, list):
        if not last.isdigit() or int(last) >= len(node):
            raise KeyError(f"{dotted}: no such array element")
        node[int(last)] = value
    else:
        node[last] = value


def expand(
    table: dict[str, Any], file: str, name: str, seeds: list[int], grid: dict[str, list[Any]]
) -> list[Point]:
    """Every (grid combination, seed) of a scenario table, in a fixed order."""
    keys = sorted(grid)
    points: list[Point] = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        for seed in seeds:
            t = copy.deepcopy(table)
            params: dict[str, Any] = {"seed": seed}
            for key, value in zip(keys, combo, strict=True):
                params[key] = value
                try:
                    set_path(t, key, value)
                except KeyError as exc:
                    # recorded at run time as the point's error: the sweep goes on
                    t = {"__error__": f"grid key {exc.args[0]}"}
                    break
            if "__error__" not in t:
                t["seed"] = seed
            points.append(Point(len(points), params, t, file, name))
    return points


def load(path: str | Path) -> Sweep:
    """Read a sweep file and expand its points (SweepError if the file itself is wrong)."""
    from . import scenario_file as sf

    p = Path(path)
    file = str(p)
    raw = sf.read_toml(p, lambda why: SweepError(file, "-", why))
    for key in raw:
        if key not in SWEEP_KEYS:
            raise SweepError(file, key, f"unknown key (expected one of: {', '.join(sorted(SWEEP_KEYS))})")
    scen = raw.get("scenario")
    if not isinstance(scen, str):
        raise SweepError(file, "scenario", "missing: a shipped scenario's name or a path")
    spath = (p.parent / scen) if not Path(scen).is_absolute() else Path(scen)
    if not spath.exists() and (sf.SCENARIO_DIR / f"{scen}.toml").exists():
        spath = sf.SCENARIO_DIR / f"{scen}.toml"
    try:
        table = tomllib.loads(spath.read_text())
    except OSError as exc:
        raise SweepError(file, "scenario", f"cannot read {spath}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise SweepError(file, "scenario", f"{spath}: not valid TOML: {exc}") from exc
    seeds_raw = raw.get("seeds", 10)
    if isinstance(seeds_raw, int) and not isinstance(seeds_raw, bool) and 1 <= seeds_raw <= 10_000:
        seeds = list(range(1, seeds_raw + 1))
    elif (
        isinstance(seeds_raw, list)
        and seeds_raw
        and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds_raw)
        and len(set(seeds_raw)) == len(seeds_raw)
    ):
        seeds = list(seeds_raw)
    else:
        raise SweepError(file, "seeds", "must be a count (1..10000) or a list of distinct integers")
    grid_raw = raw.get("grid", {})
    if not isinstance(grid_raw, dict):
        raise SweepError(file, "grid", "must be a table of dotted keys to lists of values")
    grid: dict[str, list[Any]] = {}
    for key, values in grid_raw.items():
        if not isinstance(values, list) or not values:
            raise SweepError(file, f"grid.{key}", "must be a non-empty list of values")
        if key == "seed":
            raise SweepError(file, "grid.seed", "use the top-level key seeds")
        grid[key] = values
    count = len(seeds)
    for values in grid.values():
        count *= len(values)
    if count > MAX_POINTS:
        raise SweepError(file, "grid", f"{count} points, at most {MAX_POINTS}")
    name = raw.get("name", p.stem)
    if not isinstance(name, str):
        raise SweepError(file, "name", "must be a string")
    sweep = Sweep(name, file, str(spath), seeds, grid)
    sweep.points = expand(table, str(spath), spath.stem, seeds, grid)
    return sweep


# ---- running a point (on a worker) ------------------------------------------------------
def run_point(point: Point) -> dict[str, Any]:
    """Parse and run one point; never raises (a failure is the point's result)."""
    from . import scenario_file as sf

    out: dict[str, Any] = {"index": point.index, "params": point.params}
    try:
        if "__error__" in point.table:
            raise ValueError(point.table["__error__"])
        sc = sf.parse(copy.deepcopy(point.table), point.file, point.name)
        out["result"] = sf.run_scenario(sc)
        out["status"] = "ok"
    except Exception as exc:  # reported with the point's parameters; the sweep goes on
        out["status"] = "failed"
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        # the finished network's objects hold reference cycles: only a full collection frees
        # them, and in a worker that runs point after point one may not come before the next
        # point has built its own (a full-size sweep grew each worker past 10 GiB, until Dask
        # paused it); collected here, a worker stays at one network's size
        gc.collect()
    return out


# ---- running many points ----------------------------------------------------------------
@dataclass
class SweepRun:
    """What ran where: the results (in point order) and how long it took (not in the JSON)."""

    results: list[dict[str, Any]]
    workers: int
    scheduler: str
    seconds: float

    @property
    def failed(self) -> list[dict[str, Any]]:
        return [r for r in self.results if r["status"] != "ok"]


def local_cluster(workers: int | None = None, scratch: str | None = None) -> Any:
    """The embedded cluster: one single-threaded worker process per core, no dashboard.

    ``scratch``: the scheduler's and workers' scratch directory (Dask's default,
    ``dask-scratch-space`` in the system temp directory, outlives the sweep: ``run_points``
    gives one it removes). Without a dashboard the scheduler still serves its health routes
    over HTTP, by default on port 8787: a free loopback port instead, so that two sweeps at
    once (a bench beside a fuzz run) neither collide nor warn."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"temporary-directory": scratch}):  # the scheduler's, in this process
        return LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            host="127.0.0.1",
            local_directory=scratch,
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},  # the health routes' server
        )


def run_points(
    points: Iterable[Task],
    scheduler: str | None = None,
    workers: int | None = None,
    progress: bool | None = None,
    label: str = "sweep",
    fn: Callable[[Any], dict[str, Any]] = run_point,
) -> SweepRun:
    """Run ``fn`` on every point on Dask; results in point order, whatever the worker count.

    ``scheduler``: the address of a running cluster (default: an embedded ``LocalCluster``
    with ``workers`` processes, default one per core). ``progress``: a rich bar of points
    done and failed on stderr (None: only on a terminal).
    """
    from distributed import Client

    todo = list(points)
    started = time.monotonic()
    scratch = None
    cluster = None
    with _terminated_as_exit() as stop:
        try:
            if not scheduler:
                scratch = tempfile.mkdtemp(prefix="mrc-sweep-")
                cluster = local_cluster(workers, scratch)
            client = Client(scheduler or cluster)  # type: ignore[no-untyped-call]
            results, n_workers = _gather(client, todo, label, progress, fn, stop)
        finally:
            if cluster is not None:
                cluster.close()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
    return SweepRun(
        [results[pt.index] for pt in todo],
        n_workers,
        scheduler or "embedded LocalCluster",
        time.monotonic() - started,
    )


# how often the main thread looks for finished points and a SIGTERM (``_gather``)
POLL_S = 0.05


@contextmanager
def _terminated_as_exit() -> Iterator[threading.Event]:
    """A SIGTERM (``kill``, a cancelled job) ends the sweep through its cleanup, as Ctrl-C
    does: by default it ends the process on the spot, and the embedded cluster's worker
    processes and scratch directory (``mrc-sweep-*`` in the temp directory) outlived it. The
    handler only sets the event it yields; ``_gather`` raises ``SystemExit`` on seeing it.
    Raised from the handler itself, the exit fell now and then inside a callback that ignores
    exceptions (Dask's garbage-collection timer), and the sweep ran on."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # (signal handlers belong to the main thread)
        return

    def terminated(_signum: int, _frame: object) -> None:
        stop.set()

    before = signal.signal(signal.SIGTERM, terminated)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


def _gather(
    client: Any,
    todo: list[Task],
    label: str,
    progress: bool | None,
    fn: Callable[[Any], dict[str, Any]],
    stop: threading.Event,
) -> tuple[dict[int, dict[str, Any]], int]:
    """Every point's result by index, and how many workers ran them; ``client`` is closed.
    ``stop`` set (a SIGTERM) ends it with ``SystemExit``: the points are polled, not waited
    for, so it is seen within ``POLL_S`` however long a point runs."""
    from distributed import as_completed

    def stopped() -> None:
        if stop.is_set():
            raise SystemExit(128 + signal.SIGTERM)

    with client:
        stopped()
        client.wait_for_workers(1, timeout=120)
        n_workers = len(client.scheduler_info(n_workers=-1)["workers"])
        futures = {client.submit(fn, pt, key=f"{label}-{pt.index}", pure=False): pt for pt in todo}
        results: dict[int, dict[str, Any]] = {}
        done: Any = as_completed(futures)  # type: ignore[no-untyped-call]
        with _Bar(len(todo), label, progress) as bar:
            while not done.is_empty():
                stopped()
                if not done.has_ready():
                    time.sleep(POLL_S)
                    continue
                for fut in done.next_batch(block=False):
                    pt = futures[fut]
                    if fut.status == "finished":
                        res = fut.result()
                    else:  # the worker died or the task could not run: still the point's result
                        exc = fut.exception()
                        res = {
                            "index": pt.index,
                            "params": pt.params,
                            "status": "failed",
                            "error": f"{type(exc).__name__}: {exc}",
                        }
                    fut.release()
                    results[pt.index] = res
                    bar.advance(res["status"] == "ok")
    return results, n_workers


class _Bar:
    """A rich progress bar of points done and failed (stderr)."""

    def __init__(self, total: int, label: str, show: bool | None) -> None:
        import sys

        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.show = sys.stderr.isatty() if show is None else show
        # asked for where stderr is no terminal: a line per point instead of a bar redrawn in place
        self.plain = self.show and not sys.stderr.isatty()
        self.label, self.total, self.started = label, total, time.monotonic()
        self.ok = self.failed = 0
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[green]{task.fields[ok]} ok[/] [red]{task.fields[failed]} failed[/]"),
            TimeElapsedColumn(),
            console=self.console,
            disable=not self.show or self.plain,
        )
        self.task = self.progress.add_task(label, total=total, ok=0, failed=0)

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def advance(self, ok: bool) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        self.progress.update(self.task, advance=1, ok=self.ok, failed=self.failed)
        if self.plain:
            done, wall = self.ok + self.failed, time.monotonic() - self.started
            self.console.print(
                f"{self.label}: {done}/{self.total} points, {self.ok} ok, {self.failed} failed, {wall:.0f} s",
                highlight=False,
                markup=False,
            )


def sweep_json(sweep: Sweep, run: SweepRun) -> str:
    """The sweep's JSON: its definition and every point's result, in point order.

    No timing and no worker count: the same sweep gives the same bytes wherever it ran."""
    doc = {
        "sweep": sweep.name,
        "scenario_file": sweep.scenario_file,
        "seeds": sweep.seeds,
        "grid": sweep.grid,
        "points": run.results,
        "failed": [r["index"] for r in run.failed],
    }
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"
