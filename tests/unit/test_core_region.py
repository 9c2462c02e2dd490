"""Registered regions: a lazy one's memory comes whole with its first write, and no write --
whatever the payload object -- lands outside the region or changes the buffer's size."""

from __future__ import annotations

import array

import pytest

from mrc_host.core.region import RegionTable
from mrc_host.wire.messages import NackReason

BASE = 0x1_0000_0000
RKEY = 0x1234
SIZE = 1 << 20


def test_a_lazy_region_is_allocated_whole_by_its_first_write_and_never_resized() -> None:
    table = RegionTable()
    r = table.register(BASE, SIZE, RKEY, lazy=True)
    assert r.length == SIZE and len(r.buffer) == 0 and not r.allocated
    assert table.write(BASE, RKEY, b"") is None and len(r.buffer) == 0  # a filler allocates nothing
    assert table.write(BASE + SIZE - 2, RKEY, b"xyz") is NackReason.BAD_ADDRESS
    assert len(r.buffer) == 0  # a refused write allocates nothing
    assert r.read(BASE + 10, 3) == bytes(3)  # nothing there yet: zeros
    assert table.write(BASE + 3 * 4096 + 10, RKEY, b"abc") is None
    assert r.allocated and len(r.buffer) == SIZE
    assert r.read(BASE + 3 * 4096 + 10, 3) == b"abc" and r.read(BASE + SIZE - 4, 4) == bytes(4)
    buffer = r.buffer
    assert table.write(BASE + SIZE - 3, RKEY, b"xyz") is None
    assert r.buffer is buffer and len(buffer) == SIZE  # the same buffer, the same size, for good
    with pytest.raises(BufferError):
        buffer.extend(b"more")  # the region's view pins its size


def test_an_eager_region_has_its_memory_at_once() -> None:
    table = RegionTable()
    r = table.register(BASE, 4096, RKEY)
    assert r.allocated and len(r.buffer) == 4096
    assert table.write(BASE + 4094, RKEY, b"ab") is None and r.read(BASE + 4094, 2) == b"ab"
    assert table.write(BASE + 4095, RKEY, b"ab") is NackReason.BAD_ADDRESS
    assert table.write(BASE - 1, RKEY, b"a") is NackReason.BAD_ADDRESS
    assert table.write(BASE, RKEY + 1, b"a") is NackReason.BAD_RKEY


def test_a_view_of_the_frame_is_written_exactly() -> None:
    table = RegionTable()
    r = table.register(BASE, 4096, RKEY)
    frame = bytes(range(256)) * 2
    assert table.write(BASE + 100, RKEY, memoryview(frame)[10:30]) is None
    assert r.read(BASE + 100, 20) == frame[10:30] and r.read(BASE + 120, 1) == b"\0"


@pytest.mark.parametrize(
    "payload",
    [
        memoryview(array.array("I", [1, 2, 3, 4])),  # len 4, 16 bytes
        memoryview(bytes(16)).cast("B", (4, 4)),  # len 4, 16 bytes
        memoryview(bytes(4)).cast("b"),  # len 4, 4 bytes, but not unsigned bytes
        memoryview(bytes(4)).cast("c"),
    ],
)
def test_a_view_whose_length_is_not_its_bytes_is_refused_and_writes_nothing(payload: memoryview) -> None:
    table = RegionTable()
    r = table.register(BASE, 64, RKEY, lazy=True)
    assert table.write(BASE + 60, RKEY, payload) is NackReason.BAD_ADDRESS
    assert len(r.buffer) == 0
    assert table.write(BASE, RKEY, b"x") is None
    assert table.write(BASE + 8, RKEY, payload) is NackReason.BAD_ADDRESS
    assert len(r.buffer) == 64 and r.read(BASE, 64) == b"x" + bytes(63)
