"""UET's NSCC (registered as ``nscc``, the default): see ``NsccParams`` for the rules.

What makes it NSCC rather than the first window: the decrease is sized by the *averaged*
queueing delay and bounded by ``max_md_jump``; increases are proportional to the delay
headroom, turn into a fast increase after a whole window at almost no delay, and are
applied in batches; quick adapt drops the window at once to what the network actually
delivered when that collapsed.
"""

from __future__ import annotations

from .cc_base import CongestionControl, register_cc
from .config import NsccParams, TransportConfig


class Nscc(CongestionControl):
    name = "nscc"

    @classmethod
    def from_config(cls, cfg: TransportConfig) -> Nscc:
        return cls(cfg.nscc)

    def __init__(self, p: NsccParams) -> None:
        self.p = p
        self.cwnd = float(p.initial_cwnd or p.max_cwnd)
        self.avg_delay: float | None = None
        self._inc = 0.0  # increase gathered since the last adjustment
        self._adjust_bytes = 0
        self._adjust_ns: int | None = None
        self._last_md_ns: int | None = None
        self._fi_bytes = 0  # bytes acked in a row at almost no delay
        self._fast = False
        self._qa_end_ns: int | None = None
        self._qa_bytes = 0
        self._qa_armed = False
        self.quick_adapts = 0
        self.decreases = 0

    def _clamp(self) -> None:
        p = self.p
        self.cwnd = min(max(self.cwnd, float(p.min_cwnd)), float(p.max_cwnd))

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

    def on_ack(self, acked_bytes: int, rtt_ns: int | None, ecn: bool, now_ns: int) -> None:
        p = self.p
        self._quick_adapt(now_ns)
        self._qa_bytes += acked_bytes
        if rtt_ns is None or acked_bytes <= 0:
            return
        delay = max(0, rtt_ns - p.base_rtt)
        avg = self.avg_delay
        avg = float(delay) if avg is None else avg + p.delay_weight * (delay - avg)
        self.avg_delay = avg
        target = max(p.target_delay, 1)
        if avg > p.qa_threshold * target:
            self._qa_armed = True
        if ecn:
            self._fast = False
            self._fi_bytes = 0
            once_per_rtt = self._last_md_ns is None or now_ns - self._last_md_ns >= p.base_rtt
            if delay > target and avg > target and once_per_rtt:
                cut = min(p.gamma * (avg - target) / avg, p.max_md_jump)
                self.cwnd *= 1.0 - cut
                self._inc = 0.0
                self._last_md_ns = now_ns
                self.decreases += 1
                self._clamp()
            return
        if delay > target:
            self._fast = False
            self._fi_bytes = 0
            self._inc += p.fi * acked_bytes / self.cwnd
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
                self._inc += p.eta * acked_bytes * (target - delay) / target
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

    def on_trim(self, now_ns: int = 0) -> None:
        self._qa_armed = True
        self.cwnd -= self.p.min_cwnd
        self._clamp()

    def on_loss(self, lost_bytes: int, now_ns: int) -> None:
        self._qa_armed = True

    def on_timeout(self, now_ns: int) -> None:
        self._qa_armed = True


# registered by a call, not a decorator: mypyc compiles only undecorated classes natively
register_cc(Nscc)
