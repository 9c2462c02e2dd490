"""The Linux target's eBPF egress program (linux_target/bpf/mrc_egress.c) copies the frame
layout, the DSCP code points and the data opcodes from the Python side as ``#define``s; this
test ties each to its one source (the codec, ``mrc_fabric``, the message enums and the HTB
classes ``linux_target/egress.py`` sets up), as test_drop_reasons.py does for the P4 program."""

from __future__ import annotations

import re
import socket
import struct
from pathlib import Path

from mrc_fabric.addressing import MRC_UDP_PORT
from mrc_host.wire import codec
from mrc_host.wire.messages import DATA_OPCODES, Dscp, Ecn
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_data

REPO = Path(__file__).resolve().parents[2]
PROGRAM = REPO / "linux_target" / "bpf" / "mrc_egress.c"
EGRESS_PY = REPO / "linux_target" / "egress.py"
DEFINE = re.compile(r"^#define\s+([A-Z0-9_]+)\s+(0x[0-9A-Fa-f]+|\d+)\b", re.MULTILINE)


def defines() -> dict[str, int]:
    found = {name: int(value, 0) for name, value in DEFINE.findall(PROGRAM.read_text())}
    assert found, f"no numeric #defines found in {PROGRAM}"
    return found


def test_frame_offsets_match_the_codec() -> None:
    d = defines()
    assert d["ETH_P_IPV6_BE"] == int.from_bytes(codec.ETHERTYPE_IPV6, "big")
    assert d["OUTER_OFF"] == codec.OUTER_OFF
    assert d["INNER_OFF"] == codec.INNER_OFF
    assert d["UDP_OFF"] == codec.UDP_OFF
    assert d["BTH_OFF"] == codec.BTH_OFF
    assert d["ROCEV2_PORT"] == MRC_UDP_PORT
    assert d["IPPROTO_IPV6_NH"] == socket.IPPROTO_IPV6
    assert d["IPPROTO_UDP_NH"] == socket.IPPROTO_UDP


def test_trimmed_frame_matches_what_the_codec_trims() -> None:
    # The program cuts a DATA frame to the same bytes codec.trim (and the P4 program) produce.
    d = defines()
    frame = codec.encode(sample_data(4096), SAMPLE_CARRIER, SAMPLE_ADDRESSING)
    cut = codec.trim(frame)
    assert d["TRIMMED_FRAME_LEN"] == len(cut) == codec.DATA_HDR_END
    (outer_plen,) = struct.unpack_from("!H", cut, codec.OUTER_OFF + 4)
    (udp_len,) = struct.unpack_from("!H", cut, codec.UDP_OFF + 4)
    assert d["TRIMMED_OUTER_PLEN"] == outer_plen
    assert d["TRIMMED_UDP_LEN"] == udp_len


def test_dscp_code_points_match_the_messages() -> None:
    d = defines()
    assert d["DSCP_DATA"] == Dscp.DATA
    assert d["DSCP_CONTROL"] == Dscp.CONTROL
    assert d["DSCP_TRIMMED"] == Dscp.TRIMMED


def test_the_program_treats_exactly_the_data_opcodes_as_trimmable_data() -> None:
    text = PROGRAM.read_text()
    m = re.search(r"mrc_data\s*=\s*(op\s*==[^;]+);", text)
    assert m, "mrc_data assignment not found in the program"
    opcodes = {int(v, 16) for v in re.findall(r"op\s*==\s*(0x[0-9A-Fa-f]+)", m.group(1))}
    assert opcodes == {int(op) for op in DATA_OPCODES}


def test_ect_test_matches_the_ecn_code_points() -> None:
    # ECT is (tc & 3) == 1 or 2: ECT(1) and ECT(0), never CE (3) nor Not-ECT (0).
    text = PROGRAM.read_text()
    assert re.search(r"ect\s*=\s*\(tc & 3\) == 1 \|\| \(tc & 3\) == 2;", text)
    assert {Ecn.ECT1, Ecn.ECT0} == {1, 2}


def test_htb_classes_are_the_ones_egress_py_creates() -> None:
    d = defines()
    setup = EGRESS_PY.read_text()
    for name, prio in (("CLASS_HIGH", 0), ("CLASS_DATA", 1)):
        major, minor = d[name] >> 16, d[name] & 0xFFFF
        assert f"classid {major:x}:{minor:x} htb" in setup, name
        assert re.search(rf"classid {major:x}:{minor:x} htb [^\"]* prio {prio}\b", setup), name
