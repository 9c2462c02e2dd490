"""Python API to a running agent (what the ``mrc`` CLI and the testbed call).

    client = AgentClient("/path/to/agent.sock")
    summary = client.send("h3", 64 << 20, mode="mrc", on_progress=print)
    client.stats(); client.evs(); client.deny("10040001"); client.allow("10040001")
    client.cancel("00c0ffee00c0ffee")

Each call opens its own connection, writes one JSON request line and reads reply lines
until the final one (protocol.py). A refusal raises ``AgentError`` with the agent's message.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mrc_fabric.time_scale import scaled

from .protocol import is_final, parse_size

DEFAULT_TIMEOUT_S = 30.0
ENV_SOCKET = "MRC_AGENT"


class AgentError(RuntimeError):
    """The agent refused a request, could not be reached, or (started by the testbed) did not
    start or answer."""

    def __init__(self, message: str, reply: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.reply = reply or {}


def default_socket() -> str | None:
    return os.environ.get(ENV_SOCKET)


class AgentClient:
    def __init__(
        self, sock_path: str | os.PathLike[str] | None = None, timeout_s: float | None = None
    ) -> None:
        """``timeout_s``: each reply line's limit (None: DEFAULT_TIMEOUT_S times the machine's
        time scale, ``mrc_fabric.time_scale``)."""
        path = sock_path if sock_path is not None else default_socket()
        if not path:
            raise AgentError(f"no agent socket: pass one or set ${ENV_SOCKET}")
        self.path = Path(path)
        self.timeout_s = scaled(DEFAULT_TIMEOUT_S) if timeout_s is None else timeout_s

    def request(
        self,
        obj: dict[str, Any],
        on_event: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float | None = None,
        raise_on_error: bool = True,
    ) -> dict[str, Any]:
        """Send one request; call ``on_event`` for every non-final line; return the final reply.

        ``timeout_s`` bounds the wait for each line (None: the client's default; 0: no limit).
        """
        limit = self.timeout_s if timeout_s is None else timeout_s
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(limit or None)
            s.connect(str(self.path))
        except OSError as exc:
            raise AgentError(f"cannot reach the agent at {self.path}: {exc}") from exc
        with s, s.makefile("rb") as f:
            s.sendall(json.dumps(obj).encode() + b"\n")
            while True:
                try:
                    line = f.readline()
                except TimeoutError as exc:
                    raise AgentError(f"the agent at {self.path} did not answer within {limit:.0f} s") from exc
                if not line:
                    raise AgentError(f"the agent at {self.path} closed the connection")
                reply: dict[str, Any] = json.loads(line)
                if is_final(reply):
                    if raise_on_error and not reply["ok"] and "summary" not in reply:
                        raise AgentError(str(reply.get("error", "refused")), reply)
                    return reply
                if on_event is not None:
                    on_event(reply)

    def ping(self) -> dict[str, Any]:
        return self.request({"cmd": "ping"})

    def send(
        self,
        peer: str,
        size: int | str,
        mode: str = "mrc",
        on_progress: Callable[[dict[str, Any]], None] | None = None,
        timeout_s: float = 0,
        deadline_s: float = 0,
        on_started: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Send ``size`` bytes to ``peer``; returns the summary (``ok``, ``verified``, goodput, ...).

        Waits until the receiver confirmed the bytes (or the agent gave up); ``timeout_s`` bounds
        the wait for each reply line (0: no limit; progress lines come every 0.2 s when asked for).
        ``on_started`` gets the transfer id as soon as the agent took the request (for ``cancel``).
        Closing the connection before the end cancels the transfer.
        """
        req = {"cmd": "send", "peer": peer, "size": parse_size(size), "mode": mode,
               "progress": on_progress is not None}  # fmt: skip
        if deadline_s:
            req["deadline_s"] = deadline_s

        def on_event(ev: dict[str, Any]) -> None:
            if ev.get("event") == "started":
                if on_started is not None:
                    on_started(str(ev.get("transfer_id", "")))
            elif on_progress is not None:
                on_progress(ev)

        reply = self.request(req, on_event, timeout_s=timeout_s)
        summary: dict[str, Any] = reply["summary"]
        return summary

    def cancel(self, transfer_id: int | str) -> dict[str, Any]:
        """End a transfer now (its own ``send`` returns with the error "cancelled ...")."""
        return self.request({"cmd": "cancel", "transfer_id": transfer_id})

    def stats(self) -> dict[str, Any]:
        return self.request({"cmd": "stats"})

    def evs(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.request({"cmd": "evs"})["evs"]
        return rows

    def deny(self, ev: int | str | None = None, rule: dict[str, int] | None = None) -> dict[str, Any]:
        """DENY one EV, or every EV a rule matches (the keys of a profile's [[deny]])."""
        return self.request({"cmd": "deny", **({"ev": ev} if rule is None else {"rule": rule})})

    def allow(self, ev: int | str | None = None, rule: dict[str, int] | None = None) -> dict[str, Any]:
        return self.request({"cmd": "allow", **({"ev": ev} if rule is None else {"rule": rule})})
