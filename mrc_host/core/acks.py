"""What SACKs and NACKs from the peer prove, for the sender to apply.

A SACK is believed only for PSNs the sender sent and has not yet seen acknowledged, and only
when its echo (send time and EV of the packet that triggered it) names a copy of a packet
it acknowledges: a SACK whose echo matches nothing sent moves nothing, the cumulative ACK
included, which makes blind forgery impractical (the echo is 96 unguessable bits). What
it acknowledges, it acknowledges as ranges (``rangeset.bitmap_ranges``), each PSN once:
the PSNs SACKed so far are kept as a ``RangeSet``, so only those a SACK adds are looked up.

``AckBook`` works out what a believed SACK or NACK proves and returns it (``SackProof``,
``NackProof``), as aioquic's recovery hands its results back to the connection: it reads the
sender's packets and keeps only its own books (PSNs SACKed, refused and twin copies); the one
thing it asks of another owner is the guess a D-SACK names (``SentPackets.duplicate``). It
changes nothing else: ``AckEffects`` (ack_effects.py) applies what a proof says of packets,
paths and round trips, and the ``Sender`` the rest -- the cumulative ACK, completions,
resends, rewinds, the window and the losses the new evidence reveals.
"""

from __future__ import annotations

from typing import Final

from mrc_host.wire.messages import SACK_BITMAP_BITS, Nack, NackReason, Opcode, Sack

from .config import TransportConfig
from .counters import Counters
from .evset import EvSet
from .psn import unwrap
from .rangeset import RangeSet, bitmap_ranges
from .records import PLANE_SHIFT, TxRecord
from .sent import SentPackets

BITMAP_MASK: Final = (1 << SACK_BITMAP_BITS) - 1
REFUSED_MAX: Final = 64  # refused packets remembered, for the SACK that names one


_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)


class SackProof:
    """What one SACK proved. A D-SACK that names a copy resent once on a guess proves the guess
    spurious (``undone``: the EV it blamed and that copy's send time, the round trip of the
    late copy, -1 if unusable, and its ECN echo), even when the SACK proves nothing else.
    Believed (``newly`` not empty): the new cumulative point, the packets acknowledged for
    the first time (in PSN order), their bytes, and the sample of the packet that triggered
    it -- the RTT for the congestion control (``rtt``, None without one), the loss rules' own
    (``timed``: from when the copy left the NIC, with departures reported) on ``plane``, the
    fabric's (``fabric``: the copy's own port wait known), its ECN echo and port wait.
    ``evidence`` (filled as ``AckEffects`` applies it): the packets of ``newly`` whose latest
    copy arrived, the loss rules' evidence."""

    def __init__(self, cum: int, echo_ts: int, echo_ev: int) -> None:
        self.cum = cum
        self.echo_ts = echo_ts
        self.echo_ev = echo_ev
        self.undone = False
        self.lost_ev = -1
        self.lost_sent = -1
        self.undo_rtt = -1
        self.undo_ecn = False
        self.newly: list[TxRecord] = []
        self.acked_bytes = 0
        self.rtt: int | None = None
        self.timed = 0
        self.plane = 0
        self.fabric = False
        self.ecn = False
        self.port_wait = 0
        self.evidence: list[TxRecord] = []


class NackProof:
    """What one believed NACK proved about packet ``rec``: trimmed (``lasthop``: at the peer's
    own port; ``window``: news for the congestion window; ``resend``: the copy in flight was
    the one cut), refused by the peer (``refused`` names why), or out of its window. For a
    trim, what it says of the paths: the copy sent at ``credit_sent`` on ``echo_ev`` reached
    the peer (``credited``: it names one of ours), the copy guessed lost was trimmed (``answered``: a queue,
    not a failed path), and ``echo_ev`` takes the trim penalty (``penalty``)."""

    def __init__(
        self,
        rec: TxRecord,
        trimmed: bool = False,
        lasthop: bool = False,
        window: bool = False,
        resend: bool = False,
        refused: str = "",
        out_of_window: bool = False,
    ) -> None:
        self.rec = rec
        self.trimmed = trimmed
        self.lasthop = lasthop
        self.window = window
        self.resend = resend
        self.refused = refused
        self.out_of_window = out_of_window
        self.echo_ev = -1
        self.credited = False
        self.credit_sent = -1
        self.answered = False
        self.penalty = False


class AckBook:
    """The sender's acknowledgement books: what each SACK and NACK from the peer proves."""

    def __init__(self, cfg: TransportConfig, counters: Counters, packets: SentPackets, evset: EvSet) -> None:
        self.cfg = cfg
        self.counters = counters
        self.packets = packets  # (read; the one transition asked of it: ``duplicate``)
        self.evset = evset  # (read: which EVs are ours)
        self._departures = cfg.nic_departures  # RTT samples from when a packet left the NIC
        # (send time, EV) of packets the peer refused (BAD_RKEY/ADDRESS: done, no longer
        # recorded): the SACK their arrival triggered echoes one, and is believed for it
        self._refused: dict[tuple[int, int], None] = {}
        # (send time, EV) of both copies of resends sent twice at the tail (Sender._twin): the
        # second to arrive is reported as a duplicate, which is expected, not a stray SACK
        self._twins: dict[tuple[int, int], None] = {}
        # the echo of the latest SACK believed: its copy (``Receiver._send_spare``) is expected
        self._last_echo = (-1, -1)
        # the PSNs at or above ``snd_una`` already SACKed (``TxRecord.sacked``), as ranges
        self._sacked = RangeSet()

    def note_twins(self, rec: TxRecord) -> None:
        """``rec``'s latest copy just left twice (on ``rec.ev`` and ``rec.twin_ev``)."""
        twins = self._twins
        twins[(rec.sent_ns, rec.ev)] = None
        twins[(rec.sent_ns, rec.twin_ev)] = None
        while len(twins) > 2 * REFUSED_MAX:
            del twins[next(iter(twins))]

    def _on_duplicate_report(self, s: Sack, now_ns: int, proof: SackProof) -> bool:
        """D-SACK: if it names a copy of a packet resent once on a guess, both copies arrived
        and the loss is undone, however late (the resent copy may have won the race): the
        guess goes into ``proof``. Its round trip is a true RTT sample (an original's is the
        very spike that caused the guess), and its CE echo a true mark of the EV it took."""
        self.counters.dsacks_received += 1
        guess = self.packets.duplicate(s.echo_ts, s.echo_ev)
        if guess is None:
            return False
        proof.undone = True
        proof.lost_ev, proof.lost_sent = guess
        rtt = now_ns - s.echo_ts
        if 0 <= rtt < self.cfg.rto_max_ns:
            proof.undo_rtt = rtt
        # the late copy met a marking queue on its way: the very congestion that delayed it
        # past the reorder window, and the echo names the EV it took exactly
        proof.undo_ecn = s.ecn_echo
        return True

    def _drop_ack(self, reason: str) -> None:
        """A SACK/NACK the sender does not believe: counted by reason, nothing else happens."""
        self.counters.acks_dropped[reason] += 1
        self.counters.stray_acks += 1

    def _sack_claims(self, s: Sack, una: int, nxt: int) -> tuple[int, list[tuple[int, int]]] | None:
        """The cumulative point and the PSN ranges at or above it that ``s`` says arrived;
        None (counted) when it names a PSN never sent (``una``, ``nxt``: the sender's)."""
        cum = unwrap(s.cum_psn, una)
        if cum > nxt:
            self._drop_ack("sack_cum_beyond_sent")
            return None
        cum = max(cum, una)  # an old cumulative ACK arriving late: its bitmap may be news
        bitmap = s.bitmap & BITMAP_MASK
        base = unwrap(s.base_psn, una)
        if bitmap and base + bitmap.bit_length() - 1 >= nxt:
            self._drop_ack("sack_bitmap_beyond_sent")
            return None
        ranges = [(una, cum)] if cum > una else []
        for start, stop in bitmap_ranges(base, bitmap):
            if stop > cum:
                ranges.append((max(start, cum), stop))
        return cum, ranges

    def on_sack(self, s: Sack, una: int, nxt: int, now_ns: int) -> SackProof | None:
        """What ``s`` proves, for a sender whose oldest unacknowledged PSN is ``una`` and
        whose next new one is ``nxt``; None when it proves nothing at all.

        Everything is checked before anything is proved: a cumulative PSN or a bitmap bit
        beyond ``nxt`` drops the whole SACK, and so does a SACK that acknowledges nothing new
        (a replay or a duplicate) or whose echo matches none of the packets it names -- but
        for the guess a D-SACK among them proves spurious (``SackProof.undone``). The ECN
        echo and the RTT sample are taken only from the packet that triggered the SACK among
        those it newly acknowledges.
        """
        self.counters.sacks_received += 1
        claims = self._sack_claims(s, una, nxt)
        if claims is None:
            return None
        cum, ranges = claims
        newly, fresh, acked_bytes = self._newly_acked(cum, ranges)
        echo_ts, echo_ev = s.echo_ts, s.echo_ev
        # (only asked when something is new: the trigger is nearly always among it)
        echoed = bool(newly) and (
            any(rec.is_copy(echo_ts, echo_ev) for rec in newly)
            or self._echo_in(ranges, echo_ts, echo_ev)
            or (echo_ts, echo_ev) in self._refused
        )
        if not newly:  # (most repeated SACKs: a proof only for a D-SACK, that may undo a guess)
            dup = SackProof(cum, echo_ts, echo_ev) if s.duplicate else None
            undone = dup is not None and self._on_duplicate_report(s, now_ns, dup)
            if s.duplicate and (echo_ts, echo_ev) in self._twins:
                self._twins.pop((echo_ts, echo_ev))  # the second of a tail resend's two copies
                self.counters.tail_twin_duplicates += 1
            elif not s.duplicate and (echo_ts, echo_ev) == self._last_echo:
                self._last_echo = (-1, -1)  # the second copy of a message's last SACK: once
                self.counters.sack_spares += 1
            elif not undone:  # (a D-SACK that proved a loss spurious was news enough)
                self._drop_ack("sack_nothing_new")
            return dup if undone else None
        proof = SackProof(cum, echo_ts, echo_ev)
        undone = s.duplicate and self._on_duplicate_report(s, now_ns, proof)
        if not echoed and not undone:
            self.counters.sack_echo_unmatched += 1
            self._drop_ack("sack_echo_unmatched")
            return None
        proof.newly = newly
        proof.acked_bytes = acked_bytes
        sacked = self._sacked
        sacked.discard_below(cum)
        for start, stop in fresh:
            sacked.add(start, stop)
        if any(r.opcode in _LAST_OPCODES and r.is_copy(echo_ts, echo_ev) for r in newly):
            self._last_echo = (echo_ts, echo_ev)  # (a message's last: its SACK comes twice)
        self._trigger_sample(s, newly, now_ns, proof)
        return proof

    def _newly_acked(
        self, cum: int, ranges: list[tuple[int, int]]
    ) -> tuple[list[TxRecord], list[tuple[int, int]], int]:
        """The records ``ranges`` acknowledge for the first time, in PSN order; the ranges
        above ``cum`` they fill (to add to ``_sacked`` once believed); their payload bytes.
        Only what ``_sacked`` lacks is looked up: a SACK repeats most of what the ones before
        it said, and a lookup per PSN it names was most of its cost."""
        records = self.packets.records
        sacked = self._sacked
        newly: list[TxRecord] = []
        fresh: list[tuple[int, int]] = []
        acked_bytes = 0
        for start, stop in ranges:
            for low, high in sacked.uncovered(start, stop):
                if low >= cum:
                    fresh.append((low, high))
                for seq in range(low, high):
                    rec = records.get(seq)
                    if rec is not None:  # (None: refused, or acknowledged since)
                        newly.append(rec)
                        acked_bytes += len(rec.payload)
        return newly, fresh, acked_bytes

    def _echo_in(self, ranges: list[tuple[int, int]], echo_ts: int, echo_ev: int) -> bool:
        """Whether the echo names a copy of any packet ``ranges`` acknowledge, new or not
        (a SACK answering a packet SACKed before: a duplicate, or a later SACK came first)."""
        records = self.packets.records
        for start, stop in ranges:
            for seq in range(start, stop):
                rec = records.get(seq)
                if rec is not None and rec.is_copy(echo_ts, echo_ev):
                    return True
        return False

    def _trigger_sample(self, s: Sack, newly: list[TxRecord], now_ns: int, proof: SackProof) -> None:
        """The RTT sample, ECN echo and port wait of the packet that triggered ``s``, into
        ``proof``; none when it is not among ``newly``."""
        trigger = None
        for rec in newly:
            if rec.sent_ns == s.echo_ts and s.echo_ev in (rec.ev, rec.twin_ev):
                trigger = rec
                break
        if trigger is None:
            # the copy acknowledged was the earlier one of a packet resent since (a spurious
            # timeout or gap loss): its echoed send time still names that copy exactly, so the
            # sample is sound (no Karn ambiguity) -- and it is the very delay spike the RTO and
            # the reorder window must learn from, so it must not be thrown away
            for rec in newly:
                if rec.prev_sent_ns == s.echo_ts and rec.lost_ev == s.echo_ev:
                    trigger = rec
                    break
        if trigger is None:
            return
        rtt = now_ns - s.echo_ts
        if 0 <= rtt < self.cfg.rto_max_ns:
            proof.rtt = rtt  # (the CC's: from the hand-over, a wait at the NIC is its queue too)
            timed = rtt  # the loss rules' (``nic_departures``: from when the copy left the NIC)
            if self._departures:
                left = trigger.left_ns if trigger.sent_ns == s.echo_ts else trigger.prev_left_ns
                if left >= s.echo_ts:
                    timed = now_ns - left
            proof.timed = timed
            proof.plane = s.echo_ev >> PLANE_SHIFT
            if trigger.sent_ns == s.echo_ts and trigger.ev == s.echo_ev:  # (its port wait is known)
                proof.port_wait = trigger.left_ns - trigger.sent_ns
                proof.fabric = True
        proof.ecn = s.ecn_echo

    def on_nack(self, n: Nack, una: int, nxt: int, now_ns: int) -> NackProof | None:
        """What ``n`` proves; None unless it names a PSN sent and not yet acknowledged, echoing
        one of our EVs.

        A trim NACK for the copy currently in flight (echoed EV = the EV it left on) is a
        resend at once; one for an earlier copy (the packet was resent since) only penalises
        the echoed EV -- the EV the trimmed copy really took -- and the window. A trim NACK for
        a packet already queued for resending is stale: news for nothing but the EV set.
        """
        counters = self.counters
        try:
            reason = NackReason(n.reason)
        except ValueError:
            counters.malformed["nack_reason"] += 1
            return None
        counters.nacks_received[reason.name] += 1
        seq = unwrap(n.psn, una)
        rec = self.packets.records.get(seq) if una <= seq < nxt else None
        if rec is None or rec.sacked:
            self._drop_ack("nack_not_outstanding")
            return None
        if self.evset.state(n.echo_ev) is None:
            self._drop_ack("nack_unknown_ev")
            return None
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            return self._on_trim(rec, n.echo_ev, reason is NackReason.TRIMMED)
        if reason is NackReason.OUT_OF_WINDOW:
            return NackProof(rec, out_of_window=True)
        # BAD_RKEY / BAD_ADDRESS: the peer refused the write
        self._refused[(rec.sent_ns, rec.ev)] = None
        if len(self._refused) > REFUSED_MAX:
            del self._refused[next(iter(self._refused))]
        return NackProof(rec, refused=reason.name)

    def _on_trim(self, rec: TxRecord, echo_ev: int, fabric: bool) -> NackProof:
        # the trimmed header crossed its whole path to the peer: the path delivers (congested,
        # not failed), as a SACKed packet would show -- what tells a deep last-hop queue, where
        # every path is late, from a path that delivers nothing
        # the copy the gap rule or a timer guessed lost was trimmed by a congested switch:
        # congestion, not a failed path -- the retirement it caused is undone and the EV takes
        # the trim penalty instead (a trimmed header, queued in the high class, can arrive
        # after packets sent later on an idle path made the guess)
        answered = rec.gap_lost and echo_ev == rec.lost_ev
        if rec.lost:  # still queued for resending: only the penalty of an answered guess is new
            self._drop_ack("nack_stale")
            proof = NackProof(rec, trimmed=True, lasthop=not fabric)
            proof.penalty = answered
        elif echo_ev != rec.ev:
            self.counters.acks_dropped["nack_earlier_copy"] += 1  # penalty taken, current copy flies on
            proof = NackProof(rec, trimmed=True, lasthop=not fabric, window=True)
            proof.penalty = True
        else:
            proof = NackProof(rec, trimmed=True, lasthop=not fabric, window=True, resend=True)
            proof.penalty = True
        proof.echo_ev = echo_ev
        proof.credited = echo_ev in (rec.ev, rec.lost_ev)
        proof.credit_sent = rec.sent_ns if echo_ev == rec.ev else rec.prev_sent_ns
        proof.answered = answered
        return proof
