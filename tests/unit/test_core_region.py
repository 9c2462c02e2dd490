"""Registered regions: a lazy one's memory comes whole with its first write, and no write --
whatever the payload object -- lands outside the region or changes the buffer's size."""

from __future__ import annotations

import array
import ctypes
import mmap
from pathlib import Path

import pytest

from mrc_host.core.region import HUGE_PAGE, RegionTable
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


def test_a_large_region_is_a_private_mapping_advised_as_huge_pages() -> None:
    """From ``HUGE_PAGE`` up a region's memory is an anonymous private mapping (its first pass
    of packets faults it in 2 MiB at a time where the kernel allows huge pages): it is zeroed,
    takes writes exactly where they land, and cannot be resized."""
    table = RegionTable()
    r = table.register(BASE, 2 * HUGE_PAGE, RKEY, lazy=True)
    assert len(r.buffer) == 0
    assert table.write(BASE + HUGE_PAGE - 2, RKEY, b"abcd") is None
    assert isinstance(r.buffer, mmap.mmap) and len(r.buffer) == 2 * HUGE_PAGE
    assert r.read(BASE + HUGE_PAGE - 3, 6) == b"\0abcd\0" and r.read(BASE + 2 * HUGE_PAGE - 1, 1) == b"\0"
    assert table.write(BASE + 2 * HUGE_PAGE - 1, RKEY, b"xy") is NackReason.BAD_ADDRESS
    with pytest.raises(BufferError):
        r.buffer.resize(3 * HUGE_PAGE)  # the region's view pins its size
    small = table.register(BASE, HUGE_PAGE - 1, RKEY + 1)
    assert isinstance(small.buffer, bytearray)  # a small region pays no system call
    if not hasattr(mmap, "MADV_HUGEPAGE") or "[never]" in _read(THP_MODE):
        return  # the kernel gives no huge pages here: nothing more to see
    vma = _smaps_entry(ctypes.addressof(ctypes.c_char.from_buffer(r.buffer)))
    assert vma.get("THPeligible") == "1", vma  # advised: the kernel may back it with huge pages


THP_MODE = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else "[never]"


def _smaps_entry(address: int) -> dict[str, str]:
    """The fields of the ``/proc/self/smaps`` entry whose range holds ``address``."""
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:  # a mapping's first line: its address range
            if inside:
                break
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields
