"""24-bit PSN arithmetic around the wrap point."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mrc_host.core.psn import PSN_MODULUS, psn_of, unwrap


def test_unwrap_across_the_wrap() -> None:
    ref = PSN_MODULUS - 2  # seq just below the wrap
    assert unwrap(1, ref) == PSN_MODULUS + 1
    assert unwrap(PSN_MODULUS - 5, PSN_MODULUS + 3) == PSN_MODULUS - 5
    assert psn_of(PSN_MODULUS + 7) == 7


@given(st.integers(min_value=0, max_value=1 << 40), st.integers(min_value=-(1 << 22), max_value=1 << 22))
def test_unwrap_inverts_psn_of_within_half_space(ref: int, delta: int) -> None:
    seq = ref + delta
    assert unwrap(psn_of(seq), ref) == seq
