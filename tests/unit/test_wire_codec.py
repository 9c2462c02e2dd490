"""Fast codec: round trips, byte equality with scapy, trimmed frames, every refusal reason."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import struct
import subprocess
import sys
from ipaddress import IPv6Address

import pytest
from scapy.layers.l2 import Ether

from mrc_host.wire import codec, write_templates
from mrc_host.wire import messages as wm
from mrc_host.wire.codec import (
    BTH_OFF,
    DATA_HDR_END,
    INNER_OFF,
    MAX_FRAME,
    REASONS,
    UDP_OFF,
    FrameEncoder,
    decode,
    decode_frame,
    decode_inner,
    decode_inner_frame,
    encode,
    trim,
)
from mrc_host.wire.framing import MAX_PAYLOAD
from mrc_host.wire.layers import message_from_scapy, to_scapy
from mrc_host.wire.messages import DataPacket, Dscp, Ecn, MalformedPacket, Message
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_data, sample_messages

MSGS = sample_messages()
IDS = [f"{type(m).__name__}-{getattr(m, 'opcode', '')}" for m in MSGS]


def expected(msg: Message) -> Message:
    """What decode returns for ``msg``: the same, plus the inner addresses in meta."""
    meta = dataclasses.replace(
        msg.meta, src=str(SAMPLE_ADDRESSING.inner_src), dst=str(SAMPLE_ADDRESSING.inner_dst)
    )
    return dataclasses.replace(msg, meta=meta)


def frame_of(msg: Message) -> bytes:
    return encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)


def patch(frame: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(frame)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def fix_lengths(frame: bytes) -> bytes:
    """Rewrite outer/inner IPv6 and UDP lengths to match the frame, as a switch would."""
    out = bytearray(frame)
    udp_len = len(out) - UDP_OFF
    struct.pack_into(">H", out, 18, udp_len + 40)
    struct.pack_into(">H", out, INNER_OFF + 4, udp_len)
    struct.pack_into(">H", out, UDP_OFF + 4, udp_len)
    return bytes(out)


def reason_of(frame: bytes, **kw: bool) -> str:
    with pytest.raises(MalformedPacket) as info:
        decode_frame(frame, **kw)
    assert info.value.reason in REASONS
    return info.value.reason


@pytest.mark.parametrize("msg", MSGS, ids=IDS)
def test_round_trip(msg: Message) -> None:
    frame = frame_of(msg)
    assert decode_frame(frame) == expected(msg)
    assert decode_frame(frame, verify_icrc=True) == expected(msg)
    assert decode_frame(memoryview(frame)) == expected(msg)


@pytest.mark.parametrize("msg", MSGS, ids=IDS)
def test_fast_encoder_is_byte_identical_to_scapy(msg: Message) -> None:
    assert frame_of(msg) == bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))


@pytest.mark.parametrize("msg", MSGS, ids=IDS)
def test_scapy_dissects_fast_output_to_the_same_fields(msg: Message) -> None:
    frame = frame_of(msg)
    assert message_from_scapy(Ether(frame)) == decode_frame(frame) == expected(msg)


@pytest.mark.parametrize("msg", MSGS, ids=IDS)
def test_decode_inner_starts_at_inner_ipv6(msg: Message) -> None:
    assert decode_inner_frame(frame_of(msg)[INNER_OFF:], verify_icrc=True) == expected(msg)


@pytest.mark.parametrize("hop_limit", [1, 64, 255])
def test_header_templates_are_what_scapy_builds(hop_limit: int) -> None:
    """header_templates.py is scapy's bytes (rerun ``python -m mrc_host.wire.write_templates``
    when this fails), and an encoder of any hop limit writes what scapy would."""
    assert write_templates.render(write_templates.build()) == write_templates.TEMPLATE_FILE.read_text()
    addressing = dataclasses.replace(SAMPLE_ADDRESSING, hop_limit=hop_limit)
    for msg in MSGS:
        assert encode(msg, SAMPLE_CARRIER, addressing) == bytes(to_scapy(msg, SAMPLE_CARRIER, addressing))


def test_the_agent_never_imports_scapy() -> None:
    """scapy costs each agent process about 35 MiB: the packet path must not need it."""
    code = (
        "import sys, mrc_host.agent.agent, mrc_host.agent.cli\n"
        "print(sorted(m for m in sys.modules if m.startswith('scapy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_carrier_forms_and_encoder_object_agree() -> None:
    msg = MSGS[0]
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    a = enc.encode(msg, SAMPLE_CARRIER.packed)
    assert a == encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)
    assert a == encode(msg, str(SAMPLE_CARRIER), SAMPLE_ADDRESSING)
    assert a == encode(msg, SAMPLE_CARRIER.packed, SAMPLE_ADDRESSING)
    assert a[38:54] == SAMPLE_CARRIER.packed


def test_encoder_reuse_does_not_alias_earlier_frames() -> None:
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    other = IPv6Address("fcbb:bb00:4400:c402::")
    frames = [(m, enc.encode(m, other.packed)) for m in MSGS]
    for m, f in frames:
        assert decode_frame(f, verify_icrc=True) == expected(m)
        assert f[38:54] == other.packed


def test_every_ev_bit_and_mark_round_trips() -> None:
    for ev in (0, 1, 0xFFFF, 0x10000, 0xFFFFFFFF, 0x9ABCDEF0):
        for dscp, ecn in ((Dscp.DATA, Ecn.ECT0), (Dscp.RETX, Ecn.CE), (Dscp.CONTROL, Ecn.NOT_ECT), (63, 1)):
            msg = sample_data(64)
            msg.meta = dataclasses.replace(msg.meta, ev=ev, dscp=dscp, ecn=ecn)
            got = decode_frame(frame_of(msg))
            assert (got.meta.ev, got.meta.dscp, got.meta.ecn) == (ev, dscp, ecn)


def test_empty_and_max_payload() -> None:
    for n in (0, 1, MAX_PAYLOAD):
        msg = sample_data(n)
        frame = frame_of(msg)
        assert len(frame) == DATA_HDR_END + n + 4
        assert decode_frame(frame, verify_icrc=True) == expected(msg)


@pytest.mark.parametrize(
    ("length", "piece"),
    [(3 * 4096 + 80, 4096), (4096, 4096), (5000, 1364), (5001, 1364), (4101, 1366), (4099, 1365), (0, 4096)],
)
def test_payload_sums_give_the_checksum_scapy_computes(length: int, piece: int) -> None:
    """A message cut into packets, each encoded with its piece's precomputed checksum share,
    is byte-identical to scapy's frame (which computes the UDP checksum itself); odd pieces
    are summed by the encoder (-1)."""
    data = random.Random(length * 7 + piece).randbytes(length)
    sums = codec.payload_sums(data, piece)
    starts = range(0, length, piece)
    assert len(sums) == len(starts)
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    for k, start in enumerate(starts):
        chunk = data[start : start + piece]
        assert sums[k] == (-1 if len(chunk) & 1 else int.from_bytes(chunk, "big") % 0xFFFF)
        msg = dataclasses.replace(sample_data(0), payload=chunk, vaddr=0x1000 + start)
        frame = enc.encode_data(msg, SAMPLE_CARRIER.packed, sums[k])
        assert frame == bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))
        assert frame == enc.encode(msg, SAMPLE_CARRIER.packed)
    with pytest.raises(ValueError, match="piece size"):
        codec.payload_sums(data, 0)


# --------------------------------------------------------------------------- trimmed


def test_switch_trimmed_frame_decodes_as_trimmed() -> None:
    msg = sample_data(1024)
    cut = trim(frame_of(msg))
    assert len(cut) == DATA_HDR_END
    got = decode_frame(cut)
    assert isinstance(got, DataPacket)
    assert got.trimmed and got.payload == b""
    assert got.meta.dscp == Dscp.TRIMMED and got.meta.ecn == msg.meta.ecn
    want = dataclasses.replace(expected(msg), payload=b"", trimmed=True)
    want.meta.dscp = Dscp.TRIMMED
    assert got == want


def test_a_fabric_trim_marks_an_ect_frame_ce_and_leaves_the_rest_alone() -> None:
    for ecn, want in ((Ecn.ECT0, Ecn.CE), (Ecn.ECT1, Ecn.CE), (Ecn.CE, Ecn.CE), (Ecn.NOT_ECT, Ecn.NOT_ECT)):
        msg = sample_data(256)
        msg.meta.ecn = ecn
        got = decode_frame(trim(frame_of(msg), ce=True))
        assert isinstance(got, DataPacket) and got.trimmed
        assert (got.meta.dscp, got.meta.ecn) == (Dscp.TRIMMED, want), ecn
        kept = decode_frame(trim(frame_of(msg)))
        assert kept.meta.ecn == ecn


def test_a_cut_without_the_trim_dscp_is_not_a_trim() -> None:
    """Payload shorter than the RETH length says (lengths consistent) but DSCP still DATA: cut
    on the way or forged, never believed as a switch's trim (which the sender answers at once)."""
    msg = sample_data(512)
    for keep in (0, 1, 100, 512 + 3):
        assert reason_of(fix_lengths(frame_of(msg)[: DATA_HDR_END + keep])) == "truncated"


def test_a_trim_is_believed_with_the_trim_dscp_and_exactly_the_headers() -> None:
    msg = sample_data(512)
    msg.meta.dscp = Dscp.TRIMMED
    cut = fix_lengths(frame_of(msg)[:DATA_HDR_END])
    got = decode_frame(cut, verify_icrc=True)
    assert isinstance(got, DataPacket) and got.trimmed and got.payload == b""
    assert decode_frame(trim(frame_of(sample_data(512)))).trimmed  # what the switches do


def test_the_trim_dscp_on_a_frame_with_payload_is_refused() -> None:
    msg = sample_data(64)
    msg.meta.dscp = Dscp.TRIMMED
    assert reason_of(frame_of(msg)) == "bad_length"
    for keep in (1, 4, 40):
        assert reason_of(fix_lengths(frame_of(msg)[: DATA_HDR_END + keep])) == "bad_length"


# every byte the header check covers: inner addresses, UDP source port, BTH opcode, QP and
# AckReq/PSN, RETH, message id, flags, send time (header_check.py)
CHECKED = [*range(62, 96), 102, *range(107, 114), *range(114, 136), *range(138, 146)]


def test_a_trim_is_believed_only_with_its_header_check() -> None:
    """The ICRC goes with a trimmed frame's payload: the header check vouches for what is left.
    A trim with any covered byte changed, or with the check itself changed, is dropped."""
    cut = trim(frame_of(sample_data(512)))
    assert decode_frame(cut).trimmed
    reasons = {}
    for offset in [*CHECKED, 136, 137]:
        bad = bytearray(cut)
        bad[offset] ^= 0x01
        reasons[offset] = reason_of(bytes(bad))  # refused, whichever check sees it first
    # where no other field check applies (the opcode, a BTH reserved bit, ...), it is the
    # header check that refuses it
    assert {o for o, r in reasons.items() if r != "bad_icrc"} <= {102, 110, 126, 127}, reasons
    # the fields a trim changes (outer header, lengths, DSCP/ECN) are outside it: the trim holds
    assert decode_frame(trim(frame_of(sample_data(512)), ce=True)).trimmed


def test_scapy_and_the_codec_write_the_same_header_check() -> None:
    msg = sample_data(300)
    built = bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))
    assert built[136:138] == frame_of(msg)[136:138] != b"\x00\x00"


@pytest.mark.parametrize("tver", [1, 2, 0xF])
def test_a_bth_transport_version_other_than_0_is_refused(tver: int) -> None:
    for msg in MSGS:
        frame = bytearray(frame_of(msg))
        frame[BTH_OFF + 1] |= tver
        assert reason_of(bytes(frame)) == "bad_field", type(msg).__name__


BTH_FIXED = {  # (offset from the BTH, bits): fields the protocol fixes (docs/protocol.md)
    "SE": (1, 0x80),
    "MigReq": (1, 0x40),
    "PadCnt": (1, 0x30),
    "pkey 0x7FFF": (2, 0x80),
    "pkey 0xFFFE": (3, 0x01),
    "FECN/BECN/reserved": (4, 0xC0),
    "reserved before the PSN": (8, 0x7F),
}


@pytest.mark.parametrize("field", sorted(BTH_FIXED))
def test_a_bth_field_the_protocol_fixes_is_refused_with_a_good_icrc(field: str) -> None:
    """The ICRC does not vouch for these: it is recomputed, as a forger would."""
    offset, bits = BTH_FIXED[field]
    for msg in MSGS:
        frame = bytearray(frame_of(msg))
        frame[BTH_OFF + offset] ^= bits
        frame[-4:] = struct.pack("<I", codec.compute_icrc(bytes(frame[INNER_OFF:-4])))
        assert reason_of(bytes(frame), verify_icrc=True) == "bad_bth", (field, type(msg).__name__)


def test_trim_refuses_short_frames() -> None:
    with pytest.raises(ValueError):
        trim(frame_of(MSGS[-1]))


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("msg", MSGS, ids=IDS)
def test_every_truncation_is_truncated(msg: Message) -> None:
    frame = frame_of(msg)
    for k in range(len(frame)):
        assert reason_of(frame[:k]) == "truncated", k


def test_trimmed_frame_cut_further_is_truncated() -> None:
    cut = trim(frame_of(sample_data(64)))
    for k in range(len(cut)):
        assert reason_of(cut[:k]) == "truncated", k


def test_not_ipv6() -> None:
    frame = frame_of(MSGS[0])
    assert reason_of(patch(frame, 12, ">H", 0x0800)) == "not_ipv6"
    assert reason_of(patch(frame, 14, ">B", 0x40)) == "not_ipv6"
    assert reason_of(patch(frame, INNER_OFF, ">B", 0x40)) == "not_ipv6"
    assert reason_of(b"\x00" * 12 + b"\x08\x00") == "not_ipv6"


def test_not_mrc() -> None:
    frame = frame_of(MSGS[0])
    assert reason_of(patch(frame, 20, ">B", 17)) == "not_mrc"  # outer next header UDP
    assert reason_of(patch(frame, INNER_OFF + 6, ">B", 6)) == "not_mrc"  # inner next header TCP
    assert reason_of(patch(frame, UDP_OFF + 2, ">H", 4792)) == "not_mrc"


def test_bad_length() -> None:
    data = frame_of(sample_data(64))
    assert reason_of(data + b"\x00") == "bad_length"  # trailing byte the outer length does not cover
    assert reason_of(patch(data, 18, ">H", len(data) - 54 - 2)) == "bad_length"
    assert reason_of(patch(data, INNER_OFF + 4, ">H", len(data) - 94 - 1)) == "bad_length"
    assert reason_of(patch(data, UDP_OFF + 4, ">H", len(data) - 94 - 1)) == "bad_length"
    assert reason_of(fix_lengths(data + b"\x00")) == "bad_length"  # more payload than RETH says
    for msg in MSGS[4:]:
        ctrl = frame_of(msg)
        assert reason_of(fix_lengths(ctrl + b"\x00")) == "bad_length"
        assert reason_of(fix_lengths(ctrl[:-1])) == "bad_length"


def test_lengths_claiming_more_than_present_are_truncated() -> None:
    data = frame_of(sample_data(64))
    assert reason_of(patch(data, 18, ">H", len(data) - 54 + 1)) == "truncated"
    assert reason_of(patch(data, UDP_OFF + 4, ">H", len(data) - 94 + 1)) == "truncated"


def test_unknown_opcode() -> None:
    frame = frame_of(MSGS[0])
    for op in (0x04, 0x11, 0xC8, 0xFF):
        assert reason_of(patch(frame, 102, ">B", op)) == "unknown_opcode"


def test_oversized() -> None:
    big = fix_lengths(frame_of(sample_data(MAX_PAYLOAD)) + b"\x00")
    assert len(big) == MAX_FRAME + 1
    assert reason_of(big) == "oversized"
    assert reason_of(b"\x00" * 100_000) == "oversized"
    small = frame_of(sample_data(16))
    assert reason_of(patch(small, 114 + 12, ">I", MAX_PAYLOAD + 1)) == "oversized"  # RETH DMA length


def test_bad_field() -> None:
    nack = next(m for m in MSGS if isinstance(m, wm.Nack))
    assert reason_of(patch(frame_of(nack), 114 + 4, ">B", 99)) == "bad_field"
    sack = next(m for m in MSGS if isinstance(m, wm.Sack))
    assert reason_of(patch(frame_of(sack), 114, ">B", 1)) == "bad_field"
    # docs/design.md §3: no EV gives a UDP source port below 0xC000 or flow-label bits above bit 17
    assert reason_of(patch(frame_of(sack), 94, ">H", 4789)) == "bad_field"  # VXLAN's port
    vtf = struct.unpack_from(">I", frame_of(sack), 14)[0]
    assert reason_of(patch(frame_of(sack), 14, ">I", vtf | 0x80000)) == "bad_field"
    connect_ack = next(m for m in MSGS if isinstance(m, wm.ConnectAck))
    assert reason_of(patch(frame_of(connect_ack), 114, ">B", 7)) == "bad_field"  # status


def test_core_decoders_refuse_the_handshake() -> None:
    """decode/decode_inner return only what the transport core takes; the agent uses decode_frame."""
    for m in MSGS:
        if isinstance(m, wm.Connect | wm.ConnectAck):
            with pytest.raises(MalformedPacket) as exc:
                decode(frame_of(m))
            assert exc.value.reason == "unknown_opcode"
            with pytest.raises(MalformedPacket):
                decode_inner(frame_of(m)[INNER_OFF:])
            assert decode_frame(frame_of(m)) == expected(m)


def test_bad_icrc_only_when_asked() -> None:
    frame = bytearray(frame_of(sample_data(64)))
    frame[DATA_HDR_END] ^= 0x01
    assert reason_of(bytes(frame), verify_icrc=True) == "bad_icrc"
    assert decode_frame(bytes(frame)).payload[0] == 0x01


def test_a_bytes_frames_payload_is_a_read_only_view_of_it() -> None:
    """A frame of bytes cannot change after it is decoded, so its payload is a view of it (no
    copy), and nothing can be written through that view."""
    frame = frame_of(sample_data(512))
    got = decode_frame(frame, verify_icrc=True)
    assert isinstance(got, DataPacket) and isinstance(got.payload, memoryview)
    assert got.payload.readonly and got.payload.obj is frame and got.payload == frame[DATA_HDR_END:-4]
    with pytest.raises(TypeError):
        got.payload[0] = 1


@pytest.mark.parametrize("kind", [bytearray, memoryview])
def test_a_frame_that_can_change_has_its_payload_copied(kind: type) -> None:
    """A reused receive buffer (bytearray, or a view of one) is written again after decoding:
    the payload decoded from it must not change with it."""
    buf = bytearray(frame_of(sample_data(512)))
    want = bytes(buf[DATA_HDR_END:-4])
    got = decode_frame(kind(buf), verify_icrc=True)
    assert isinstance(got, DataPacket) and type(got.payload) is bytes
    buf[DATA_HDR_END:-4] = bytes(512)
    assert got.payload == want


@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_a_data_frames_icrc_covers_every_unmasked_byte(kind: type) -> None:
    """Decoding with the ICRC checked (a view's single pass for bytes, a copy's for a buffer):
    a change to any byte from the inner header on is refused, except in the masked fields
    (and the BTH's masked FECN/BECN/reserved byte, which the BTH check holds at 0)."""
    frame = frame_of(sample_data(64))
    masked = {0, 1, 2, 3, 7, 46, 47}  # offsets from the inner IPv6 header
    assert decode_frame(kind(frame), verify_icrc=True).payload == frame[DATA_HDR_END:-4]
    for _ in range(2):  # and again, every masked header's CRC cached by the first round
        for i in range(INNER_OFF, len(frame)):
            bad = bytearray(frame)
            bad[i] ^= 0x04 if i == INNER_OFF else 0x01  # (keep the IP version 6)
            if i - INNER_OFF in masked:
                decode_frame(kind(bad), verify_icrc=True)
            else:
                with pytest.raises(MalformedPacket):
                    decode_frame(kind(bad), verify_icrc=True)


def test_the_decoders_caches_stay_bounded() -> None:
    """Addresses and header fields are the sender's choice: the text of address pairs and the
    CRCs of masked headers kept for them never outgrow their bounds, and a frame still
    decodes (and verifies) after a flood cleared them."""
    for i in range(codec._PAIRS_MAX + 10):
        frame = bytearray(frame_of(sample_data(8)))
        frame[INNER_OFF + 8 : INNER_OFF + 12] = i.to_bytes(4, "big")  # another inner source
        decode_frame(bytes(frame))
        assert len(codec._PAIRS) <= codec._PAIRS_MAX
    for ev in range(codec._HEAD_CRCS_MAX + 10):
        msg = sample_data(8)
        msg.meta = dataclasses.replace(msg.meta, ev=ev)
        decode_frame(frame_of(msg), verify_icrc=True)
        assert all(len(crcs) <= codec._HEAD_CRCS_MAX for _s, _d, crcs in codec._PAIRS.values())
    assert decode_frame(frame_of(sample_data(8)), verify_icrc=True).payload == sample_data(8).payload


def test_non_bytes_input_is_malformed() -> None:
    for junk in (None, 42, "x" * 200, [1, 2, 3]):
        with pytest.raises(MalformedPacket):
            decode_frame(junk)  # type: ignore[arg-type]
        with pytest.raises(MalformedPacket):
            decode_inner_frame(junk)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- encode errors


def test_encode_refuses_values_that_do_not_fit() -> None:
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    c = SAMPLE_CARRIER.packed
    bad: list[Message] = [
        dataclasses.replace(sample_data(8), psn=1 << 24),
        dataclasses.replace(sample_data(8), qp=-1),
        dataclasses.replace(sample_data(8), rkey=1 << 32),
        dataclasses.replace(sample_data(8), payload=b"\x00" * (MAX_PAYLOAD + 1)),
        dataclasses.replace(sample_data(8), meta=dataclasses.replace(sample_data(8).meta, dscp=64)),
        dataclasses.replace(sample_data(8), meta=dataclasses.replace(sample_data(8).meta, ev=1 << 32)),
        dataclasses.replace(MSGS[4], cum_psn=1 << 24),
        dataclasses.replace(MSGS[4], bitmap=1 << 64),
        # fields the encoder packs joined with a neighbour (codec._HDR_DATA, _HDR_SACK): each
        # still refused alone, never spilling into the field beside it
        dataclasses.replace(sample_data(8), msg_id=1 << 32),
        dataclasses.replace(sample_data(8), vaddr=1 << 64),
        dataclasses.replace(sample_data(8), send_ts=-1),
        dataclasses.replace(sample_data(8), ack_echo=-1),
        dataclasses.replace(MSGS[4], port_status=1 << 16),
        dataclasses.replace(MSGS[4], port_status=-1),
        dataclasses.replace(MSGS[4], echo_ev=1 << 32),
        dataclasses.replace(MSGS[4], echo_ts=1 << 64),
    ]
    slot = memoryview(bytearray(codec.MAX_FRAME))
    for msg in bad:
        with pytest.raises(ValueError):
            enc.encode(msg, c)
        with contextlib.suppress(ValueError):  # (in place: refused too, or, too long, not written)
            assert enc.encode_into(msg, c, slot, 0, len(slot)) < 0, msg
    with pytest.raises(ValueError):
        enc.encode(MSGS[0], c[:15])
    with pytest.raises(TypeError):
        enc.encode(object(), c)  # type: ignore[arg-type]


def test_opcode_constants_match_messages() -> None:
    frame = frame_of(sample_data(8, opcode=wm.Opcode.WRITE_MIDDLE))
    assert frame[102] == wm.Opcode.WRITE_MIDDLE
    assert codec.DATA_HDR_END == 146


def test_module_encode_is_safe_across_threads() -> None:
    """encode() keeps its scratch buffers per thread, so concurrent callers never mix frames."""
    import threading

    errors: list[str] = []

    def worker(ev: int) -> None:
        msg = sample_data(128)
        msg.meta = dataclasses.replace(msg.meta, ev=ev)
        for _ in range(300):
            got = decode_frame(encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING), verify_icrc=True)
            if got.meta.ev != ev:
                errors.append(f"thread {ev:#x} got EV {got.meta.ev:#x}")
                return

    threads = [threading.Thread(target=worker, args=(0x1000_0000 * i + i,)) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_icrc_ignores_exactly_the_masked_fields() -> None:
    """RoCEv2's mask: what switches rewrite (traffic class, flow label, hop limit, the UDP
    checksum, the BTH's FECN/BECN byte) leaves the ICRC valid; any other header byte, or one
    payload bit, makes it bad_icrc; a packet too short to hold the masked headers is refused."""
    frame = frame_of(sample_data(256))
    masked = {0, 1, 2, 3, 7, 46, 47, 52}  # offsets from the inner IPv6 header
    for i in range(DATA_HDR_END - INNER_OFF + 8):
        bad = bytearray(frame)
        bad[INNER_OFF + i] ^= 0x04 if i == 0 else 0x01  # (keep the IP version 6)
        if i in masked:
            # (decode checks the fields it reads: compare the ICRC itself)
            assert codec.compute_icrc(bytes(bad[INNER_OFF:-4])) == codec.compute_icrc(frame[INNER_OFF:-4])
        else:
            assert codec.compute_icrc(bytes(bad[INNER_OFF:-4])) != codec.compute_icrc(frame[INNER_OFF:-4]), i
    with pytest.raises(ValueError):
        codec.compute_icrc(frame[INNER_OFF : INNER_OFF + 52])
