"""UET's NSCC (registered as ``nscc``, the default): see ``NsccParams`` for the rules.

What makes it NSCC rather than the first window: the decrease is sized by the *averaged*
queueing delay and bounded by ``max_md_jump``; increases are additive (a fixed number of
bytes per window acknowledged, scaled by the delay headroom, as in htsim's ``uec.cpp``),
turn into a fast increase after a whole window at almost no delay, and are applied in
batches; quick adapt drops the window at once to what the network actually delivered when
that collapsed (never over a period in which the sender ran out of data: ``on_app_limited``).

Three departures from UET, all because MRC's switches mark no ECN on the last hop:
- a *standing* queue at the receiver's port stands in for the mark it does not set. Every
  flow into that port sees the same queue, so every flow reads it from its own delay samples
  by the same rule (``_standing_queue``): their average less ``_SCATTER_K`` times the mean
  difference between successive samples. Jitter scatters each sample afresh, so that
  difference is large against its mean (8 hops of uniform jitter: about a fifth of it); a
  queue moves little from one sample to the next. Above half the target the standing queue
  is a mark: the window sheds the excess's share of the round trip, at most once a measured
  round trip of the fabric's longest base RTT; any standing queue stops the fair and fast
  increases, so the windows meet it with the proportional one alone. A cut by the same
  share for every flow keeps the windows' ratio (a newcomer that starts at line rate held
  about 4x its share for 25 RTT); ``lasthop_share_scale`` (experimental, off) starts the mark
  lower for a larger window (``_share_scale``, Swift's flow scaling of its target), so the
  larger windows cut while the smaller still grow; ``lasthop_queue_share`` (experimental, off)
  replaces the mark there by FAST TCP's update (``_lasthop_own_queue``): every window aims
  at the same bytes of its own in the queue, so unequal windows meet within a few round
  trips. Before, only a flow trimmed there (NACK TRIMMED_LASTHOP) read its queue, for 128
  periods: 80/5/5/5 Gb/s for four equal flows. The signal steers no EV;
- the window cap follows the RTT's spread: ``bdp`` + 2 MTU plus the line rate times
  (average delay - floor delay), up to ``max_cwnd``. A jittery fabric gets the window its
  longer RTT needs; a calm one keeps about a BDP in flight, which is what a path that dies
  under it loses. Both delays leave out each packet's wait for the sender's own NIC port:
  a window above a BDP queues there, and counted as spread that queue raised the cap that
  made it (a lone 41 us flow held 1.2 BDP, and a black hole took 1.45 x a BDP/paths);
- no receiver credits (UET's RCCC needs a message MRC lacks).
"""

from __future__ import annotations

import math
from typing import Final

from .cc_base import CongestionControl, register_cc
from .config import Experimental, NsccParams, TransportConfig

_FLOOR_PERIODS = 8  # the delay floor is the smallest sample of at least this many periods ...
# ... and of at least this many samples (the floor of random per-hop delay is the least of a
# sum of draws, so it falls with the number of samples: the cap's spread needs many)
_FLOOR_SAMPLES = 64
# the last hop's standing queue is the average fabric delay less this many times the mean
# difference between successive samples. For jitter that difference is about 1.1 deviations,
# and the mean less 8 of them is below half the target on the jitter benches (3 us RTT with 1
# us a hop, 21 us with 3 us: the jitter's mean 1.3 and 0.55 RTT); a queue near that target
# moves a fraction of a packet time from one sample to the next
_SCATTER_K = 8.0
_SCATTER_GAIN = 1 / 32  # the difference is averaged over about this many samples ...
_SCATTER_SAMPLES = 16  # ... and trusted from this many on
# ``lasthop_queue_share``'s update: the share of the gap to its aim a window closes in one round
# trip, downwards and upwards (upwards less: the windows of all flows into the port move
# together, and a full step each refilled the queue past the aim), and how many periods
# (``lasthop_delay``) after the last standing queue the rule still holds the window: the queue
# it drained shows first as no queue, and the usual increases then grew every window alike
_QUEUE_GAIN_DOWN = 1.0
_QUEUE_GAIN_UP = 0.75
_QUEUE_HOLD_PERIODS = 4

_OFF: Final = Experimental()  # every researcher's switch off: what the product runs


class Nscc(CongestionControl):
    name = "nscc"

    @classmethod
    def from_config(cls, cfg: TransportConfig) -> Nscc:
        return cls(cfg.nscc, cfg.experimental)

    def __init__(self, p: NsccParams, experimental: Experimental = _OFF) -> None:
        self.params = p
        self.share_scale = experimental.lasthop_share_scale  # a researcher's switches (off: 0)
        self.queue_share = experimental.lasthop_queue_share
        self.cwnd = float(p.initial_cwnd or self._base_cap())
        self.avg_delay: float | None = None
        # the same average less each packet's wait for its own NIC port: the fabric's share,
        # which alone the cap's spread and the delay floor are taken from (see ``cap``)
        self.avg_fabric_delay: float | None = None
        self._inc = 0.0  # increase gathered since the last adjustment
        self._adjust_bytes = 0
        self._adjust_ns: int | None = None
        self._last_md_ns: int | None = None
        self._fi_bytes = 0  # bytes acked in a row at almost no delay
        self._fast = False
        self._qa_end_ns: int | None = None
        self._qa_bytes = 0
        self._qa_armed = False
        self._qa_start_ns = 0  # the quick-adapt period's start ...
        self._app_limited_ns = -1  # ... and the sender's last report of being app-limited
        # the delay floor: per period (min, samples), the current one and the last ones, as
        # many as _FLOOR_PERIODS and _FLOOR_SAMPLES need
        self._period_end_ns: int | None = None
        self._period_min: int | None = None
        self._period_n = 0
        self._floors: list[tuple[int, int]] = []
        self._floor_n = 0  # samples in self._floors
        self._floor_min: int | None = None  # the least of self._floors
        self._calm_from_ns = 0  # no headroom for spread before this: a trim says it is a queue
        # the last fabric delay sample, and the mean difference between successive ones
        self._last_fabric = -1
        self._lh_level = -1.0  # the fabric delay averaged over time (``_standing_queue``)
        self._lh_at = 0
        self._lh_hold_ns = 0  # ``lasthop_queue_share``: its rule holds the window until then
        self._scatter = 0.0
        self._scatter_n = 0
        self._now_ns = 0
        self.quick_adapts = 0
        self.app_limited_periods = 0  # quick adapts not made: the sender had run out of data
        self.decreases = 0
        self.lasthop_decreases = 0  # decreases on a standing last-hop queue without ECN

    def _base_cap(self) -> int:
        p = self.params
        return min(p.bdp + 2 * p.min_cwnd, p.max_cwnd) if p.bdp else p.max_cwnd

    @property
    def floor_delay(self) -> int | None:
        """The smallest delay sample of the last periods (the standing queue)."""
        return self._floor_min

    @property
    def cap(self) -> float:
        """The window cap now: a BDP plus what the RTT's spread needs (see the module)."""
        p = self.params
        if not p.bdp or self._now_ns < self._calm_from_ns:
            return float(self._base_cap())
        floor = self.floor_delay
        avg = self.avg_fabric_delay
        spread = 0.0 if floor is None or avg is None else max(0.0, avg - floor)
        # the two packets above a BDP already cover the spread their own queueing makes
        spread = max(0.0, spread - 2 * p.min_cwnd * p.base_rtt / p.bdp)
        # twice the spread: the floor is the least of many samples, so (mean - floor) is about
        # half of the range the RTT moves in, and the window must cover the mean RTT
        return min(float(self._base_cap()) + 2 * p.bdp * spread / max(p.base_rtt, 1), float(p.max_cwnd))

    def _clamp(self) -> None:
        self.cwnd = min(max(self.cwnd, float(self.params.min_cwnd)), self.cap)

    def _track_floor(self, delay: int, now_ns: int) -> None:
        """Keep the per-period delay floors (the cap's spread is measured from them)."""
        if self._period_min is None or delay < self._period_min:
            self._period_min = delay
        self._period_n += 1
        # a period is the fabric's longest base RTT (lasthop_delay) when it is set: flows of
        # different RTTs then see the same queue through the same number of samples
        period = max(self.params.base_rtt, self.params.lasthop_delay)
        if self._period_end_ns is None:
            self._period_end_ns = now_ns + period
            return
        if now_ns < self._period_end_ns:
            return
        floors = self._floors
        floors.append((self._period_min, self._period_n))
        self._floor_n += self._period_n
        # every period holds a sample (the one that closed it): at most _FLOOR_SAMPLES periods
        while len(floors) > _FLOOR_PERIODS and self._floor_n - floors[0][1] >= _FLOOR_SAMPLES:
            self._floor_n -= floors.pop(0)[1]
        self._floor_min = min(f[0] for f in floors)
        self._period_min = None
        self._period_n = 0
        self._period_end_ns = now_ns + period

    def _quick_adapt(self, now_ns: int) -> None:
        p = self.params
        if self._qa_end_ns is None:
            self._qa_end_ns = now_ns + p.base_rtt + p.target_delay
            self._qa_start_ns = now_ns
            return
        if now_ns < self._qa_end_ns:
            return
        # a period is one RTT as measured (base_rtt + target_delay on a calm fabric): on a
        # jittery one a shorter period would see too few acks and adapt for nothing
        period = p.base_rtt + max(p.target_delay, int(self.avg_delay or 0))
        # a period in which the sender ran out of data says nothing of what the network can
        # deliver: the few bytes acknowledged at the end of a message (a ring step's last
        # window) are what was sent, and judged they cut a 1.1 MB window to 24 KB that the
        # next message started from (link flaps: JCT x1.06-1.08 on the seeds it happened)
        few = self._qa_bytes < int(self.cwnd) >> p.qa_gate
        if self._qa_armed and few and self._app_limited_ns >= self._qa_start_ns:
            self.app_limited_periods += 1
        elif self._qa_armed and few:
            self.cwnd = float(self._qa_bytes)
            self._clamp()
            self._inc = 0.0
            self._fast = False
            self._fi_bytes = 0
            self.quick_adapts += 1
        self._qa_armed = False
        self._qa_bytes = 0
        self._qa_start_ns = now_ns
        self._qa_end_ns = now_ns + period

    def _rtt_scale(self, avg: float) -> float:
        """The increments' share for a flow shorter than the fabric's longest base RTT
        (``network_rtt``): (its RTT / that one's)^2 at the same queue delay. A window grows by
        its increment once per RTT, so the rate grows by the increment over the RTT squared:
        flows of different RTTs then grow alike in rate."""
        p = self.params
        if p.network_rtt <= p.base_rtt:
            return 1.0
        ratio = (p.base_rtt + avg) / (p.network_rtt + avg)
        return ratio * ratio

    def _decrease(self, excess_over: float, now_ns: int, target: int, every: int, rtt: float = 0.0) -> bool:
        """Multiplicative decrease sized by ``excess_over`` (a delay above ``target``), at
        most once per ``every`` ns; True when it happened. The cut is the excess's share of
        ``excess_over`` (UET's), or with ``rtt`` of that round trip: what a window must shed
        for the excess to drain."""
        p = self.params
        if self._last_md_ns is not None and now_ns - self._last_md_ns < every:
            return False
        if excess_over <= target:
            return False
        cut = min(p.gamma * (excess_over - target) / (rtt or excess_over), p.max_md_jump)
        self.cwnd *= 1.0 - cut
        self._inc = 0.0
        self._last_md_ns = now_ns
        self.decreases += 1
        self._clamp()
        return True

    def on_ack(
        self, acked_bytes: int, rtt_ns: int | None, ecn: bool, now_ns: int, port_wait_ns: int = 0
    ) -> None:
        p = self.params
        self._now_ns = now_ns
        self._quick_adapt(now_ns)
        self._qa_bytes += acked_bytes
        if rtt_ns is None or acked_bytes <= 0:
            return
        delay = max(0, rtt_ns - p.base_rtt)
        avg = self.avg_delay
        avg = float(delay) if avg is None else avg + p.delay_weight * (delay - avg)
        self.avg_delay = avg
        fabric = max(0, delay - port_wait_ns)
        favg = self.avg_fabric_delay
        self.avg_fabric_delay = float(fabric) if favg is None else favg + p.delay_weight * (fabric - favg)
        target = max(p.target_delay, 1)
        self._track_floor(fabric, now_ns)
        if avg > p.qa_threshold * target:
            self._qa_armed = True
        standing = self._standing_queue(fabric, now_ns) if p.lasthop_signal else 0.0
        if ecn:
            # a mark: above the target the window decreases, below it holds
            self._fast = False
            self._fi_bytes = 0
            if delay > target:
                self._decrease(avg, now_ns, target, p.base_rtt)
            return
        if self.queue_share > 0.0 and p.bdp > 0 and self._holds_for_the_queue(now_ns, standing, target):
            return
        if standing > 0:
            scale = self._share_scale()  # (only where a queue stands: this runs per ACK)
            if 2 * standing > target * scale:
                self._lasthop_mark(now_ns, scale)
                return
            # some queue stands (below half the target): the windows meet it growing by the
            # proportional increase alone -- with the fair or fast one the flows of an incast
            # refilled it to the trim threshold between decreases
            self._fast = False
            self._fi_bytes = 0
            if delay < target:
                self._inc += (
                    p.eta * acked_bytes * (target - delay) / target / self.cwnd * self._rtt_scale(avg)
                )
        elif delay > target:
            self._fast = False
            self._fi_bytes = 0
            self._inc += p.fi * acked_bytes / self.cwnd * self._rtt_scale(avg)
        else:
            if delay <= p.fast_increase_delay * target:
                self._fi_bytes += acked_bytes
                if self._fi_bytes >= self.cwnd:
                    self._fast = True
            else:
                self._fast = False
                self._fi_bytes = 0
            if self._fast:
                self._inc += p.fi_scale * acked_bytes
            else:
                # additive: ``eta`` bytes per window acknowledged at zero delay
                headroom = (target - delay) / target
                self._inc += p.eta * acked_bytes * headroom / self.cwnd * self._rtt_scale(avg)
        self._adjust_bytes += acked_bytes
        if self._adjust_ns is None:
            self._adjust_ns = now_ns
        if (
            self._adjust_bytes >= p.adjust_bytes_threshold
            or now_ns - self._adjust_ns >= p.adjust_period_threshold
        ):
            self.cwnd += self._inc
            self._inc = 0.0
            self._adjust_bytes = 0
            self._adjust_ns = now_ns
            self._clamp()

    def on_trim(self, now_ns: int = 0, lasthop: bool = False) -> None:
        self._qa_armed = True
        # the RTT's spread came from a queue that overflowed, not from jitter: no headroom
        # for it until _FLOOR_PERIODS base RTTs pass without a trim
        self._calm_from_ns = now_ns + _FLOOR_PERIODS * self.params.base_rtt
        self.cwnd -= self.params.min_cwnd
        self._clamp()

    def _share_scale(self) -> float:
        """How far below half the target this window's last-hop mark starts: 1 for a window of
        up to (``lasthop_share_scale``)^2 of the BDP, less for a larger one (``Experimental``).
        Every flow into a port reads the same standing queue; a mark that starts lower for a
        larger window makes unequal windows cut at different queues, so they meet, where a cut
        by the same share for all keeps their ratio."""
        p = self.params
        c = self.share_scale
        if c <= 0.0 or p.bdp <= 0:
            return 1.0
        return min(1.0, c / math.sqrt(max(self.cwnd, 1.0) / p.bdp))

    def _lasthop_mark(self, now_ns: int, scale: float) -> None:
        """The last hop's standing queue above half the target (where a switch's ECN would
        mark): the window sheds the excess's share of the round trip, at most once a round
        trip -- both of the fabric's longest base RTT (``lasthop_delay``) plus the queue, so
        that flows of every RTT cut alike and a cut shows before the next. Half the target
        times ``scale`` (``_share_scale``, 1 unless ``lasthop_share_scale`` is set)."""
        p = self.params
        self._fast = False
        self._fi_bytes = 0
        queue = self._lh_level
        rtt = max(p.base_rtt, p.lasthop_delay) + queue
        if self._decrease(queue, now_ns, int(p.target_delay // 2 * scale), int(rtt), rtt):
            self.lasthop_decreases += 1

    def _holds_for_the_queue(self, now_ns: int, standing: float, target: int) -> bool:
        """``lasthop_queue_share``: from where the mark would cut (the standing queue above half
        the target) until ``_QUEUE_HOLD_PERIODS`` after the last such sample, the window is
        ``_lasthop_own_queue``'s alone (True: no other rule runs for this acknowledgement)."""
        period = max(self.params.base_rtt, self.params.lasthop_delay)
        if 2 * standing > target:
            self._lh_hold_ns = now_ns + _QUEUE_HOLD_PERIODS * period
        if now_ns >= self._lh_hold_ns:
            return False
        self._fast = False
        self._fi_bytes = 0
        self._lasthop_own_queue(now_ns, max(self._lh_level, 0.0), period)
        return True

    def _lasthop_own_queue(self, now_ns: int, queue: float, period: int) -> None:
        """``lasthop_queue_share``: FAST TCP's window update on the last hop's queue, at most
        once a round trip (``period`` plus ``queue``, the time-averaged delay).

        The window's own bytes in that queue are cwnd x queue / (its base RTT + queue: over the
        fabric's longest, a nearer flow undercounts them and takes more); the window moves towards
        keeping ``alpha`` bytes there. Every flow into the port sees the same queue and aims at
        the same ``alpha``, so the one fixed point is equal windows, and the gap between two
        windows shrinks by queue / RTT each round trip whichever way they started -- the mark
        (``_lasthop_mark``) cuts every window by the same share and keeps their ratio.
        ``alpha`` falls as the queue grows past half the target, so N flows settle near
        sqrt(N x share) halves of the target, not N x share."""
        p = self.params
        rtt = period + queue
        if self._last_md_ns is not None and now_ns - self._last_md_ns < rtt:
            return
        half = p.target_delay / 2
        alpha = self.queue_share * half * p.bdp / max(p.base_rtt, 1) * min(1.0, half / max(queue, 1.0))
        own = self.cwnd * queue / (p.base_rtt + queue)
        if own > alpha:
            self.cwnd -= min(_QUEUE_GAIN_DOWN * (own - alpha), p.max_md_jump * self.cwnd)
            self.decreases += 1
            self.lasthop_decreases += 1
        else:
            self.cwnd += _QUEUE_GAIN_UP * (alpha - own)
        self._inc = 0.0
        self._last_md_ns = now_ns
        self._clamp()

    def _standing_queue(self, fabric_delay: int, now_ns: int) -> float:
        """The queueing delay the samples show beyond what their scatter explains: the
        average fabric delay less ``_SCATTER_K`` times the mean difference between one sample
        and the next (jitter scatters every sample afresh; a queue changes little from one
        to the next). 0 until ``_SCATTER_SAMPLES`` differences have shown the scatter."""
        # the queue's level, averaged over time (about half a period), not over samples: a
        # flow with few samples then sees a queue rise and drain when one with many does
        # (averaged over samples, the small flows of an incast still saw the queue that had
        # gone and kept cutting, and the large ones kept their lead)
        dt = now_ns - self._lh_at
        self._lh_at = now_ns
        level = self._lh_level
        tau = max(self.params.base_rtt, self.params.lasthop_delay) // 2
        gain = 1.0 if level < 0 else min(1.0, dt / max(tau, 1))
        self._lh_level = level + gain * (fabric_delay - level) if level >= 0 else float(fabric_delay)
        last = self._last_fabric
        self._last_fabric = fabric_delay
        if last < 0:
            return 0.0
        self._scatter_n += 1
        # (the plain mean of the first differences, then a moving one: started from 0, the
        # moving mean understated the scatter of the first samples, and jitter marked)
        gain = max(_SCATTER_GAIN, 1 / self._scatter_n)
        self._scatter += gain * (abs(fabric_delay - last) - self._scatter)
        if self._scatter_n < _SCATTER_SAMPLES:
            return 0.0
        return self._lh_level - _SCATTER_K * self._scatter

    def on_loss(self, lost_bytes: int, now_ns: int) -> None:
        self._qa_armed = True

    def on_timeout(self, now_ns: int) -> None:
        self._qa_armed = True

    def on_app_limited(self, now_ns: int) -> None:
        self._app_limited_ns = now_ns


# registered by a call, not a decorator: mypyc compiles only undecorated classes natively
register_cc(Nscc)
