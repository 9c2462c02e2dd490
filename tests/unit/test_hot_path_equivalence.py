"""Per-packet helpers written for compiled speed give what their plain definitions give."""

from __future__ import annotations

import bisect

from hypothesis import given
from hypothesis import strategies as st

from mrc_host.core import rangeset
from mrc_host.wire.messages import ACK_ECHO_MAX, ack_echo_of
from mrc_host.wire.virtual_payload import VirtualPayload


def reference_echo(echo_ts: int, echo_ev: int) -> int:
    return ((echo_ts ^ echo_ev * 0x9E3779B1) & 0xFFFFFFFF) % ACK_ECHO_MAX + 1


@given(
    st.one_of(st.integers(0, 2**64 - 1), st.integers(-(2**70), 2**70)),
    st.one_of(st.integers(0, 2**32 - 1), st.integers(-(2**40), 2**64)),
)
def test_the_ack_echo_is_its_defining_formula(echo_ts: int, echo_ev: int) -> None:
    assert ack_echo_of(echo_ts, echo_ev) == reference_echo(echo_ts, echo_ev)


def test_the_ack_echo_at_the_edges_of_its_fields() -> None:
    for ts in (0, 1, 0xFFFFFFFF, 2**32, 2**64 - 1):
        for ev in (0, 1, 0x7FFFFFFF, 0xFFFFFFFF):
            assert ack_echo_of(ts, ev) == reference_echo(ts, ev)


@given(st.integers(0, 2**26 - 1), st.integers(0, 2**40), st.integers(0, 9000), st.data())
def test_a_virtual_piece_is_the_slice(key: int, offset: int, length: int, data: st.DataObject) -> None:
    v = VirtualPayload(key, offset, length)
    start = data.draw(st.integers(0, length))
    stop = data.draw(st.integers(start, length))
    got, want = v.piece(start, stop), v[start:stop]
    assert (got.key, got.offset, got.length, got.check) == (want.key, want.offset, want.length, want.check)


@given(st.lists(st.integers(-50, 50)), st.integers(-60, 60))
def test_the_range_sets_searches_are_bisects(items: list[int], x: int) -> None:
    a = sorted(items)
    assert rangeset.bisect_left(a, x) == bisect.bisect_left(a, x)
    assert rangeset.bisect_right(a, x) == bisect.bisect_right(a, x)
