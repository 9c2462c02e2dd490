"""A simulated connection's bytes: every aligned word differs, the same for the same seed."""

from __future__ import annotations

import pytest

from mrc_host.core.region import HUGE_PAGE, RegionTable
from mrc_host.sim.network import COMPARE_CHUNK, prefix, same_prefix
from mrc_host.sim.payload import _source, pattern_segments, payload_pattern


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


@pytest.mark.parametrize("size", [1, 9, 64, 65, 4096 * 8 + 3])
def test_the_segments_are_the_pattern_as_read_only_views_of_one_source(size: int) -> None:
    """What a connection posts: at most eight views, none empty, that join to the pattern,
    and none writable (the sender keeps them uncopied until the write completes)."""
    segments = pattern_segments(1, 0, size)
    assert 1 <= len(segments) <= 8 and all(len(s) and s.readonly for s in segments)
    assert b"".join(segments) == payload_pattern(1, 0, size)
    assert len({id(s.obj) for s in segments}) == 1
    for n in (1, size // 2, size):
        if n:
            assert b"".join(prefix(segments, n)) == payload_pattern(1, 0, size)[:n]


@pytest.mark.parametrize("size", [HUGE_PAGE - 1, 3 * HUGE_PAGE + 5])
def test_the_data_check_finds_one_wrong_byte_in_a_region_of_either_kind(size: int) -> None:
    """``data_ok``'s comparison against the posted segments, on a bytearray region and on a
    mapped one (compared a chunk at a time): a whole match, a prefix, and one wrong byte
    anywhere, segment boundaries included."""
    segments = pattern_segments(3, 0, size)
    data = b"".join(segments)
    table = RegionTable()
    region = table.register(0, size, 1)
    assert table.write(0, 1, data) is None
    assert same_prefix(region.buffer, segments, size) and same_prefix(region.buffer, segments, size - 7)
    assert not same_prefix(region.buffer, prefix(segments, size - 1), size)  # shorter than asked
    boundary = len(segments[0])
    for at in (0, COMPARE_CHUNK - 1, COMPARE_CHUNK, boundary - 1, boundary, size - 1):
        table.write(at, 1, bytes([data[at] ^ 0x10]))
        assert not same_prefix(region.buffer, segments, size), at
        assert same_prefix(region.buffer, segments, at)  # everything before it still matches
        table.write(at, 1, data[at : at + 1])
    assert same_prefix(region.buffer, segments, size)
