"""A running QEMU guest: start it, wait for SSH, run commands with time limits, stop it.

Nothing here can hang: QEMU dies with this process (PR_SET_PDEATHSIG), a watchdog timer kills it
at the run's hard deadline, every command over SSH has its own limit (and `timeout` inside the
guest), and leaving the `with` block stops the guest, by force when it does not power off.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType

from mrc_vm.qemu import VmSpec, qemu_argv, ssh_argv

PR_SET_PDEATHSIG = 1
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _die_with_parent() -> None:
    """Runs in the child before exec: QEMU gets SIGKILL when the runner dies, however it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class StepResult:
    rc: int
    seconds: float
    output: str
    timed_out: bool = False


class Guest:
    """One QEMU process and the SSH key that reaches it; use as a context manager."""

    def __init__(self, spec: VmSpec, key: Path, hard_limit_s: float, log: Path) -> None:
        self.spec = spec
        self.key = key
        self.hard_limit_s = hard_limit_s
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed_by_watchdog = False
        self._watchdog: threading.Timer | None = None
        self.started = 0.0

    def __enter__(self) -> Guest:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start QEMU; a port another program took meanwhile gets a second try on a new one."""
        for attempt in range(3):
            with self.log.open("ab") as out:
                self.proc = subprocess.Popen(
                    qemu_argv(self.spec), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                    preexec_fn=_die_with_parent, start_new_session=True,
                )  # fmt: skip
            self.started = time.monotonic()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
            if self.proc.poll() is None:
                break
            if "host forwarding" not in self.log.read_text(errors="replace") or attempt == 2:
                raise RuntimeError(f"QEMU exited at once ({self.proc.returncode}): {self.log_tail()}")
            self.spec = replace(self.spec, ssh_port=free_port())
        self.rearm(self.hard_limit_s)

    def rearm(self, seconds_from_now: float) -> None:
        """A new hard deadline, once the guest's speed is known (the first one assumed the worst)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = threading.Timer(seconds_from_now, self._watchdog_fires)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _watchdog_fires(self) -> None:
        self.killed_by_watchdog = True
        self.kill()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, n: int = 600) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text.strip()[-n:] or "(nothing)"

    def ended(self) -> str:
        """Why QEMU is gone and what the guest said last: its exit, QEMU's own output, the
        console's last lines (a guest that powered off or panicked says so there)."""
        rc = None if self.proc is None else self.proc.returncode
        if self.killed_by_watchdog:
            how = "stopped by the run's time limit"
        elif rc is not None and rc < 0:
            how = f"killed by signal {-rc} (not by this check: the OOM killer, or another program?)"
        elif rc == 0:
            how = "exit status 0: the guest powered off or reset"
        else:
            how = f"exit status {rc}"
        console = console_tail(self.spec.console_log)
        return f"{how}; QEMU said: {self.log_tail()}; the guest's console ended with:\n{console}"

    def wait_ssh(self, timeout_s: float, since: float | None = None) -> float:
        """Seconds from QEMU's start (or `since`, a monotonic time) until the guest ran a command over SSH."""
        start = self.started if since is None else since
        deadline = start + timeout_s
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"QEMU ended while the guest booted ({self.ended()})")
            with contextlib.suppress(subprocess.TimeoutExpired):
                probe = subprocess.run(
                    ssh_argv(self.key, self.spec.ssh_port, "true", connect_timeout=10),
                    capture_output=True, timeout=60,
                )  # fmt: skip
                if probe.returncode == 0:
                    return time.monotonic() - start
            time.sleep(2)
        raise TimeoutError(f"no SSH from the guest within {timeout_s:.0f} s")

    def run(self, command: str, limit_s: float, on_line: Callable[[str], None] | None = None) -> StepResult:
        """`command` in the guest under `timeout`, its output streamed line by line."""
        guest_cmd = f"timeout -k 30 {int(limit_s)} bash -lc {shlex.quote(command)}"
        t0 = time.monotonic()
        proc = subprocess.Popen(
            ssh_argv(self.key, self.spec.ssh_port, guest_cmd), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
        )  # fmt: skip
        # the guest's own `timeout` should end it; this one ends SSH if the guest stopped answering
        timer = threading.Timer(limit_s + 90, proc.kill)
        timer.daemon = True
        timer.start()
        lines: list[str] = []
        try:
            for line in _lines(proc):
                lines.append(line)
                if on_line is not None:
                    on_line(line)
            rc = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        timed_out = rc in (124, 137) or rc < 0
        return StepResult(rc, time.monotonic() - t0, "\n".join(lines), timed_out)

    def stop(self, grace_s: float = 120.0) -> None:
        """Power the guest off (its disk is consistent), else kill QEMU; ends the watchdog."""
        if self.alive():
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                subprocess.run(
                    ssh_argv(self.key, self.spec.ssh_port, "sudo systemctl poweroff"),
                    capture_output=True,
                    timeout=30,
                )
            if self.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=grace_s)
        self.kill()
        if self._watchdog is not None:
            self._watchdog.cancel()


def console_tail(path: Path, lines: int = 8) -> str:
    """The last ``lines`` non-empty lines of a serial console log, without colour codes."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "  (no console log)"
    kept = [ANSI.sub("", line).strip() for line in text.replace("\r", "\n").splitlines()]
    return "\n".join(f"  {line}" for line in [x for x in kept if x][-lines:]) or "  (nothing)"


def _lines(proc: subprocess.Popen[str]) -> Iterator[str]:
    assert proc.stdout is not None
    for line in proc.stdout:
        yield line.rstrip("\n")
