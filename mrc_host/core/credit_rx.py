"""The receiving side of receiver credits (UET's RCCC): one NIC's credit line, and the grants of
each of its queue pairs.

Why: senders into one host that each run their own window share its port by how their windows
happen to move -- a late flow keeps its lead, a short-RTT one grows faster -- while the port
itself knows exactly who wants to send into it. Its NIC hands out the port's rate as CREDITs,
one ``quantum`` of payload at a time, each quantum booked on the NIC's credit line for the
wire time it will take (``NicCredits.book``). Every endpoint with demand holds one booking; at
its time it grants a quantum and books its next at the line's end, behind everyone else's: the
grants go round robin, and the senders' DATA arrives at ``rate_share`` of the port's rate, each
sender getting an equal share whatever its RTT or when it started.

DATA that no grant covers -- a sender's speculation, resends that need no credit -- takes the
port's time too. Paced at the port's rate, grants alone would leave whatever such bytes queued
there standing for good: an 8 -> 1 incast's first round trip of speculation kept the receiver's
last hop 37-53 packets deep to the end of the transfer, and a black hole then took a queue's
worth of packets. So at each grant an endpoint books first the bytes it received beyond all it
granted (``CreditGrants.unscheduled``) on the line, delaying every grant of the NIC by their
wire time: the queue they made drains. A lone sender's speculation arrives while its first
grants are still on their way, so it books (nearly) nothing and costs no round trip. What the
booking cannot see -- a queue that hides inside the credits still in flight -- drains at the
rate ``rate_share`` leaves.

Sans-I/O as the rest: the line is passive shared state (like ``NicPathHealth``); each endpoint's
booking is one of its own deadlines, and a grant is a CREDIT it sends on its own control EVs. An
endpoint given no line makes its own (one queue pair alone on its NIC). With no rate known the
line books nothing: credits are granted as they are asked for.
"""

from __future__ import annotations

from mrc_fabric.frames import DATA_OVERHEAD
from mrc_host.wire.codec import ETH_LEN
from mrc_host.wire.messages import CREDIT_MASK, Credit, CreditRequest

from .actions import Action
from .config import TransportConfig
from .control import ControlOut
from .counters import Counters
from .credit_tx import unwrap_credit


class NicCredits:
    """One receiving NIC's credit line: when it is next free, at its rate."""

    def __init__(self, gbps: float, share: float = 1.0) -> None:
        self.ns_per_byte = 8.0 / (gbps * share) if gbps > 0 and share > 0 else 0.0
        self.free_ns = 0

    @property
    def paced(self) -> bool:
        return self.ns_per_byte > 0

    def book(self, now_ns: int, wire_bytes: int) -> int:
        """The time of the next grant of ``wire_bytes`` on the wire: the line's end (not before
        now), which then moves that many bytes' time later."""
        slot = max(now_ns, self.free_ns)
        self.free_ns = slot + int(wire_bytes * self.ns_per_byte)
        return slot

    def occupy(self, now_ns: int, wire_bytes: int) -> None:
        """``wire_bytes`` of DATA no grant covered crossed the port: the line's next booking
        moves that many bytes' time later (not before now)."""
        self.free_ns = max(now_ns, self.free_ns) + int(wire_bytes * self.ns_per_byte)


def nic_credits_for(cfg: TransportConfig, planes: int, port_gbps: float = 0.0) -> NicCredits:
    """The credit line of a NIC this configuration describes (``RcccParams.nic_gbps``, else
    ``port_gbps`` -- the caller's, or the configuration's -- on each of ``planes`` ports;
    neither known: unpaced), at ``RcccParams.rate_share`` of that rate."""
    p = cfg.rccc
    gbps = p.nic_gbps or (port_gbps or cfg.port_gbps) * planes
    return NicCredits(gbps, p.rate_share)


class CreditGrants:
    """One receiving endpoint's grants to its sender: what it asked for, what it got, and its
    booking on the NIC's credit line (None: nothing more to grant)."""

    def __init__(
        self, cfg: TransportConfig, line: NicCredits, control: ControlOut, peer_qp: int, counters: Counters
    ) -> None:
        self.line = line
        self.control = control
        self.peer_qp = peer_qp
        self.c = counters
        self.quantum = max(cfg.rccc.quantum, 1)
        # the wire time a quantum of DATA takes (its packets' headers included)
        self.per_packet = DATA_OVERHEAD + ETH_LEN
        self.mtu = max(cfg.mtu, 1)
        self.wire = self.wire_of(self.quantum)
        self.target = 0  # the sender's latest target (not wrapped)
        self.granted = 0
        self.unscheduled = 0  # DATA bytes received beyond every grant, booked on the line
        self.slot_ns: int | None = None

    def wire_of(self, payload: int) -> int:
        """The bytes ``payload`` bytes of DATA take on the wire, their packets' headers included."""
        return payload + -(-payload // self.mtu) * self.per_packet

    def deadline(self) -> int | None:
        return self.slot_ns

    def on_request(self, req: CreditRequest, now_ns: int, out: list[Action]) -> None:
        """The sender's target. Above what was granted: booked on the line (granted at once
        when it is free). Not above: the sender waits for a CREDIT that was lost, or is in
        flight: it is told again what it has."""
        self.c.credit_requests_received += 1
        target = unwrap_credit(req.target, self.granted)
        if target > self.target:
            self.target = target
        if self.target <= self.granted:
            self._send(now_ns, out)
        elif self.slot_ns is None:
            self.slot_ns = self.line.book(now_ns, self.wire)
            self.on_timer(now_ns, out)

    def on_timer(self, now_ns: int, out: list[Action]) -> None:
        """At the booking: a quantum granted (all that is asked, unpaced), the next booked."""
        slot = self.slot_ns
        if slot is None or now_ns < slot:
            return
        if self.line.paced:
            beyond = self.c.data_bytes_placed - self.granted - self.unscheduled
            if beyond >= self.quantum:
                # this slot's quantum and then the rest of their wire time go to them: this
                # grant, and the NIC's others, wait (less than a quantum waits for more)
                self.unscheduled += beyond
                self.line.occupy(now_ns, self.wire_of(beyond) - self.wire)
                self.slot_ns = self.line.book(now_ns, self.wire)
                return
        want = self.target - self.granted
        self.granted += min(want, self.quantum) if self.line.paced else want
        self._send(now_ns, out)
        self.slot_ns = self.line.book(now_ns, self.wire) if self.target > self.granted else None

    def _send(self, now_ns: int, out: list[Action]) -> None:
        msg = Credit(self.peer_qp, self.granted & CREDIT_MASK)
        if self.control.send(msg, out, None, now_ns) is not None:
            self.c.credits_sent += 1
