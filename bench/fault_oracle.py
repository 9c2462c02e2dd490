"""The loss no endpoint-driven transport avoids when a link dies: the *oracle* of a fault.

Why: a fault's floor (the data that entered the element in the base RTT before it failed)
assumes news of the failure takes one base RTT. Under an incast the receiver's last hop holds
a standing queue, and a packet that should have crossed the dead link is overdue only once
its siblings on live paths, queued behind the same last hop, show when it would have arrived.
Nothing an endpoint does can beat that instant; this module measures it in a run.

For a black-holed fabric link (``down`` of the direction towards the receiver's T0):

- ``due_ns``: when the first packet the link lost would have reached the receiver. It reaches
  the T0 end of the link at ``reach`` (a packet on the wire when the link died: when it left
  the T1 plus serialisation and propagation; else the first drop plus the same), then waits
  what the receiver's last-hop port held at ``reach`` (every sibling entering that queue then
  waits as long; a queue past the trim threshold trims it, and its header waits for nothing),
  then crosses the last link. Lower bounds throughout: the queue sampled at or before
  ``reach`` on a 25 ns grid, the packet on the wire of either port not counted.
- ``oracle``: the data packets the link lost that entered it before ``due_ns`` (the earliest
  instant any endpoint, the receiver, could know).
- ``oracle_sent``: those sent before any sender could hear of it: the receiver's report
  reaches a sender ``4 x (control serialisation + link delay)`` after ``due_ns``, and a packet
  sent then enters the link ``2 x (data serialisation + link delay)`` later at the earliest.
  This is what a transport that pools every connection's evidence at the receiver and acts
  on it at once still loses, given the traffic this run put on the link.

Reading only: the samples are events that read ports (their sequence numbers order only ties
among themselves), so the run is the same with or without them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mrc_host.sim.fabric import CONTROL_BYTES, DATA_OVERHEAD, Port
from mrc_host.sim.fault_state import Fault
from mrc_host.sim.network import START_NS, Network

GRID_NS = 25  # the samples' spacing
MTU = 4096


@dataclass
class OracleWatch:
    """Samples ``dead`` (the link's port towards the receiver) around the fault at ``at_ns``
    (relative to the run's start) and ``last_hop`` (the receiver's T0 port on that plane)."""

    net: Network
    fault: Fault
    dead: Port
    last_hop: Port
    at_ns: int
    sent: list[tuple[int, int]] = field(default_factory=list)  # (time, dead.tx_data_bytes)
    queue: list[tuple[int, int]] = field(default_factory=list)  # (time, last_hop.queued)

    def __post_init__(self) -> None:
        d1 = self._hop(self.dead, DATA_OVERHEAD + MTU)
        start = START_NS + self.at_ns
        loop = self.net.loop
        for t in range(start - d1 - GRID_NS, start + GRID_NS, GRID_NS):
            loop.at(t, self._sample_sent)
        # the queue up to the latest ``reach`` can be (fault plus one hop), and some slack
        for t in range(start, start + 2 * d1 + 40 * GRID_NS, GRID_NS):
            loop.at(t, self._sample_queue)

    def _sample_sent(self) -> None:
        self.sent.append((self.net.loop.now, self.dead.tx_data_bytes))

    def _sample_queue(self) -> None:
        self.queue.append((self.net.loop.now, self.last_hop.queued))

    @staticmethod
    def _hop(port: Port, size: int) -> int:
        return int(size * port.ns_per_byte) + port.delay_ns

    def reach_ns(self) -> int:
        """When the first packet lost on the link would have reached its far end."""
        d1 = self._hop(self.dead, DATA_OVERHEAD + MTU)
        start = START_NS + self.at_ns
        # a packet still on the wire at the fault left in (start - d1, start]: the first
        # sample after its transmission began, less one grid step (a lower bound)
        before = [b for t, b in self.sent if t <= start - d1]
        base = before[-1] if before else 0
        for t, b in self.sent:
            if t > start - d1 and b > base:
                return max(start, t - GRID_NS + d1)
        drops = [d.at_ns for d in self.fault.drops if d.data]
        return (drops[0] if drops else start) + d1

    def due_ns(self) -> int:
        reach = self.reach_ns()
        queued = 0
        for t, q in self.queue:
            if t > reach:
                break
            queued = q
        port = self.last_hop
        trimmed = queued + DATA_OVERHEAD + MTU > port.trim_bytes
        wait = 0 if trimmed else int(queued * port.ns_per_byte)
        return reach + wait + self._hop(port, DATA_OVERHEAD if trimmed else DATA_OVERHEAD + MTU)

    def figures(self) -> dict[str, Any]:
        """``due_us`` after the fault, ``oracle`` and ``oracle_sent`` (module docstring)."""
        due = self.due_ns()
        port = self.dead
        heard = due + 4 * self._hop(port, CONTROL_BYTES) + 2 * self._hop(port, DATA_OVERHEAD + MTU)
        drops = [d.at_ns for d in self.fault.drops if d.data]
        return {
            "due_us": round((due - START_NS - self.at_ns) / 1e3, 2),
            "oracle": sum(t < due for t in drops),
            "oracle_sent": sum(t < heard for t in drops),
        }
