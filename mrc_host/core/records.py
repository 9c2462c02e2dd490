"""What a sender remembers of its work: RDMA WRITEs not yet segmented or acknowledged, and
one record per packet sent (the unit loss detection and acknowledgement work on).

Plain classes, each field declared once, in ``__init__``: nothing compares, prints or copies
them, and as dataclasses they cost every start-up their generated methods.
"""

from __future__ import annotations

from typing import Final

from mrc_host.wire.messages import Opcode
from mrc_host.wire.virtual_payload import VirtualPayload

from .counters import SentRow
from .packet_state import ACKED_BIT, GUESS_BIT, QUEUED_BIT, UNSENT

# mrc_fabric.ev.PLANE_SHIFT and T1_SHIFT as literals: compiled, a literal shift is one
# instruction, a name read per packet costs a static load and a check
# (tests/unit/test_core_recovery.py ties them)
PLANE_SHIFT: Final = 28  # an EV's plane: ``ev >> PLANE_SHIFT``
PATH_SHIFT: Final = 18  # above it an EV's plane and T1, its path

# one piece of a write's source: bytes, a read-only byte view, or a length and check value
# without bytes (mrc-sim's virtual payloads)
Segment = bytes | memoryview | VirtualPayload


def held(data: Segment | bytearray) -> Segment:
    """``data`` as a posted write keeps it until it completes.

    Bytes and read-only flat views of bytes are kept as they are: as with a verbs work
    request, the memory a write reads must not change until the write completes, and a view
    costs no copy of a source of many megabytes (mrc-sim's payloads). A virtual payload has
    nothing to copy. Anything else -- a bytearray, a writable or multi-dimensional view --
    is copied, so that changing it later changes nothing sent."""
    if isinstance(data, (bytes, VirtualPayload)):
        return data
    if isinstance(data, memoryview) and data.readonly and data.ndim == 1 and data.format == "B":
        return data if data.c_contiguous else bytes(data)
    return bytes(data)


class PendingWrite:
    """An RDMA WRITE posted and not yet completed.

    Its source is a gather list (verbs' scatter/gather elements): ``segments`` read in order
    as one message of ``length`` bytes. Packets are cut from it in order, each a slice of the
    segment it starts in (no copy for a view), or the join of the pieces where it spans two.
    """

    def __init__(
        self, msg_id: int, segments: list[Segment], vaddr: int, rkey: int, remaining: int = 0
    ) -> None:
        self.msg_id = msg_id
        self.segments = segments
        self.length = sum([len(s) for s in segments])
        self.vaddr = vaddr
        self.rkey = rkey
        self.offset = 0  # bytes segmented so far
        self.remaining = remaining  # packets not yet acknowledged
        self.failed = ""
        self._seg = 0  # the segment the next packet starts in
        self._seg_at = 0  # and where in it

    def take(self, size: int) -> Segment:
        """The next ``size`` bytes of the source (``offset`` moves on by them)."""
        self.offset += size
        if self._seg >= len(self.segments):
            return b""
        seg = self.segments[self._seg]
        at = self._seg_at
        end = at + size
        n = len(seg)
        if end <= n:
            if end < n:
                self._seg_at = end
            else:
                self._seg += 1
                self._seg_at = 0
            if isinstance(seg, bytes):  # compiled, a bytes slice is a direct call
                return seg[at:end]
            if isinstance(seg, VirtualPayload):  # (and this a native one)
                return seg.piece(at, end)
            return seg[at:end]
        pieces: list[Segment] = []
        while size and self._seg < len(self.segments):
            seg = self.segments[self._seg]
            n = min(size, len(seg) - self._seg_at)
            pieces.append(seg[self._seg_at : self._seg_at + n])
            size -= n
            self._seg_at += n
            if self._seg_at == len(seg):
                self._seg += 1
                self._seg_at = 0
        return joined(pieces)


def joined(pieces: list[Segment]) -> Segment:
    """One packet's payload from pieces of consecutive segments: bytes joined, or the virtual
    pieces of one content that follow each other as one (anything else: ValueError)."""
    first = pieces[0] if pieces else b""
    if not isinstance(first, VirtualPayload):
        if any(isinstance(p, VirtualPayload) for p in pieces):
            raise ValueError("a write's source mixes bytes and virtual payloads")
        return b"".join([p for p in pieces if not isinstance(p, VirtualPayload)])
    length = first.length
    prev = first
    for p in pieces[1:]:
        if not isinstance(p, VirtualPayload) or not p.follows(prev):
            raise ValueError("a write's virtual segments must follow each other in one content")
        length += p.length
        prev = p
    return VirtualPayload(first.key, first.offset, length)


class TxRecord:
    """One packet sent (the latest copy of it, and what is known of the one before).

    Its ``state`` (packet_state.py) is written by ``SentPackets`` alone; the copy history
    (``transmissions``, ``ev``, the send times, the twin EVs, ``lost_ev``) moves with it
    there too. The loss rules keep their own per-copy evidence here (``later_delivered``,
    ``overtaken_*``, ``tx_order``: recovery.py), the NIC clock the departure (``left_ns``,
    ``at_nic``: nic_clock.py), the RTO its verdict (``suspect_sent``)."""

    def __init__(self, seq: int, write: PendingWrite, vaddr: int, payload: Segment, opcode: Opcode) -> None:
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
        self.later_on_path = 0  # of those, sent on its own path (plane and T1: one FIFO end to end)
        # when it left its NIC port: reported by the NIC (``Endpoint.departed``), else the NIC
        # model's guess (recovery.py; ``sent_ns`` without one). While ``at_nic`` (reported
        # departures only) it has not left yet and this is a lower bound
        self.left_ns = 0
        self.at_nic = False
        self.prev_left_ns = -1  # ``left_ns`` of the copy before the latest
        self.overtaken_left = -1  # that time of the latest-leaving packet of its plane delivered after it
        self.overtaken_at = -1  # when a packet of its plane sent after it was first acknowledged
        self.state = UNSENT  # (packet_state.py)
        self.lost_ev = -1  # the EV it was last declared lost on
        self.prev_sent_ns = -1  # send time of the copy before the latest
        self.twin_ev = -1  # the EV of a second copy sent with the latest (a tail resend), -1 if none
        self.prev_twin_ev = -1  # ``twin_ev`` of the copy before the latest
        self.suspect_sent = -1  # ``sent_ns`` of the copy whose path the RTO blamed (``rto_slack``)
        # the counters' row of ``ev`` (``Counters.sent_on``), kept by the sender when it sends
        # the latest copy: its acknowledgement counts there without a second look-up by EV
        self.ev_row: SentRow | None = None

    @property
    def lost(self) -> bool:
        """It waits in the retransmit queue (LOST or GUESSED)."""
        return bool(self.state & QUEUED_BIT)

    @property
    def gap_lost(self) -> bool:
        """A loss of it was guessed (the gap rule, RACK, a timer: a guess that can be wrong) and
        not yet answered (GUESSED or RESENT)."""
        return bool(self.state & GUESS_BIT)

    @property
    def sacked(self) -> bool:
        """A SACK acknowledged it (ACKED)."""
        return bool(self.state & ACKED_BIT)

    def is_copy(self, sent_ns: int, ev: int) -> bool:
        """Whether (send time, EV) -- a SACK's echo -- names this packet's latest copy or the one before."""
        return (sent_ns == self.sent_ns and (ev == self.ev or ev == self.twin_ev)) or (
            sent_ns == self.prev_sent_ns and ev == self.lost_ev
        )
