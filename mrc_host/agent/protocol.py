"""The agent's control protocol: JSON lines over a local unix stream socket.

A client writes one request object per line and reads reply lines. Every request gets
exactly one *final* reply, an object with ``"ok"``; a ``send`` may first get any number of
``{"event": "progress", ...}`` lines (which carry no ``"ok"``). Requests::

    {"cmd": "ping"}
    {"cmd": "send", "peer": "h3", "size": 67108864, "mode": "mrc", "progress": true,
     "deadline_s": 60}                     # optional: end with an error if not done by then
    {"cmd": "cancel", "transfer_id": "00c0ffee00c0ffee"}  # end a transfer now (16 hex digits)
    {"cmd": "stats"}                       # agent counters, connections, per-EV table, transfers
    {"cmd": "evs"}                         # per-EV states only
    {"cmd": "deny", "ev": "10040001"}      # EV as 8 hex digits (or "0x...", or a JSON integer)
    {"cmd": "allow", "ev": 268697601}
    {"cmd": "deny", "rule": {"field": 1, "min": 12, "max": 15}}   # or a rule, as a profile's [[deny]]

Errors are ``{"ok": false, "error": "<field>: <why>"}``; a malformed line never closes the
agent, only (after the error reply) that line is forgotten. docs/agent.md has the replies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from mrc_host.core import Mode

MAX_LINE = 64 * 1024
MAX_SIZE = 1 << 40
COMMANDS = ("ping", "send", "cancel", "stats", "evs", "deny", "allow")

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SCALE = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}


class ProtocolError(ValueError):
    """A request the agent refuses; the message starts with the offending field."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field


def parse_size(text: str | int) -> int:
    """Bytes from ``123``, ``64M``, ``8MiB``, ``1.5G`` (binary) or ``10MB`` / ``1GB`` (decimal)."""
    if isinstance(text, bool):
        raise ProtocolError("size", f"{text!r} is not a size")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m:
            raise ProtocolError("size", f"{text!r} is not a size (examples: 4096, 64M, 8MiB, 10MB)")
        number, unit, suffix = m.group(1), m.group(2).lower(), m.group(3).lower()
        decimal = suffix == "b" and unit != ""
        base = 1000 if decimal else 1024
        value = int(float(number) * base ** _SCALE[unit])
    if not 0 <= value <= MAX_SIZE:
        raise ProtocolError("size", f"{value} is outside 0..{MAX_SIZE}")
    return value


def parse_ev(value: str | int) -> int:
    """An EV from a JSON integer or text: 8 hex digits as ``mrc evs`` prints them, or 0x..."""
    if isinstance(value, bool):
        raise ProtocolError("ev", f"{value!r} is not an EV")
    if isinstance(value, int):
        ev = value
    else:
        text = str(value).strip().lower()
        try:
            ev = int(text, 16)
        except ValueError:
            raise ProtocolError("ev", f"{value!r} is not a hexadecimal EV (e.g. 10040001)") from None
    if not 0 <= ev <= 0xFFFFFFFF:
        raise ProtocolError("ev", f"{value!r} is not 32 bits")
    return ev


def parse_mode(value: Any) -> Mode:
    try:
        return Mode(value)
    except ValueError:
        choices = ", ".join(m.value for m in Mode)
        raise ProtocolError("mode", f"{value!r} is not one of {choices}") from None


def parse_deadline(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError("deadline_s", f"{value!r} is not a number of seconds")
    if not 0 <= value <= 86_400 * 7:
        raise ProtocolError("deadline_s", f"{value} is outside 0..604800 s")
    return float(value)


def parse_transfer_id(value: Any) -> int:
    """A transfer id: 16 hex digits as ``mrc send`` and ``mrc stats`` print it, or a JSON integer."""
    if isinstance(value, bool):
        raise ProtocolError("transfer_id", f"{value!r} is not a transfer id")
    if isinstance(value, int):
        tid = value
    else:
        try:
            tid = int(str(value).strip(), 16)
        except ValueError:
            raise ProtocolError("transfer_id", f"{value!r} is not a hexadecimal transfer id") from None
    if not 0 < tid < 1 << 64:
        raise ProtocolError("transfer_id", f"{value!r} is not a 64-bit transfer id")
    return tid


@dataclass(frozen=True, slots=True)
class Request:
    cmd: str
    peer: str = ""
    size: int = 0
    mode: Mode = Mode.MRC
    ev: int = 0
    progress: bool = False
    deadline_s: float = 0.0  # 0: the agent's default
    transfer_id: int = 0
    rule: dict[str, int] | None = None  # deny/allow: a deny rule (the keys of a profile's [[deny]])


RULE_KEYS = ("plane", "t1", "field", "min", "max", "mask", "value")


def parse_rule(value: object) -> dict[str, int]:
    """A deny rule's keys and integers (their ranges are checked against the agent's format)."""
    if not isinstance(value, dict) or not value or set(value) - set(RULE_KEYS):
        raise ProtocolError("rule", f"an object with some of {', '.join(RULE_KEYS)}")
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ProtocolError(f"rule.{k}", f"{v!r} is not an integer")
    return dict(value)


def parse_request(line: bytes | str) -> Request:
    """Validate one request line; raises ProtocolError naming the bad field."""
    if len(line) > MAX_LINE:
        raise ProtocolError("request", f"line longer than {MAX_LINE} bytes")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError("request", f"not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ProtocolError("request", "not a JSON object")
    cmd = obj.get("cmd")
    if cmd not in COMMANDS:
        raise ProtocolError("cmd", f"{cmd!r} is not one of {', '.join(COMMANDS)}")
    if cmd == "send":
        peer = obj.get("peer")
        if not isinstance(peer, str) or not peer:
            raise ProtocolError("peer", "a destination host name is required")
        if "size" not in obj:
            raise ProtocolError("size", "required")
        return Request(
            cmd,
            peer=peer,
            size=parse_size(obj["size"]),
            mode=parse_mode(obj.get("mode", "mrc")),
            progress=bool(obj.get("progress", False)),
            deadline_s=parse_deadline(obj.get("deadline_s", 0)),
        )
    if cmd == "cancel":
        if "transfer_id" not in obj:
            raise ProtocolError("transfer_id", "required")
        return Request(cmd, transfer_id=parse_transfer_id(obj["transfer_id"]))
    if cmd in ("deny", "allow"):
        if "rule" in obj and "ev" not in obj:
            return Request(cmd, rule=parse_rule(obj["rule"]))
        if "ev" not in obj or "rule" in obj:
            raise ProtocolError("ev", "required (or, instead, a rule)")
        return Request(cmd, ev=parse_ev(obj["ev"]))
    return Request(cmd)


def encode_line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=str).encode() + b"\n"


def error_reply(exc: Exception) -> dict[str, Any]:
    return {"ok": False, "error": str(exc)}


def is_final(reply: dict[str, Any]) -> bool:
    return "ok" in reply
