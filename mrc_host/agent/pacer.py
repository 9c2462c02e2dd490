"""The agent's NIC departure clock: each port sends at most the host link's rate, and each
DATA frame's core hears when it left (``TransportConfig.nic_departures``).

Why: on the emulated fabric a host link with a set rate is a qdisc (HTB at that rate) with
no ECN. Frames handed to the port as fast as the core makes them wait there, a queue no
real NIC holds: the sender's own RTT grows by it (tens of ms against a base of one), NSCC
sees delay without marks and grows to its maximum window, and each loss is found a queue
later. A NIC transmits at line rate and builds a packet when its queue pair's turn comes.

So with a rate the agent is the NIC. A DATA frame waits here, in its plane's FIFO, until
that port's clock says the previous frames have gone at the rate; it is then written to
the port and its core is told it departed (``Endpoint.departed``), which is also when the
core may hand over another (``nic_backlog``: the cores never put more than that many frames
of theirs here). Control frames (SACKs, probes, the handshake) go at once, ahead of waiting
DATA (a NIC's control queue), their bytes counted against the port. A loop that woke late
sends what came due meanwhile at once, but the port's clock runs at most ``slack_ns`` behind
the present and an idle port earns no credit, so the qdisc holds a frame or two at most: the
queue is here, where ``describe`` shows it.

Without a rate (links "as fast as the CPU goes") there is no pacer: the hand-over is the
departure, as before.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Final

from mrc_host.wire.codec import FrameEncoder
from mrc_host.wire.messages import DataPacket

from .ports import Ports

log = logging.getLogger("mrc.agent")

# how far the port's clock may trail the present: what a loop that woke late may send at
# once. Enough for epoll's millisecond and a loop turn, and at least one full frame; no more,
# so the qdisc holds a frame or two (Mininet's HTB lets about one frame through unqueued:
# its ceiling's burst is a frame, whatever its rate's burst)
SLACK_NS: Final = 2_000_000
SLACK_MIN_BYTES: Final = 4_300  # a 4 KiB payload's frame

# what the pacer hands a frame's owner: (connection, the DATA frame, when it left) -> whether
# its core has room for more now (``Endpoint.departed``); then ``on_ready(connection)``
Departed = Callable[[Any, DataPacket, int], bool]
Route = tuple[FrameEncoder, bytes, int]  # (encoder, carrier, payload_sum): ``Ports.send_msg``'s


@dataclass
class PacerCounters:
    """One port's pacing, for ``mrc stats`` and the fidelity monitor."""

    paced: int = 0  # DATA frames that went through the FIFO
    waited: int = 0  # ... of them, frames that found the port busy
    wait_ns: int = 0  # their waits together
    queued: int = 0  # DATA frames waiting now
    max_queued: int = 0
    errors: int = 0  # frames the codec refused (logged; the agent's internal errors)


class NicPacer:
    """Per-plane FIFOs of DATA frames, sent at ``mbit_s`` (frame bytes as written, Ethernet
    header included: what the host link's HTB counts)."""

    def __init__(
        self, ports: Ports, mbit_s: float, departed: Departed, on_ready: Callable[[Any, int], None]
    ) -> None:
        if not mbit_s > 0:
            raise ValueError(f"pacer rate {mbit_s} Mbit/s: must be above 0")
        self.ports = ports
        self.mbit_s = mbit_s
        self.ns_per_byte = 8_000.0 / mbit_s
        self.slack_ns = max(SLACK_NS, int(SLACK_MIN_BYTES * self.ns_per_byte))
        planes = len(ports.counters)
        self.free_at = [0] * planes  # when each port has sent everything written to it
        self.fifo: list[deque[tuple[Any, DataPacket, Route, int]]] = [deque() for _ in range(planes)]
        self.counters = [PacerCounters() for _ in range(planes)]
        self._departed = departed
        self._on_ready = on_ready
        self._running = False

    def send(self, conn: Any, plane: int, msg: Any, route: Route, now: int) -> None:
        """A frame a core handed over: DATA through its plane's FIFO, anything else at once."""
        if type(msg) is DataPacket:
            self.data(conn, plane, msg, route, now)
        else:
            self.control(plane, msg, route, now)

    def data(self, conn: Any, plane: int, msg: DataPacket, route: Route, now: int) -> None:
        """A DATA frame handed over: into its plane's FIFO, and out now if the port is free.
        ``route``: ``(encoder, carrier, payload_sum)`` for ``Ports.send_msg``."""
        q = self.fifo[plane]
        q.append((conn, msg, route, now))
        pc = self.counters[plane]
        pc.queued = len(q)
        if pc.queued > pc.max_queued:
            pc.max_queued = pc.queued
        self.run(now)

    def control(self, plane: int, msg: Any, route: Route, now: int) -> None:
        """A control frame goes at once; its bytes take their time on the port all the same."""
        self._write(plane, msg, route, now, now)

    def next_due(self) -> int | None:
        """When the earliest waiting frame's port is free (None: nothing waits)."""
        due: int | None = None
        for plane, q in enumerate(self.fifo):
            if q and (due is None or self.free_at[plane] < due):
                due = self.free_at[plane]
        return due

    def run(self, now: int) -> None:
        """Send every waiting frame whose port is free by ``now``, and tell each its core; a
        core with room again hands over more (``on_ready``), which may go out in turn."""
        if self._running:
            return  # (a frame handed over while we tell cores: the loop below takes it)
        self._running = True
        try:
            while True:
                ready: list[Any] = []
                for plane, q in enumerate(self.fifo):
                    pc = self.counters[plane]
                    while q and self.free_at[plane] <= now:
                        conn, msg, route, queued_at = q.popleft()
                        self._write(plane, msg, route, now, queued_at)
                        pc.paced += 1
                        if now > queued_at:
                            pc.waited += 1
                            pc.wait_ns += now - queued_at
                        if self._departed(conn, msg, now) and conn not in ready:
                            ready.append(conn)
                    pc.queued = len(q)
                if not ready:
                    return
                for conn in ready:
                    self._on_ready(conn, now)
        finally:
            self._running = False

    def _write(self, plane: int, msg: Any, route: Route, now: int, since: int) -> None:
        """Write one frame, there ``since``, and move the port's clock on by its bytes from
        when it could have gone (a loop that woke late has up to the slack to catch up; an idle
        port has no credit). A frame the codec refuses is counted and logged, never raised:
        its core still hears it departed (lost at the NIC), or its backlog would stay full."""
        pc = self.ports.counters[plane]
        before = pc.bytes_tx
        encoder, carrier, payload_sum = route
        try:
            self.ports.send_msg(plane, encoder, msg, carrier, payload_sum)
        except (ValueError, TypeError, IndexError) as exc:
            self.counters[plane].errors += 1
            log.error("cannot encode a frame for plane %d: %s", plane, exc)
        size = pc.bytes_tx - before  # (0: not sent -- refused by the kernel or the codec)
        start = max(self.free_at[plane], since, now - self.slack_ns)
        self.free_at[plane] = start + int(size * self.ns_per_byte)

    def describe(self) -> dict[str, Any]:
        """The departure clock and each port's FIFO, for ``mrc stats``."""
        return {
            "clock": "pacer",
            "rate_mbit_s": self.mbit_s,
            "slack_us": round(self.slack_ns / 1e3, 1),
            "ports": [asdict(c) | {"mean_wait_us": _mean_us(c.wait_ns, c.paced)} for c in self.counters],
        }


def _mean_us(total_ns: int, n: int) -> float:
    return round(total_ns / n / 1e3, 1) if n else 0.0


def hand_over_clock() -> dict[str, Any]:
    """``describe`` of an agent without a pacer: a frame departs when the core hands it over."""
    return {"clock": "hand-over", "rate_mbit_s": None}
