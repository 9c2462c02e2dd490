"""The round-trip time of one sender's packets: RFC 6298's smoothed RTT and variation, the
minimum, the spread above it (jitter, and the longest stall lately), one smoothed RTT per
plane (each plane has its own NIC queue) and how much one path may lag another. The loss
rules (recovery.py) and the silent-plane watch (plane_watch.py) time their guesses from it;
the acknowledgement book (acks.py) finds the samples and ``AckEffects`` feeds them in.
"""

from __future__ import annotations

from typing import Final

from .plane_delays import NicPlaneDelays

SPREAD_DECAY: Final = 1 - 1 / 256  # per RTT sample: the jitter estimate forgets over a few windows
# per RTT sample: the largest stall seen forgets over thousands of samples (a software switch
# descheduled for milliseconds does it again, seconds later)
STALL_DECAY: Final = 1 - 1 / 8192
FABRIC_SPREAD_HALFLIFE: Final = 2  # SRTTs (see ``RttEstimator.sample_fabric``)
# delays within 1/32 of the minimum RTT are flat (``RttEstimator.flat``): 1 % loss on the
# 2 x 4 and production shapes stayed within 1/2000 (10-25 ns), an incast's first RTT rose 1/5
FLAT_SHARE: Final = 32


class RttEstimator:
    """Smoothed RTT and variation (RFC 6298), the minimum, the recent spread above it
    (jitter), and one smoothed RTT per plane (each plane has its own NIC queue)."""

    def __init__(self, planes: int) -> None:
        self.srtt_ns: float | None = None
        self.rttvar_ns = 0.0
        self.min_rtt_ns: int | None = None
        self.spread = 0.0  # recent max RTT minus min RTT, decaying (jitter)
        # the longest stall lately: a round trip less its own plane's minimum (``sample_plane``),
        # forgetting far more slowly than the spread
        self.stall = 0.0
        self.plane_srtt: list[float | None] = [None] * planes
        self.plane_last = [0] * planes  # each plane's latest sample (RACK's RTT: a queue building)
        self.plane_at = [0] * planes  # when it came: a plane still SACKing is draining (``queue_floor``)
        self.plane_min = [0] * planes  # each plane's shortest sample (0: none yet)
        # per plane, how long after a first copy left the sender heard it was delivered, by
        # any SACK (smoothed; None: none yet). A plane much slower than the others is rarely
        # sampled: its own SACKs come back after the others' have covered its packets, so
        # only this says how long it takes (``of_plane``, while a NIC port is slower than the
        # others: ``heard_for_rtt``; ``heard_instead``, for a plane with slower links)
        self.plane_heard: list[float | None] = [None] * planes
        # the heard delay stands in for an unsampled plane's RTT: a port was slow at the latest
        # one (with ports alike, planes slow inside the fabric lost 0.03 of capacity with it)
        self.heard_for_rtt = False
        self.plane_heard_low = [0] * planes  # the shortest of those per plane (0: none yet)
        # per plane, ``heard_later``: worked out when a shortest delay moves (rarely, and early),
        # not on every read (RACK's queue floor reads it for each packet it judges)
        self._later = [0.0] * planes
        self.plane_heard_at = [0] * planes  # when the latest came (``queue_floor``)
        # how much later one path may deliver than another: the largest difference lately
        # between successive samples of a plane, each less the time its packet waited for its
        # NIC port (its paths' queues differ; a queue they all end in, at the peer's port,
        # moves little from one sample to the next and reorders nothing)
        self._fabric_last = [-1] * planes
        self.fabric_spread = 0.0
        self._fabric_at = 0
        # the NIC's planes, as all its connections measure them (None: this connection's own)
        self.nic: NicPlaneDelays | None = None

    def share(self, nic: NicPlaneDelays) -> None:
        """Report plane samples to ``nic``, shared with its other connections, and read how
        slow it found a plane this connection has no sample of (``of_plane``)."""
        self.nic = nic

    def sample(self, rtt: int) -> None:
        if self.min_rtt_ns is None:
            self.min_rtt_ns = rtt
        elif rtt < self.min_rtt_ns:
            # a new floor: the slow samples seen so far sit that much further above it
            self.spread += self.min_rtt_ns - rtt
            self.min_rtt_ns = rtt
        self.spread = max(float(rtt - self.min_rtt_ns), self.spread * SPREAD_DECAY)
        if self.srtt_ns is None:
            self.srtt_ns = float(rtt)
            self.rttvar_ns = rtt / 2
        else:
            self.rttvar_ns += 0.25 * (abs(self.srtt_ns - rtt) - self.rttvar_ns)
            self.srtt_ns += 0.125 * (rtt - self.srtt_ns)

    def sample_fabric(self, rtt: int, plane: int = 0, now_ns: int = 0) -> None:
        """A round trip on ``plane`` less the time its packet waited for its port (the NIC
        model). The spread forgets by time, by half every ``FABRIC_SPREAD_HALFLIFE`` SRTTs:
        by samples, a slow flow kept the swing of an incast's first round trips (60 us) for a
        thousand of them, and its gap rule waited that long behind a path that had died."""
        last = self._fabric_last[plane]
        self._fabric_last[plane] = rtt
        jump = float(abs(rtt - last)) if last >= 0 else 0.0
        spread = self.fabric_spread
        srtt = self.srtt_ns
        if spread and srtt and now_ns > self._fabric_at:
            spread *= 0.5 ** ((now_ns - self._fabric_at) / (FABRIC_SPREAD_HALFLIFE * srtt))
        self._fabric_at = now_ns
        self.fabric_spread = max(jump, spread)

    def sample_plane(self, plane: int, rtt: int, now_ns: int) -> None:
        if self.nic is not None:
            self.nic.report(plane, rtt)
        self.plane_last[plane] = rtt
        self.plane_at[plane] = now_ns
        # a stall is a round trip longer than its own plane's shortest: a plane that is only
        # slower (a lower rate) is no stall; taken from the connection's minimum, its extra
        # delay raised the silent-plane watch's guard for every plane (a plane at 10 Gb/s
        # beside two at 100: a 26 us stall held a black-holed NIC link GOOD for 30 RTT)
        low = self.plane_min[plane]
        if not low or rtt < low:
            low = self.plane_min[plane] = rtt
        stall = float(rtt - low)
        self.stall = stall if stall > self.stall * STALL_DECAY else self.stall * STALL_DECAY
        ps = self.plane_srtt[plane]
        self.plane_srtt[plane] = float(rtt) if ps is None else ps + 0.125 * (rtt - ps)

    def heard_plane(self, plane: int, delay: int, now_ns: int, slow_ports: bool) -> None:
        """A first copy sent on ``plane`` was acknowledged ``delay`` after it left (its own SACK
        or another's cover): how long the plane takes to be heard from. ``slow_ports``: a NIC
        port is slower than the others (``NicClock.slow``)."""
        self.heard_for_rtt = slow_ports
        self.plane_heard_at[plane] = now_ns
        low = self.plane_heard_low[plane]
        if not low or delay < low:
            self.plane_heard_low[plane] = delay
            self._later_again()
        h = self.plane_heard[plane]
        self.plane_heard[plane] = float(delay) if h is None else h + 0.125 * (delay - h)

    def heard_later(self, plane: int) -> float:
        """How much later than the quickest other plane ``plane``'s packets are heard of at
        the least (``plane_heard_low``): a plane whose links are slower, not only queued (an
        incast's planes' queues differ by microseconds; their shortest delays do not). A packet
        behind another on a link ten times slower arrives a packet's time at that rate later,
        and the extra delay of its links is at least that: the spacing of its deliveries before
        it is measured (``PlaneWatch.delivering``; fuzz seed 5151, draw 1474: a plane at 10 Gb/s
        inside, heard of 6 us after the others, was failed 1.8 us after its one delivery by four
        connections of five)."""
        return self._later[plane]

    def _later_again(self) -> None:
        """Every plane's ``heard_later`` from the shortest delays as they are now."""
        lows = self.plane_heard_low
        for plane, own in enumerate(lows):
            least = 0
            for p, other in enumerate(lows):
                if p != plane and other and (not least or other < least):
                    least = other
            self._later[plane] = float(own - least) if own and least and own > least else 0.0

    def heard_instead(self, plane: int, window: int) -> float:
        """How long ``plane``'s first copies take to be heard of, by any SACK, where that
        stands in for its round trip (0.0 elsewhere): it has no sample of its own, and its
        links are slower than the quickest other plane's by more than ``window``
        (``heard_later``). Timed at the connection's SRTT, such a plane's queued packets were
        taken for lost at the tail of every flow (fuzz seed 5151, draw 1989: 8 planes, one at
        10 Gb/s inside, 17 resends a connection, none lost). Not a plane only queued, or only
        not sampled: an incast's fast planes' packets, heard of later through the queue, were
        then held past a failure (fuzz seed 4242, draw 1425: 5 more lost, under the queue)."""
        heard = self.plane_heard[plane]
        if heard is None or self.plane_srtt[plane] is not None or self.heard_later(plane) <= window:
            return 0.0
        return heard

    def of_plane(self, plane: int) -> float:
        """The plane's smoothed RTT; else, unsampled, how long its packets took to be heard of
        (``heard_plane``: a plane at 5 Gb/s beside seven at 100 never had a sample of its own,
        and was taken for failed at the connection's SRTT, a round trip ahead of its packets);
        else the connection's (0 before any sample), times how much slower than its fastest
        plane the NIC's connections found this one, when shared (``plane_delays.py``)."""
        ps = self.plane_srtt[plane]
        if ps is not None:
            return ps
        heard = self.plane_heard[plane]
        if heard is not None and self.heard_for_rtt:
            return heard
        srtt = self.srtt_ns or 0.0
        nic = self.nic
        return srtt * nic.slowdown(plane) if nic is not None else srtt

    def heard_of(self, plane: int) -> bool:
        """``plane`` has been heard of: a round trip of its own sampled, or a first copy sent on
        it acknowledged (``heard_plane``). Not the NIC's other connections' samples: they go to
        other destinations, and a plane slowed on its T0-T1 links is not slower to a host under
        the same T0 (fuzz seed 4242, draw 1542: the NIC found the plane slowed inside the
        fabric its fastest, from such a destination)."""
        return self.plane_srtt[plane] is not None or self.plane_heard[plane] is not None

    def flat(self, plane: int) -> bool:
        """No queue builds: ``plane`` has its own samples and the round trips lately, and their
        variation, stay within 1/``FLAT_SHARE`` of the minimum (no queue but the propagation
        and a packet's serialisation: the delay of uniform random loss's fabric). An incast's
        first round trips fail it: its last hop queues (the RTT rose 22 % in 4 us), and a plane
        not yet sampled, or an estimate a few samples old, says nothing of its queue."""
        low = self.min_rtt_ns
        if low is None or self.plane_srtt[plane] is None:
            return False
        return self.spread * FLAT_SHARE <= low and self.rttvar_ns * FLAT_SHARE <= low

    def plane_delay(self, plane: int) -> float:
        """``plane``'s round trip now: its smoothed RTT, or its latest sample if longer (a queue
        building), else the connection's SRTT."""
        last = float(self.plane_last[plane])
        ps = self.of_plane(plane)
        return last if last > ps else ps
