"""Wireshark agrees: tshark decodes the codec's frames as RoCEv2 with the values written, and
the project's Lua dissector (wireshark/mrc.lua) decodes every MRC header and vendor opcode."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from mrc_fabric.ev import EV
from mrc_host.wire import tshark
from mrc_host.wire.codec import encode, trim
from mrc_host.wire.messages import (
    Connect,
    ConnectAck,
    ConnectStatus,
    Credit,
    CreditRequest,
    DataPacket,
    Message,
    Nack,
    Opcode,
    Probe,
    ProbeAck,
    Sack,
    data_flags_word,
)
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_messages

pytestmark = pytest.mark.skipif(
    shutil.which("tshark") is None, reason="tshark not installed (apt-get install tshark)"
)

FIELDS = [
    "ipv6.src",
    "ipv6.dst",
    "ipv6.nxt",
    "ipv6.tclass.dscp",
    "ipv6.tclass.ecn",
    "ipv6.flow",
    "udp.srcport",
    "udp.dstport",
    "udp.checksum",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.invariant.crc",
]
CONTROL_OPCODES = {
    Sack: Opcode.SACK,
    Nack: Opcode.NACK,
    Probe: Opcode.PROBE,
    ProbeAck: Opcode.PROBE_ACK,
    Connect: Opcode.CONNECT,
    ConnectAck: Opcode.CONNECT_ACK,
    Credit: Opcode.CREDIT,
    CreditRequest: Opcode.CREDIT_REQUEST,
}
MRC_FIELDS = [
    "mrc.opcode",
    "mrc.qp",
    "mrc.psn",
    "mrc.ev",
    "mrc.ev.plane",
    "mrc.ev.t1",
    "mrc.ev.entropy",
    "mrc.class",
    "mrc.reth.va",
    "mrc.reth.rkey",
    "mrc.reth.dlen",
    "mrc.data.msg_id",
    "mrc.data.flags",
    "mrc.data.ack_echo",
    "mrc.data.send_ts",
    "mrc.data.payload_len",
    "mrc.data.trimmed",
    "mrc.sack.cum_psn",
    "mrc.sack.base_psn",
    "mrc.sack.bitmap",
    "mrc.sack.echo_ev",
    "mrc.sack.ecn_echo",
    "mrc.sack.duplicate",
    "mrc.sack.port_status",
    "mrc.sack.echo_ts",
    "mrc.nack.psn",
    "mrc.nack.reason",
    "mrc.nack.echo_ev",
    "mrc.probe.id",
    "mrc.probe.ev_under_test",
    "mrc.probe.send_ts",
    "mrc.probe.reply_ev",
    "mrc.probe_ack.echo_ts",
    "mrc.probe_ack.port_status",
    "mrc.connect.initial_psn",
    "mrc.connect.nonce",
    "mrc.connect.status",
    "mrc.connect.rkey",
    "mrc.connect.cookie",
    "mrc.credit.granted",
    "mrc.credit.target",
    "mrc.icrc",
]


def _int(text: str) -> int:
    return int(text, 0)


def _pcap(tmp_path: Path, frames: list[bytes]) -> Path:
    pcap = tmp_path / "mrc.pcap"
    wrpcap(str(pcap), [Ether(f) for f in frames])
    return pcap


def _frames(msgs: list[Message]) -> list[bytes]:
    return [encode(m, SAMPLE_CARRIER, SAMPLE_ADDRESSING) for m in msgs]


def test_tshark_decodes_every_message_type_as_rocev2(tmp_path: Path) -> None:
    """Without the Lua script: the built-in RoCEv2 dissector sees the values written."""
    msgs = sample_messages()
    frames = _frames(msgs)
    rows = tshark.fields(_pcap(tmp_path, frames), FIELDS, lua=False)
    assert len(rows) == len(msgs)

    outer_src, inner_src = str(SAMPLE_ADDRESSING.outer_src), str(SAMPLE_ADDRESSING.inner_src)
    for msg, frame, row in zip(msgs, frames, rows, strict=True):
        meta = msg.meta
        assert row["ipv6.src"].split(",") == [outer_src, inner_src]
        assert row["ipv6.dst"].split(",") == [str(SAMPLE_CARRIER), str(SAMPLE_ADDRESSING.inner_dst)]
        assert row["ipv6.nxt"].split(",") == ["41", "17"]
        assert [int(x) for x in row["ipv6.tclass.dscp"].split(",")] == [meta.dscp, meta.dscp]
        assert [int(x) for x in row["ipv6.tclass.ecn"].split(",")] == [meta.ecn, meta.ecn]
        assert [_int(x) for x in row["ipv6.flow"].split(",")] == [meta.ev >> 14] * 2
        assert int(row["udp.srcport"]) == 0xC000 | (meta.ev & 0x3FFF)
        assert int(row["udp.dstport"]) == 4791
        assert _int(row["udp.checksum"]) == int.from_bytes(frame[100:102], "big") != 0
        assert _int(row["infiniband.bth.destqp"]) == msg.qp
        if isinstance(msg, DataPacket):
            assert int(row["infiniband.bth.opcode"]) == msg.opcode
            assert int(row["infiniband.bth.psn"]) == msg.psn
            assert row["infiniband.bth.a"] in (("1", "True") if msg.ack_req else ("0", "False"))
            # tshark reads the trailer as the ICRC only where it knows the header layout.
            assert _int(row["infiniband.invariant.crc"]) == int.from_bytes(frame[-4:], "big")
            # Wireshark follows the IB spec and parses a RETH only in FIRST/ONLY packets;
            # MRC carries one in every packet (see docs/protocol.md).
            if msg.opcode in (Opcode.WRITE_FIRST, Opcode.WRITE_ONLY):
                assert _int(row["infiniband.reth.va"]) == msg.vaddr
                assert _int(row["infiniband.reth.r_key"]) == msg.rkey
                assert int(row["infiniband.reth.dmalen"]) == len(msg.payload)
        else:
            assert int(row["infiniband.bth.opcode"]) == CONTROL_OPCODES[type(msg)]
            if isinstance(msg, Sack):
                expected_psn = msg.cum_psn
            elif isinstance(msg, Nack):
                expected_psn = msg.psn
            elif isinstance(msg, Connect | ConnectAck):
                expected_psn = msg.initial_psn
            else:
                expected_psn = 0
            assert int(row["infiniband.bth.psn"]) == expected_psn


def _check_ev(row: dict[str, str], ev: int) -> None:
    e = EV.decode(ev)
    assert _int(row["mrc.ev"].split(",")[0]) == ev
    assert int(row["mrc.ev.plane"].split(",")[0]) == e.plane
    assert int(row["mrc.ev.t1"].split(",")[0]) == e.t1
    assert _int(row["mrc.ev.entropy"].split(",")[0]) == e.entropy


def _flag(text: str) -> bool:
    assert text in ("0", "1", "True", "False")
    return text in ("1", "True")


def test_lua_dissector_decodes_every_mrc_header(tmp_path: Path) -> None:
    msgs = sample_messages()
    frames = _frames(msgs)
    trimmed = trim(frames[0])
    rows = tshark.fields(_pcap(tmp_path, [*frames, trimmed]), MRC_FIELDS)
    assert len(rows) == len(msgs) + 1
    classes = {26: "data", 28: "retransmission", 48: "control"}
    for msg, frame, row in zip(msgs, frames, rows, strict=False):
        _check_ev(row, msg.meta.ev)
        assert row["mrc.class"] == classes[msg.meta.dscp]
        assert _int(row["mrc.qp"]) == msg.qp
        assert _int(row["mrc.icrc"]) == int.from_bytes(frame[-4:], "little")
        if isinstance(msg, DataPacket):
            assert _int(row["mrc.opcode"]) == msg.opcode
            assert int(row["mrc.psn"]) == msg.psn
            assert _int(row["mrc.reth.va"]) == msg.vaddr  # in every packet, MIDDLE/LAST too
            assert _int(row["mrc.reth.rkey"]) == msg.rkey
            assert int(row["mrc.reth.dlen"]) == len(msg.payload)
            assert int(row["mrc.data.msg_id"]) == msg.msg_id
            assert _int(row["mrc.data.flags"]) == data_flags_word(msg.flags, msg.ack_echo)
            assert int(row["mrc.data.ack_echo"]) == msg.ack_echo
            assert int(row["mrc.data.send_ts"]) == msg.send_ts
            assert int(row["mrc.data.payload_len"]) == len(msg.payload)
            assert not _flag(row["mrc.data.trimmed"])
        elif isinstance(msg, Sack):
            assert int(row["mrc.sack.cum_psn"]) == msg.cum_psn
            assert int(row["mrc.sack.base_psn"]) == msg.base_psn
            assert _int(row["mrc.sack.bitmap"]) == msg.bitmap
            assert _int(row["mrc.sack.echo_ev"]) == msg.echo_ev
            assert _flag(row["mrc.sack.ecn_echo"]) is msg.ecn_echo
            assert _flag(row["mrc.sack.duplicate"]) is msg.duplicate
            assert _int(row["mrc.sack.port_status"]) == msg.port_status
            assert int(row["mrc.sack.echo_ts"]) == msg.echo_ts
        elif isinstance(msg, Nack):
            assert int(row["mrc.nack.psn"]) == msg.psn
            assert int(row["mrc.nack.reason"]) == msg.reason
            assert _int(row["mrc.nack.echo_ev"]) == msg.echo_ev
        elif isinstance(msg, Probe):
            assert int(row["mrc.probe.id"]) == msg.probe_id
            assert _int(row["mrc.probe.ev_under_test"]) == msg.ev_under_test
            assert int(row["mrc.probe.send_ts"]) == msg.send_ts
            assert _int(row["mrc.probe.reply_ev"]) == msg.reply_ev != 0
        elif isinstance(msg, ProbeAck):
            assert int(row["mrc.probe.id"]) == msg.probe_id
            assert _int(row["mrc.probe.ev_under_test"]) == msg.ev_under_test
            assert int(row["mrc.probe_ack.echo_ts"]) == msg.echo_ts
            assert _int(row["mrc.probe_ack.port_status"]) == msg.port_status != 0
        elif isinstance(msg, Credit):
            assert int(row["mrc.credit.granted"]) == msg.granted and row["mrc.credit.target"] == ""
        elif isinstance(msg, CreditRequest):
            assert int(row["mrc.credit.target"]) == msg.target and row["mrc.credit.granted"] == ""
        elif isinstance(msg, Connect):
            assert int(row["mrc.connect.initial_psn"]) == msg.initial_psn
            assert _int(row["mrc.connect.nonce"]) == msg.nonce
            assert _int(row["mrc.connect.cookie"]) == msg.cookie
        else:
            assert isinstance(msg, ConnectAck)
            assert int(row["mrc.connect.initial_psn"]) == msg.initial_psn
            assert _int(row["mrc.connect.nonce"]) == msg.nonce
            assert int(row["mrc.connect.status"]) == msg.status
            if msg.status is ConnectStatus.RETRY:  # the cookie in the rkey's place
                assert _int(row["mrc.connect.cookie"]) == msg.cookie != 0 and row["mrc.connect.rkey"] == ""
            else:
                assert _int(row["mrc.connect.rkey"]) == msg.rkey and row["mrc.connect.cookie"] == ""
    last = rows[-1]
    assert _flag(last["mrc.data.trimmed"]) and int(last["mrc.data.payload_len"]) == 0
    assert last["mrc.class"] == "trimmed" and last["mrc.icrc"] == ""


def test_every_message_type_decodes_without_warnings(tmp_path: Path) -> None:
    frames = [*_frames(sample_messages()), trim(_frames(sample_messages())[3])]
    assert tshark.problems(_pcap(tmp_path, frames)) == []
    assert tshark.problems(_pcap(tmp_path, frames), lua=False) == []


def test_problem_check_sees_a_zero_checksum_and_a_cut_header(tmp_path: Path) -> None:
    """The clean-decode check above can fail: RFC 8200's zero checksum and a short SACK are caught."""
    sack = bytearray(_frames(sample_messages())[4])
    sack[100:102] = b"\0\0"
    short = bytearray(_frames(sample_messages())[5])
    del short[-6:-4]  # NACK body 2 bytes short, lengths patched so only MRC can tell
    for off, delta in ((18, -2), (58, -2), (98, -2)):
        short[off : off + 2] = (int.from_bytes(short[off : off + 2], "big") + delta).to_bytes(2, "big")
    found = tshark.problems(_pcap(tmp_path, [bytes(sack), bytes(short)]))
    assert any(p.startswith("frame 1:") and "checksum" in p.lower() for p in found), found
    assert any(p.startswith("frame 2:") and "MRC header length" in p for p in found), found


def test_the_mrc_tree_comes_first_with_the_carrier_broken_out_and_each_echo_once(tmp_path: Path) -> None:
    """``tshark -V``: the MRC tree before InfiniBand's and its payload dump; the outer destination
    read as T0 / T1 / host uSIDs; a SACK's echoed EV shown once (with its plane, T1, entropy)."""
    msgs = sample_messages()
    pcap = _pcap(tmp_path, _frames(msgs))
    data = next(i for i, m in enumerate(msgs, 1) if isinstance(m, DataPacket) and len(m.payload) > 64)
    text = tshark.details(pcap, data)
    assert "\nMRC\n" in text and "\nInfiniBand\n" in text
    mrc_at = text.index("\nMRC\n")
    assert mrc_at < text.index("\nInfiniBand\n") < text.index("Data (")
    carrier = text[text.index("uSID carrier", mrc_at) : text.index("Opcode", mrc_at)]
    assert [ln.split(": ", 2)[2].split()[0] for ln in carrier.splitlines() if "uSID: 0x" in ln] == [
        "T0",
        "T1",
        "T0",
        "host",
    ]
    assert str(SAMPLE_CARRIER) in carrier
    sack = next(i for i, m in enumerate(msgs, 1) if isinstance(m, Sack))
    text = tshark.details(pcap, sack)
    assert text.count("Echoed EV") == 1, text
    echoed = text[text.index("Echoed EV") :].splitlines()
    assert [ln.strip().split(":")[0] for ln in echoed[1:4]] == ["Plane", "T1 index", "Entropy"]
