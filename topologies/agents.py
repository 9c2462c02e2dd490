"""MRC host agents in the testbed: one ``mrc serve`` per Mininet host, started and stopped by PID.

The agent itself lives in ``mrc_host.agent`` (``mrc serve --config <run_dir>/hosts/<host>.json
--control <sock>``); this module only runs it inside a host's namespace, waits until its
control socket answers, hands out a client and stops it again. An agent that does not start or
answer raises the client's ``AgentError``, its message ending with the agent's log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mrc_fabric.time_scale import TimeLimitExceeded, scaled
from mrc_host.agent.client import AgentError
from topologies.procs import in_parallel, terminate

START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
# ``python -c`` keeps the command independent of how the console script is installed;
# argv[1:] after "-c CODE" is what main() parses.
LAUNCH = "import sys; from mrc_host.agent.cli import main; sys.exit(main())"


def agent_available() -> tuple[bool, str]:
    """Is the live host agent installed? (False, why) when not."""
    for module in ("mrc_host.agent.cli", "mrc_host.agent.client"):
        try:
            if importlib.util.find_spec(module) is None:
                return False, f"{module} not found"
        except ImportError as exc:
            return False, f"{module}: {exc}"
    return True, "mrc_host.agent found"


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
    except OSError:
        return "(no agent log)"


class AgentProcess:
    """``mrc serve`` in one host."""

    def __init__(self, node: Any, config: Path, control: Path, log: Path, extra_args: list[str]) -> None:
        self.node = node
        self.name = node.name
        self.config = config
        self.control = control
        self.log = log
        self.extra_args = extra_args
        self.proc: subprocess.Popen[bytes] | None = None
        self._client: Any = None

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-c",
            LAUNCH,
            "serve",
            "--config",
            str(self.config),
            "--control",
            str(self.control),
            "--log",
            str(self.log),
            *self.extra_args,
        ]

    def start(self) -> int:
        """Start the process (returns its pid); :meth:`wait_ready` waits for the control socket."""
        self.control.unlink(missing_ok=True)
        with open(self.log.with_suffix(".out"), "ab") as out:
            self.proc = self.node.popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        return self.proc.pid

    def restart(self) -> None:
        """Start it again after it died (the supervisor's restart): the same command, so it reads
        the host configuration the controller wrote and serves on the same control socket."""
        self.start()
        self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until its control socket answers: at most ``timeout`` s (default START_TIMEOUT on the
        reference machine, scaled to this one; TimeLimitExceeded past it)."""
        from mrc_host.agent.client import AgentClient

        timeout = scaled(START_TIMEOUT) if timeout is None else timeout
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                raise AgentError(f"agent of {self.name} exited\n{self._tails()}")
            if self.control.exists():
                try:
                    client = AgentClient(str(self.control))
                    client.ping() if hasattr(client, "ping") else client.stats()
                    self._client = client
                    return
                except Exception as exc:  # not answering yet: retry until the deadline
                    last = exc
            time.sleep(0.05)  # poll interval; the deadline bounds the wait
        raise TimeLimitExceeded(
            f"the agent of {self.name} answering ({last or 'no control socket'})", timeout
        )

    def _tails(self) -> str:
        return _log_tail(self.log) + _log_tail(self.log.with_suffix(".out"))

    @property
    def client(self) -> Any:
        """A :class:`mrc_host.agent.client.AgentClient` for this agent."""
        if self._client is None:
            from mrc_host.agent.client import AgentClient

            self._client = AgentClient(str(self.control))
        return self._client

    def stop(self) -> None:
        """SIGTERM by PID (the agent removes its rules and socket), SIGKILL after STOP_TIMEOUT."""
        proc, self.proc = self.proc, None
        if self._client is not None and hasattr(self._client, "close"):
            with contextlib.suppress(Exception):
                self._client.close()
        self._client = None
        if proc is None:
            return
        terminate(proc, STOP_TIMEOUT)
        self.control.unlink(missing_ok=True)


class AgentFleet:
    """Every host's agent of one run: started together, looked up by host, stopped together."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentProcess] = {}
        self.note = ""  # "4 agents (h0, ...)" or why there are none (the testbed's summary)

    def start(self, net: Any, hosts: list[str], run: Any, args: list[str]) -> list[tuple[int, str]]:
        """One ``mrc serve`` per host of ``net``, with ``args``; (pid, host) of each started,
        once every one answers (none, and :attr:`note` says why, without the agent installed)."""
        ok, why = agent_available()
        if not ok:
            self.note = f"no host agents: {why}"
            return []
        started = []
        for host in hosts:
            agent = AgentProcess(
                net.get(host), run.host_config(host), run.agent_socket(host), run.agent_log(host), args
            )
            self.agents[host] = agent
            started.append((agent.start(), host))
        for agent in self.agents.values():
            agent.wait_ready()
        self.note = f"{len(self.agents)} agents ({', '.join(self.agents)})"
        return started

    def get(self, host: str) -> AgentProcess:
        if host not in self.agents:
            raise KeyError(f"no agent in {host!r} ({self.note or 'agents not started'})")
        return self.agents[host]

    def stop(self) -> None:
        in_parallel([agent.stop for agent in self.agents.values()])
        self.agents.clear()
