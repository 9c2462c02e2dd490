"""What a sender remembers of its work: RDMA WRITEs not yet segmented or acknowledged, and
one record per packet sent (the unit loss detection and acknowledgement work on)."""

from __future__ import annotations

from dataclasses import dataclass

from mrc_host.wire.messages import Opcode


# ``init=False`` + a spelled-out ``__init__``: mypyc compiles it (see mrc_host/wire/messages.py)
@dataclass(slots=True, init=False)
class PendingWrite:
    msg_id: int
    data: bytes
    vaddr: int
    rkey: int
    offset: int = 0
    remaining: int = 0  # packets not yet acknowledged
    failed: str = ""

    def __init__(
        self,
        msg_id: int,
        data: bytes,
        vaddr: int,
        rkey: int,
        offset: int = 0,
        remaining: int = 0,
        failed: str = "",
    ) -> None:
        self.msg_id = msg_id
        self.data = data
        self.vaddr = vaddr
        self.rkey = rkey
        self.offset = offset
        self.remaining = remaining
        self.failed = failed


@dataclass(slots=True, init=False)
class TxRecord:
    seq: int
    write: PendingWrite
    vaddr: int
    payload: bytes
    opcode: Opcode
    ev: int = 0
    sent_ns: int = 0
    tx_order: int = 0
    transmissions: int = 0
    later_delivered: int = 0
    # when it left its port by the NIC model (recovery.py; ``sent_ns`` without one)
    left_ns: int = 0
    overtaken_left: int = -1  # that time of the latest-leaving packet of its plane delivered after it
    sacked: bool = False
    lost: bool = False  # waiting in the retransmit queue
    gap_lost: bool = False  # declared lost by the gap rule or the timer (a guess that can be wrong)
    lost_ev: int = -1  # the EV it was last declared lost on
    prev_sent_ns: int = -1  # send time of the copy before the latest
    twin_ev: int = -1  # the EV of a second copy sent with the latest (a tail resend), -1 if none

    def __init__(
        self,
        seq: int,
        write: PendingWrite,
        vaddr: int,
        payload: bytes,
        opcode: Opcode,
        ev: int = 0,
        sent_ns: int = 0,
        tx_order: int = 0,
        transmissions: int = 0,
        later_delivered: int = 0,
        left_ns: int = 0,
        overtaken_left: int = -1,
        sacked: bool = False,
        lost: bool = False,
        gap_lost: bool = False,
        lost_ev: int = -1,
        prev_sent_ns: int = -1,
        twin_ev: int = -1,
    ) -> None:
        self.seq = seq
        self.write = write
        self.vaddr = vaddr
        self.payload = payload
        self.opcode = opcode
        self.ev = ev
        self.sent_ns = sent_ns
        self.tx_order = tx_order
        self.transmissions = transmissions
        self.later_delivered = later_delivered
        self.left_ns = left_ns
        self.overtaken_left = overtaken_left
        self.sacked = sacked
        self.lost = lost
        self.gap_lost = gap_lost
        self.lost_ev = lost_ev
        self.prev_sent_ns = prev_sent_ns
        self.twin_ev = twin_ev

    def is_copy(self, sent_ns: int, ev: int) -> bool:
        """Whether (send time, EV) -- a SACK's echo -- names this packet's latest copy or the one before."""
        return (sent_ns == self.sent_ns and (ev == self.ev or ev == self.twin_ev)) or (
            sent_ns == self.prev_sent_ns and ev == self.lost_ev
        )
