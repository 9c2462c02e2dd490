"""Wireshark agrees: tshark decodes the codec's frames as RoCEv2 with the values written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap

from mrc_host.wire.codec import encode
from mrc_host.wire.messages import DataPacket, Nack, Opcode, Probe, ProbeAck, Sack
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_messages

TSHARK = shutil.which("tshark")
FIELDS = [
    "ipv6.src",
    "ipv6.dst",
    "ipv6.nxt",
    "ipv6.tclass.dscp",
    "ipv6.tclass.ecn",
    "ipv6.flow",
    "udp.srcport",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.invariant.crc",
]
CONTROL_OPCODES = {Sack: Opcode.SACK, Nack: Opcode.NACK, Probe: Opcode.PROBE, ProbeAck: Opcode.PROBE_ACK}


def _int(text: str) -> int:
    return int(text, 0)


@pytest.mark.skipif(TSHARK is None, reason="tshark not installed (apt-get install tshark)")
def test_tshark_decodes_every_message_type(tmp_path: Path) -> None:
    msgs = sample_messages()
    frames = [encode(m, SAMPLE_CARRIER, SAMPLE_ADDRESSING) for m in msgs]
    pcap = tmp_path / "mrc.pcap"
    wrpcap(str(pcap), [Ether(f) for f in frames])
    cmd = [TSHARK, "-n", "-r", str(pcap), "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout
    rows = [dict(zip(FIELDS, line.split("\t"), strict=True)) for line in out.splitlines()]
    assert len(rows) == len(msgs)

    outer_src, inner_src = str(SAMPLE_ADDRESSING.outer_src), str(SAMPLE_ADDRESSING.inner_src)
    for msg, frame, row in zip(msgs, frames, rows, strict=True):
        meta = msg.meta
        assert row["ipv6.src"].split(",") == [outer_src, inner_src]
        assert row["ipv6.dst"].split(",") == [str(SAMPLE_CARRIER), str(SAMPLE_ADDRESSING.inner_dst)]
        assert row["ipv6.nxt"].split(",") == ["41", "17"]
        assert [int(x) for x in row["ipv6.tclass.dscp"].split(",")] == [meta.dscp, meta.dscp]
        assert [int(x) for x in row["ipv6.tclass.ecn"].split(",")] == [meta.ecn, meta.ecn]
        assert _int(row["ipv6.flow"].split(",")[0]) == meta.ev >> 16
        assert int(row["udp.srcport"]) == meta.ev & 0xFFFF
        assert int(row["udp.dstport"]) == 4791
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
            expected_psn = msg.cum_psn if isinstance(msg, Sack) else msg.psn if isinstance(msg, Nack) else 0
            assert int(row["infiniband.bth.psn"]) == expected_psn
