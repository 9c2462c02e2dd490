"""A write posted as a gather list: packets cut across segment boundaries, views held
without a copy, anything the caller could still change copied when posted."""

from __future__ import annotations

import random

import pytest

from mrc_host.core.records import PendingWrite, held
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataPacket


def _bytes(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("sizes", [[1, 1023, 1024, 1025, 7, 3000], [5000], [512, 512, 512], [1, 1, 1]])
def test_a_gather_list_lands_as_one_write_in_order(sizes: list[int]) -> None:
    """Segments of any length, packet boundaries inside and across them (MTU 1024): the
    region holds their concatenation, one completion each side, and every packet but the
    last is a full MTU."""
    segments = [memoryview(_bytes(n, k)).toreadonly() for k, n in enumerate(sizes)]
    whole = b"".join(segments)
    p = make_pair(size=len(whole))
    _, acts = p.a.post_write(segments, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    p.deliver(keep=lambda m: not (isinstance(m, DataPacket) and m.psn == 1 and m.send_ts == 0))
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == whole
    assert len(p.received_done()) == 1 and [s.ok for s in p.sent_done()] == [True]
    lengths = [len(m.payload) for m in p.sent_log if isinstance(m, DataPacket)]
    assert lengths == [1024] * (len(whole) // 1024) + ([len(whole) % 1024] if len(whole) % 1024 else [])


def test_a_lost_packet_that_spans_two_segments_is_resent_with_the_same_bytes() -> None:
    """The second packet (bytes 1024..2047) spans the first two segments; dropping its first
    copy makes the sender resend it from the record it kept."""
    segments = [memoryview(_bytes(1500, 1)).toreadonly(), memoryview(_bytes(2000, 2)).toreadonly()]
    whole = b"".join(segments)
    p = make_pair(size=len(whole))
    _, acts = p.a.post_write(segments, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    dropped: list[int] = []

    def keep(m: object) -> bool:
        if isinstance(m, DataPacket) and m.vaddr == BASE + 1024 and not dropped:
            dropped.append(m.psn)
            return False
        return True

    p.settle(keep)
    region = p.b.regions.get(RKEY)
    assert dropped and region is not None and bytes(region.buffer) == whole
    sent = [m for m in p.sent_log if isinstance(m, DataPacket) and m.vaddr == BASE + 1024]
    assert len(sent) >= 2 and all(bytes(m.payload) == whole[1024:2048] for m in sent)


def test_read_only_views_are_held_and_writable_buffers_copied() -> None:
    source = bytearray(_bytes(4096, 3))
    view = memoryview(source).toreadonly()
    assert held(view) is view  # no copy: the caller keeps it unchanged until completion
    assert held(b"abc") == b"abc"
    writable = held(source)
    assert isinstance(writable, bytes) and writable == source  # a copy, taken when posted
    assert isinstance(held(memoryview(source)), bytes)  # a writable view: copied
    assert held(view.cast("B", (64, 64))) == bytes(source)  # two dimensions: flattened copy
    assert held(memoryview(bytes(8)).cast("Q")) == bytes(8)  # words, not bytes: a copy


def test_changing_a_posted_bytearray_changes_nothing_sent() -> None:
    data = bytearray(_bytes(3000, 4))
    before = bytes(data)
    p = make_pair(size=3000)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    data[:] = bytes(3000)
    p.absorb(p.a, acts)
    p.deliver()
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == before


def test_packets_of_a_view_are_views_of_its_memory() -> None:
    """The sender slices a posted view: its packets' payloads share the caller's memory."""
    source = _bytes(4096, 5)
    p = make_pair(size=4096)
    _, acts = p.a.post_write([memoryview(source)], BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    payloads = [m.payload for m in p.sent_log if isinstance(m, DataPacket)]
    assert payloads and all(isinstance(x, memoryview) and x.obj is source for x in payloads)


def test_take_cuts_in_order_and_an_empty_list_gives_empty_packets() -> None:
    w = PendingWrite(1, [b"ab", b"cde", b"f"], 0, 0)
    assert w.length == 6 and [bytes(w.take(n)) for n in (1, 3, 2)] == [b"a", b"bcd", b"ef"]
    assert w.offset == 6 and w.take(4) == b""
    empty = PendingWrite(2, [], 0, 0)
    assert empty.length == 0 and empty.take(0) == b""
