"""Scapy layers for every MRC header, and the scapy view of a whole MRC frame.

Scapy is the reference here, not the data path: the fast codec (codec.py) builds
its header templates from these layers once per encoder and then only patches
bytes, and the tests check that scapy dissects the codec's output to the same
field values. Wireshark/tshark decode the same frames as RoCEv2 (UDP 4791).

Frame: Ether / IPv6 (nh 41, the SRv6 uSID carrier) / IPv6 (nh 17, NIC addresses)
/ UDP (sport = 0xC000 | EV & 0x3fff, dport 4791) / BTH / per-opcode header / payload / ICRC.
The EV's high 18 bits ride in the flow label of both IPv6 headers (mrc_fabric.ev).
Byte offsets of every field are in docs/protocol.md.

The BTH is scapy.contrib.roce.BTH unchanged: it already binds UDP dport 4791
and carries the 4-byte ICRC as a trailer that it *computes* (RoCEv2 rules: CRC32
over a pseudo header of 8 x 0xff + the IPv6 header right before UDP -- the inner
one -- with traffic class, flow label and hop limit set to all ones, the UDP
header with checksum 0xffff, and the BTH with FECN/BECN/reserved bits set to
ones, then the rest of the packet; stored little-endian). The outer header is
not covered, so the ICRC survives every SRv6 hop.

The UDP checksum is computed (over the inner IPv6 pseudo header, as RFC 8200 requires
for UDP over IPv6: a zero checksum is only allowed for tunnel protocols under RFC
6935/6936, which MRC's UDP is not -- it is the transport, carried *inside* the tunnel).
Receivers do not check it: the ICRC covers the same bytes and more. A switch that trims
a packet leaves the checksum stale, as it leaves no ICRC (docs/protocol.md).

Known limit of the scapy view: a trimmed data frame (cut by a switch right
after the MRC data header) has no ICRC, but scapy's BTH still takes the last
four bytes as one. Use ``codec.decode`` for trimmed frames.
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv6Address

from scapy.contrib.roce import BTH
from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    ThreeBytesField,
    XIntField,
    XLongField,
    XShortField,
)
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Packet, Raw, bind_layers

from mrc_fabric.addressing import MRC_UDP_PORT
from mrc_fabric.ev import ev_from_wire, flow_label, udp_sport
from mrc_host.wire.framing import SACK_FLAG_DUPLICATE, SACK_FLAG_ECN_ECHO, FrameAddressing
from mrc_host.wire.header_check import header_check
from mrc_host.wire.messages import (
    DATA_OPCODES,
    Connect,
    ConnectAck,
    ConnectStatus,
    Credit,
    CreditRequest,
    DataFlag,
    DataPacket,
    Frame,
    Nack,
    NackReason,
    Opcode,
    PathMeta,
    Probe,
    ProbeAck,
    Sack,
    data_flags_word,
)
from mrc_host.wire.virtual_payload import VirtualPayload

__all__ = [
    "BTH",
    "RETH",
    "MrcConnect",
    "MrcConnectAck",
    "MrcCredit",
    "MrcCreditRequest",
    "MrcData",
    "MrcNack",
    "MrcProbe",
    "MrcProbeAck",
    "MrcSack",
    "message_from_scapy",
    "to_scapy",
]

IPPROTO_IPV6 = 41
IPPROTO_UDP = 17


class RETH(Packet):
    """RDMA Extended Transport Header, in every MRC data packet (placement by address).

    ``dlen`` is the payload length of *this* packet, so a receiver can tell a
    trimmed packet (payload shorter than dlen) from a short write.
    """

    name = "RETH"
    fields_desc = [XLongField("va", 0), XIntField("rkey", 0), IntField("dlen", 0)]


class MrcData(Packet):
    """MRC data header after the RETH: message id, ACK echo and flags, header check, send
    timestamp (ns). The ACK echo (the top 14 bits of the 16-bit flags word) names the latest
    SACK the sender received (``messages.ack_echo_of``; 0: none)."""

    name = "MRC data"
    fields_desc = [
        IntField("msg_id", 0),
        BitField("ack_echo", 0, 14),
        FlagsField("flags", 0, 2, ["RETRANSMISSION", "LAST_OF_MESSAGE"]),
        XShortField("hdr_check", 0),  # what a receiver checks on a trimmed frame (header_check.py)
        LongField("send_ts", 0),
    ]


class MrcSack(Packet):
    """Cumulative PSN + 64-bit SACK bitmap, echoing the EV/ECN/timestamp of the packet acked."""

    name = "MRC SACK"
    fields_desc = [
        ByteField("reserved0", 0),
        ThreeBytesField("cum_psn", 0),
        ByteField("reserved1", 0),
        ThreeBytesField("base_psn", 0),
        XLongField("bitmap", 0),
        XIntField("echo_ev", 0),
        FlagsField("flags", 0, 8, ["ECN_ECHO", "DUPLICATE"]),
        ByteField("reserved2", 0),
        XShortField("port_status", 0),
        LongField("echo_ts", 0),
    ]


class MrcNack(Packet):
    name = "MRC NACK"
    fields_desc = [
        ByteField("reserved0", 0),
        ThreeBytesField("psn", 0),
        ByteEnumField("reason", 0, {r.value: r.name for r in NackReason}),
        ThreeBytesField("reserved1", 0),
        XIntField("echo_ev", 0),
    ]


class MrcProbe(Packet):
    name = "MRC PROBE"
    fields_desc = [
        IntField("probe_id", 0),
        XIntField("ev_under_test", 0),
        LongField("send_ts", 0),
        XIntField("reply_ev", 0),
    ]


class MrcProbeAck(Packet):
    name = "MRC PROBE_ACK"
    fields_desc = [
        IntField("probe_id", 0),
        XIntField("ev_under_test", 0),
        LongField("echo_ts", 0),
        XShortField("port_status", 0),
        ShortField("reserved", 0),
    ]


class MrcConnect(Packet):
    """Handshake request: the data sender's random initial PSN and nonce, and the cookie of
    the receiver's RETRY (0 on a first try)."""

    name = "MRC CONNECT"
    fields_desc = [
        ByteField("reserved0", 0),
        ThreeBytesField("initial_psn", 0),
        XIntField("cookie", 0),
        XLongField("nonce", 0),
    ]


class MrcConnectAck(Packet):
    """Handshake answer: status, the initial PSN expected, the region's rkey (RETRY: the cookie
    to send back instead), the nonce echoed."""

    name = "MRC CONNECT_ACK"
    fields_desc = [
        ByteEnumField("status", 0, {s.value: s.name for s in ConnectStatus}),
        ThreeBytesField("initial_psn", 0),
        XIntField("rkey", 0),
        XLongField("nonce", 0),
    ]


class MrcCredit(Packet):
    """Receiver credit: the payload bytes granted the sender so far, cumulative modulo 2**32."""

    name = "MRC CREDIT"
    fields_desc = [IntField("granted", 0)]


class MrcCreditRequest(Packet):
    """A credit-using sender's target: the cumulative credit (modulo 2**32) that covers all it has to send."""

    name = "MRC CREDIT_REQUEST"
    fields_desc = [IntField("target", 0)]


for _op in DATA_OPCODES:
    bind_layers(BTH, RETH, opcode=int(_op))
bind_layers(RETH, MrcData)
bind_layers(BTH, MrcSack, opcode=int(Opcode.SACK))
bind_layers(BTH, MrcNack, opcode=int(Opcode.NACK))
bind_layers(BTH, MrcProbe, opcode=int(Opcode.PROBE))
bind_layers(BTH, MrcProbeAck, opcode=int(Opcode.PROBE_ACK))
bind_layers(BTH, MrcConnect, opcode=int(Opcode.CONNECT))
bind_layers(BTH, MrcConnectAck, opcode=int(Opcode.CONNECT_ACK))
bind_layers(BTH, MrcCredit, opcode=int(Opcode.CREDIT))
bind_layers(BTH, MrcCreditRequest, opcode=int(Opcode.CREDIT_REQUEST))


def _bth_and_header(msg: Frame) -> Packet:
    """BTH + per-opcode header (+ payload) of one message."""
    if isinstance(msg, DataPacket):
        if isinstance(msg.payload, VirtualPayload):
            raise ValueError("a virtual payload (mrc-sim) has no bytes to put in a frame")
        return (
            BTH(opcode=int(msg.opcode), dqpn=msg.qp, psn=msg.psn, ackreq=int(msg.ack_req))
            / RETH(va=msg.vaddr, rkey=msg.rkey, dlen=len(msg.payload))
            / MrcData(msg_id=msg.msg_id, ack_echo=msg.ack_echo, flags=int(msg.flags), send_ts=msg.send_ts)
            / Raw(bytes(msg.payload))
        )
    if isinstance(msg, Sack):
        flags = (SACK_FLAG_ECN_ECHO if msg.ecn_echo else 0) | (SACK_FLAG_DUPLICATE if msg.duplicate else 0)
        return BTH(opcode=int(Opcode.SACK), dqpn=msg.qp, psn=msg.cum_psn) / MrcSack(
            cum_psn=msg.cum_psn,
            base_psn=msg.base_psn,
            bitmap=msg.bitmap,
            echo_ev=msg.echo_ev,
            flags=flags,
            port_status=msg.port_status,
            echo_ts=msg.echo_ts,
        )
    if isinstance(msg, Nack):
        return BTH(opcode=int(Opcode.NACK), dqpn=msg.qp, psn=msg.psn) / MrcNack(
            psn=msg.psn, reason=int(msg.reason), echo_ev=msg.echo_ev
        )
    if isinstance(msg, Probe):
        return BTH(opcode=int(Opcode.PROBE), dqpn=msg.qp) / MrcProbe(
            probe_id=msg.probe_id, ev_under_test=msg.ev_under_test, send_ts=msg.send_ts, reply_ev=msg.reply_ev
        )
    if isinstance(msg, ProbeAck):
        return BTH(opcode=int(Opcode.PROBE_ACK), dqpn=msg.qp) / MrcProbeAck(
            probe_id=msg.probe_id,
            ev_under_test=msg.ev_under_test,
            echo_ts=msg.echo_ts,
            port_status=msg.port_status,
        )
    if isinstance(msg, Connect):
        return BTH(opcode=int(Opcode.CONNECT), dqpn=msg.qp, psn=msg.initial_psn) / MrcConnect(
            initial_psn=msg.initial_psn, nonce=msg.nonce, cookie=msg.cookie
        )
    if isinstance(msg, ConnectAck):
        return BTH(opcode=int(Opcode.CONNECT_ACK), dqpn=msg.qp, psn=msg.initial_psn) / MrcConnectAck(
            status=int(msg.status),
            initial_psn=msg.initial_psn,
            rkey=msg.cookie if msg.status is ConnectStatus.RETRY else msg.rkey,
            nonce=msg.nonce,
        )
    if isinstance(msg, Credit):
        return BTH(opcode=int(Opcode.CREDIT), dqpn=msg.qp) / MrcCredit(granted=msg.granted)
    if isinstance(msg, CreditRequest):
        return BTH(opcode=int(Opcode.CREDIT_REQUEST), dqpn=msg.qp) / MrcCreditRequest(target=msg.target)
    raise TypeError(f"not an MRC message: {type(msg).__name__}")


def to_scapy(msg: Frame, carrier: IPv6Address | str, addressing: FrameAddressing) -> Packet:
    """The whole frame of ``msg`` as a scapy packet (slow: templates, tests, benchmarks).

    The inner IPv6 header repeats the outer traffic class and flow label (tunnel
    ingress copies them, RFC 6040), so ``codec.decode_inner`` can recover the EV.
    """
    meta = msg.meta
    tc = ((meta.dscp & 0x3F) << 2) | (meta.ecn & 0x3)
    fl = flow_label(meta.ev)
    hl = addressing.hop_limit
    body = _bth_and_header(msg)
    if isinstance(msg, DataPacket):
        body[MrcData].hdr_check = header_check(
            IPv6Address(addressing.inner_src).packed + IPv6Address(addressing.inner_dst).packed,
            udp_sport(meta.ev),
            int(msg.opcode),
            msg.qp,
            msg.psn | (int(msg.ack_req) << 31),
            msg.vaddr,
            msg.rkey,
            len(msg.payload),
            msg.msg_id,
            data_flags_word(msg.flags, msg.ack_echo),
            msg.send_ts,
        )
    return (
        Ether(src=addressing.src_mac, dst=addressing.dst_mac)
        / IPv6(src=str(addressing.outer_src), dst=str(carrier), nh=IPPROTO_IPV6, tc=tc, fl=fl, hlim=hl)
        / IPv6(
            src=str(addressing.inner_src),
            dst=str(addressing.inner_dst),
            nh=IPPROTO_UDP,
            tc=tc,
            fl=fl,
            hlim=hl,
        )
        / UDP(sport=udp_sport(meta.ev), dport=MRC_UDP_PORT)  # checksum: scapy computes it
        / body
    )


def _data_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    bth, reth, hdr = pkt[BTH], pkt[RETH], pkt[MrcData]
    payload = bytes(hdr.payload)
    return DataPacket(
        qp=qp,
        psn=bth.psn,
        vaddr=reth.va,
        rkey=reth.rkey,
        payload=payload,
        msg_id=hdr.msg_id,
        send_ts=hdr.send_ts,
        flags=DataFlag(int(hdr.flags)),
        opcode=Opcode(bth.opcode),
        ack_req=bool(bth.ackreq),
        trimmed=len(payload) < reth.dlen,
        meta=meta,
        ack_echo=int(hdr.ack_echo),
    )


def _sack_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    s = pkt[MrcSack]
    return Sack(
        qp=qp,
        cum_psn=s.cum_psn,
        base_psn=s.base_psn,
        bitmap=s.bitmap,
        echo_ev=s.echo_ev,
        ecn_echo=bool(int(s.flags) & SACK_FLAG_ECN_ECHO),
        echo_ts=s.echo_ts,
        port_status=s.port_status,
        meta=meta,
        duplicate=bool(int(s.flags) & SACK_FLAG_DUPLICATE),
    )


def _nack_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    n = pkt[MrcNack]
    return Nack(qp=qp, psn=n.psn, reason=NackReason(n.reason), echo_ev=n.echo_ev, meta=meta)


def _probe_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    p = pkt[MrcProbe]
    return Probe(
        qp=qp,
        probe_id=p.probe_id,
        ev_under_test=p.ev_under_test,
        send_ts=p.send_ts,
        meta=meta,
        reply_ev=p.reply_ev,
    )


def _probe_ack_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    a = pkt[MrcProbeAck]
    return ProbeAck(
        qp=qp,
        probe_id=a.probe_id,
        ev_under_test=a.ev_under_test,
        echo_ts=a.echo_ts,
        meta=meta,
        port_status=a.port_status,
    )


def _connect_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    c = pkt[MrcConnect]
    return Connect(qp=qp, initial_psn=c.initial_psn, nonce=c.nonce, meta=meta, cookie=c.cookie)


def _connect_ack_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    k = pkt[MrcConnectAck]
    status = ConnectStatus(k.status)
    retry = status is ConnectStatus.RETRY
    return ConnectAck(
        qp=qp,
        initial_psn=k.initial_psn,
        nonce=k.nonce,
        rkey=0 if retry else k.rkey,
        status=status,
        meta=meta,
        cookie=k.rkey if retry else 0,
    )


def _credit_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    return Credit(qp=qp, granted=pkt[MrcCredit].granted, meta=meta)


def _credit_request_from_scapy(pkt: Packet, qp: int, meta: PathMeta) -> Frame:
    return CreditRequest(qp=qp, target=pkt[MrcCreditRequest].target, meta=meta)


# One reader per BTH opcode: the scapy layers it reads and the Message it builds.
_FROM_SCAPY: dict[int, Callable[[Packet, int, PathMeta], Frame]] = {
    **{int(op): _data_from_scapy for op in DATA_OPCODES},
    Opcode.SACK: _sack_from_scapy,
    Opcode.NACK: _nack_from_scapy,
    Opcode.PROBE: _probe_from_scapy,
    Opcode.PROBE_ACK: _probe_ack_from_scapy,
    Opcode.CONNECT: _connect_from_scapy,
    Opcode.CONNECT_ACK: _connect_ack_from_scapy,
    Opcode.CREDIT: _credit_from_scapy,
    Opcode.CREDIT_REQUEST: _credit_request_from_scapy,
}


def message_from_scapy(pkt: Packet) -> Frame:
    """Read a dissected frame back into a Message: an independent decoder for tests.

    Raises ValueError when the packet is not a (non-trimmed) MRC frame.
    """
    outer = pkt.getlayer(IPv6, 1)
    inner = pkt.getlayer(IPv6, 2)
    udp = pkt.getlayer(UDP)
    bth = pkt.getlayer(BTH)
    if outer is None or inner is None or udp is None or bth is None:
        raise ValueError("not an MRC frame")
    meta = PathMeta(
        ev=ev_from_wire(udp.sport, outer.fl),
        ecn=outer.tc & 0x3,
        dscp=outer.tc >> 2,
        src=str(inner.src),
        dst=str(inner.dst),
    )
    reader = _FROM_SCAPY.get(bth.opcode)
    if reader is None:
        raise ValueError(f"unknown opcode {bth.opcode:#x}")
    return reader(pkt, bth.dqpn, meta)
