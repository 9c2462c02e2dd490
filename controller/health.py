"""Health of the host agents, as the controller sees it from their control sockets.

The testbed writes each agent's control socket at ``<run dir>/agents/<host>.sock``. An
agent is *alive* while something accepts a connection there, *dead* once it was alive
and no longer does (killed: the socket file stays but nobody listens, or the file is
gone), *absent* while it has never been seen (not started, or a run without agents).
:class:`AgentWatch` holds that state per host and says which hosts changed on each
check, so the core can publish ``agent_dead`` / ``agent_alive`` events; the probing
itself (:func:`probe_socket`) is the only I/O.

Switch health needs no probing: it is the state of each P4Runtime session.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

PROBE_TIMEOUT_S = 0.5
ALIVE, DEAD, ABSENT = "alive", "dead", "absent"


def probe_socket(path: Path, timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """(accepts a connection, why not); a connect and close, no request."""
    if not path.exists():
        return False, "no control socket"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
        except OSError as exc:
            return False, exc.strerror or type(exc).__name__
    return True, ""


@dataclass
class AgentState:
    host: str
    socket: Path
    state: str = ABSENT
    detail: str = "never seen"


class AgentWatch:
    """Per-host agent state; :meth:`check` probes every host and returns the transitions."""

    def __init__(
        self,
        hosts: Iterable[str],
        agents_dir: Path,
        probe: Callable[[Path], tuple[bool, str]] = probe_socket,
    ) -> None:
        self.agents = {h: AgentState(h, agents_dir / f"{h}.sock") for h in hosts}
        self._probe = probe

    def check(self) -> list[AgentState]:
        """Probe each agent; the ones that became alive or dead since the last check."""
        changed = []
        for a in self.agents.values():
            up, why = self._probe(a.socket)
            new = ALIVE if up else (DEAD if a.state != ABSENT else ABSENT)
            a.detail = "" if up else why
            if new != a.state:
                a.state = new
                changed.append(a)
        return changed
