"""The first NSCC-like window (registered as ``window``); see ``CcParams`` for its four cases.

Kept for comparison with ``nscc``: its decrease reacts to one instantaneous delay sample.
"""

from __future__ import annotations

from .cc_base import CongestionControl, register_cc
from .config import CcParams, TransportConfig


class WindowCc(CongestionControl):
    name = "window"

    @classmethod
    def from_config(cls, cfg: TransportConfig) -> WindowCc:
        return cls(cfg.cc, cfg.mtu)

    def __init__(self, p: CcParams, mtu: int) -> None:
        self.params = p
        self.mtu = mtu
        self.cwnd = float(p.initial_cwnd_bytes or p.max_cwnd_bytes)
        self.ecn_fraction = 0.0
        self._last_md_ns: int | None = None

    def _clamp(self) -> None:
        self.cwnd = min(max(self.cwnd, float(self.params.min_cwnd_bytes)), float(self.params.max_cwnd_bytes))

    def on_ack(
        self, acked_bytes: int, rtt_ns: int | None, ecn: bool, now_ns: int, port_wait_ns: int = 0
    ) -> None:
        p = self.params
        self.ecn_fraction += p.ecn_alpha * ((1.0 if ecn else 0.0) - self.ecn_fraction)
        if rtt_ns is None or acked_bytes <= 0:
            return
        delay = max(0, rtt_ns - p.base_rtt_ns)
        target = p.target_delay_ns
        if ecn:
            if delay > target and (self._last_md_ns is None or now_ns - self._last_md_ns >= p.base_rtt_ns):
                excess = min(1.0, (delay - target) / max(target, 1))
                factor = p.md_gain * max(excess, self.ecn_fraction)
                self.cwnd *= 1.0 - factor
                self._last_md_ns = now_ns
        elif delay <= target:
            self.cwnd += p.proportional_gain * acked_bytes * (target - delay) / max(target, 1)
        else:
            self.cwnd += p.fair_increase_bytes * acked_bytes / self.cwnd
        self._clamp()

    def on_trim(self, now_ns: int = 0, lasthop: bool = False) -> None:
        self.cwnd -= self.mtu
        self._clamp()


# registered by a call, not a decorator: mypyc compiles only undecorated classes natively
register_cc(WindowCc)
