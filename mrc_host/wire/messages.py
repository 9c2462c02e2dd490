"""Decoded MRC packets: the values the sans-I/O core consumes and produces.

These plain dataclasses are the boundary between the core (which never sees
bytes it has to parse by hand) and the codec (which turns them into frames and
back). Field meanings and byte offsets are in docs/protocol.md.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

PSN_BITS = 24
PSN_MASK = (1 << PSN_BITS) - 1
SACK_BITMAP_BITS = 64


class Opcode(enum.IntEnum):
    """BTH opcodes. RC RDMA WRITE for data; the vendor range 0xC0-0xFF for MRC control."""

    WRITE_FIRST = 0x06
    WRITE_MIDDLE = 0x07
    WRITE_LAST = 0x08
    WRITE_ONLY = 0x0A
    SACK = 0xC0
    NACK = 0xC1
    PROBE = 0xC2
    PROBE_ACK = 0xC3


DATA_OPCODES = frozenset({Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY})


class Dscp(enum.IntEnum):
    """DSCP classes (6-bit code points) carried in the outer IPv6 traffic class."""

    DATA = 26  # AF31: first transmission, may be trimmed
    RETX = 28  # AF32: retransmission
    CONTROL = 48  # CS6: SACK, NACK, PROBE, PROBE_ACK
    TRIMMED = 46  # EF: a data packet cut to its headers by a switch


class Ecn(enum.IntEnum):
    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3


class NackReason(enum.IntEnum):
    TRIMMED = 1
    TRIMMED_LASTHOP = 2
    OUT_OF_WINDOW = 3
    BAD_RKEY = 4
    BAD_ADDRESS = 5


class DataFlag(enum.IntFlag):
    NONE = 0
    RETRANSMISSION = 1
    LAST_OF_MESSAGE = 2


@dataclass(slots=True)
class PathMeta:
    """What the network layer says about a packet: its EV and the outer header marks."""

    ev: int = 0
    ecn: int = Ecn.NOT_ECT
    dscp: int = Dscp.CONTROL
    src: str = ""  # inner IPv6 source (the peer's NIC port) as text; "" when not known
    dst: str = ""  # inner IPv6 destination


@dataclass(slots=True)
class DataPacket:
    """RDMA WRITE packet: BTH + RETH (in every packet) + MRC data header + payload."""

    qp: int
    psn: int
    vaddr: int
    rkey: int
    payload: bytes
    msg_id: int = 0
    send_ts: int = 0  # sender clock, nanoseconds (64 bit)
    flags: DataFlag = DataFlag.NONE
    opcode: Opcode = Opcode.WRITE_ONLY
    ack_req: bool = True
    trimmed: bool = False  # set by the decoder when a switch cut the payload
    meta: PathMeta = field(default_factory=PathMeta)


@dataclass(slots=True)
class Sack:
    """Cumulative ACK + 64-bit selective bitmap, echoing the EV and marks of the packet acked."""

    qp: int
    cum_psn: int  # every PSN before this one was received
    base_psn: int  # bit i of bitmap = PSN base_psn + i received
    bitmap: int
    echo_ev: int
    ecn_echo: bool = False
    echo_ts: int = 0
    port_status: int = 0  # the sender's NIC port-status bitmap (bit p = port of plane p up)
    meta: PathMeta = field(default_factory=PathMeta)


@dataclass(slots=True)
class Nack:
    qp: int
    psn: int
    reason: NackReason
    echo_ev: int
    meta: PathMeta = field(default_factory=PathMeta)


@dataclass(slots=True)
class Probe:
    qp: int
    probe_id: int
    ev_under_test: int
    send_ts: int = 0
    meta: PathMeta = field(default_factory=PathMeta)


@dataclass(slots=True)
class ProbeAck:
    qp: int
    probe_id: int
    ev_under_test: int
    echo_ts: int = 0
    meta: PathMeta = field(default_factory=PathMeta)
    port_status: int = 0  # the responder's NIC port-status bitmap (BTH PSN field); 0 = not reported


Message = DataPacket | Sack | Nack | Probe | ProbeAck


class MalformedPacket(ValueError):
    """A frame the codec refuses; ``reason`` is a short stable key for counters."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
