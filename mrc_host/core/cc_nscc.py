"""UET's NSCC (registered as ``nscc``, the default): see ``NsccParams`` for the rules.

What makes it NSCC rather than the first window: the decrease is sized by the *averaged*
queueing delay and bounded by ``max_md_jump``; increases are additive (a fixed number of
bytes per window acknowledged, scaled by the delay headroom, as in htsim's ``uec.cpp``),
turn into a fast increase after a whole window at almost no delay, and are applied in
batches; quick adapt drops the window at once to what the network actually delivered when
that collapsed.

Three departures from UET, all because MRC's switches mark no ECN on the last hop:
- a *standing* queue (the smallest delay of the last periods above the target, and the
  samples' mean within a third of it above) decreases the window like an ECN mark does.
  Jitter raises the floor too, but its samples scatter as far above it as it stands, once
  the floor has seen enough of them (``_FLOOR_SAMPLES``); the signal never reaches the EV
  set, so it steers no traffic;
- the window cap follows the RTT's spread: ``bdp`` + 2 MTU plus the line rate times
  (average delay - floor delay), up to ``max_cwnd``. A jittery fabric gets the window its
  longer RTT needs; a calm one keeps about a BDP in flight, which is what a path that dies
  under it loses. Both delays leave out each packet's wait for the sender's own NIC port:
  a window above a BDP queues there, and counted as spread that queue raised the cap that
  made it (a lone 41 us flow held 1.2 BDP, and a black hole took 1.45 x a BDP/paths);
- a trim at the receiver's own port (NACK TRIMMED_LASTHOP) proves a queue there: for
  ``_LASTHOP_MEMORY`` periods after it (or after the last sample so marked), a delay above
  half the target counts as the mark that port does not set. In UET the last hop marks (or
  receiver credits pace an incast), and marks from well below the target (htsim's ECN ramp
  starts at 0.2 BDP of queue, its target is 0.75 RTT): between the two, NSCC's "ECN, delay
  below target" holds a window still, and only above the target does it decrease. Here the
  windows of an incast shrink after its first round of trims instead of trimming for its
  whole length.
"""

from __future__ import annotations

from .cc_base import CongestionControl, register_cc
from .config import NsccParams, TransportConfig

_FLOOR_PERIODS = 8  # the delay floor is the smallest sample of at least this many periods ...
# ... and of at least this many samples. The floor of random per-hop delay is the least of a
# sum of draws, so it depends on how many samples it saw: 8 hops of 0..3 us give a floor near
# 8 us from a dozen samples (a slow flow's 8 periods) and near 6 us from 64, where the mean
# is 12 us. A dozen samples therefore looked like a standing queue, each decrease made the
# flow slower, its floor higher and the next decrease likelier; 64 keep the floor of such
# jitter well under three quarters of the mean (the last-hop guard below).
_FLOOR_SAMPLES = 64
# a trim at the receiver's own port proves a queue there: for this many periods after it, and
# after each sample it marks, a delay sample above half the target counts as a mark its
# switch did not set (the receiver's port: it steers no EV). Shorter memories let a flow
# whose window the incast shrank grow back into the same queue and trim again; one counted
# from the trim alone ran out in a long incast (8 MiB x 8: a round of trims every 128 periods)
_LASTHOP_MEMORY = 128


class Nscc(CongestionControl):
    name = "nscc"

    @classmethod
    def from_config(cls, cfg: TransportConfig) -> Nscc:
        return cls(cfg.nscc)

    def __init__(self, p: NsccParams) -> None:
        self.p = p
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
        # the delay floor: per period (min, samples, sum of delays), the current one and the
        # last ones, as many as _FLOOR_PERIODS and _FLOOR_SAMPLES need
        self._period_end_ns: int | None = None
        self._period_min: int | None = None
        self._period_n = 0
        self._period_sum = 0
        self._floors: list[tuple[int, int, int]] = []
        self._floor_n = 0  # samples in self._floors
        self._floor_sum = 0
        self._floor_min: int | None = None  # the least of self._floors
        self._calm_from_ns = 0  # no headroom for spread before this: a trim says it is a queue
        self._lasthop_until_ns = 0  # until then a last-hop trim's queue is known (_LASTHOP_MEMORY)
        self._now_ns = 0
        self.quick_adapts = 0
        self.decreases = 0
        self.lasthop_decreases = 0  # decreases on a standing queue without ECN

    def _base_cap(self) -> int:
        p = self.p
        return min(p.bdp + 2 * p.min_cwnd, p.max_cwnd) if p.bdp else p.max_cwnd

    @property
    def floor_delay(self) -> int | None:
        """The smallest delay sample of the last periods (the standing queue)."""
        return self._floor_min

    @property
    def cap(self) -> float:
        """The window cap now: a BDP plus what the RTT's spread needs (see the module)."""
        p = self.p
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
        self.cwnd = min(max(self.cwnd, float(self.p.min_cwnd)), self.cap)

    def _track_floor(self, delay: int, now_ns: int) -> bool:
        """Keep the per-period delay floors; True when a period just closed."""
        if self._period_min is None or delay < self._period_min:
            self._period_min = delay
        self._period_n += 1
        self._period_sum += delay
        # a period is the fabric's longest base RTT (lasthop_delay) when it is set: flows of
        # different RTTs then see the same queue through the same number of samples
        period = max(self.p.base_rtt, self.p.lasthop_delay)
        if self._period_end_ns is None:
            self._period_end_ns = now_ns + period
            return False
        if now_ns < self._period_end_ns:
            return False
        floors = self._floors
        floors.append((self._period_min, self._period_n, self._period_sum))
        self._floor_n += self._period_n
        self._floor_sum += self._period_sum
        # every period holds a sample (the one that closed it): at most _FLOOR_SAMPLES periods
        while len(floors) > _FLOOR_PERIODS and self._floor_n - floors[0][1] >= _FLOOR_SAMPLES:
            _, n, total = floors.pop(0)
            self._floor_n -= n
            self._floor_sum -= total
        self._floor_min = min(f[0] for f in floors)
        self._period_min = None
        self._period_n = 0
        self._period_sum = 0
        self._period_end_ns = now_ns + period
        return True

    def _quick_adapt(self, now_ns: int) -> None:
        p = self.p
        if self._qa_end_ns is None:
            self._qa_end_ns = now_ns + p.base_rtt + p.target_delay
            return
        if now_ns < self._qa_end_ns:
            return
        # a period is one RTT as measured (base_rtt + target_delay on a calm fabric): on a
        # jittery one a shorter period would see too few acks and adapt for nothing
        period = p.base_rtt + max(p.target_delay, int(self.avg_delay or 0))
        if self._qa_armed and self._qa_bytes < int(self.cwnd) >> p.qa_gate:
            self.cwnd = float(self._qa_bytes)
            self._clamp()
            self._inc = 0.0
            self._fast = False
            self._fi_bytes = 0
            self.quick_adapts += 1
        self._qa_armed = False
        self._qa_bytes = 0
        self._qa_end_ns = now_ns + period

    def _rtt_scale(self, avg: float) -> float:
        """The increments' share for a flow shorter than the fabric's longest base RTT
        (``network_rtt``): (its RTT / that one's)^2 at the same queue delay. A window grows by
        its increment once per RTT, so the rate grows by the increment over the RTT squared:
        flows of different RTTs then grow alike in rate."""
        p = self.p
        if p.network_rtt <= p.base_rtt:
            return 1.0
        ratio = (p.base_rtt + avg) / (p.network_rtt + avg)
        return ratio * ratio

    def _decrease(self, excess_over: float, now_ns: int) -> bool:
        """Multiplicative decrease sized by ``excess_over`` (a delay above target), at
        most once per base RTT; True when it happened."""
        p = self.p
        target = max(p.target_delay, 1)
        if self._last_md_ns is not None and now_ns - self._last_md_ns < p.base_rtt:
            return False
        if excess_over <= target:
            return False
        cut = min(p.gamma * (excess_over - target) / excess_over, p.max_md_jump)
        self.cwnd *= 1.0 - cut
        self._inc = 0.0
        self._last_md_ns = now_ns
        self.decreases += 1
        self._clamp()
        return True

    def on_ack(
        self, acked_bytes: int, rtt_ns: int | None, ecn: bool, now_ns: int, port_wait_ns: int = 0
    ) -> None:
        p = self.p
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
        closed = self._track_floor(fabric, now_ns)
        if avg > p.qa_threshold * target:
            self._qa_armed = True
        trim_marked = p.lasthop_trim_mark and now_ns < self._lasthop_until_ns and 2 * delay > target
        if ecn or trim_marked:
            # (a real mark, or the last hop's queue that a trim there has shown: marked from
            # half the target, as a switch's ECN starts below it, so that between the two the
            # window holds -- marked above the target, the fair increase of every flow of an
            # incast (5 packets a window at UET's reference) filled the queue to the trim)
            self._fast = False
            self._fi_bytes = 0
            if trim_marked:  # the queue still stands: remember it as long
                self._remember_lasthop_queue(now_ns)
            if delay > target:
                self._decrease(avg, now_ns)
            return
        floor = 0
        if closed and self._floor_n >= _FLOOR_SAMPLES:
            floor = self._floor_min or 0
            mean = self._floor_sum / self._floor_n  # of the samples the floor is the least of
            if floor <= 3 * (mean - floor):
                floor = 0
        if floor > max(target, p.lasthop_delay):
            # no mark, yet every sample of the last periods waited in a queue that moves
            # less than it stands (jitter moves as much as it adds): the last hop, which
            # marks nothing -- decrease as a mark would
            self._fast = False
            self._fi_bytes = 0
            if self._decrease(float(floor), now_ns):
                self.lasthop_decreases += 1
                return
        if delay > target:
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
        if lasthop:
            self._remember_lasthop_queue(now_ns)
        # the RTT's spread came from a queue that overflowed, not from jitter: no headroom
        # for it until _FLOOR_PERIODS base RTTs pass without a trim
        self._calm_from_ns = now_ns + _FLOOR_PERIODS * self.p.base_rtt
        self.cwnd -= self.p.min_cwnd
        self._clamp()

    def _remember_lasthop_queue(self, now_ns: int) -> None:
        """A queue at the receiver's own port is known for ``_LASTHOP_MEMORY`` periods from now."""
        period = max(self.p.base_rtt, self.p.lasthop_delay)
        self._lasthop_until_ns = now_ns + _LASTHOP_MEMORY * period

    def on_loss(self, lost_bytes: int, now_ns: int) -> None:
        self._qa_armed = True

    def on_timeout(self, now_ns: int) -> None:
        self._qa_armed = True


# registered by a call, not a decorator: mypyc compiles only undecorated classes natively
register_cc(Nscc)
