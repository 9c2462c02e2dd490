"""The run's ``mrc-controller``: its process, the warm standby beside it, and the client to it.

:class:`ControllerProcesses` owns that state: it starts the controller on a unix socket in the
run directory and waits until it answers, installs the routes, starts it again for the
supervisor (the standby takes over at once), and ends both at teardown. The testbed only asks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable

from controller.northbound import ControllerClient
from mrc_fabric.time_scale import TimeLimitExceeded, scaled
from topologies.procs import terminate
from topologies.rundir import RunDir

CONTROLLER_START_TIMEOUT = 30.0
CONTROLLER_STATE = "controller-state.json"  # routes and faults a restarted controller takes up
INSTALL_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0


def log_tail(path: os.PathLike[str] | str, lines: int = 20) -> str:
    """The last ``lines`` of a log, for an error message."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.read().splitlines(True)[-lines:])
    except OSError:
        return "(no log)"


class ControllerProcesses:
    """``mrc-controller`` and its standby for one run; ``client`` talks to whichever serves."""

    def __init__(self, run: RunDir) -> None:
        self.run = run
        self.proc: subprocess.Popen[bytes] | None = None
        self.standby: subprocess.Popen[bytes] | None = None
        self.client: ControllerClient | None = None

    def _popen(self, *extra: str) -> subprocess.Popen[bytes]:
        run = self.run
        cmd = [sys.executable, "-m", "controller.server", "--topology", str(run.path / "topology.json"),
               "--listen", f"unix:{run.controller_socket}", "--parent", str(os.getpid()),
               "--state-file", str(run.path / CONTROLLER_STATE), *extra]  # fmt: skip
        with open(run.controller_log, "ab") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        run.record(proc.pid, "controller", "mrc-controller" + (" standby" if extra else ""))
        return proc

    def launch(self) -> None:
        """Start ``mrc-controller`` and wait until it answers. It keeps its routes and faults in
        the run directory, so one started again after a crash takes up where it left off. A
        *standby* beside it, imports done, takes over the moment it dies (``--standby-for``):
        a restart then costs no interpreter start, which on a busy machine took a second."""
        sock = self.run.controller_socket
        standby, self.standby = self.standby, None
        if standby is not None and standby.poll() is None:
            self.proc = standby  # it is taking over already
        else:
            terminate(standby, STOP_TIMEOUT)
            sock.unlink(missing_ok=True)  # a killed controller leaves its socket behind
            self.proc = self._popen()
        if self.client is None:
            self.client = ControllerClient(f"unix:{sock}")
        limit = scaled(CONTROLLER_START_TIMEOUT)
        deadline = time.monotonic() + limit
        while not sock.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"mrc-controller did not start:\n{log_tail(self.run.controller_log)}")
            if time.monotonic() > deadline:
                raise TimeLimitExceeded("mrc-controller's start", limit)
            time.sleep(0.05)  # poll interval; the deadline bounds the wait
        self.client.wait_ready(limit)
        # (started once this one answers: its interpreter start must not slow the takeover)
        self.standby = self._popen("--standby-for", str(self.proc.pid))

    def start(self, progress: Callable[[str], None]) -> None:
        """Launch it and have it install every route (and write the host configs)."""
        self.launch()
        assert self.client is not None
        resp = self.client.install_routes(scaled(INSTALL_TIMEOUT))
        progress(
            f"mrc-controller on unix:{self.run.controller_socket}: {resp.total_entries} entries on "
            f"{len(resp.switches)} switches, host configs in {resp.host_config_dir}"
        )

    def stop(self) -> None:
        """Close the client, end the standby (it would take over) and then the controller."""
        if self.client is not None:
            self.client.close()
            self.client = None
        terminate(self.standby, STOP_TIMEOUT)
        self.standby = None
        terminate(self.proc, STOP_TIMEOUT)
        self.proc = None
        self.run.controller_socket.unlink(missing_ok=True)
