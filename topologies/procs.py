"""Stopping a child process the way every part of the testbed does: SIGTERM, then SIGKILL.

SIGTERM first, because the shims and agents remove what they installed (routes, nft
tables, sockets) when they exit cleanly; SIGKILL only after ``timeout`` seconds, so a
stuck child cannot hang a teardown.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from typing import Protocol


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
