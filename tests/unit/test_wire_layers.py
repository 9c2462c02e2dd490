"""Scapy layers: every MRC message type survives build -> bytes -> dissect."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from mrc_host.wire.codec import decode_frame, encode
from mrc_host.wire.layers import (
    RETH,
    MrcConnect,
    MrcConnectAck,
    MrcData,
    MrcNack,
    MrcProbe,
    MrcProbeAck,
    MrcSack,
    message_from_scapy,
    to_scapy,
)
from mrc_host.wire.messages import DataFlag, DataPacket, Dscp, Ecn, Message, Opcode, PathMeta, Sack
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_messages


def _checksums(frame: bytes) -> tuple[int, int]:
    """(the UDP checksum ``frame`` carries, the one scapy computes for it)."""
    pkt = Ether(frame)
    sent = pkt[UDP].chksum
    del pkt[UDP].chksum
    return sent, Ether(bytes(pkt))[UDP].chksum


def _with_inner_addresses(msg: Message) -> Message:
    meta = dataclasses.replace(
        msg.meta, src=str(SAMPLE_ADDRESSING.inner_src), dst=str(SAMPLE_ADDRESSING.inner_dst)
    )
    return dataclasses.replace(msg, meta=meta)


@pytest.mark.parametrize(
    "msg", sample_messages(), ids=lambda m: f"{type(m).__name__}-{getattr(m, 'opcode', '')}"
)
def test_scapy_round_trip(msg: Message) -> None:
    frame = bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))
    pkt = Ether(frame)
    assert message_from_scapy(pkt) == _with_inner_addresses(msg)


def test_header_sizes_match_protocol_doc() -> None:
    assert len(BTH()) == 12 + 4  # scapy counts the ICRC trailer with the BTH
    assert len(RETH()) == 16
    assert len(MrcData()) == 16
    assert len(MrcSack()) == 32
    assert len(MrcNack()) == 12
    assert len(MrcProbe()) == 20
    assert len(MrcProbeAck()) == 20
    assert len(MrcConnect()) == 16
    assert len(MrcConnectAck()) == 16


def test_outer_header_carries_path_ev_and_marks() -> None:
    msg = sample_messages()[0]
    pkt = Ether(bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)))
    outer, inner = pkt.getlayer(IPv6, 1), pkt.getlayer(IPv6, 2)
    assert outer.nh == 41 and inner.nh == 17
    assert outer.dst == str(SAMPLE_CARRIER)
    assert outer.tc == (msg.meta.dscp << 2) | msg.meta.ecn
    assert outer.fl == inner.fl == msg.meta.ev >> 14  # docs/design.md §3: the high 18 EV bits
    assert pkt[UDP].sport == 0xC000 | (msg.meta.ev & 0x3FFF) and pkt[UDP].dport == 4791
    assert 0xC000 <= pkt[UDP].sport <= 0xFFFF
    assert inner.src == str(SAMPLE_ADDRESSING.inner_src) and inner.dst == str(SAMPLE_ADDRESSING.inner_dst)


@pytest.mark.parametrize("msg", sample_messages(), ids=lambda m: type(m).__name__)
def test_udp_checksum_is_valid_over_ipv6(msg: Message) -> None:
    """RFC 8200: a UDP checksum of 0 is invalid over IPv6; scapy recomputes the codec's and agrees."""
    sent, recomputed = _checksums(encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))
    assert sent != 0
    assert recomputed == sent


def test_icrc_is_computed_and_covers_payload() -> None:
    msg = sample_messages()[3]
    a = Ether(bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)))[BTH].icrc
    msg.payload = b"\xff" + msg.payload[1:]
    b = Ether(bytes(to_scapy(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)))[BTH].icrc
    assert a != 0 and b != 0 and a != b


@pytest.mark.parametrize("size", [0, 1, 2, 255, 256, 257, 4095, 4096, 9000])
def test_udp_checksum_of_every_payload_size_matches_scapy(size: int) -> None:
    """Both sums of the codec (big integer, and numpy for long even payloads) agree with scapy."""
    from mrc_host.wire.samples import sample_data

    frame = encode(sample_data(size), SAMPLE_CARRIER, SAMPLE_ADDRESSING)
    sent, recomputed = _checksums(frame)
    assert recomputed == sent != 0


@settings(max_examples=300, deadline=None)
@given(
    qp=st.integers(0, (1 << 24) - 1),
    psn=st.integers(0, (1 << 24) - 1),
    vaddr=st.integers(0, (1 << 64) - 1),
    rkey=st.integers(0, (1 << 32) - 1),
    msg_id=st.integers(0, (1 << 32) - 1),
    send_ts=st.integers(0, (1 << 64) - 1),
    flags=st.sampled_from(list(DataFlag)),
    opcode=st.sampled_from([Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY]),
    ack_req=st.booleans(),
    ev=st.integers(0, (1 << 32) - 1),
    size=st.integers(0, 600),
)
def test_data_checksum_from_field_values_matches_scapy(
    qp: int, psn: int, vaddr: int, rkey: int, msg_id: int, send_ts: int, flags: DataFlag,
    opcode: Opcode, ack_req: bool, ev: int, size: int,
) -> None:  # fmt: skip
    """The DATA encoder sums its headers from the field values, not the bytes: every field at
    its widest, every opcode and flag, odd and even payloads give the checksum scapy computes."""
    msg = DataPacket(
        qp, psn, vaddr, rkey, bytes(i * 7 & 0xFF for i in range(size)),
        msg_id=msg_id, send_ts=send_ts, flags=flags, opcode=opcode, ack_req=ack_req,
        meta=PathMeta(ev=ev, ecn=Ecn.ECT0, dscp=Dscp.DATA),
    )  # fmt: skip
    sent, recomputed = _checksums(encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING))
    assert recomputed == sent != 0


@settings(max_examples=300, deadline=None)
@given(
    qp=st.integers(0, (1 << 24) - 1),
    cum=st.integers(0, (1 << 24) - 1),
    base=st.integers(0, (1 << 24) - 1),
    bitmap=st.integers(0, (1 << 64) - 1),
    echo_ev=st.integers(0, (1 << 32) - 1),
    ecn_echo=st.booleans(),
    duplicate=st.booleans(),
    echo_ts=st.integers(0, (1 << 64) - 1),
    port_status=st.integers(0, 0xFFFF),
    ev=st.integers(0, (1 << 32) - 1),
)
def test_sack_checksum_from_field_values_matches_scapy(
    qp: int, cum: int, base: int, bitmap: int, echo_ev: int, ecn_echo: bool, duplicate: bool,
    echo_ts: int, port_status: int, ev: int,
) -> None:  # fmt: skip
    """The SACK encoder sums its headers from the field values too: every field at its widest
    gives the checksum scapy computes, the ICRC the decoder checks, and the same fields back."""
    msg = Sack(
        qp, cum, base, bitmap, echo_ev, ecn_echo=ecn_echo, echo_ts=echo_ts, port_status=port_status,
        meta=PathMeta(ev=ev, ecn=Ecn.NOT_ECT, dscp=Dscp.CONTROL), duplicate=duplicate,
    )  # fmt: skip
    frame = encode(msg, SAMPLE_CARRIER, SAMPLE_ADDRESSING)
    assert decode_frame(frame, verify_icrc=True) == _with_inner_addresses(msg)
    sent, recomputed = _checksums(frame)
    assert recomputed == sent != 0
