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
        # and per plane: the bound counts each plane's copies up to its part of the backlog
        # (``backlog / planes``) only: a NIC port slower than the others would otherwise hold
        # the whole backlog, and the sender, stopped at the bound, feed every fast port at its
        # pace (2 planes, one at 50 Gb/s: 0.67 of their capacity). What the slow port holds
        # beyond its part is the rotation's to bound (``EvSet.queued_planes``: its queue)
        self._per_plane = max(1, self.backlog // planes) if self.backlog else 0
        self._waiting_on = [0] * planes
        self.counted = 0  # the copies waiting, each plane's at most its part

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
        self._wait_on(plane, 1)
        if left > self.last_left:
            self.last_left = left

    def _wait_on(self, plane: int, n: int) -> None:
        """``n`` more (or fewer) of our copies wait at ``plane``'s port (-1: a port not said)."""
        per = self._per_plane
        if not per:
            return
        if not 0 <= plane < len(self._waiting_on):
            self.counted = max(0, self.counted + n)  # (a NIC that does not say: the total)
            return
        old = self._waiting_on[plane]
        new = old + n if old + n > 0 else 0
        self._waiting_on[plane] = new
        self.counted += min(new, per) - min(old, per)

    def on_twin(self, rec: TxRecord, plane: int) -> None:
        """A second copy of ``rec`` is handed over with it (the model's port holds it too)."""
        if self._ns_per_byte:
            left = max(rec.sent_ns, self._port_free[plane])
            self._port_free[plane] = left + int((len(rec.payload) + DATA_OVERHEAD) * self._ns_per_byte)
        if self.reported:
            self.waiting += 1
            self._wait_on(plane, 1)

    def on_departed(self, rec: TxRecord | None, at_ns: int, plane: int = -1) -> bool:
        """One of our copies left ``plane``'s port (-1: not said) at ``at_ns``; ``rec`` if it is a
        packet's latest copy. True when the sender stopped at the backlog bound and may hand
        over more now."""
        if rec is not None and rec.at_nic:
            rec.at_nic = False
            rec.left_ns = at_ns
            if at_ns > self.last_left:
                self.last_left = at_ns
        self.waiting -= 1
        self._wait_on(plane, -1)
        if self.blocked and self.counted < self.backlog:
            self.blocked = False  # (said once: the caller pumps)
            return True
        return False

    def full(self) -> bool:
        """The sender may hand over nothing more now (``nic_backlog`` copies wait at the NIC,
        each plane's counted up to its part)."""
        if self.backlog and self.counted >= self.backlog:
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
