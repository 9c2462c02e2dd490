"""When one sender's packets leave its NIC ports, for the loss rules (recovery.py) to time
them from, and how many the NIC still holds, for the sender's hand-over (``nic_backlog``).

Two sources. The NIC model (``port_gbps``): each plane's port a FIFO at that rate holding this
queue pair's packets only, a guess made at the hand-over. And, with ``nic_departures``, the
NIC's own report of each departure (``Endpoint.departed``; mrc-sim's port makes it), which
also counts the turns the port gives the host's other queue pairs: until it comes the
model's time is a lower bound (``TxRecord.at_nic``), raised to the present whenever the
timers look (``hold``), so a wait at the NIC is never taken for a loss.
"""

from __future__ import annotations

from mrc_fabric.frames import DATA_OVERHEAD

from .config import TransportConfig
from .records import TxRecord


class NicClock:
    """Departure times of one sender's packets, and its packets still at the NIC."""

    def __init__(self, cfg: TransportConfig, planes: int) -> None:
        self.reported = cfg.nic_departures  # the NIC reports departures (``on_departed``)
        self._port_free = [0] * planes  # the model: when each plane's port has sent all it got
        self._ns_per_byte = 8 / cfg.port_gbps if cfg.port_gbps > 0 else 0.0
        self.last_left = 0  # when the newest packet left (or, reported, the latest departure)
        # ``nic_backlog``: copies handed over and not yet reported leaving, and whether the
        # sender stopped at the bound (it is told once when there is room again)
        self.backlog = cfg.nic_backlog if cfg.nic_departures else 0
        self.waiting = 0
        self.blocked = False

    def on_sent(self, rec: TxRecord, plane: int, size: int, now_ns: int) -> None:
        """``rec`` is handed over now: when the model says it leaves (after what its port
        already holds of ours; other queue pairs may delay it further)."""
        left = now_ns
        if self._ns_per_byte:
            left = max(now_ns, self._port_free[plane])
            self._port_free[plane] = left + int((size + DATA_OVERHEAD) * self._ns_per_byte)
        rec.left_ns = left
        if not self.reported:
            self.last_left = left
            return
        rec.at_nic = True
        self.waiting += 1
        if left > self.last_left:
            self.last_left = left

    def on_twin(self, rec: TxRecord, plane: int) -> None:
        """A second copy of ``rec`` is handed over with it (the model's port holds it too)."""
        if self._ns_per_byte:
            left = max(rec.sent_ns, self._port_free[plane])
            self._port_free[plane] = left + int((len(rec.payload) + DATA_OVERHEAD) * self._ns_per_byte)
        if self.reported:
            self.waiting += 1

    def on_departed(self, rec: TxRecord | None, at_ns: int) -> bool:
        """One of our copies left the NIC at ``at_ns``; ``rec`` if it is a packet's latest copy.
        True when the sender stopped at the backlog bound and may hand over more now."""
        if rec is not None and rec.at_nic:
            rec.at_nic = False
            rec.left_ns = at_ns
            if at_ns > self.last_left:
                self.last_left = at_ns
        self.waiting -= 1
        if self.blocked and self.waiting < self.backlog:
            self.blocked = False  # (said once: the caller pumps)
            return True
        return False

    def full(self) -> bool:
        """The sender may hand over nothing more now (``nic_backlog`` copies wait at the NIC)."""
        if self.backlog and self.waiting >= self.backlog:
            self.blocked = True
            return True
        return False

    def hold(self, in_flight: dict[int, TxRecord], now_ns: int) -> None:
        """Before the timers' rules run: a packet still at the NIC leaves no sooner than now."""
        if not self.waiting:
            return  # (nothing at the NIC: no ``at_nic`` record to look for)
        held = False
        for rec in in_flight.values():
            if rec.at_nic:
                held = True
                if rec.left_ns < now_ns:
                    rec.left_ns = now_ns
        if held and self.last_left < now_ns:
            self.last_left = now_ns


def expired_since_left(in_flight: dict[int, TxRecord], now_ns: int, rto: int, base: int) -> list[TxRecord]:
    """The RTO timed from departures: once a packet has been out for ``rto``, every packet
    out for ``base`` (half the RTO before its backoff) goes with it. Packets leave a packet
    time or a NIC turn apart, not as one burst: taking only those out for the whole
    backed-off RTO freed one per doubling, a staircase to RETRY_EXCEEDED (an incast whose
    window sat on a black-holed path)."""
    out: list[TxRecord] = []
    fired = False
    for rec in in_flight.values():  # (transmission order)
        if rec.sent_ns + base > now_ns:
            break  # it left no sooner than it was sent: neither has any later one
        if rec.at_nic or rec.left_ns + base > now_ns:
            continue
        out.append(rec)
        if rec.left_ns + rto <= now_ns:
            fired = True
    return out if fired else []
