"""``bench.htsim_a2a``'s verdict: mrc-sim's trims and resends at most 1.5x htsim's.

Why: with the ECN/trim penalty escalating, mrc-sim trims about two thirds of what htsim's
reference does on the all-to-all (whose receiver credits run it at twice mrc-sim's time);
the old "within 1.5x either way" rule called that a failure.
"""

from __future__ import annotations

from typing import Any

from bench.htsim_a2a import at_most, verdict


def rows(trims: int, resends: int, rto: int = 0) -> list[dict[str, Any]]:
    return [{"trims": trims, "resends": resends, "rto": rto, "completed": True}]


def test_fewer_trims_than_htsim_pass_and_more_than_one_and_a_half_times_fail() -> None:
    assert at_most(250, 380) and at_most(0, 0) and at_most(1, 0)
    assert at_most(570, 380) and not at_most(571, 380)
    v = verdict(rows(250, 320), rows(380, 425), rows(0, 44))
    assert v == {
        "no_rto_any_seed": True,
        "all_completed": True,
        "trims_at_most_1.5x_htsim": True,
        "resends_at_most_1.5x_htsim": True,
    }
    v = verdict(rows(1350, 1420, rto=2), rows(380, 425), rows(0, 44))
    assert not v["no_rto_any_seed"] and not v["trims_at_most_1.5x_htsim"]
