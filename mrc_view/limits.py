"""How many connections the view keeps, per client and in all, and for how long an idle one.

Why: each connection holds a file descriptor, and the process has about a thousand. Without a
cap, any local user could open a thousand connections that never finish a request and the view
stops answering everyone (about 1,020 such connections did it). The view listens on 127.0.0.1 only,
where every client has the same address, so a *client* is the local user that owns the
connecting socket (its UID, from ``/proc/net/tcp``; a connection whose owner cannot be found
counts as one unknown client). Each client may hold :data:`MAX_PER_CLIENT` connections; all
clients but the view's own user together :data:`MAX_TOTAL`, so a crowd of other users still
leaves the owner its share. Idle connections -- no complete request within ``IDLE_S``, or
nothing more after one -- are closed by aiohttp's keep-alive timer, which ``server.py`` sets to
:data:`IDLE_S`.

At a cap, a client's new connection takes the place of its own oldest *idle* one (no request in
progress: ``server.py``'s middleware says when one is); only when every one of them is busy is
the new one closed at once. The view's owner is never turned away: with all of its connections
busy, its oldest gives way. Why: a browser keeps idle keep-alive connections, and 32 of the
owner's own could otherwise lock it out of its view until they timed out.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_PER_CLIENT = 32
MAX_TOTAL = 256
IDLE_S = 15.0
UNKNOWN = -1


def peer_uid(local_port: int, peer_port: int, table: Path = Path("/proc/net/tcp")) -> int:
    """The UID owning the loopback socket at ``peer_port`` connected to our ``local_port``
    (UNKNOWN if it is not in ``table``)."""
    want_local = f"0100007F:{peer_port:04X}"
    want_remote = f"0100007F:{local_port:04X}"
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return UNKNOWN
    for line in lines:
        f = line.split()
        if len(f) > 7 and f[1] == want_local and f[2] == want_remote:
            return int(f[7])
    return UNKNOWN


class ConnectionLimits:
    """Counts open connections per client; ``wrap`` puts the caps in front of a protocol factory."""

    def __init__(
        self,
        per_client: int = MAX_PER_CLIENT,
        total: int = MAX_TOTAL,
        owner: int | None = None,
        identify: Callable[[Any], int] | None = None,
    ) -> None:
        self.per_client = per_client
        self.total = total
        self.owner = os.geteuid() if owner is None else owner
        self.identify = identify or _identify
        self.open: Counter[int] = Counter()
        self.refused: Counter[int] = Counter()
        self.evicted: Counter[int] = Counter()  # idle connections that gave way to a new one
        self._conns: dict[int, list[Slot]] = {}  # per client, oldest first
        self._by_transport: dict[Any, Slot] = {}

    def admit(self, conn: Slot) -> bool:
        """Count ``conn`` in, making room at a cap by closing one of its client's (see above)."""
        c = conn.client
        others = sum(n for k, n in self.open.items() if k != self.owner)
        if self.open[c] >= self.per_client or (c != self.owner and others >= self.total):
            victim = self._victim(c)
            if victim is None:
                self.refused[c] += 1
                return False
            self.evicted[c] += 1
            self.release(victim)
            victim.evict()
        self.open[c] += 1
        self._conns.setdefault(c, []).append(conn)
        if conn.transport is not None:
            self._by_transport[conn.transport] = conn
        return True

    def _victim(self, client: int) -> Slot | None:
        mine = self._conns.get(client, [])
        idle = [s for s in mine if not s.busy]
        if idle:
            return idle[0]
        return mine[0] if client == self.owner and mine else None

    def release(self, conn: Slot) -> None:
        """``conn`` is gone (closed by either side, or evicted); twice is once."""
        mine = self._conns.get(conn.client, [])
        if conn not in mine:
            return
        mine.remove(conn)
        self._by_transport.pop(conn.transport, None)
        self.open[conn.client] -= 1
        if self.open[conn.client] <= 0:
            del self.open[conn.client]
            self._conns.pop(conn.client, None)

    def request(self, transport: Any, started: bool) -> None:
        """A request on ``transport`` started or ended (the server's middleware says)."""
        conn = self._by_transport.get(transport)
        if conn is not None:
            conn.busy += 1 if started else -1

    def wrap(self, factory: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        return lambda: _Capped(factory(), self)


class Slot:
    """One connection as the caps see it."""

    def __init__(self, client: int, transport: Any = None) -> None:
        self.client = client
        self.transport = transport
        self.busy = 0  # requests in progress

    def evict(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def _identify(transport: Any) -> int:
    sock = transport.get_extra_info("sockname")
    peer = transport.get_extra_info("peername")
    if not sock or not peer:
        return UNKNOWN
    return peer_uid(int(sock[1]), int(peer[1]))


class _Capped(asyncio.Protocol):
    """Hands everything to aiohttp's protocol once the connection is admitted."""

    def __init__(self, inner: asyncio.Protocol, limits: ConnectionLimits) -> None:
        self.inner: asyncio.Protocol | None = inner
        self.limits = limits
        self.slot: Slot | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        slot = Slot(self.limits.identify(transport), transport)
        if not self.limits.admit(slot):
            self.inner = None
            transport.abort()  # type: ignore[attr-defined]
            return
        self.slot = slot
        assert self.inner is not None
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.slot is not None:
            self.limits.release(self.slot)
            self.slot = None
        if self.inner is not None:
            self.inner.connection_lost(exc)
            self.inner = None

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.inner is not None else None

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.resume_writing()
