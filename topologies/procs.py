"""Stopping a child process the way every part of the testbed does: SIGTERM, then SIGKILL;
and running such stops side by side (:func:`in_parallel`).

SIGTERM first, because the shims and agents remove what they installed (routes, nft
tables, sockets) when they exit cleanly; SIGKILL only after ``timeout`` seconds, so a
stuck child cannot hang a teardown.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import Any, Protocol


class ChildProcess(Protocol):
    """What the testbed needs of a process it started: a ``subprocess.Popen``, or a shim the
    launcher forked (``topologies.shim_launcher.LaunchedShim``)."""

    pid: int

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def send_signal(self, sig: int) -> None: ...

    def kill(self) -> None: ...


def terminate(proc: ChildProcess | None, timeout: float, sig: signal.Signals = signal.SIGTERM) -> int | None:
    """``sig`` (SIGTERM) by PID, SIGKILL after ``timeout`` seconds; reaps the process.

    Returns its exit status (None where there was no process). A process that is already
    gone is only reaped.
    """
    if proc is None:
        return None
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait()
    return proc.returncode


def in_parallel(calls: list[Callable[[], Any]]) -> None:
    """Run each call in its own thread and wait for all; the first exception is re-raised
    (one failing call never keeps the others from running to their end)."""
    errors: list[BaseException] = []

    def run(call: Callable[[], Any]) -> None:
        try:
            call()
        except BaseException as exc:  # collected, re-raised below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
