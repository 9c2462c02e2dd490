"""What a sender remembers of its work: RDMA WRITEs not yet segmented or acknowledged, and
one record per packet sent (the unit loss detection and acknowledgement work on).

Plain classes, each field declared once, in ``__init__``: nothing compares, prints or copies
them, and as dataclasses they cost every start-up their generated methods.
"""

from __future__ import annotations

from mrc_host.wire.messages import Opcode


class PendingWrite:
    """An RDMA WRITE posted and not yet completed."""

    def __init__(self, msg_id: int, data: bytes, vaddr: int, rkey: int, remaining: int = 0) -> None:
        self.msg_id = msg_id
        self.data = data
        self.vaddr = vaddr
        self.rkey = rkey
        self.offset = 0  # bytes segmented so far
        self.remaining = remaining  # packets not yet acknowledged
        self.failed = ""


class TxRecord:
    """One packet sent (the latest copy of it, and what is known of the one before)."""

    def __init__(self, seq: int, write: PendingWrite, vaddr: int, payload: bytes, opcode: Opcode) -> None:
        self.seq = seq
        self.write = write
        self.vaddr = vaddr
        self.payload = payload
        self.opcode = opcode
        self.ev = 0
        self.sent_ns = 0
        self.tx_order = 0
        self.transmissions = 0
        self.later_delivered = 0
        # when it left its port by the NIC model (recovery.py; ``sent_ns`` without one)
        self.left_ns = 0
        self.overtaken_left = -1  # that time of the latest-leaving packet of its plane delivered after it
        self.sacked = False
        self.lost = False  # waiting in the retransmit queue
        self.gap_lost = False  # declared lost by the gap rule or the timer (a guess that can be wrong)
        self.lost_ev = -1  # the EV it was last declared lost on
        self.prev_sent_ns = -1  # send time of the copy before the latest
        self.twin_ev = -1  # the EV of a second copy sent with the latest (a tail resend), -1 if none

    def is_copy(self, sent_ns: int, ev: int) -> bool:
        """Whether (send time, EV) -- a SACK's echo -- names this packet's latest copy or the one before."""
        return (sent_ns == self.sent_ns and (ev == self.ev or ev == self.twin_ev)) or (
            sent_ns == self.prev_sent_ns and ev == self.lost_ev
        )
