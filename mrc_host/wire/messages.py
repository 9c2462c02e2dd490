"""Decoded MRC packets: the values the sans-I/O core consumes and produces.

These plain dataclasses are the boundary between the core (which never sees
bytes it has to parse by hand) and the codec (which turns them into frames and
back). Field meanings and byte offsets are in docs/protocol.md.

The per-packet ones spell out their ``__init__`` (``init=False``, same fields, order and
defaults as the generated one; repr, eq and ``dataclasses.replace`` are unchanged): compiled
by mypyc, the generated one stays interpreted Python and cost ~5x more per packet.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from .virtual_payload import VirtualPayload

PSN_BITS: Final = 24
PSN_MASK: Final = (1 << PSN_BITS) - 1
SACK_BITMAP_BITS: Final = 64


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
    CONNECT = 0xC4
    CONNECT_ACK = 0xC5
    CREDIT = 0xC6
    CREDIT_REQUEST = 0xC7


DATA_OPCODES: Final = frozenset(
    {Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY}
)


class Dscp(enum.IntEnum):
    """DSCP classes (6-bit code points) carried in the outer IPv6 traffic class."""

    DATA = 26  # AF31: first transmission, may be trimmed
    RETX = 28  # AF32: retransmission
    CONTROL = 48  # CS6: SACK, NACK, PROBE, PROBE_ACK, CREDIT, CREDIT_REQUEST
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


# DATA's 16-bit flags word: the flags in bits 0-1, the ACK echo in bits 2-15
DATA_FLAG_BITS: Final = 2
DATA_FLAG_MASK: Final = (1 << DATA_FLAG_BITS) - 1
ACK_ECHO_BITS: Final = 14
ACK_ECHO_MAX: Final = (1 << ACK_ECHO_BITS) - 1


def ack_echo_of(echo_ts: int, echo_ev: int) -> int:
    """The ACK echo naming a SACK: its echoed timestamp and EV (the DATA copy it answers:
    two copies may leave at the same nanosecond, not on the same EV) folded into
    1..ACK_ECHO_MAX (0 is "no echo"). A DATA packet echoes SACKs its sender received, which
    tells the SACK's sender which of its reverse EVs deliver (core/ack_echo.py).

    The value is ``((echo_ts ^ echo_ev * 0x9E3779B1) & 0xFFFFFFFF) % ACK_ECHO_MAX + 1``,
    computed in 32-bit halves: the 64-bit product is a big integer when compiled (three
    allocations per call, twice per SACK), its low 32 bits from two 48-bit products are not."""
    ev = echo_ev & 0xFFFFFFFF
    mixed = (ev * 0x79B1 + ((ev * 0x9E37 & 0xFFFF) << 16)) & 0xFFFFFFFF  # ev * 0x9E3779B1 mod 2**32
    return ((echo_ts & 0xFFFFFFFF) ^ mixed) % ACK_ECHO_MAX + 1


def data_flags_word(flags: int, ack_echo: int) -> int:
    """The 16 bits DATA carries at offset 134: flags | ACK echo << 2."""
    return int(flags) | ack_echo << DATA_FLAG_BITS


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class PathMeta:
    """What the network layer says about a packet: its EV and the outer header marks."""

    ev: int = 0
    ecn: int = Ecn.NOT_ECT
    dscp: int = Dscp.CONTROL
    src: str = ""  # inner IPv6 source (the peer's NIC port) as text; "" when not known
    dst: str = ""  # inner IPv6 destination

    def __init__(
        self,
        ev: int = 0,
        ecn: int = Ecn.NOT_ECT,
        dscp: int = Dscp.CONTROL,
        src: str = "",
        dst: str = "",
    ) -> None:
        self.ev = ev
        self.ecn = ecn
        self.dscp = dscp
        self.src = src
        self.dst = dst


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class DataPacket:
    """RDMA WRITE packet: BTH + RETH (in every packet) + MRC data header + payload."""

    qp: int
    psn: int
    vaddr: int
    rkey: int
    # a decoded frame's is a read-only view of it (codec._data_payload): never written to;
    # mrc-sim's virtual payloads carry a length and a check value, no bytes (never encoded)
    payload: bytes | memoryview | VirtualPayload
    msg_id: int = 0
    send_ts: int = 0  # sender clock, nanoseconds (64 bit)
    flags: DataFlag = DataFlag.NONE
    opcode: Opcode = Opcode.WRITE_ONLY
    ack_req: bool = True
    trimmed: bool = False  # set by the decoder when a switch cut the payload
    meta: PathMeta = field(default_factory=PathMeta)
    ack_echo: int = 0  # ``ack_echo_of`` the latest SACK the sender received (0: none yet)

    def __init__(
        self,
        qp: int,
        psn: int,
        vaddr: int,
        rkey: int,
        payload: bytes | memoryview | VirtualPayload,
        msg_id: int = 0,
        send_ts: int = 0,
        flags: DataFlag = DataFlag.NONE,
        opcode: Opcode = Opcode.WRITE_ONLY,
        ack_req: bool = True,
        trimmed: bool = False,
        meta: PathMeta | None = None,
        ack_echo: int = 0,
    ) -> None:
        self.qp = qp
        self.psn = psn
        self.vaddr = vaddr
        self.rkey = rkey
        self.payload = payload
        self.msg_id = msg_id
        self.send_ts = send_ts
        self.flags = flags
        self.opcode = opcode
        self.ack_req = ack_req
        self.trimmed = trimmed
        self.meta = PathMeta() if meta is None else meta
        self.ack_echo = ack_echo


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
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
    # D-SACK: the packet that triggered this SACK (echo_ev, echo_ts) had already arrived
    duplicate: bool = False

    def __init__(
        self,
        qp: int,
        cum_psn: int,
        base_psn: int,
        bitmap: int,
        echo_ev: int,
        ecn_echo: bool = False,
        echo_ts: int = 0,
        port_status: int = 0,
        meta: PathMeta | None = None,
        duplicate: bool = False,
    ) -> None:
        self.qp = qp
        self.cum_psn = cum_psn
        self.base_psn = base_psn
        self.bitmap = bitmap
        self.echo_ev = echo_ev
        self.ecn_echo = ecn_echo
        self.echo_ts = echo_ts
        self.port_status = port_status
        self.meta = PathMeta() if meta is None else meta
        self.duplicate = duplicate


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class Nack:
    qp: int
    psn: int
    # a NackReason value; typed int because the core takes any int and refuses unknown ones
    # itself (counted), and a compiled (mypyc) Nack must be able to carry them to it
    reason: int
    echo_ev: int
    meta: PathMeta = field(default_factory=PathMeta)

    def __init__(
        self,
        qp: int,
        psn: int,
        reason: int,
        echo_ev: int,
        meta: PathMeta | None = None,
    ) -> None:
        self.qp = qp
        self.psn = psn
        self.reason = reason
        self.echo_ev = echo_ev
        self.meta = PathMeta() if meta is None else meta


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class Probe:
    """Liveness probe of ``ev_under_test``; ``reply_ev`` names the EV the PROBE_ACK should
    return on (0: the responder chooses), so the prober can test a path's reverse too."""

    qp: int
    probe_id: int
    ev_under_test: int
    send_ts: int = 0
    meta: PathMeta = field(default_factory=PathMeta)
    reply_ev: int = 0

    def __init__(
        self,
        qp: int,
        probe_id: int,
        ev_under_test: int,
        send_ts: int = 0,
        meta: PathMeta | None = None,
        reply_ev: int = 0,
    ) -> None:
        self.qp = qp
        self.probe_id = probe_id
        self.ev_under_test = ev_under_test
        self.send_ts = send_ts
        self.meta = PathMeta() if meta is None else meta
        self.reply_ev = reply_ev


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class ProbeAck:
    """Answer to a PROBE, with the responder's NIC port-status bitmap."""

    qp: int
    probe_id: int
    ev_under_test: int
    echo_ts: int = 0
    meta: PathMeta = field(default_factory=PathMeta)
    port_status: int = 0

    def __init__(
        self,
        qp: int,
        probe_id: int,
        ev_under_test: int,
        echo_ts: int = 0,
        meta: PathMeta | None = None,
        port_status: int = 0,
    ) -> None:
        self.qp = qp
        self.probe_id = probe_id
        self.ev_under_test = ev_under_test
        self.echo_ts = echo_ts
        self.meta = PathMeta() if meta is None else meta
        self.port_status = port_status


# Receiver credits count bytes of DATA payload modulo 2**32, compared as serial numbers (a
# difference of up to 2**31 either way): a connection may move any number of bytes
CREDIT_MASK: Final = 0xFFFFFFFF


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class Credit:
    """Receiver credit (the receiver's NIC schedules its port among its senders): the DATA
    payload bytes the receiver has granted this queue pair's sender so far, cumulative modulo
    2**32 (a later CREDIT covers a lost one)."""

    qp: int
    granted: int
    meta: PathMeta = field(default_factory=PathMeta)

    def __init__(self, qp: int, granted: int, meta: PathMeta | None = None) -> None:
        self.qp = qp
        self.granted = granted
        self.meta = PathMeta() if meta is None else meta


# init=False + the __init__ below: compiled, 1.5-2x faster to build than the generated one.
@dataclass(slots=True, init=False)
class CreditRequest:
    """A credit-using sender's demand: the cumulative credit (modulo 2**32) that would cover
    everything it has to send, those granted already included. Sent when it grows, and again
    when a sender waiting for credit heard none for a while (a CREDIT or this was lost)."""

    qp: int
    target: int
    meta: PathMeta = field(default_factory=PathMeta)

    def __init__(self, qp: int, target: int, meta: PathMeta | None = None) -> None:
        self.qp = qp
        self.target = target
        self.meta = PathMeta() if meta is None else meta


class ConnectStatus(enum.IntEnum):
    """What a CONNECT_ACK says about the CONNECT it answers."""

    ACCEPTED = 0
    REFUSED = 1  # no such peer/mode here, or the initiator is not who its QP says
    RETRY = 2  # nothing was created: send the CONNECT again with this answer's cookie
    # no connection here for this DATA (the receiver restarted): its PSN and rkey are echoed,
    # which only a host that saw the DATA can do; the sender drops the connection and connects anew
    RESET = 3


@dataclass(slots=True)
class Connect:
    """Opens a queue pair: the data sender's initial PSN and a random nonce (the agent's
    handshake, docs/agent.md). Sent to the receiver's QP; retransmitted until answered.
    ``cookie``: 0 on the first try; then the one the receiver's RETRY gave, which proves
    the sender receives packets at the address it sends from."""

    qp: int
    initial_psn: int
    nonce: int
    meta: PathMeta = field(default_factory=PathMeta)
    cookie: int = 0


@dataclass(slots=True)
class ConnectAck:
    """The receiver's answer: the nonce echoed, the initial PSN it will expect, and the rkey
    of the region it registered for this connection (random, so only the real initiator,
    which receives this packet, can write). A RETRY creates nothing: it carries a cookie
    (in the rkey's place on the wire) for the initiator to send back."""

    qp: int
    initial_psn: int
    nonce: int
    rkey: int
    status: ConnectStatus = ConnectStatus.ACCEPTED
    meta: PathMeta = field(default_factory=PathMeta)
    cookie: int = 0


# What the transport core consumes and produces.
Message = DataPacket | Sack | Nack | Probe | ProbeAck | Credit | CreditRequest
# The agent's connection handshake: on the wire like the rest, never seen by the core.
Handshake = Connect | ConnectAck
# Everything the codec encodes and decodes.
Frame = Message | Handshake


class MalformedPacket(ValueError):
    """A frame the codec refuses; ``reason`` is a short stable key for counters."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
