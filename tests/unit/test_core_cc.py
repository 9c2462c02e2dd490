"""NSCC-like window: the four (ECN, delay) cases, the once-per-RTT decrease, trims, bounds."""

from __future__ import annotations

from mrc_host.core.cc import WindowCc
from mrc_host.core.config import CcParams

P = CcParams(
    base_rtt_ns=10_000,
    target_delay_ns=5_000,
    max_cwnd_bytes=100_000,
    min_cwnd_bytes=4096,
    initial_cwnd_bytes=50_000,
)


def test_no_ecn_low_delay_grows_proportionally_up_to_max() -> None:
    cc = WindowCc(P, 4096)
    cc.on_ack(4096, rtt_ns=10_000, ecn=False, now_ns=1)  # zero queueing delay
    assert cc.cwnd == 50_000 + 0.5 * 4096
    slower = WindowCc(P, 4096)
    slower.on_ack(4096, rtt_ns=14_000, ecn=False, now_ns=1)  # 4 us of 5 us target used
    assert 50_000 < slower.cwnd < cc.cwnd
    for i in range(1000):
        cc.on_ack(4096, 10_000, False, i)
    assert cc.cwnd == P.max_cwnd_bytes


def test_no_ecn_high_delay_fair_increase_is_small() -> None:
    cc = WindowCc(P, 4096)
    cc.on_ack(4096, rtt_ns=30_000, ecn=False, now_ns=1)
    assert 50_000 < cc.cwnd < 50_000 + 4096 * 4096 / 50_000 + 1


def test_ecn_with_delay_cuts_once_per_base_rtt() -> None:
    cc = WindowCc(P, 4096)
    cc.on_ack(4096, rtt_ns=30_000, ecn=True, now_ns=100)
    after_first = cc.cwnd
    assert after_first <= 50_000 * (1 - P.md_gain * 1.0) + 1  # delay far above target: full cut
    cc.on_ack(4096, rtt_ns=30_000, ecn=True, now_ns=200)  # same RTT: no second cut
    assert cc.cwnd == after_first
    cc.on_ack(4096, rtt_ns=30_000, ecn=True, now_ns=100 + P.base_rtt_ns)
    assert cc.cwnd < after_first


def test_ecn_without_delay_leaves_window_alone_and_trims_cost_an_mtu() -> None:
    cc = WindowCc(P, 4096)
    cc.on_ack(4096, rtt_ns=11_000, ecn=True, now_ns=1)
    assert cc.cwnd == 50_000
    assert cc.ecn_fraction > 0
    cc.on_trim()
    assert cc.cwnd == 50_000 - 4096
    for _ in range(100):
        cc.on_trim()
    assert cc.cwnd == P.min_cwnd_bytes
