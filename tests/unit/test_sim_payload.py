"""A simulated connection's bytes: every aligned word differs, the same for the same seed."""

from __future__ import annotations

import pytest

from mrc_host.sim.payload import _source, payload_pattern


@pytest.mark.parametrize("size", [1, 7, 8, 32768, 32769, 3 << 20])
def test_every_aligned_word_differs_and_the_pattern_is_seeded(size: int) -> None:
    data = payload_pattern(1, 0, size)
    assert len(data) == size and data == payload_pattern(1, 0, size)
    words = memoryview(data)[: size // 8 * 8].cast("Q")
    assert len(set(words)) == len(words)
    if size >= 8:
        assert data != payload_pattern(2, 0, size) and data != payload_pattern(1, 1, size)


def test_the_source_windows_differ_at_every_offset_across_blocks() -> None:
    """The eight shifted copies hold every aligned word once only because the source's
    8-byte windows differ at every offset, also where one block of units meets the next."""
    source = _source(3, 2, 3 * 32768 + 11)
    windows = {bytes(source[i : i + 8]) for i in range(len(source) - 7)}
    assert len(source) == 3 * 32768 + 11 and len(windows) == len(source) - 7
