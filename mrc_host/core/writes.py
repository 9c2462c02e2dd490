"""The RDMA WRITEs one sender has been given and not yet cut into packets, and each write's
completion once its last packet is acknowledged.

A write is posted with the next message id, cut into MTU-sized packets in order (each a
``TxRecord`` of ``SentPackets``, under the next PSN) and leaves this queue with its last
packet; it completes (``MessageSent``) when every one of its packets is acknowledged or
refused (``packet_done``). A write abandoned before that (``Sender.abandon``) leaves at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from mrc_host.wire.messages import Opcode
from mrc_host.wire.virtual_payload import VirtualPayload

from .actions import MessageSent
from .counters import Counters
from .records import PendingWrite, Segment, TxRecord, held
from .sent import SentPackets

# The queue starts as this shared empty stand-in (never added to: maxlen 0), a sender's own
# made at its first write (``_own``): an endpoint that only receives makes no deque for it
# (~0.2 MB of the 128-host permutation)
_NO_WRITES: Final[deque[PendingWrite]] = deque(maxlen=0)


class WriteQueue:
    """Writes posted and not yet wholly cut into packets, oldest first, and the message ids."""

    def __init__(self) -> None:
        self.queue: deque[PendingWrite] = _NO_WRITES
        self.next_msg_id = 1  # the id the next ``post`` returns

    def __bool__(self) -> bool:
        """Whether a write has packets not yet cut (the sender has more to send; per packet,
        the sender reads ``queue`` itself: compiled, that is one native check)."""
        return bool(self.queue)

    def new_id(self) -> int:
        """The next message id (never 0: message 0 is the fillers', ``Sender.abandon``)."""
        msg_id = self.next_msg_id
        self.next_msg_id = (self.next_msg_id + 1) & 0xFFFFFFFF or 1
        return msg_id

    def post(
        self, msg_id: int, data: Segment | bytearray | Sequence[Segment], vaddr: int, rkey: int, mtu: int
    ) -> None:
        """Queue write ``msg_id`` of ``data`` (bytes, a byte view or a bytearray, or a gather
        list of them, read in order); read-only views are not copied (``held``)."""
        if isinstance(data, (bytes, bytearray, memoryview, VirtualPayload)):
            segments = [held(data)]
        else:
            segments = [held(d) for d in data]
        w = PendingWrite(msg_id, [s for s in segments if len(s)], vaddr, rkey)
        w.remaining = max(1, -(-w.length // mtu))
        self._own().append(w)

    def unsent(self) -> int:
        """The bytes not yet cut into packets, all writes together (what a credit-using sender
        still needs credit for: ``credit_tx.py``)."""
        return sum(w.length - w.offset for w in self.queue)

    def head(self) -> PendingWrite:
        return self.queue[0]

    def cut(self, w: PendingWrite, size: int, packets: SentPackets) -> TxRecord:
        """The next packet of ``w``, the head (``size`` payload bytes), recorded under the next
        PSN; ``w`` leaves the queue with its last."""
        first = w.offset == 0
        last = w.offset + size >= w.length
        opcode = (
            (Opcode.WRITE_ONLY if last else Opcode.WRITE_FIRST)
            if first
            else (Opcode.WRITE_LAST if last else Opcode.WRITE_MIDDLE)
        )
        vaddr = w.vaddr + w.offset
        rec = packets.record(w, vaddr, w.take(size), opcode)
        if last:
            self.queue.popleft()
        return rec

    def withdraw(self, msg_id: int) -> PendingWrite | None:
        """Take write ``msg_id`` out of the queue (abandoned): it, or None if not queued."""
        target = next((w for w in self.queue if w.msg_id == msg_id), None)
        if target is not None:
            self.queue.remove(target)
        return target

    def pending(self) -> list[PendingWrite]:
        return list(self.queue)

    def clear(self) -> None:
        self.queue.clear()

    def _own(self) -> deque[PendingWrite]:
        if self.queue is _NO_WRITES:
            self.queue = deque()
        return self.queue


def packet_done(w: PendingWrite, counters: Counters, failure: str = "") -> MessageSent | None:
    """One more packet of ``w`` is acknowledged (or refused: ``failure``): its completion,
    once it was the last."""
    if failure and not w.failed:
        w.failed = failure
    w.remaining -= 1
    if w.remaining:
        return None
    if w.failed:
        counters.messages_failed += 1
    else:
        counters.messages_completed += 1
    return MessageSent(w.msg_id, not w.failed, w.failed)
