"""Which planes the rotation passes over for the next DATA packet, and when new data waits
for them: a question put to the NIC's ports (``NicClock``), the planes' queue weights
(``PlaneQueueWeights``) and the rotation's loads (``EvSet``) together.

Why its own module: the answer reads three owners' state and changes none; the sender asks
before each pick (``Sender._choose_ev``, ``Sender._fill``) and acts on the answer.
"""

from __future__ import annotations

from .cc_base import CongestionControl
from .evset import EvSet
from .nic_clock import NicClock
from .plane_queues import PlaneQueueWeights
from .rtt import RttEstimator
from .writes import WriteQueue


class PlanePassing:
    """The sender's view of its planes' ports and queues, for the rotation."""

    def __init__(
        self,
        nic: NicClock,
        rtt: RttEstimator,
        queues: PlaneQueueWeights | None,
        evset: EvSet,
        writes: WriteQueue,
        congestion: CongestionControl,
    ) -> None:
        self._nic = nic
        self._rtt = rtt
        self._queues = queues
        self._evset = evset
        self._writes = writes  # (read only past the early return: ``unsent`` walks the writes)
        self._congestion = congestion

    def passed(self) -> tuple[int, int]:
        """The planes (a bit mask) the rotation passes over while others can take the packet:
        those whose NIC port is slower than the others (``NicClock.slow``) once they hold their
        part of the backlog, and near the tail those whose packets would arrive after the rest:
        slow ports (``NicClock.late_at_tail``: 8 planes, one at 5 Gb/s, took 1.03 x as long as
        with that plane dead, waiting for its last packets) and planes the queue weights hold
        (``PlaneQueueWeights.late_at_tail``: 4 planes, two at 5 Gb/s inside, sent their last
        packets onto queues 700 us deep, and took 2.2 x as long as with those planes dead).
        Second, the held planes among them, which take a packet after the others passed."""
        nic = self._nic
        holding = self._queues if self._queues is not None and self._queues.held else None
        if not nic.slow and holding is None:
            return 0, 0
        unsent = self._writes.unsent()
        mask = late = 0
        if nic.slow:
            delays = [self._rtt.of_plane(p) for p in range(self._evset.planes)]
            mask = nic.backed_up() | nic.late_at_tail(unsent, delays)
        if holding is not None:  # (the queue weights hold a plane)
            late = holding.late_at_tail(unsent, self._congestion.cwnd, nic.slow)
        return mask | late, late

    def full(self) -> bool:
        """Every plane up is a slow NIC port holding its part of the backlog (``NicClock.backed_up``)
        or a plane the queue weights hold with more in flight for its weight than such a port
        (``PlaneQueueWeights.past_ports``): new data waits. Why: with no plane at full rate the
        rotation, passing over the port, gave every byte the window had beyond it to the held
        plane (50 Gb/s inside beside 75 at the port: its weight at 0.03 and its queue still
        overflowing, 0.76 of capacity), and given to the port instead it queued there."""
        queues = self._queues
        nic = self._nic
        if queues is None or not queues.held or not nic.slow:
            return False
        backed = nic.backed_up()
        if not backed:
            return False
        evset = self._evset
        full = backed | queues.past_ports(evset.plane_load, evset.plane_weight, backed)
        up = evset.local_ports & evset.peer_ports & ((1 << evset.planes) - 1)
        return up & ~full == 0
