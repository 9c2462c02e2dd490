"""The packets one sender has sent and not yet seen cumulatively acknowledged: the one owner
of their life (packet_state.py's table), as aioquic's recovery owns its sent packets.

Everything that moves a packet -- sent, guessed or known lost, acknowledged, its guess
withdrawn, refused, passed by the cumulative ACK, dropped with a failed connection -- is a
method here, and each goes through ``next_state``: the loss rules (recovery.py, blame.py)
find packets and return them, the acknowledgement book (acks.py) proves what the peer saw,
and the sender asks this class for the transition. The containers a state implies are kept
with it: the packets in flight (in transmission order, with their bytes, per plane too), the
retransmit queue, and the guesses a D-SACK may still prove spurious.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from mrc_host.wire.messages import Opcode

from .config import TransportConfig
from .packet_state import (
    ACK,
    CUMULATIVE,
    FAIL,
    GUESS,
    GUESS_BIT,
    GUESS_TRIMMED,
    KNOWN_LOSS,
    REFUSE,
    SEND,
    next_state,
)
from .records import PLANE_SHIFT, PendingWrite, Segment, TxRecord

GUESSES_MAX: Final = 4096  # guessed-lost, acked packets remembered for a D-SACK that proves them spurious
# The retransmit queue starts as this shared empty stand-in (never added to: maxlen 0), a
# sender's own made at its first resend (``_own_retx``): an endpoint that only receives, or
# sends without loss, makes no deque for it (~0.2 MB of the 128-host permutation)
_NO_RETX: Final[deque[int]] = deque(maxlen=0)


class SentPackets:
    """One sender's packets from the first copy to the cumulative ACK, and their states."""

    def __init__(self, cfg: TransportConfig, plane_load: list[int]) -> None:
        self.una = cfg.initial_psn  # oldest seq not cumulatively acknowledged
        self.nxt = cfg.initial_psn  # next new seq
        self.records: dict[int, TxRecord] = {}  # seq -> record, from ``una`` to ``nxt``
        self.in_flight: dict[int, TxRecord] = {}  # seq -> record, in transmission order
        self.inflight_bytes = 0
        self.plane_load = plane_load  # bytes in flight per plane (the EV set's rotation reads it)
        self.retx: deque[int] = _NO_RETX  # resends due (a seq may be stale: ``next_resend``)
        # packets declared lost by a guess, resent once, acknowledged, and not (yet) shown
        # spurious: (send time, EV) of each of their two copies -> the EV the loss was
        # blamed on and the other copy's key. Both copies arrived iff the peer reports one
        # as a duplicate (D-SACK): then the loss was spurious. Bounded, oldest out first.
        self._guesses: dict[tuple[int, int], tuple[int, tuple[int, int]]] = {}

    # ---- a packet's life --------------------------------------------------------------
    def record(self, write: PendingWrite, vaddr: int, payload: Segment, opcode: Opcode) -> TxRecord:
        """A new packet of ``write``, under the next sequence number (UNSENT)."""
        rec = TxRecord(self.nxt, write, vaddr, payload, opcode)
        self.records[rec.seq] = rec
        self.nxt += 1
        return rec

    def sent(self, rec: TxRecord, ev: int, now_ns: int) -> bool:
        """``rec`` leaves on ``ev`` now, a first copy or a resend (SEND): the copy before
        becomes history, the packet is in flight. True when nothing else was."""
        rec.state = next_state(rec.state, SEND)
        idle = not self.in_flight
        rec.transmissions += 1
        rec.ev = ev
        rec.prev_sent_ns = rec.sent_ns
        rec.prev_left_ns = rec.left_ns
        rec.sent_ns = now_ns
        rec.prev_twin_ev = rec.twin_ev
        rec.twin_ev = -1
        self.in_flight[rec.seq] = rec
        size = len(rec.payload)
        self.inflight_bytes += size
        self.plane_load[ev >> PLANE_SHIFT] += size
        return idle

    def twinned(self, rec: TxRecord, ev: int) -> None:
        """A second copy of ``rec``'s latest leaves on ``ev`` with it (a tail resend sent twice):
        not counted in flight (the window had room for it), no state change."""
        rec.twin_ev = ev

    def guessed_lost(self, rec: TxRecord) -> None:
        """A loss rule guessed ``rec``'s latest copy lost (GUESS): queued for resending,
        blamed on its EV; the copy's delivery may yet prove the guess wrong."""
        rec.state = next_state(rec.state, GUESS)
        self._leave_flight(rec)
        rec.lost_ev = rec.ev
        self._own_retx().append(rec.seq)

    def known_lost(self, rec: TxRecord, first: bool = False) -> None:
        """``rec``'s latest copy is known lost (KNOWN_LOSS: trimmed, its port down): queued
        for resending, at the head of the queue if ``first``."""
        rec.state = next_state(rec.state, KNOWN_LOSS)
        self._leave_flight(rec)
        if first:
            self._own_retx().appendleft(rec.seq)
        else:
            self._own_retx().append(rec.seq)

    def acked(self, rec: TxRecord, spurious: bool = False) -> None:
        """A SACK acknowledged ``rec`` (ACK): out of flight, and out of the retransmit queue's
        reckoning (its entry there, if any, is stale). Resent once on a guess not shown
        ``spurious`` (``Recovery.on_delivered``), and with no twin in flight (then a duplicate
        report proves nothing), the guess is remembered for a D-SACK (``duplicate``)."""
        if not spurious and rec.state & GUESS_BIT and rec.transmissions == 2 and rec.twin_ev < 0:
            self._remember_guess(rec)
        rec.state = next_state(rec.state, ACK)
        self._leave_flight(rec)

    def guess_trimmed(self, rec: TxRecord) -> None:
        """A trim NACK named the copy of ``rec`` guessed lost (GUESS_TRIMMED): congestion, not
        a failed path; the guess is answered (neither a later SACK nor another NACK undoes it
        again), whether the packet still waits to be resent or was resent."""
        rec.state = next_state(rec.state, GUESS_TRIMMED)

    def refused(self, rec: TxRecord) -> None:
        """The peer refused ``rec``'s write (REFUSE): the packet is done, in error."""
        rec.state = next_state(rec.state, REFUSE)
        self._leave_flight(rec)
        del self.records[rec.seq]

    def passed(self, cum: int) -> list[TxRecord]:
        """The cumulative ACK moved to ``cum`` (CUMULATIVE): the packets it passed, in order
        (each ACKED already), are forgotten and returned."""
        records = self.records
        done: list[TxRecord] = []
        for seq in range(self.una, cum):
            if (rec := records.get(seq)) is not None:  # (get and del: native; ``pop(k, None)`` is not)
                del records[seq]
                rec.state = next_state(rec.state, CUMULATIVE)
                done.append(rec)
        self.una = cum
        return done

    def rewind(self, seq: int) -> None:
        """Go-back-N: every packet from ``seq`` on not yet acknowledged is resent, in order
        (KNOWN_LOSS), ahead of anything queued before."""
        seq = max(seq, self.una)
        records = self.records
        for s in range(seq, self.nxt):
            rec = records.get(s)
            if rec is not None and not rec.sacked:
                rec.state = next_state(rec.state, KNOWN_LOSS)
                self._leave_flight(rec)
        self.retx = deque(s for s in range(self.una, self.nxt) if s in records and records[s].lost)

    def failed(self) -> None:
        """The connection failed (FAIL): every packet is dropped."""
        for rec in self.records.values():
            rec.state = next_state(rec.state, FAIL)
        for rec in list(self.in_flight.values()):
            self._leave_flight(rec)
        self.records.clear()
        self.retx.clear()

    def empty(self, msg_id: int, target: PendingWrite | None) -> tuple[PendingWrite | None, int]:
        """Write ``msg_id`` is abandoned (``target``: the write, if it was still queued): its
        packets sent and not yet acknowledged keep their PSNs (the receiver's cumulative ACK
        must pass them) but carry no payload from now on -- resent if lost as empty fillers
        of message 0, which complete no message -- and their bytes leave the window's and
        their plane's count. Returns the write (None: unknown) and the sequence number
        after its last packet sent (``una`` if none was)."""
        end = self.una
        filler: PendingWrite | None = None
        in_flight = self.in_flight
        for rec in self.records.values():
            if rec.write.msg_id != msg_id or (target is not None and rec.write is not target):
                continue
            target = rec.write
            if filler is None:
                filler = PendingWrite(0, [], 0, target.rkey, remaining=1 << 62)  # never completes
            end = max(end, rec.seq + 1)
            rec.write = filler
            rec.opcode = Opcode.WRITE_MIDDLE
            if rec.seq in in_flight:
                size = len(rec.payload)
                self.inflight_bytes -= size
                self.plane_load[rec.ev >> PLANE_SHIFT] -= size
            rec.payload = b""
        return target, end

    # ---- what the others read ---------------------------------------------------------
    def next_resend(self) -> TxRecord | None:
        """The packet at the head of the retransmit queue, or None; entries gone stale
        (acknowledged, refused or resent since) are dropped on the way."""
        retx = self.retx
        records = self.records
        while retx:
            rec = records.get(retx[0])
            if rec is None or rec.sacked or not rec.lost:
                retx.popleft()
                continue
            return rec
        return None

    def take_resend(self) -> None:
        """The head of the retransmit queue (``next_resend``) is being sent."""
        self.retx.popleft()

    def on_plane(self, plane: int) -> list[TxRecord]:
        """The packets in flight on ``plane``, in transmission order."""
        return [r for r in self.in_flight.values() if r.ev >> PLANE_SHIFT == plane]

    # ---- guesses a D-SACK may prove spurious ---------------------------------------------
    def _remember_guess(self, rec: TxRecord) -> None:
        """``rec`` was guessed lost, resent once and acknowledged, and nothing shows yet which
        copy arrived: if the other one arrives too, the receiver reports it as a duplicate
        and the loss is undone then (with three copies or more a duplicate proves nothing)."""
        first, second = (rec.prev_sent_ns, rec.lost_ev), (rec.sent_ns, rec.ev)
        guesses = self._guesses
        guesses[first] = (rec.lost_ev, second)
        guesses[second] = (rec.lost_ev, first)
        while len(guesses) > GUESSES_MAX:
            del guesses[next(iter(guesses))]

    def duplicate(self, echo_ts: int, echo_ev: int) -> tuple[int, int] | None:
        """D-SACK: the copy (send time, EV) arrived after another. If the packet was resent
        once on a guess, the guess was spurious: returns the EV it blamed and that copy's send
        time, else None. Only an exact match counts: a forged report undoes nothing."""
        guess = self._guesses.pop((echo_ts, echo_ev), None)
        if guess is None:
            return None
        lost_ev, other = guess
        self._guesses.pop(other, None)
        lost_sent = echo_ts if echo_ev == lost_ev else other[0]
        return lost_ev, lost_sent

    # ---- internals ------------------------------------------------------------------------
    def _leave_flight(self, rec: TxRecord) -> None:
        in_flight = self.in_flight
        seq = rec.seq
        if seq in in_flight:  # (compiled, ``in`` and ``del`` are native; ``pop(k, None)`` is not)
            del in_flight[seq]
            size = len(rec.payload)
            self.inflight_bytes -= size
            self.plane_load[rec.ev >> PLANE_SHIFT] -= size

    def _own_retx(self) -> deque[int]:
        """The retransmit queue, made at the first resend."""
        if self.retx is _NO_RETX:
            self.retx = deque()
        return self.retx
