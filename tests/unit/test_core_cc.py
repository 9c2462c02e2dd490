"""NSCC-like window: the four (ECN, delay) cases, the once-per-RTT decrease, trims, bounds."""

from __future__ import annotations

from mrc_host.core.cc_window import WindowCc
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


# ---- NSCC (the default) and the registry -------------------------------------------------
import pytest  # noqa: E402

from mrc_host.core import NsccParams, TransportConfig, cc_names, create_cc  # noqa: E402
from mrc_host.core.cc_nscc import Nscc  # noqa: E402

N = NsccParams(
    base_rtt=10_000,
    target_delay=5_000,
    max_cwnd=1_000_000,
    min_cwnd=4096,
    initial_cwnd=100_000,
    adjust_bytes_threshold=1,  # apply every increase at once (easier to read)
)


def test_registry_selects_by_name_and_names_the_known_ones() -> None:
    create_cc(TransportConfig())  # registers the built-in algorithms
    assert {"nscc", "window", "fixed"} <= set(cc_names())
    assert isinstance(create_cc(TransportConfig()), Nscc)  # the default
    assert create_cc(TransportConfig(cc_algorithm="fixed")).cwnd == TransportConfig().nscc.max_cwnd
    with pytest.raises(ValueError, match="nscc"):
        create_cc(TransportConfig(cc_algorithm="cubic"))


def test_nscc_one_ecn_sample_does_not_halve_the_window() -> None:
    """Defect (issue 10): one ECN sample at 3x target halved the window (instantaneous delay)."""
    cc = Nscc(N)
    for t in range(20):  # a calm history: the average delay is low
        cc.on_ack(4096, rtt_ns=11_000, ecn=False, now_ns=t)
    before = cc.cwnd
    cc.on_ack(4096, rtt_ns=10_000 + 15_000, ecn=True, now_ns=100)
    assert cc.cwnd == before  # the average is still below target: no decrease
    old = WindowCc(P, 4096)
    old.on_ack(4096, rtt_ns=10_000 + 15_000, ecn=True, now_ns=100)
    assert old.cwnd <= 0.5 * 50_000 + 1  # what the first window did


def test_nscc_decrease_bounded_by_max_md_jump_once_per_base_rtt() -> None:
    cc = Nscc(N)
    for t in range(50):
        cc.on_ack(4096, rtt_ns=10_000 + 100_000, ecn=False, now_ns=t)  # a deep standing queue
    before = cc.cwnd
    cc.on_ack(4096, rtt_ns=110_000, ecn=True, now_ns=1_000)
    assert cc.cwnd == pytest.approx(before * (1 - N.max_md_jump))
    cc.on_ack(4096, rtt_ns=110_000, ecn=True, now_ns=2_000)  # same base RTT: no second cut
    assert cc.cwnd == pytest.approx(before * (1 - N.max_md_jump))
    cc.on_ack(4096, rtt_ns=110_000, ecn=True, now_ns=1_000 + N.base_rtt)
    assert cc.cwnd < before * (1 - N.max_md_jump)


def test_nscc_proportional_then_fast_increase() -> None:
    cc = Nscc(N)
    cc.on_ack(4096, rtt_ns=12_500, ecn=False, now_ns=1)  # half the target used: eta/2 per byte
    assert cc.cwnd == pytest.approx(100_000 + N.eta * 4096 * 0.5)
    cc2 = Nscc(N)
    steps = []
    for t in range(60):  # no queueing at all: after one window, fast increase
        before = cc2.cwnd
        cc2.on_ack(4096, rtt_ns=10_000, ecn=False, now_ns=t)
        steps.append(cc2.cwnd - before)
    assert steps[0] == pytest.approx(N.eta * 4096)
    assert steps[-1] == pytest.approx((N.fi_scale) * 4096)
    assert cc2._fast


def test_nscc_fair_increase_above_target_is_about_fi_per_window() -> None:
    cc = Nscc(N)
    acked = 0
    while acked < 100_000:
        cc.on_ack(4096, rtt_ns=30_000, ecn=False, now_ns=acked)
        acked += 4096
    assert N.fi * 0.8 < cc.cwnd - 100_000 < N.fi * 1.2


def test_nscc_quick_adapt_drops_to_what_was_delivered() -> None:
    cc = Nscc(N)
    cc.on_ack(4096, rtt_ns=11_000, ecn=False, now_ns=0)  # opens the first period
    cc.on_trim(10)  # congestion seen: quick adapt armed
    cc.on_ack(8192, rtt_ns=11_000, ecn=False, now_ns=100)
    cc.on_ack(4096, rtt_ns=11_000, ecn=False, now_ns=N.base_rtt + N.target_delay + 1)
    assert cc.quick_adapts == 1 and 12288 <= cc.cwnd <= 12288 + N.eta * 4096  # delivered + this ack
    cc.on_ack(4096, rtt_ns=11_000, ecn=False, now_ns=3 * (N.base_rtt + N.target_delay))
    assert cc.quick_adapts == 1  # not armed again: no second drop
