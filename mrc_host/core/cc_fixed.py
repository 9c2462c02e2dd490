"""A constant window (registered as ``fixed``): ``max_cwnd`` bytes, whatever happens.

The reference point for the others, and what a RoCE NIC without congestion control does.
"""

from __future__ import annotations

from .cc_base import CongestionControl, register_cc
from .config import TransportConfig


class FixedCc(CongestionControl):
    name = "fixed"

    @classmethod
    def from_config(cls, cfg: TransportConfig) -> FixedCc:
        return cls(float(cfg.nscc.max_cwnd))

    def __init__(self, cwnd: float) -> None:
        self.cwnd = cwnd

    def on_ack(
        self, acked_bytes: int, rtt_ns: int | None, ecn: bool, now_ns: int, port_wait_ns: int = 0
    ) -> None:
        return None


# registered by a call, not a decorator: mypyc compiles only undecorated classes natively
register_cc(FixedCc)
