"""One realistic message of every MRC type, on a real path of the default fabric.

Shared by the wire tests, the codec benchmark and anyone who needs a valid
frame to start from (fuzzing, pcaps, simulator smoke tests).
"""

from __future__ import annotations

from ipaddress import IPv6Address

from mrc_fabric.addressing import carrier, nic_address, path_usids
from mrc_fabric.ev import ev_value
from mrc_host.wire.framing import FrameAddressing
from mrc_host.wire.messages import (
    ACK_ECHO_MAX,
    Connect,
    ConnectAck,
    ConnectStatus,
    Credit,
    CreditRequest,
    DataFlag,
    DataPacket,
    Dscp,
    Ecn,
    Frame,
    Nack,
    NackReason,
    Opcode,
    PathMeta,
    Probe,
    ProbeAck,
    Sack,
)

# Host 0 (under T0 0) to host 2 (under T0 1), plane 1, through T1 1.
SAMPLE_PLANE = 1
SAMPLE_EV = ev_value(SAMPLE_PLANE, 1, 0x2A5A5)
SAMPLE_REPLY_EV = ev_value(SAMPLE_PLANE, 0, 0x15A5A)
SAMPLE_CARRIER: IPv6Address = carrier(path_usids(SAMPLE_PLANE, 0, 1, 2, 1))
SAMPLE_ADDRESSING = FrameAddressing(
    src_mac="02:00:00:00:00:01",
    dst_mac="02:00:00:00:01:01",
    outer_src=nic_address(SAMPLE_PLANE, 0),
    inner_src=nic_address(SAMPLE_PLANE, 0),
    inner_dst=nic_address(SAMPLE_PLANE, 2),
)


def data_meta(ev: int = SAMPLE_EV, retx: bool = False) -> PathMeta:
    return PathMeta(ev=ev, ecn=Ecn.ECT0, dscp=Dscp.RETX if retx else Dscp.DATA)


def control_meta(ev: int = SAMPLE_EV) -> PathMeta:
    return PathMeta(ev=ev, ecn=Ecn.NOT_ECT, dscp=Dscp.CONTROL)


def sample_data(payload_len: int = 1024, opcode: Opcode = Opcode.WRITE_ONLY) -> DataPacket:
    return DataPacket(
        qp=0x00ABCD,
        psn=0xFFFFF0,
        vaddr=0x7F00_1234_5000,
        rkey=0xC0FFEE,
        payload=bytes(i & 0xFF for i in range(payload_len)),
        msg_id=77,
        send_ts=1_700_000_000_123_456_789,
        flags=DataFlag.LAST_OF_MESSAGE,
        opcode=opcode,
        ack_req=True,
        meta=data_meta(),
    )


def sample_messages() -> list[Frame]:
    """One message of every type (and every DATA opcode)."""
    data = [
        sample_data(opcode=op, payload_len=256 + i)
        for i, op in enumerate(
            (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY)
        )
    ]
    data[1].flags = DataFlag.RETRANSMISSION
    data[1].meta = data_meta(retx=True)
    data[1].ack_echo = ACK_ECHO_MAX  # every bit of the ACK echo, next to a flag
    data[2].ack_req = False
    data[3].ack_echo = 0x2A5B
    return [
        *data,
        Sack(
            qp=0x00ABCD,
            cum_psn=0x000102,
            base_psn=0x000102,
            bitmap=0xF0F0_0000_0000_0001,
            echo_ev=SAMPLE_EV,
            ecn_echo=True,
            echo_ts=1_700_000_000_000_000_001,
            port_status=0b11,
            meta=control_meta(),
            duplicate=True,
        ),
        Nack(
            qp=0x00ABCD,
            psn=0x000103,
            reason=NackReason.TRIMMED_LASTHOP,
            echo_ev=SAMPLE_EV,
            meta=control_meta(),
        ),
        Probe(
            qp=0x00ABCD,
            probe_id=9,
            ev_under_test=SAMPLE_EV,
            send_ts=123_456,
            meta=control_meta(),
            reply_ev=SAMPLE_REPLY_EV,
        ),
        ProbeAck(
            qp=0x00ABCD,
            probe_id=9,
            ev_under_test=SAMPLE_EV,
            echo_ts=123_456,
            meta=control_meta(),
            port_status=0b01,
        ),
        Connect(qp=0x00ABCD, initial_psn=0x5A5A5A, nonce=0x0123_4567_89AB_CDEF, meta=control_meta()),
        Connect(
            qp=0x00ABCD,
            initial_psn=0x5A5A5A,
            nonce=0x0123_4567_89AB_CDEF,
            meta=control_meta(),
            cookie=0xC001_D00D,
        ),
        ConnectAck(
            qp=0x40ABCD,
            initial_psn=0x5A5A5A,
            nonce=0x0123_4567_89AB_CDEF,
            rkey=0,
            status=ConnectStatus.RETRY,
            meta=control_meta(),
            cookie=0xC001_D00D,
        ),
        ConnectAck(
            qp=0x40ABCD,
            initial_psn=0x5A5A5A,
            nonce=0x0123_4567_89AB_CDEF,
            rkey=0x9E37_79B9,
            status=ConnectStatus.ACCEPTED,
            meta=control_meta(),
        ),
        Credit(qp=0x00ABCD, granted=0xFFFF_F000, meta=control_meta(SAMPLE_REPLY_EV)),
        CreditRequest(qp=0x00ABCD, target=0x8000_0001, meta=control_meta()),
    ]
