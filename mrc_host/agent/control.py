"""The control-socket server: JSON lines over a local unix stream socket (protocol.py).

``ControlServer`` accepts clients, splits their input into lines, hands each parsed
request to the agent's handler and writes replies without ever blocking the event loop
(a slow client's replies wait in its buffer). It knows nothing of transfers: a handler
that answers later (``send``) keeps the ``ControlClient`` and calls ``reply`` itself.

The socket file gets its mode explicitly, not from the umask: 0600 (the agent's user only),
or 0660 with the group ``--control-group`` names. It is bound under a umask of 0177, so it
never exists with wider permissions, even for the moment before the chmod.
"""

from __future__ import annotations

import contextlib
import grp
import logging
import os
import selectors
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from . import protocol

log = logging.getLogger("mrc.agent")

LISTEN_BACKLOG: Final = 256  # clients connecting at once (each `mrc send` is one, for its whole transfer)
MODE_OWNER: Final = 0o600
MODE_GROUP: Final = 0o660


@dataclass
class ControlClient:
    sock: socket.socket
    inbuf: bytearray = field(default_factory=bytearray)
    outbuf: bytearray = field(default_factory=bytearray)
    closed: bool = False


# handler(request, client) -> reply now, or None when the reply comes later
Handler = Callable[[protocol.Request, ControlClient], "dict[str, Any] | None"]


class ControlServer:
    def __init__(
        self, path: Path, handler: Handler, on_error: Callable[[], None], group: str | None = None
    ) -> None:
        self.path = path
        self.gid = -1 if group is None else _group_id(group)
        self.handler = handler
        self.on_error = on_error  # an internal error while handling a request (counted)
        self.listener: socket.socket | None = None
        self.clients: dict[int, ControlClient] = {}
        self.on_drop: Callable[[ControlClient], None] = lambda c: None
        self._sel: selectors.BaseSelector | None = None

    def open(self, sel: selectors.BaseSelector) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener = ls
        old = os.umask(0o177)
        try:
            ls.bind(str(self.path))
        finally:
            os.umask(old)
        if self.gid >= 0:
            os.chown(self.path, -1, self.gid)
        os.chmod(self.path, MODE_GROUP if self.gid >= 0 else MODE_OWNER)
        ls.listen(LISTEN_BACKLOG)
        ls.setblocking(False)
        self._sel = sel
        sel.register(ls, selectors.EVENT_READ, ("listen", None))

    def close(self) -> None:
        for c in list(self.clients.values()):
            self.drop(c)
        if self.listener is not None:
            self.listener.close()
            self.listener = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def accept(self) -> None:
        assert self.listener is not None and self._sel is not None
        try:
            s, _ = self.listener.accept()
        except OSError:
            return
        s.setblocking(False)
        c = ControlClient(s)
        self.clients[s.fileno()] = c
        self._sel.register(s, selectors.EVENT_READ, ("client", c))

    def drop(self, c: ControlClient) -> None:
        if c.closed:
            return
        c.closed = True
        if self._sel is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.unregister(c.sock)
        self.clients.pop(c.sock.fileno(), None)
        c.sock.close()
        self.on_drop(c)

    def io(self, c: ControlClient, mask: int) -> None:
        if mask & selectors.EVENT_WRITE:
            self._flush(c)
        if not mask & selectors.EVENT_READ or c.closed:
            return
        try:
            data = c.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.drop(c)
            return
        c.inbuf += data
        while not c.closed:
            nl = c.inbuf.find(b"\n")
            if nl < 0:
                if len(c.inbuf) > protocol.MAX_LINE:
                    c.inbuf.clear()
                    self.reply(c, protocol.error_reply(protocol.ProtocolError("request", "line too long")))
                return
            line = bytes(c.inbuf[:nl])
            del c.inbuf[: nl + 1]
            if line.strip():
                self._handle(c, line)

    def _handle(self, c: ControlClient, line: bytes) -> None:
        reply: dict[str, Any] | None
        try:
            req = protocol.parse_request(line)
            reply = self.handler(req, c)
        except (protocol.ProtocolError, KeyError, ValueError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            reply = {"ok": False, "error": str(msg)}
        except Exception as exc:
            self.on_error()
            log.exception("internal error handling %r", line[:200])
            reply = {"ok": False, "error": f"internal error: {exc}"}
        if reply is not None:
            self.reply(c, reply)

    def reply(self, c: ControlClient, obj: dict[str, Any]) -> None:
        if c.closed:
            return
        c.outbuf += protocol.encode_line(obj)
        self._flush(c)

    def _flush(self, c: ControlClient) -> None:
        if c.closed:
            return
        try:
            while c.outbuf:
                n = c.sock.send(c.outbuf)
                del c.outbuf[:n]
        except BlockingIOError:
            pass
        except OSError:
            self.drop(c)
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if c.outbuf else 0)
        if self._sel is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._sel.modify(c.sock, events, ("client", c))


def _group_id(name: str) -> int:
    """The id of group ``name`` (or a number); ValueError naming the option if there is none."""
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        if name.isdigit():
            return int(name)
        raise ValueError(f"--control-group: no group {name!r}") from None
