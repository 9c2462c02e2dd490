"""Property tests: any bytes decode to a Message or MalformedPacket, never anything else;
random in-range messages survive encode/decode."""

from __future__ import annotations

import contextlib
import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrc_host.wire import codec
from mrc_host.wire import messages as wm
from mrc_host.wire.codec import (
    DATA_HDR_END,
    INNER_OFF,
    MAX_FRAME,
    UDP_OFF,
    FrameEncoder,
    decode_frame,
    decode_inner_frame,
)
from mrc_host.wire.framing import MAX_PAYLOAD
from mrc_host.wire.header_check import addresses_crc, header_check, header_check_after
from mrc_host.wire.messages import Frame, MalformedPacket
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_messages

ENC = FrameEncoder(SAMPLE_ADDRESSING)
CARRIER = SAMPLE_CARRIER.packed
VALID = [ENC.encode(m, CARRIER) for m in sample_messages()]
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(data: bytes, inner: bool = False) -> Frame | MalformedPacket:
    """Decode (handshake included); any exception other than MalformedPacket fails the test."""
    try:
        return decode_inner_frame(data) if inner else decode_frame(data)
    except MalformedPacket as exc:
        return exc


def check_decoded_is_encodable(result: Frame | MalformedPacket) -> None:
    """Whatever decode accepts has every field in range, so it encodes again; a DATA payload is
    bytes or a read-only flat view of unsigned bytes whose length is its size (what a region
    write relies on to stay inside the bytes it checked)."""
    if not isinstance(result, MalformedPacket):
        ENC.encode(result, CARRIER)
        if isinstance(result, wm.DataPacket) and isinstance(result.payload, memoryview):
            p = result.payload
            assert p.readonly and p.format == "B" and p.ndim == 1 and p.nbytes == len(p)


@FUZZ
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    check_decoded_is_encodable(outcome(data))
    check_decoded_is_encodable(outcome(data, inner=True))


@FUZZ
@given(st.sampled_from(VALID), st.binary(max_size=200))
def test_valid_headers_random_tail(frame: bytes, tail: bytes) -> None:
    for cut in (UDP_OFF, 114, 130, 146):
        check_decoded_is_encodable(outcome(frame[:cut] + tail))


@FUZZ
@given(st.sampled_from(VALID), st.data())
def test_truncation_at_any_offset(frame: bytes, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, len(frame) - 1))
    result = outcome(frame[:k])
    assert isinstance(result, MalformedPacket) and result.reason == "truncated"
    check_decoded_is_encodable(outcome(frame[INNER_OFF:][:k], inner=True))


@FUZZ
@given(st.sampled_from(VALID), st.lists(st.integers(0, 8 * 400), min_size=1, max_size=8))
def test_random_bit_flips(frame: bytes, bits: list[int]) -> None:
    flipped = bytearray(frame)
    for bit in bits:
        i = (bit // 8) % len(flipped)
        flipped[i] ^= 1 << (bit % 8)
    check_decoded_is_encodable(outcome(bytes(flipped)))
    check_decoded_is_encodable(outcome(bytes(flipped[INNER_OFF:]), inner=True))
    with contextlib.suppress(MalformedPacket):
        decode_frame(bytes(flipped), verify_icrc=True)


@settings(max_examples=40, deadline=None)
@given(st.integers(MAX_PAYLOAD + 1, 3 * MAX_PAYLOAD), st.booleans())
def test_oversized_payloads(size: int, fix: bool) -> None:
    frame = bytearray(VALID[3][:146] + bytes(size) + b"\x00" * 4)
    struct.pack_into(">I", frame, 114 + 12, size)  # RETH DMA length
    if fix and size + 146 + 4 - UDP_OFF <= 0xFFFF - 40:
        udp_len = len(frame) - UDP_OFF
        struct.pack_into(">H", frame, 18, udp_len + 40)
        struct.pack_into(">H", frame, INNER_OFF + 4, udp_len)
        struct.pack_into(">H", frame, UDP_OFF + 4, udp_len)
    assert len(frame) > MAX_FRAME
    result = outcome(bytes(frame))
    assert isinstance(result, MalformedPacket) and result.reason == "oversized"


U24 = st.integers(0, (1 << 24) - 1)
U32 = st.integers(0, (1 << 32) - 1)
U64 = st.integers(0, (1 << 64) - 1)
META = st.builds(wm.PathMeta, ev=U32, ecn=st.integers(0, 3), dscp=st.sampled_from([26, 28, 48, 0, 63]))
MESSAGES = st.one_of(
    st.builds(
        wm.DataPacket,
        qp=U24,
        psn=U24,
        vaddr=U64,
        rkey=U32,
        payload=st.binary(max_size=2048),
        msg_id=U32,
        send_ts=U64,
        flags=st.sampled_from(list(wm.DataFlag)),
        opcode=st.sampled_from(
            [wm.Opcode.WRITE_FIRST, wm.Opcode.WRITE_MIDDLE, wm.Opcode.WRITE_LAST, wm.Opcode.WRITE_ONLY]
        ),
        ack_req=st.booleans(),
        meta=META,
    ),
    st.builds(
        wm.Sack,
        qp=U24,
        cum_psn=U24,
        base_psn=U24,
        bitmap=U64,
        echo_ev=U32,
        ecn_echo=st.booleans(),
        echo_ts=U64,
        port_status=st.integers(0, 0xFFFF),
        meta=META,
        duplicate=st.booleans(),
    ),
    st.builds(wm.Nack, qp=U24, psn=U24, reason=st.sampled_from(list(wm.NackReason)), echo_ev=U32, meta=META),
    st.builds(wm.Probe, qp=U24, probe_id=U32, ev_under_test=U32, send_ts=U64, meta=META, reply_ev=U32),
    st.builds(
        wm.ProbeAck,
        qp=U24,
        probe_id=U32,
        ev_under_test=U32,
        echo_ts=U64,
        meta=META,
        port_status=st.integers(0, 0xFFFF),
    ),
    st.builds(wm.Connect, qp=U24, initial_psn=U24, nonce=U64, meta=META, cookie=U32),
    st.builds(
        wm.ConnectAck,
        qp=U24,
        initial_psn=U24,
        nonce=U64,
        rkey=U32,
        status=st.sampled_from([wm.ConnectStatus.ACCEPTED, wm.ConnectStatus.REFUSED]),
        meta=META,
    ),
    st.builds(  # a RETRY carries its cookie where the others carry the rkey
        wm.ConnectAck,
        qp=U24,
        initial_psn=U24,
        nonce=U64,
        rkey=st.just(0),
        status=st.just(wm.ConnectStatus.RETRY),
        meta=META,
        cookie=U32,
    ),
)


@FUZZ
@given(MESSAGES)
def test_random_messages_round_trip(msg: Frame) -> None:
    got = decode_frame(ENC.encode(msg, CARRIER), verify_icrc=True)
    meta = dataclasses.replace(
        msg.meta, src=str(SAMPLE_ADDRESSING.inner_src), dst=str(SAMPLE_ADDRESSING.inner_dst)
    )
    assert got == dataclasses.replace(msg, meta=meta)


@FUZZ
@given(MESSAGES, st.integers(0, 300), st.binary(min_size=1, max_size=1), st.sampled_from([-1, 0, 1]))
def test_encoding_into_a_slot_is_encoding(msg: Frame, off: int, junk: bytes, spare: int) -> None:
    """``encode_into`` (a packet ring's slot: headers, payload and ICRC written in place) writes
    exactly ``encode``'s frame over whatever the slot held, and nothing outside it; a slot one
    byte too short gets nothing written and the frame's length, negated."""
    want = ENC.encode(msg, CARRIER)
    n = len(want)
    buf = bytearray(junk * (off + n + 64))
    before = bytes(buf)
    got = ENC.encode_into(msg, CARRIER, memoryview(buf), off, n + spare)
    if spare < 0:
        assert got == -n and buf == before
        return
    assert got == n
    assert buf[off : off + n] == want
    assert buf[:off] == before[:off] and buf[off + n :] == before[off + n :]


def _both_paths(frame: bytes | bytearray | memoryview, verify: bool, borrow: bool) -> tuple[object, object]:
    """decode_frame's outcome with its fast paths (DATA, SACK) and without: (message or refusal)."""
    got: list[object] = []
    for fast in (True, False):
        try:
            got.append(codec._decode_frame(frame, verify, borrow, fast))
        except MalformedPacket as exc:
            got.append((exc.reason, str(exc)))
    return got[0], got[1]


DATA_FRAMES = [f for f, m in zip(VALID, sample_messages(), strict=True) if isinstance(m, wm.DataPacket)]
SACK_FRAMES = [f for f, m in zip(VALID, sample_messages(), strict=True) if isinstance(m, wm.Sack)]


@FUZZ
@given(
    st.sampled_from(DATA_FRAMES),
    st.lists(st.tuples(st.integers(0, 150), st.integers(0, 255)), max_size=3),
    st.sampled_from([0, 0, 0, 0, 0, -4, -1, 1, 4]),
    st.sampled_from(["none", "trim", "tail"]),
    st.sampled_from([bytes, bytearray, memoryview]),
)
def test_data_fast_path_is_the_full_path(
    frame: bytes, writes: list[tuple[int, int]], grow: int, cut: str, kind: type
) -> None:
    """The fast path takes exactly the DATA frames the full path takes, and returns the same
    message (payload a view or a copy as the full path's); everything else goes to the full
    path, so every refusal keeps its reason: damaged headers, lengths, trims, ICRCs."""
    out = bytearray(codec.trim(frame) if cut == "trim" else frame)
    if cut == "tail":
        out = out[:-4] + bytes(4) if grow >= 0 else out
    for at, value in writes:
        out[at % len(out)] = value
    if grow > 0:
        out += bytes(grow)
    elif grow < 0:
        del out[grow:]
    if writes and writes[0][1] & 1:  # lengths that agree with the damaged frame, half the time
        udp_len = len(out) - UDP_OFF
        struct.pack_into(">H", out, 18, udp_len + 40)
        struct.pack_into(">H", out, INNER_OFF + 4, udp_len)
        struct.pack_into(">H", out, UDP_OFF + 4, udp_len)
    data = kind(bytes(out))
    for verify in (False, True):
        for borrow in (False, True):
            fast, full = _both_paths(data, verify, borrow)
            assert fast == full
            if isinstance(fast, wm.DataPacket) and isinstance(full, wm.DataPacket):
                assert type(fast.payload) is type(full.payload)


@pytest.mark.parametrize("cut", ["none", "trim", "mark"])
def test_data_fast_path_every_header_byte(cut: str) -> None:
    """Every header byte of a DATA frame (of its trim; of it marked trimmed but whole) changed
    three ways, lengths kept: both paths agree on each (as the fuzz above, but no header
    field left to chance)."""
    frame = DATA_FRAMES[-1]
    base = codec.trim(frame) if cut == "trim" else frame
    if cut == "mark":  # DSCP TRIMMED on a frame that kept its payload: bad_length, not a trim
        vtf = struct.unpack_from(">I", base, 14)[0] & ~(0x3F << 22) | int(wm.Dscp.TRIMMED) << 22
        base = bytes(base[:14]) + struct.pack(">I", vtf) + bytes(base[18:])
    for at in range(DATA_HDR_END):
        for flip in (0x01, 0x80, 0xFF):
            out = bytearray(base)
            out[at] ^= flip
            for verify in (False, True):
                fast, full = _both_paths(bytes(out), verify, True)
                assert fast == full, (at, flip, verify)


@FUZZ
@given(
    st.sampled_from(SACK_FRAMES),
    st.lists(st.tuples(st.integers(0, 149), st.integers(0, 255)), max_size=3),
    st.sampled_from([0, 0, 0, 0, 0, -4, -1, 1, 4]),
    st.booleans(),
    st.sampled_from([bytes, bytearray, memoryview]),
)
def test_sack_fast_path_is_the_full_path(
    frame: bytes, writes: list[tuple[int, int]], grow: int, as_data: bool, kind: type
) -> None:
    """As for DATA: the SACK fast path takes exactly the SACKs the full path takes and returns
    the same message; damaged headers, lengths and ICRCs go to the full path and keep their
    refusal's reason (a SACK's length with a DATA opcode included)."""
    out = bytearray(frame)
    if as_data:
        out[102] = int(wm.Opcode.WRITE_ONLY)
    for at, value in writes:
        out[at % len(out)] = value
    if grow > 0:
        out += bytes(grow)
    elif grow < 0:
        del out[grow:]
    if writes and writes[0][1] & 1:  # lengths that agree with the damaged frame, half the time
        udp_len = len(out) - UDP_OFF
        struct.pack_into(">H", out, 18, udp_len + 40)
        struct.pack_into(">H", out, INNER_OFF + 4, udp_len)
        struct.pack_into(">H", out, UDP_OFF + 4, udp_len)
    data = kind(bytes(out))
    for verify in (False, True):
        fast, full = _both_paths(data, verify, True)
        assert fast == full


@pytest.mark.parametrize("which", range(len(SACK_FRAMES)))
def test_sack_fast_path_every_byte(which: int) -> None:
    """Every byte of a SACK frame (headers, body and ICRC) changed three ways: both paths agree
    on each, with and without the ICRC check (the ICRC's own bytes are refused only with it)."""
    base = SACK_FRAMES[which]
    assert isinstance(codec._fast_sack(base, True), wm.Sack)
    for at in range(len(base)):
        for flip in (0x01, 0x80, 0xFF):
            out = bytearray(base)
            out[at] ^= flip
            for verify in (False, True):
                fast, full = _both_paths(bytes(out), verify, True)
                assert fast == full, (at, flip, verify)


U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1)


@settings(max_examples=300, deadline=None)
@given(
    st.binary(min_size=32, max_size=32), st.integers(0, 0xFFFF), st.integers(0, 0xFF),
    st.integers(0, 2**24 - 1), U32, U64, U32, U32, U32, st.integers(0, 0xFFFF), U64,
)  # fmt: skip
def test_the_encoders_header_check_is_the_receivers(
    addrs: bytes, sport: int, op: int, qp: int, psnw: int, va: int, rkey: int, dlen: int,
    msg_id: int, flags: int, ts: int,
) -> None:  # fmt: skip
    """The sender's check (the addresses' CRC once, the rest per frame, two fields joined) is
    the one a receiver verifies a trimmed frame against, for every field value."""
    fields = (sport, op, qp, psnw, va, rkey, dlen, msg_id, flags, ts)
    assert header_check_after(addresses_crc(addrs), *fields) == header_check(addrs, *fields)


def test_both_header_checks_are_the_crc_of_the_fields_written_out() -> None:
    """``header_check`` (the receiver's) and ``header_check_after`` (the sender's) both continue
    the addresses' CRC; on 20,000 random headers, field extremes among them, each equals the
    definition: the low 16 bits of zlib's CRC-32 over the 73 bytes of the fields in wire order."""
    import random
    import zlib

    rng = random.Random(48)
    widths = (16, 8, 24, 32, 64, 32, 32, 32, 16, 64)  # sport, opcode, qp, ack/psn, va, rkey, dlen, ...

    def value(bits: int) -> int:
        return rng.choice((0, (1 << bits) - 1, rng.getrandbits(bits)))

    for i in range(20_000):
        addrs = rng.randbytes(32)
        fields = tuple(rng.getrandbits(b) if i % 4 else value(b) for b in widths)
        want = zlib.crc32(addrs + struct.pack(">HBIIQIIIHQ", *fields[:2], *fields[2:])) & 0xFFFF
        assert header_check(addrs, *fields) == want, fields
        assert header_check_after(addresses_crc(addrs), *fields) == want, fields
