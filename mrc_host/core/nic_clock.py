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

from typing import Final

from mrc_fabric.frames import DATA_OVERHEAD

from .config import TransportConfig
from .records import TxRecord

# a NIC port this many times slower than the fastest is slow (``NicClock.slow``)
SLOW_PORT: Final = 1.2
# links a DATA packet may cross at its plane's port rate, its NIC port's included: the longest
# path of a two-tier Clos (NIC, T0, T1, T0, NIC). A plane slow everywhere serialises each
# packet on every one of them (``NicClock.port_lag``)
SLOW_PORT_HOPS: Final = 4


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
        # and per plane (``weigh_ports``): a port slower than the others (a NIC link at a lower
        # rate) counts only up to its part of the backlog (``backlog / planes``). Counted whole
        # it held the whole backlog, and the sender, stopped at the bound, fed every fast port
        # one copy at a time: 8 planes, one at 5 Gb/s, ran at 0.27 of their capacity. Ports
        # alike count whole: capped, a burst onto one fast port let the sender hand over past
        # the bound, and the planes slow inside the fabric took the spill
        self._part = max(1, self.backlog // planes) if self.backlog else 0
        self._waiting_on = [0] * planes
        self.counted = 0  # (``weigh_ports``) the copies waiting, a slow port's up to its part
        # each port's rate as the NIC last said when one of ours left it (``on_departed``;
        # 0.0: not said): a port at a lower rate than the others is slow. Not measured from
        # our departures: other queue pairs' frames between two of ours made ports alike
        # differ by 2 x
        self.port_gbps = [0.0] * planes
        self._weigh = cfg.weigh_ports
        self._frame = cfg.mtu + DATA_OVERHEAD  # a full packet's bytes on the wire
        self.slow = 0  # the ports (a bit mask) slower than the fastest by ``SLOW_PORT``
        # per plane, how much later its first packets may be heard of than the fastest port's
        # for its rate alone (``port_lag``; 0.0: not slow), worked out with ``slow``
        self._lag = [0.0] * planes

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
        if self._weigh:
            self._wait_on(plane, 1)
        if left > self.last_left:
            self.last_left = left

    def on_twin(self, rec: TxRecord, plane: int) -> None:
        """A second copy of ``rec`` is handed over with it (the model's port holds it too)."""
        if self._ns_per_byte:
            left = max(rec.sent_ns, self._port_free[plane])
            self._port_free[plane] = left + int((len(rec.payload) + DATA_OVERHEAD) * self._ns_per_byte)
        if self.reported:
            self.waiting += 1
            if self._weigh:
                self._wait_on(plane, 1)

    def _wait_on(self, plane: int, n: int) -> None:
        """``n`` more (or fewer) of our copies wait at ``plane``'s port (-1: a port not said);
        kept with ``weigh_ports`` only (without, the bound counts ``waiting``)."""
        if not 0 <= plane < len(self._waiting_on):
            self.counted = max(0, self.counted + n)  # (a NIC that does not say which: the total)
            return
        old = self._waiting_on[plane]
        new = old + n if old + n > 0 else 0
        self._waiting_on[plane] = new
        if self.slow >> plane & 1:
            part = self._part
            self.counted += min(new, part) - min(old, part)
        else:
            self.counted += new - old

    def _rated(self, plane: int, gbps: float) -> None:
        """The NIC says ``plane``'s port runs at ``gbps``: which ports are slow, their rate
        below the fastest's over ``SLOW_PORT`` (judged once every port has said), and the
        count made again when that changes."""
        rates = self.port_gbps
        if rates[plane] == gbps:
            return
        rates[plane] = gbps
        fastest = 0.0
        for g in rates:
            if g <= 0:
                return  # (a port not said yet)
            if g > fastest:
                fastest = g
        slow = 0
        frame_bits = self._frame * 8
        for p, g in enumerate(rates):
            if g * SLOW_PORT < fastest:
                slow |= 1 << p
                self._lag[p] = SLOW_PORT_HOPS * frame_bits * (1 / g - 1 / fastest)
            else:
                self._lag[p] = 0.0
        if slow == self.slow:
            return
        self.slow = slow
        part = self._part
        self.counted = sum(min(n, part) if slow >> p & 1 else n for p, n in enumerate(self._waiting_on))

    def on_departed(self, rec: TxRecord | None, at_ns: int, plane: int = -1, port_gbps: float = 0.0) -> bool:
        """One of our copies left ``plane``'s port (-1: not said) at ``at_ns``, the port running
        at ``port_gbps`` (0: not said); ``rec`` if it is a packet's latest copy. True when the
        sender stopped at the backlog bound and may hand over more now."""
        if rec is not None and rec.at_nic:
            rec.at_nic = False
            rec.left_ns = at_ns
            if at_ns > self.last_left:
                self.last_left = at_ns
        self.waiting -= 1
        held = self.waiting
        if self._weigh:
            self._wait_on(plane, -1)
            if port_gbps > 0 and self._part and 0 <= plane < len(self._waiting_on):
                self._rated(plane, port_gbps)
            held = self.counted
        if self.blocked and held < self.backlog:
            self.blocked = False  # (said once: the caller pumps)
            return True
        return False

    def port_lag(self, plane: int) -> float:
        """How much later than the fastest port's ``plane``'s packets may be heard of for its
        port's rate alone: a full packet's extra serialisation on each of ``SLOW_PORT_HOPS``
        links (a plane slowed at the NIC is often slow all the way, the peer's port and the
        switches' links at the same rate); 0.0 for a port not slow. What a plane not heard of
        yet may take beyond the fast planes' round trip: timed by the fast planes alone, a
        plane at 10 Gb/s beside one at 100 was taken for silent before its first packet could
        arrive (fuzz seed 5151, draw 785: every connection of an all-to-all failed it, 67
        resends, none lost). Not the round trip times the ratio of the rates: where the links'
        own delay makes most of the round trip (2 us links), that held a black-holed 10 Gb/s
        port ten fast round trips, and a connection lost 12 packets there against a limit of
        7.5 (draw 216)."""
        return self._lag[plane]

    def full(self) -> bool:
        """The sender may hand over nothing more now (``nic_backlog`` copies wait at the NIC,
        a slow port's counted up to its part with ``weigh_ports``)."""
        if self.backlog and (self.counted if self._weigh else self.waiting) >= self.backlog:
            self.blocked = True
            return True
        return False

    def backed_up(self) -> int:
        """The slow ports (a bit mask) holding their whole part of the backlog or more: the
        rotation gives them a packet only when no other plane can take it, so a slow port's
        queue stays at its part while the fast ports are fed as fast as they go."""
        slow = self.slow
        if not slow:
            return 0
        part = self._part
        mask = 0
        for p, n in enumerate(self._waiting_on):
            if slow >> p & 1 and n >= part:
                mask |= 1 << p
        return mask

    def late_at_tail(self, unsent: int, delays: list[float]) -> int:
        """The slow ports (a bit mask) whose next packet would be heard of after the fast
        ports have sent the ``unsent`` bytes left and been heard of: a packet handed to port
        ``p`` now waits behind what it holds of ours and takes its plane's round trip
        (``delays``, per plane); the fast ports take ``unsent`` at their rate, then theirs."""
        slow = self.slow
        rates = self.port_gbps
        fast_gbps = 0.0
        fast_delay = -1.0
        for p, g in enumerate(rates):
            if not slow >> p & 1:
                fast_gbps += g
                if fast_delay < 0 or delays[p] < fast_delay:
                    fast_delay = delays[p]
        if fast_gbps <= 0:
            return 0
        done = fast_delay + unsent * 8 / fast_gbps
        mask = 0
        for p, g in enumerate(rates):
            if slow >> p & 1 and delays[p] + (self._waiting_on[p] + 1) * self._frame * 8 / g >= done:
                mask |= 1 << p
        return mask

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
