"""The testbed's end of ``linux_target.launcher``: shims forked from one warm process.

:class:`ShimLauncher` starts the launcher (in the root namespace: it moves each child
into its switch's namespace itself) and asks it for shims; each comes back as a
:class:`LaunchedShim`, which answers like the ``subprocess.Popen`` the switch kept
before (``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``, ``returncode``), so
stopping, restarting and supervising a shim work as they did. The launcher is the shims'
parent and reaps them; a shim's exit status reaches the testbed through a small file.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from mrc_fabric.time_scale import scaled

READY_TIMEOUT_S = 30.0
REAP_GRACE_S = 2.0  # after a shim is gone, how long its exit file may take to appear
UNKNOWN_STATUS = 255  # a shim that died after its launcher: nobody saw its status


class LauncherError(RuntimeError):
    """The launcher could not start, or refused a request (the message says why)."""


class LaunchedShim:
    """A shim the launcher forked, seen from the testbed like a ``Popen``."""

    def __init__(self, pid: int, exit_path: Path, launcher: ShimLauncher) -> None:
        self.pid = pid
        self.exit_path = exit_path
        self.launcher = launcher
        self.returncode: int | None = None
        self.args = ["linux_target.launcher", str(pid)]

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = int(self.exit_path.read_text().strip())
            except (OSError, ValueError):
                if not self.launcher.alive() and not _exists(self.pid):
                    self.returncode = UNKNOWN_STATUS
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        if self.poll() is not None:
            return self.returncode  # type: ignore[return-value]
        _wait_gone(self.pid, None if deadline is None else max(0.0, deadline - time.monotonic()))
        if _exists(self.pid) and not _is_zombie(self.pid):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        # gone (or a zombie its launcher is about to reap): the exit file follows at once
        grace = time.monotonic() + REAP_GRACE_S
        while self.poll() is None:
            if time.monotonic() > grace:
                self.returncode = UNKNOWN_STATUS
                break
            time.sleep(0.005)  # the launcher writes the file right after reaping
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _wait_gone(pid: int, timeout: float | None) -> None:
    """Until ``pid`` has exited (a pidfd turns readable), or ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        poller.poll(None if timeout is None else int(timeout * 1000))
    finally:
        os.close(fd)


class ShimLauncher:
    """One ``linux_target.launcher`` process and the requests sent to it."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._log: IO[Any] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> ShimLauncher:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - kept for the launcher's life
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "linux_target.launcher"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
            # one malloc arena per shim, not one per thread: a shim's threads are few and idle,
            # and each arena of their own cost it about half a megabyte
            env={**os.environ, "MALLOC_ARENA_MAX": "1"},
        )
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], scaled(READY_TIMEOUT_S))
        line = self._proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.stop()
            raise LauncherError(f"the shim launcher did not start (see {self.log_path})")
        return self

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def launch(self, argv: list[str], node_pid: int, log: Path, exit_path: Path) -> LaunchedShim:
        """A shim with these arguments in the namespaces of Mininet node process ``node_pid``."""
        req = {"argv": argv, "node_pid": node_pid, "log": str(log), "exit": str(exit_path)}
        return LaunchedShim(self._ask(req), exit_path, self)

    def launch_group(
        self, members: list[dict[str, Any]], control: Path, log: Path, exit_path: Path
    ) -> LaunchedShim:
        """One process serving several switches (``linux_target.shim_group``); ``members``:
        each switch's ``{"argv", "node_pid", "log", "exit"}``."""
        req = {"group": members, "control": str(control), "log": str(log), "exit": str(exit_path)}
        return LaunchedShim(self._ask(req), exit_path, self)

    def _ask(self, req: dict[str, Any]) -> int:
        """One request to the launcher; the pid of the process it forked."""
        with self._lock:  # one request at a time: the launcher answers in order
            proc = self._proc
            if proc is None or proc.poll() is not None or proc.stdin is None or proc.stdout is None:
                raise LauncherError("the shim launcher is not running")
            try:
                proc.stdin.write(json.dumps(req) + "\n")
                proc.stdin.flush()
                answer = json.loads(proc.stdout.readline() or "{}")
            except (OSError, ValueError) as exc:
                raise LauncherError(f"the shim launcher stopped answering: {exc}") from exc
        if "pid" not in answer:
            raise LauncherError(f"the shim launcher refused: {answer.get('error', 'no answer')}")
        return int(answer["pid"])

    def stop(self, timeout: float = 5.0) -> None:
        """End the launcher (the shims it started are stopped by their switches first)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None
