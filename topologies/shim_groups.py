"""The testbed's end of shim groups: several Linux switches served by one process.

A :class:`SwitchGroup` is N switch nodes whose shims live in one process
(``linux_target.shim_group``), forked from the fabric's launcher. The first member to
start launches the process with every member that is to run; a member started while the
process serves the others is added to it (a request on its control socket), and one
stopped is taken out of it the same way, its routes and tables removed as a shim's are on
SIGTERM. Each member's ``shim`` is a :class:`MemberShim`, which answers like the ``Popen``
the switch kept before, so supervision, restart and teardown treat it as a process:

- ``poll``/``wait``: the member's own exit status (its ``<switch>.shim.exit``, written by
  the group when it stops or fails to start), else the group process's;
- SIGTERM stops the member alone; SIGUSR1 (the fabric going down) and SIGKILL go to the
  process, with every switch in it;
- the process dying ends every member: the supervisor restarts each, the first restart
  starts the process again with all of them, the others find themselves served already.
  The kernels keep the routes meanwhile and the controller re-syncs every switch
  (``linux_target.stale_routes``).

:func:`groups_of` cuts a fabric's switches into groups (``--switches-per-shim``,
``MRC_SWITCHES_PER_SHIM``; 1 gives every switch a process of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mrc_fabric.time_scale import scaled
from topologies.shim_launcher import LaunchedShim, ShimLauncher

DEFAULT_SWITCHES_PER_SHIM = 16  # a plane of 8 T0 + 8 T1 per process on the 8 x 8 x 8 fabric
CONTROL_TIMEOUT_S = 60.0  # a request's answer (a start answers once the switch serves)
CONNECT_TIMEOUT_S = 10.0


def switches_per_shim(value: int | None = None) -> int:
    """``value``, else ``$MRC_SWITCHES_PER_SHIM``, else the default (at least 1)."""
    if value is None:
        value = int(os.environ.get("MRC_SWITCHES_PER_SHIM", DEFAULT_SWITCHES_PER_SHIM))
    if value < 1:
        raise ValueError(f"switches per shim: {value} (at least 1)")
    return value


def groups_of(names: Sequence[str], size: int) -> list[list[str]]:
    """``names`` in order, cut into groups of ``size`` (the last may be smaller); none of one
    switch (that switch's shim is a process of its own)."""
    if size <= 1:
        return []
    return [list(names[i : i + size]) for i in range(0, len(names), size) if len(names[i : i + size]) > 1]


class GroupError(RuntimeError):
    """The group process refused a request or did not answer."""


class MemberShim:
    """One switch of a shim group, seen from the testbed like a ``Popen``."""

    def __init__(self, group: SwitchGroup, name: str, process: LaunchedShim, exit_path: Path) -> None:
        self.group = group
        self.name = name
        self.process = process
        self.pid = process.pid
        self.exit_path = exit_path
        self.returncode: int | None = None
        self.args = ["linux_target.shim_group", name, str(process.pid)]

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.returncode = int(self.exit_path.read_text().strip())
            except (OSError, ValueError):
                self.returncode = self.process.poll()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            # the process's exit wakes this at once; a member's own stop is answered to
            # whoever stopped it, so this only polls its file while someone else does that
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=0.05 if left is None else min(0.05, left))
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.poll() is not None:
            return
        if sig in (signal.SIGTERM, signal.SIGINT):
            self.group.stop_member(self.name)  # this switch alone, as SIGTERM stops a shim
        else:
            self.process.send_signal(sig)  # SIGUSR1, SIGKILL: the process, every switch in it

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class SwitchGroup:
    """Switch nodes whose shims one process serves (see the module docstring)."""

    def __init__(self, launcher: ShimLauncher, run_dir: Path, index: int) -> None:
        self.launcher = launcher
        self.name = f"shim-group-{index}"
        self.control = run_dir / f"{self.name}.ctl.sock"
        self.log = run_dir / f"{self.name}.log"
        self.exit = run_dir / f"{self.name}.exit"
        self.members: dict[str, Any] = {}  # name -> LinuxSrv6Switch
        self.stopped: set[str] = set()  # members stopped on purpose (not to be started with the rest)
        self.process: LaunchedShim | None = None
        self.serving: set[str] = set()  # members the current process was asked to serve
        self._lock = threading.Lock()

    def add(self, switch: Any) -> None:
        self.members[switch.name] = switch

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start_member(self, switch: Any) -> MemberShim:
        """The member served by the group process (started, or the process launched, as
        needed); its handle. The caller waits until it answers."""
        with self._lock:
            self.stopped.discard(switch.name)
            if switch.name in self.serving and switch.shim_exit.exists():
                self.serving.discard(switch.name)  # it failed or was stopped: not served now
            if not self.alive():
                members = [m for n, m in self.members.items() if n not in self.stopped]
                for m in members:
                    m.shim_exit.unlink(missing_ok=True)
                requests = [m.member_request() for m in members]
                self.process = self.launcher.launch_group(requests, self.control, self.log, self.exit)
                self.serving = {m.name for m in members}
            elif switch.name not in self.serving:
                switch.shim_exit.unlink(missing_ok=True)
                self.serving.add(switch.name)
                error = self._request({"start": switch.member_request()})
                if error:
                    raise GroupError(f"{self.name} cannot serve {switch.name}: {error}")
            assert self.process is not None
            return MemberShim(self, switch.name, self.process, switch.shim_exit)

    def stop_member(self, name: str, namespace_going: bool = False) -> None:
        """Stop one member (it removes what it installed); the others go on. With
        ``namespace_going`` (the fabric going down) the whole process ends at once."""
        with self._lock:
            self.stopped.add(name)
            if name not in self.serving or not self.alive():
                return
            if namespace_going:
                assert self.process is not None
                self.process.send_signal(signal.SIGUSR1)
                return
            self.serving.discard(name)
            with contextlib.suppress(GroupError):  # gone meanwhile: nothing left to stop
                self._request({"stop": name})

    def _request(self, req: dict[str, Any]) -> str | None:
        """One request on the control socket; None, or the group's refusal."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(scaled(CONTROL_TIMEOUT_S))
                    sock.connect(str(self.control))
                    sock.sendall((json.dumps(req) + "\n").encode())
                    answer = json.loads(sock.makefile("rb").readline() or b"{}")
                break
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                # a process launched a moment ago may not listen yet
                if not self.alive() or time.monotonic() > deadline:
                    raise GroupError(f"{self.name} does not listen on {self.control}: {exc}") from exc
                time.sleep(0.05)
            except (OSError, ValueError) as exc:
                raise GroupError(f"{self.name} did not answer: {exc}") from exc
        if answer.get("ok"):
            return None
        return str(answer.get("error", "no answer"))

    def forget_if_gone(self) -> None:
        """Once the process is gone, its control socket goes too (a killed group leaves it)."""
        if self.process is not None and not self.alive():
            self.control.unlink(missing_ok=True)
