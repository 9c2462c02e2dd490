"""The service gap both watches keep (``service_gap.widened_gap``): a sample only from a copy
that waited behind the previous delivery, the largest lately, forgotten slowly."""

from __future__ import annotations

from mrc_host.core.service_gap import SERVICE_GAP_DECAY, widened_gap


def test_a_copy_that_left_after_the_last_delivery_says_nothing_of_the_spacing() -> None:
    assert widened_gap(1_000.0, last_ns=50_000, left_ns=50_000, now_ns=60_000) == 1_000.0
    assert widened_gap(1_000.0, last_ns=50_000, left_ns=55_000, now_ns=60_000) == 1_000.0


def test_a_copy_that_waited_behind_it_is_a_sample_the_largest_kept() -> None:
    assert widened_gap(1_000.0, last_ns=50_000, left_ns=49_000, now_ns=53_000) == 3_000.0
    kept = widened_gap(3_000.0, last_ns=50_000, left_ns=49_000, now_ns=50_500)
    assert kept == 3_000.0 * SERVICE_GAP_DECAY  # (a shorter wait: the longest, a little forgotten)


def test_a_long_wait_is_forgotten_over_a_few_dozen_deliveries() -> None:
    gap = 8_000.0
    for i in range(64):
        gap = widened_gap(gap, last_ns=100_000 + i * 100, left_ns=0, now_ns=100_000 + i * 100 + 100)
    assert 100.0 < gap < 8_000.0 / 4
