"""How much of the rotation each plane gets while a queue stands on it that the others do not
have: a plane slowed inside the fabric (its T1 links at a lower rate, an optic renegotiated
down), which the NIC's port rates cannot show.

Why: the rotation balances bytes in flight, so a plane that delivers at a quarter of the
others' rate holds as many bytes as they do and queues the difference. Its round trip grows
until its share of the bytes matches its rate, and the queue that takes is several round
trips deep: 8 planes, one slowed to 25 Gb/s inside, lost packets and reached 0.64 of the
planes' capacity.

The measure is each plane's delay from a first copy leaving to its acknowledgement, by any
SACK (a slow plane's own SACKs come back after the others' have covered its packets), over
the shortest seen on that plane: its queue. A plane whose queue stands above the least
queued plane's by more than ``QUEUE_MARGIN`` of the base round trip (plus ``QUEUE_SHARE`` of
that least queue) is cut to the share that delay allows, ``target / delay``: once a round
trip, deeper within it only if the queue still grew (the queue seen was built before the cut
took effect). Once its queue is below half the margin it grows back by ``QUEUE_GROWTH`` a
round trip. The slow plane then holds bytes in flight in proportion to what it delivers,
with about the margin's queue. A queue every plane has (an incast's last hop) moves nothing:
the reference is the least queued plane, and the margin grows with it (at half that queue,
not four times, incasts' planes differed enough to be cut, and lost more under a fault). A
plane whose NIC port is slower than the others (``NicClock.slow``) is no reference: weighed
by its port it holds a small share, and its short queue had an incast's fast planes cut.
Unless every other plane is at a slow port: then they are, or a plane slowed inside beside
them has nothing to measure against and keeps its full share (``_least_queue``).

A plane so slow inside that its packets are resent before they are acknowledged (the plane
watch failed it for its silence) has no first copy acknowledged first: the copies a D-SACK
names as arriving late time it too (``heard_late_copy``), or its weight stays where
its first samples left it.

A cut plane's delay is its queue, which a packet sent onto it near the end of a transfer
waits out while the other planes have nothing left to carry: ``late_at_tail`` names the
held planes whose next packet would come last, and the rotation passes over them while
another plane can take it, as over a slow port (``NicClock.late_at_tail``), and gives it to
a slow port holding its backlog before them.

One owner: the sender feeds the delays and applies the weights to the rotation
(``EvSet.weigh_planes``); this table changes no other state.
"""

from __future__ import annotations

from typing import Final

from .records import PLANE_SHIFT, TxRecord

QUEUE_MARGIN: Final = 0.5  # of the planes' base round trip
QUEUE_SHARE: Final = 4.0  # of the least queued plane's queue
QUEUE_GROWTH: Final = 1.25  # per round trip of the plane, once its queue is gone
MIN_WEIGHT: Final = 1 / 64
QUEUE_SMOOTH: Final = 1 / 8


class PlaneQueueWeights:
    """Per plane, the share of the rotation its queue leaves it (1.0: its full share)."""

    def __init__(self, planes: int) -> None:
        self.weights = [1.0] * planes
        self.held = 0  # planes below their full share (a bit mask)
        self._delay = [0.0] * planes  # smoothed: from a first copy leaving to its acknowledgement
        self._low = [0] * planes  # the shortest of those (0: none yet)
        self._from = [1.0] * planes  # the weight when this round trip's cuts began
        self._next = [0] * planes  # no new weight before then: the last one's effect is a round trip away
        self._base = 0  # the shortest delay of any plane (0: none yet)

    def heard(self, plane: int, delay: int, now_ns: int, slow_ports: int = 0) -> bool:
        """A first copy that left on ``plane``, or a late copy a D-SACK names, was acknowledged
        ``delay`` after: True when the plane's weight moved. ``slow_ports`` (a bit mask,
        ``NicClock.slow``): planes already weighed down by their port's rate, no reference for
        the others' queues."""
        low = self._low
        d = self._delay[plane]
        d = float(delay) if not d else d + QUEUE_SMOOTH * (delay - d)
        self._delay[plane] = d
        if not low[plane] or delay < low[plane]:
            low[plane] = delay
            if not self._base or delay < self._base:
                self._base = delay
        queue = d - low[plane]
        if queue <= self._base * QUEUE_MARGIN and self.weights[plane] >= 1.0:
            return False  # (no cut without a queue past the margin, no growth at full share)
        least = self._least_queue(plane, queue, slow_ports)
        if least < 0:
            return False  # (no plane at full rate to measure against)
        margin = self._base * QUEUE_MARGIN + least * QUEUE_SHARE
        w = self.weights[plane]
        target = low[plane] + least + margin
        if d > target and delay > target - margin / 2:
            # cut from the weight the round trip began with: the queue seen now was built
            # before the last cut took effect, so a deeper one is taken only if it grew; and
            # not on a sample that saw the queue mostly gone (the smoothed delay lags a queue
            # draining: cut again on it, a plane at 25 Gb/s beside seven at 100 fell to 0.09)
            if now_ns >= self._next[plane]:
                self._from[plane] = w
                self._next[plane] = now_ns + int(d)
            cut = max(MIN_WEIGHT, self._from[plane] * target / d)
            if cut >= w:
                return False
            w = cut
            self.held |= 1 << plane
        elif now_ns < self._next[plane]:
            return False
        elif w < 1.0 and queue < least + margin / 2:
            w = w * QUEUE_GROWTH
            if w >= 1.0:
                w = 1.0
                self.held &= ~(1 << plane)
            self._next[plane] = now_ns + int(d)
        else:
            return False
        self.weights[plane] = w
        return True

    def _least_queue(self, plane: int, queue: float, slow_ports: int) -> float:
        """The least queue of ``plane`` (its own ``queue``, unless its port is slow) and the
        other planes timed, leaving out those at a slow port (``slow_ports``, a bit mask) while
        any other plane is not at one; -1.0: none to measure against. Why the slow ports when
        no other plane is outside them: a plane slowed inside beside planes at slow ports only
        had no reference, kept its full share, and held a queue 1.6 ms deep (5 Gb/s inside
        beside 75 at the port: 3.4 x as long as with it dead)."""
        low = self._low
        least = -1.0 if slow_ports >> plane & 1 else queue
        others = ((1 << len(low)) - 1) & ~slow_ports & ~(1 << plane)  # (timed or not)
        passed = slow_ports if others else 0
        for p in range(len(low)):
            if p == plane or not low[p] or passed >> p & 1:
                continue
            q = self._delay[p] - low[p]
            if q < least or least < 0:
                least = q
        return least

    def heard_first_copies(self, newly: list[TxRecord], now_ns: int, slow_ports: int) -> bool:
        """Each first copy acknowledged now times its plane, from when it left (by any SACK:
        a slow plane's own come after the others' have covered its packets): True when a
        plane's weight moved."""
        moved = False
        for rec in newly:
            if rec.transmissions == 1:
                moved = self.heard(rec.ev >> PLANE_SHIFT, now_ns - rec.left_ns, now_ns, slow_ports) or moved
        return moved

    def heard_late_copy(self, echo_ev: int, rtt: int, now_ns: int, slow_ports: int) -> bool:
        """A D-SACK named a copy sent on ``echo_ev`` that arrived after another, ``rtt`` after
        it left (-1: not timed): its round trip times its plane as a first copy's would. True
        when the plane's weight moved. A plane so slow inside that it is failed for its silence
        has its first copies resent before their acknowledgements come, so first copies alone
        never time it again (two planes, one at 10 Gb/s inside: its weight stayed at 0.83 for a
        whole 11 MB transfer, which ran at 0.42 of capacity). Timed by late copies only while
        no first copy had timed it for its own round trip, a plane cut to its floor by one such
        sample grew back too slowly, and some transfers took twice as long. Not on a slow
        port's plane: the round trip, from the hand-over, holds the copy's wait at the port,
        which its port rate already weighs."""
        plane = echo_ev >> PLANE_SHIFT
        if rtt < 0 or slow_ports >> plane & 1:
            return False
        return self.heard(plane, rtt, now_ns, slow_ports)

    def past_ports(self, load: list[int], weight: list[float] | None, backed: int) -> int:
        """The held planes (a bit mask) holding more bytes in flight (``load``, per plane) for
        their weight (``EvSet.plane_weight``) than a slow NIC port holding its part of the
        backlog (``backed``, a bit mask, ``NicClock.backed_up``). Why: the rotation passes over
        such a port while another plane can take the packet, and with no plane at full rate the
        one it found was the held plane, so the queue that held it got every byte the window
        had beyond the port (50 Gb/s inside beside 75 at the port: the held plane's weight at
        0.03 and its queue still overflowing, 0.76 of capacity). Passed over too, such a plane
        takes a packet only when its load for its weight is the least of them."""
        held = self.held & ~backed
        if weight is None or not held:
            return 0
        least = -1.0
        for p in range(len(load)):
            if backed >> p & 1 and weight[p] > 0 and (least < 0 or load[p] / weight[p] < least):
                least = load[p] / weight[p]
        if least < 0:
            return 0
        mask = 0
        for p in range(len(load)):
            if held >> p & 1 and load[p] > least * weight[p]:
                mask |= 1 << p
        return mask

    def _finishers(self, passed: int) -> tuple[float, float]:
        """Of the timed planes not in ``passed`` (a bit mask): the shortest delay (-1.0: none)
        and their summed rate, in window shares a nanosecond (``weights[p] / delay``)."""
        fast = -1.0
        rate = 0.0
        weights = self.weights
        for p, d in enumerate(self._delay):
            if d and not passed >> p & 1:
                rate += weights[p] / d
                if fast < 0 or d < fast:
                    fast = d
        return fast, rate

    def late_at_tail(self, unsent: int, window: float, slow_ports: int = 0) -> int:
        """The held planes (a bit mask) whose next packet would be acknowledged after the
        others have sent the ``unsent`` bytes left and theirs have been, by more than one of
        their round trips: each plane timed by its smoothed delay; the others (not held and
        not at a slow port, ``slow_ports``, a bit mask; with none such, those not held) by the
        quickest of them, each sending its part of the ``window`` (by weight) once its round
        trip. Why: a held plane's delay is its queue, and a packet sent onto it near the end
        of a transfer waits that queue out while the other planes have nothing left to carry;
        the rotation passes over such planes while others can take the packet, and takes a
        slow port's backlog before them (``EvSet.next_data_ev``'s ``late``). Its own
        acknowledgements go on timing it, so it comes back as its queue drains."""
        held = self.held
        total = sum(self.weights)
        fast, rate = self._finishers(held | slow_ports)
        if fast < 0:  # (every other plane at a slow port: those finish first)
            fast, rate = self._finishers(held)
        if fast < 0 or window <= 0:
            return 0
        # (later by less than another of their round trips is a tie: in an incast four of five
        # planes, held at 8.7 us beside one at 5.4, were passed over for the last 60 KB, which
        # went onto that one plane, its sender's NIC link flapping, and took 5 % longer)
        done = 2 * fast + unsent * total / (window * rate)
        mask = 0
        for p, d in enumerate(self._delay):
            if held >> p & 1 and d >= done:
                mask |= 1 << p
        return mask
