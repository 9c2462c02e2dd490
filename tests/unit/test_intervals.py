"""Verdicts over seeds: read from the 95 % bootstrap interval, never from the median alone."""

from __future__ import annotations

from bench.intervals import FAILS, HOLDS, TIES, Bar, bootstrap, judge, row_verdict


def test_interval_brackets_the_median_and_is_repeatable() -> None:
    values = [1.0, 1.2, 0.9, 1.1, 1.05, 0.95, 1.3, 1.0, 1.02, 0.98]
    iv = bootstrap(values)
    assert iv.lo <= iv.median <= iv.hi and iv.median == 1.01
    assert bootstrap(values) == iv
    assert bootstrap([2.0] * 5) == bootstrap([2.0] * 5) and bootstrap([2.0] * 5).lo == 2.0


def test_a_shape_holds_only_when_the_interval_clears_its_bar() -> None:
    bar = Bar(lo=0.25, hi=0.75)
    assert judge([0.4, 0.5, 0.45, 0.6, 0.55], bar)["verdict"] == HOLDS
    # median inside the bar, but one seed in five at 0: the interval crosses the bar
    j = judge([0.0, 0.0, 0.0, 0.3, 0.31], bar)
    assert j["verdict"] == FAILS and j["ci95"][0] < 0.25
    j = judge([0.3, 0.31, 0.32, 0.0, 0.33], bar)
    assert j["median"] == 0.31 and j["verdict"] == FAILS  # the median alone would say holds
    # a seed without a value (a run that never ended) cannot clear a bar
    assert judge([0.5, None, 0.5], bar)["verdict"] == FAILS


def test_a_comparison_holding_parity_is_a_tie() -> None:
    parity = Bar(parity=1)
    assert judge([0.69, 0.99, 0.95, 1.02, 0.67], parity)["verdict"] == TIES
    assert judge([1.2, 1.17, 1.22, 1.27, 1.17], parity)["verdict"] == HOLDS
    assert judge([0.8, 0.85, 0.9, 0.82, 0.88], parity)["verdict"] == FAILS
    assert row_verdict([HOLDS, TIES]) == TIES and row_verdict([HOLDS, HOLDS]) == HOLDS
    assert row_verdict([TIES, FAILS]) == FAILS and row_verdict([]) == FAILS
