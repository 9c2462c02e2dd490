"""What each plane delivers, so that no plane holds a queue the others do not.

Why: the rotation gives each packet to the up plane with the fewest bytes in flight. Equal
bytes on unequal planes leave a plane slower than the others (a NIC port or an optic at a
lower rate, slower T1s) a standing queue of the difference: the connection's delay and
marks rise, its window shrinks, and every fast plane runs at about the slow one's rate (8
planes, one at 25 Gb/s: 0.52 of the capacity, slower than with that plane dead).

So a plane is passed over while its *queue* -- its bytes in flight over what it delivers
per nanosecond (by Little's law the round trip a packet sent there now would see) less its
own shortest round trip -- stands more than a margin (half a base RTT) above the least
queued plane's. A plane below that bound takes its equal share of bytes, which more than
fills a slow plane, so it stays busy at its own rate with at most the margin queued; equal
planes, queued alike (an incast's last hops), are balanced by bytes as before. Subtracting each plane's own
shortest round trip matters: a plane slower per hop has a longer round trip even empty, and
judged by round trips alone it would be starved.

Each plane's rate is the bytes acknowledged on it over the last interval (about an SRTT),
smoothed over a few; a plane that delivered nothing in an interval keeps its last rate.
"""

from __future__ import annotations

from typing import Final

RATE_GAIN: Final = 0.5  # each interval's rate counts this much against the last estimate


class PlaneRates:
    """Per plane: bytes delivered per nanosecond (``rate``) and the shortest round trip from
    the hand-over (``base``; 0: no sample yet), kept by the sender's recovery, read by the
    rotation (``EvSet.queued_planes``)."""

    def __init__(self, planes: int) -> None:
        self.rate = [0.0] * planes
        self.base = [0] * planes
        self.last_ns = [-(1 << 62)] * planes  # when each last delivered something
        self._bytes = [0] * planes  # delivered on each plane since ``_since``
        self._since = -1

    def sampled(self, plane: int, rtt_ns: int) -> None:
        """A first copy sent on ``plane`` was delivered ``rtt_ns`` after its hand-over (an upper
        bound when another SACK covered it: a slow plane's own SACKs come after the cumulative
        point the others carry, and it would never be sampled)."""
        if rtt_ns <= 0:
            return
        if self.base[plane] <= 0 or rtt_ns < self.base[plane]:
            self.base[plane] = rtt_ns

    def delivered(self, plane: int, size: int, now_ns: int, interval_ns: float) -> None:
        """``size`` bytes were acknowledged on ``plane`` now; every ``interval_ns`` (an SRTT)
        the counts since become each plane's rate."""
        self.last_ns[plane] = now_ns
        if self._since < 0:
            self._since = now_ns
        self._bytes[plane] += size
        span = now_ns - self._since
        if span < interval_ns or span <= 0:
            return
        rate = self.rate
        counts = self._bytes
        for p in range(len(counts)):
            got = counts[p] / span
            if got > 0:
                rate[p] = got if rate[p] <= 0 else rate[p] + RATE_GAIN * (got - rate[p])
            counts[p] = 0
        self._since = now_ns

    def queued_ns(self, plane: int, load: int) -> float | None:
        """``plane``'s queue with ``load`` bytes in flight: the round trip a packet sent now
        would see by Little's law (those bytes over its rate) less its shortest; 0 when it is
        not full; None when not measured yet. Packets lost on a dead path count too until
        found lost: a dead plane is passed over sooner (capped by the recent round trip, a
        plane whose T0 died kept its share and lost 55 packets against a floor of 8)."""
        rate = self.rate[plane]
        base = self.base[plane]
        if rate <= 0 or base <= 0:
            return None
        v = load / rate - base
        return v if v > 0 else 0.0

    def queued(self, load: list[int], down: int, margin: float, tail: bool = False) -> int:
        """The up planes (a bit mask; ``down``: those that are not) whose queue with ``load``
        bytes in flight (``queued_ns``) stands more than ``margin`` above the least queued up
        plane's: the rotation passes them over while others can take the packet, so a slower
        plane holds no queue the others do not. At a message's ``tail`` its shortest round
        trip counts too: its last packets go where they arrive soonest (a plane at 5 Gb/s
        delivered its last ones 26 us after the rest, and the transfer took longer than with
        that plane dead)."""
        planes = len(self.rate)
        least = -1.0
        q = [-1.0] * planes
        for p in range(planes):
            if down >> p & 1:
                continue
            v = self.queued_ns(p, load[p])
            if v is None:
                continue  # (not measured yet: never passed over)
            if tail:
                v += self.base[p]
            q[p] = v
            if least < 0 or v < least:
                least = v
        if least < 0:
            return 0
        bound = least + margin
        mask = 0
        for p in range(planes):
            if q[p] > bound:
                mask |= 1 << p
        return mask
