"""Transfer content: chunk headers, the seeded pattern, the receiver's verifier."""

from __future__ import annotations

import zlib

import pytest

from mrc_host.agent.payload import (
    CHUNK_DATA_BYTES,
    HEADER_BYTES,
    PERIOD,
    BadChunk,
    ChunkFlag,
    ChunkHeader,
    ChunkKind,
    Pattern,
    Verifier,
    chunk_count,
)
from mrc_host.wire.codec import payload_sums


def test_header_round_trips() -> None:
    h = ChunkHeader(ChunkKind.DATA, ChunkFlag.LAST, 2**64 - 1, 123, 456, 789, 42, 0xFFFFFFFF)
    raw = h.pack()
    assert len(raw) == HEADER_BYTES == 80
    assert ChunkHeader.unpack(raw) == h


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\0" * HEADER_BYTES,  # no magic
        ChunkHeader(ChunkKind.DATA, ChunkFlag.NONE, 1, 0, 1, 1, 1).pack()[:-1],  # short
        b"MRCT\x02" + b"\0" * 75,  # unknown version
        b"MRCT\x01\x09" + b"\0" * 74,  # unknown kind
    ],
)
def test_garbage_is_refused(raw: bytes) -> None:
    with pytest.raises(BadChunk):
        ChunkHeader.unpack(raw)


def test_oversized_length_is_refused() -> None:
    raw = ChunkHeader(ChunkKind.DATA, ChunkFlag.NONE, 1, 0, CHUNK_DATA_BYTES + 1, 1, 1).pack()
    with pytest.raises(BadChunk, match="length"):
        ChunkHeader.unpack(raw)


def test_pattern_slices_are_consistent_and_seeded() -> None:
    p = Pattern(7)
    whole = p.slice(PERIOD - 100, 300)
    assert whole == p.slice(PERIOD - 100, 100) + p.slice(PERIOD, 200)
    assert p.slice(5, 50) == p.slice(PERIOD + 5, 50)  # periodic
    assert Pattern(8).slice(0, 64) != p.slice(0, 64)
    size = 2 * CHUNK_DATA_BYTES + 10
    data = b"".join(p.slice(o, min(CHUNK_DATA_BYTES, size - o)) for o in range(0, size, CHUNK_DATA_BYTES))
    assert p.crc32(size) == zlib.crc32(data)  # the standard library's CRC-32 agrees


def _chunks(seed: int, size: int) -> list[tuple[ChunkHeader, bytes]]:
    p = Pattern(seed)
    crc = p.crc32(size)
    n = chunk_count(size)
    out = []
    for i in range(n):
        off = i * CHUNK_DATA_BYTES
        length = min(CHUNK_DATA_BYTES, size - off)
        last = i == n - 1
        flags = ChunkFlag.LAST if last else ChunkFlag.NONE
        hdr = ChunkHeader(ChunkKind.DATA, flags, 99, off, length, size, seed, crc if last else 0)
        out.append((hdr, p.slice(off, length)))
    return out


def test_verifier_accepts_the_exact_bytes() -> None:
    chunks = _chunks(3, CHUNK_DATA_BYTES + 500)
    v = Verifier(chunks[0][0])
    assert [v.add(h, d) for h, d in chunks] == [False, True]
    assert v.ok and v.received == CHUNK_DATA_BYTES + 500


def test_verifier_catches_one_flipped_byte() -> None:
    chunks = _chunks(3, 1000)
    hdr, data = chunks[0]
    bad = bytearray(data)
    bad[500] ^= 1
    v = Verifier(hdr)
    assert v.add(hdr, bytes(bad))
    assert not v.ok and v.mismatched_chunks == 1 and v.digest_ok is False


def test_verifier_catches_a_missing_chunk() -> None:
    chunks = _chunks(4, 2 * CHUNK_DATA_BYTES + 1)
    v = Verifier(chunks[0][0])
    v.add(*chunks[0])
    assert v.add(*chunks[2])  # chunk 1 never came
    assert not v.ok and v.out_of_order == 1


def test_empty_transfer_is_one_chunk() -> None:
    chunks = _chunks(5, 0)
    assert len(chunks) == 1
    v = Verifier(chunks[0][0])
    assert v.add(*chunks[0]) and v.ok


def test_verifier_checks_the_ring_in_place() -> None:
    """What take_chunk hands over is a memoryview of the receive ring: compared in place,
    past the pattern's period too, and one flipped byte or a short chunk is still caught."""
    p = Pattern(5)
    off = 3 * PERIOD - 100  # the block's wrap-around lies inside this chunk
    data = bytearray(p.slice(off, 4000))
    hdr = ChunkHeader(ChunkKind.DATA, ChunkFlag.NONE, 1, off, 4000, 10**9, 5)
    assert p.matches(off, memoryview(data)) and not p.matches(off + 1, memoryview(data))
    v = Verifier(hdr)
    v.received = off
    v.add(hdr, memoryview(data))
    assert v.mismatched_chunks == 0 and v.out_of_order == 0
    data[3999] ^= 0x80
    v.received = off
    v.add(hdr, memoryview(data))
    v.received = off
    v.add(hdr, memoryview(data)[:3999])  # shorter than its header says
    assert v.mismatched_chunks == 2


@pytest.mark.parametrize("seed", [0, 1, 0xFFFFFFFF, 123456789])
def test_piece_sums_are_the_sums_of_the_chunks_pieces(seed: int) -> None:
    """The UDP checksum shares of a chunk's packets, from the pattern's running sums, are
    exactly what summing the chunk gives (header and data, any start, odd ends included)."""
    p = Pattern(seed)
    for offset in (0, 1, PERIOD - 1, PERIOD - 80, 3 * CHUNK_DATA_BYTES + 7):
        for length in (1, 2, 4015, 4016, 4017, 123457, CHUNK_DATA_BYTES):
            head = ChunkHeader(ChunkKind.DATA, ChunkFlag.NONE, seed, offset, length, 1 << 40, seed).pack()
            for size in (4096, 1364, 256):
                want = payload_sums(head + p.slice(offset, length), size)
                assert p.piece_sums(head, offset, length, size) == want, (offset, length, size)


SHAPES = [
    (b"", 0, 4096),
    (bytes(80), 0, 4096),
    (bytes(81), 100, 64),
    (bytes(80), 5000, 4095),
    (bytes(300), 5000, 256),
]


@pytest.mark.parametrize(("head", "length", "size"), SHAPES)
def test_piece_sums_of_shapes_the_running_sums_do_not_cover(head: bytes, length: int, size: int) -> None:
    """An empty chunk, an odd header or piece, a header longer than a piece: summed as bytes."""
    p = Pattern(7)
    assert p.piece_sums(head, 99, length, size) == payload_sums(head + p.slice(99, length), size)
