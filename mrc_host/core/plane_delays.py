"""How much slower each plane of one NIC is than its fastest, as its connections measure it,
shared by all its queue pairs.

Why: a connection's loss rules time a plane's packets by that plane's own round trips, and
for a plane it has no sample of yet they fall back on its round trip over the others. A plane
slower than the rest (a lower rate, a queue other traffic left on it) then looks dead to a
connection that starts on it: its first packets there are resent, or the whole plane
flushed, before the first of them could arrive. In the fuzzer's long run (seed 1127), once a
plane still delivering was no longer taken for silent, seven in ten of the loss guesses left
in the draws that resent with nothing dropped fell on a plane the connection had not sampled,
and on about half of those another connection of the same NIC had.

What is shared is a ratio, not a delay: the NIC's connections go to different destinations,
whose round trips differ, but a plane's slowness at this NIC (its port, its rate, its
queues) is common to them. A connection reads it only for a plane it has no sample of
(``RttEstimator.of_plane``): its own round trip, times how much slower the NIC found that
plane than its fastest. One owner: connections report their samples (``report``); the table
changes no connection's state.
"""

from __future__ import annotations

from typing import Final

PLANE_DELAY_GAIN: Final = 1 / 8  # per sample, as a connection's own smoothed RTT (RFC 6298)


class NicPlaneDelays:
    """The smoothed round trip of each plane of one NIC, over all its connections' samples."""

    def __init__(self, planes: int) -> None:
        self.smoothed = [0.0] * planes  # (0: no sample yet)

    def report(self, plane: int, rtt_ns: int) -> None:
        """A connection of the NIC measured a round trip of ``rtt_ns`` on ``plane``."""
        s = self.smoothed[plane]
        self.smoothed[plane] = float(rtt_ns) if not s else s + PLANE_DELAY_GAIN * (rtt_ns - s)

    def slowdown(self, plane: int) -> float:
        """How many times the NIC's fastest plane's round trip ``plane``'s is (1 before any
        sample of it)."""
        s = self.smoothed[plane]
        if not s:
            return 1.0
        fastest = s
        for other in self.smoothed:  # (a loop: compiled, min() over a generator is a generic call)
            if other and other < fastest:
                fastest = other
        return s / fastest
