"""What SACKs and NACKs from the peer prove, for the sender to apply.

A SACK is believed only for PSNs the sender sent and has not yet seen acknowledged, and only
when its echo (send time and EV of the packet that triggered it) names a copy of a packet
it acknowledges: a SACK whose echo matches nothing sent moves nothing, the cumulative ACK
included, which makes blind forgery impractical (the echo is 96 unguessable bits). What
it acknowledges, it acknowledges as ranges (``rangeset.bitmap_ranges``), each PSN once:
the PSNs SACKed so far are kept as a ``RangeSet``, so only those a SACK adds are looked up.

``AckBook`` works out what a believed SACK or NACK proves and returns it (``SackProof``,
``NackProof``), as aioquic's recovery hands its results back to the connection: it reads the
sender's records and keeps only its own books (PSNs SACKed, refused and twin copies); it tells
``recovery`` which packets left the flight (whose loss guesses that proves spurious) and the
EV set what the echoes say of each path (delivered, marked, a guess undone). The
``Sender`` applies the rest -- the cumulative ACK, completions, resends, rewinds, the window
and the losses the new evidence reveals -- so the sender's state has one owner.
"""

from __future__ import annotations

from typing import Final

from mrc_fabric.ev import T1_MASK, T1_SHIFT
from mrc_host.wire.messages import SACK_BITMAP_BITS, Nack, NackReason, Opcode, Sack

from .config import TransportConfig
from .counters import MARK_ECN, MARK_TRIMS, Counters
from .evset import EvSet
from .psn import unwrap
from .rangeset import RangeSet, bitmap_ranges
from .records import TxRecord
from .recovery import PLANE_SHIFT, Recovery

BITMAP_MASK: Final = (1 << SACK_BITMAP_BITS) - 1
REFUSED_MAX: Final = 64  # refused packets remembered, for the SACK that names one


_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)


class SackProof:
    """What one believed SACK proved: the new cumulative point, the packets acknowledged for
    the first time (in PSN order, already out of flight) and of those the ones whose latest
    copy arrived (the loss rules' evidence), their bytes, and the RTT sample, ECN echo and
    port wait of the packet that triggered it (None, False, 0 without one)."""

    def __init__(
        self,
        cum: int,
        newly: list[TxRecord],
        evidence: list[TxRecord],
        acked_bytes: int,
        rtt: int | None,
        ecn: bool,
        port_wait: int,
    ) -> None:
        self.cum = cum
        self.newly = newly
        self.evidence = evidence
        self.acked_bytes = acked_bytes
        self.rtt = rtt
        self.ecn = ecn
        self.port_wait = port_wait


class NackProof:
    """What one believed NACK proved about packet ``rec``: trimmed (``lasthop``: at the peer's
    own port; ``window``: news for the congestion window; ``resend``: the copy in flight was
    the one cut), refused by the peer (``refused`` names why), or out of its window."""

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


class AckBook:
    """The sender's acknowledgement books: what each SACK and NACK from the peer proves."""

    def __init__(
        self,
        cfg: TransportConfig,
        counters: Counters,
        recovery: Recovery,
        evset: EvSet,
        records: dict[int, TxRecord],
    ) -> None:
        self.cfg = cfg
        self.c = counters
        self.recovery = recovery
        self.evset = evset
        self._departures = cfg.nic_departures  # RTT samples from when a packet left the NIC
        self.records = records  # the sender's (read here, never changed)
        self._retire = cfg.retires_paths
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

    def _deliver(self, rec: TxRecord, now_ns: int, s: Sack) -> bool:
        """Acknowledge ``rec``; False when the copy that arrived is shown to be the one
        before the latest (the loss guess was spurious)."""
        self.recovery.remove(rec)
        # the SACK echoes the send time and EV of the copy that arrived: the earlier one
        # (Eifel's test) -- decisive where the RTT is too unsettled for the time test
        earlier_copy = s.echo_ts == rec.prev_sent_ns and s.echo_ev == rec.lost_ev
        # a late copy gets a SACK of its own at once (out of order, or filling a hole): a
        # guess proven wrong without it (a cumulative point or a bitmap covered the copy) is a
        # SACK lost, or gone past the later SACKs' 64-PSN windows -- not reordering
        reordered = rec.is_copy(s.echo_ts, s.echo_ev)
        spurious = self.recovery.on_delivered(rec, now_ns, earlier_copy, reordered)
        if spurious:
            # the copy before the latest left twice (a tail resend) and the SACK names neither:
            # one arrived, but not surely the one on ``lost_ev`` -- crediting it brought a
            # black-holed plane's EVs back while its twin on the other plane had arrived
            proved = earlier_copy or rec.prev_twin_ev < 0
            self._spurious(rec.lost_ev, rec.prev_sent_ns, now_ns, reordered, proved)
        elif rec.suspect_sent == rec.sent_ns and rec.twin_ev < 0 and self._retire:
            # the RTO blamed its path and it arrived within the slack (``rto_slack``): as a late
            # packet whose loss was guessed, the path comes back unless it died since
            self._undo(rec.ev, rec.sent_ns, now_ns)
        rec.gap_lost = False
        rec.lost = False
        rec.sacked = True
        c = self.c
        row = rec.ev_row  # (that of rec.ev: the sender keeps it with each copy it sends)
        if row is None:
            row = c.sent_row(rec.ev)
        row.delivered += 1
        c.data_bytes_delivered += len(rec.payload)
        if rec.twin_ev < 0:
            self.evset.note_ok(rec.ev, now_ns, rec.sent_ns, rec.left_ns)
        elif s.echo_ts == rec.sent_ns and s.echo_ev in (rec.ev, rec.twin_ev):
            self.evset.note_ok(s.echo_ev, now_ns, rec.sent_ns, rec.left_ns if s.echo_ev == rec.ev else -1)
        # (else one of a tail resend's two copies arrived, the SACK does not say which: neither
        # path is proved -- crediting the first copy's proved dead paths alive, and the
        # ev_min_active floor then kept three of them to a 1 MiB transfer's end)
        return not spurious

    def _spurious(
        self, lost_ev: int, sent_ns: int, now_ns: int, reordered: bool = True, proved: bool = True
    ) -> None:
        """A loss declared by the gap rule or a timer (of the copy sent on ``lost_ev`` at
        ``sent_ns``) was wrong: the EVs the guess retired come back, and if the copy arrived
        late (``reordered``) the reorder window grows a step. (Grown for a SACK lost at 1 %
        loss too, it held every later loss back by a quarter RTT for a thousand packets.)
        Not ``proved``: another copy may have been the one that arrived; ``lost_ev`` is not
        credited."""
        self.c.spurious_losses += 1
        if reordered:
            self.recovery.on_spurious()
        else:
            self.c.spurious_acks_lost += 1
        if not proved:
            return
        self.evset.note_ok(lost_ev, now_ns, sent_ns)  # the copy guessed lost arrived: its path delivers
        if self._retire:
            self._undo(lost_ev, sent_ns, now_ns)

    def _undo(self, lost_ev: int, sent_ns: int, now_ns: int) -> None:
        """The EVs a wrong loss guess on ``lost_ev`` retired come back (counted) -- unless the
        path, though it delivered that copy (sent at ``sent_ns``), died after it left: a
        packet it carried later is overdue (a queue's late original brought dead paths back)."""
        e = self.evset.entries.get(lost_ev)
        if e is not None and self._overdue_on_path(e.plane, e.t1, sent_ns, now_ns):
            self.c.undo_refused_dead += 1
            return
        back = self.evset.undo_loss(lost_ev, now_ns, sent_ns)
        if back:
            self.c.ev_loss_undone += 1
            self.c.ev_undone += back

    def _overdue_on_path(self, plane: int, t1: int, after_ns: int, now_ns: int) -> bool:
        """A packet sent on path (``plane``, ``t1``) after ``after_ns`` is still unacknowledged
        as long after it left as RACK waits (``Recovery.plane_wait``; its latest copy, or the
        copy a later loss guess blamed on the path)."""
        wait = self.recovery.plane_wait(plane)
        for rec in self.records.values():
            if rec.sacked:
                continue
            for ev, left in ((rec.ev, rec.left_ns), (rec.lost_ev if rec.gap_lost else -1, rec.prev_sent_ns)):
                if ev < 0 or ev >> PLANE_SHIFT != plane or (ev >> T1_SHIFT) & T1_MASK != t1:
                    continue
                if left > after_ns and now_ns - left > wait:
                    return True
        return False

    def _on_duplicate_report(self, s: Sack, now_ns: int) -> bool:
        """D-SACK: if it names a copy of a packet resent once on a guess, both copies arrived
        and the loss is undone here, however late (the resent copy may have won the race).
        Its round trip is a true RTT sample (an original's is the very spike that caused the
        guess), and its CE echo a true mark of the EV it took."""
        self.c.dsacks_received += 1
        guess = self.recovery.on_duplicate(s.echo_ts, s.echo_ev)
        if guess is None:
            return False
        lost_ev, lost_sent = guess
        rtt = now_ns - s.echo_ts
        if 0 <= rtt < self.cfg.rto_max_ns:
            self._rtt_sample(rtt)
        self._spurious(lost_ev, lost_sent, now_ns)
        if s.ecn_echo:
            # the late copy met a marking queue on its way: the very congestion that delayed
            # it past the reorder window, and the echo names the EV it took exactly
            self._ecn_echo(s.echo_ev, now_ns)
        return True

    def _ecn_echo(self, ev: int, now_ns: int) -> None:
        c = self.c
        c.ecn_echoes_received += 1
        c.mark(ev, MARK_ECN)
        if self._retire:
            self.evset.ecn_echo(ev, now_ns)

    def _drop_ack(self, reason: str) -> None:
        """A SACK/NACK the sender does not believe: counted by reason, nothing else happens."""
        self.c.acks_dropped[reason] += 1
        self.c.stray_acks += 1

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
        whose next new one is ``nxt``; None when it is not believed or proves nothing new.

        Everything is checked before any state changes: a cumulative PSN or a bitmap bit
        beyond ``nxt`` drops the whole SACK, and so does a SACK that acknowledges nothing new
        (a replay or a duplicate) or whose echo matches none of the packets it names. The
        ECN echo and the RTT sample are taken only from the packet that triggered the SACK
        among those it newly acknowledges.
        """
        self.c.sacks_received += 1
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
        undone = s.duplicate and self._on_duplicate_report(s, now_ns)
        if not newly:
            if s.duplicate and (echo_ts, echo_ev) in self._twins:
                self._twins.pop((echo_ts, echo_ev))  # the second of a tail resend's two copies
                self.c.tail_twin_duplicates += 1
            elif not s.duplicate and (echo_ts, echo_ev) == self._last_echo:
                self._last_echo = (-1, -1)  # the second copy of a message's last SACK: once
                self.c.sack_spares += 1
            elif not undone:  # (a D-SACK that proved a loss spurious was news enough)
                self._drop_ack("sack_nothing_new")
            return None
        if not echoed and not undone:
            self.c.sack_echo_unmatched += 1
            self._drop_ack("sack_echo_unmatched")
            return None
        # the gap rule's evidence: packets whose latest copy arrived. A resend acknowledged
        # because its original arrived late (the guess was spurious) carries the resend's send
        # time and order, long after the original's: counted, it made every packet sent
        # between the two look overtaken by a whole reorder window, and the next gap loss
        # was spurious too
        evidence: list[TxRecord] = []
        for rec in newly:
            if self._deliver(rec, now_ns, s):
                evidence.append(rec)
        sacked = self._sacked
        sacked.discard_below(cum)
        for start, stop in fresh:
            sacked.add(start, stop)
        if any(r.opcode in _LAST_OPCODES and r.is_copy(echo_ts, echo_ev) for r in newly):
            self._last_echo = (echo_ts, echo_ev)  # (a message's last: its SACK comes twice)
        rtt, ecn, port_wait = self._trigger_sample(s, newly, now_ns)
        return SackProof(cum, newly, evidence, acked_bytes, rtt, ecn, port_wait)

    def _newly_acked(
        self, cum: int, ranges: list[tuple[int, int]]
    ) -> tuple[list[TxRecord], list[tuple[int, int]], int]:
        """The records ``ranges`` acknowledge for the first time, in PSN order; the ranges
        above ``cum`` they fill (to add to ``_sacked`` once believed); their payload bytes.
        Only what ``_sacked`` lacks is looked up: a SACK repeats most of what the ones before
        it said, and a lookup per PSN it names was most of its cost."""
        records = self.records
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
        records = self.records
        for start, stop in ranges:
            for seq in range(start, stop):
                rec = records.get(seq)
                if rec is not None and rec.is_copy(echo_ts, echo_ev):
                    return True
        return False

    def _trigger_sample(self, s: Sack, newly: list[TxRecord], now_ns: int) -> tuple[int | None, bool, int]:
        """(RTT sample, ECN echo, port wait) of the packet that triggered ``s``, taken into the
        RTT estimates and the EV set; (None, False, 0) when it is not among ``newly``."""
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
            return None, False, 0
        port_wait = 0
        rtt = now_ns - s.echo_ts
        sample: int | None = None
        if 0 <= rtt < self.cfg.rto_max_ns:
            sample = rtt  # (the CC's: from the hand-over, a wait at the NIC is its queue too)
            timed = rtt  # the loss rules' (``nic_departures``: from when the copy left the NIC)
            if self._departures:
                left = trigger.left_ns if trigger.sent_ns == s.echo_ts else trigger.prev_left_ns
                if left >= s.echo_ts:
                    timed = now_ns - left
            self._rtt_sample(timed)
            plane = s.echo_ev >> PLANE_SHIFT
            self.recovery.rtt.sample_plane(plane, timed, now_ns)
            if trigger.sent_ns == s.echo_ts and trigger.ev == s.echo_ev:  # (its port wait is known)
                port_wait = trigger.left_ns - trigger.sent_ns
                self.recovery.rtt.sample_fabric(rtt - port_wait, plane, now_ns)
        if s.ecn_echo:
            self._ecn_echo(s.echo_ev, now_ns)
        return sample, s.ecn_echo, port_wait

    def _rtt_sample(self, rtt: int) -> None:
        rtt_est = self.recovery.rtt
        rtt_est.sample(rtt)
        self.evset.tx_delay_spread = rtt_est.spread

    def on_nack(self, n: Nack, una: int, nxt: int, now_ns: int) -> NackProof | None:
        """What ``n`` proves; None unless it names a PSN sent and not yet acknowledged, echoing
        one of our EVs.

        A trim NACK for the copy currently in flight (echoed EV = the EV it left on) is a
        resend at once; one for an earlier copy (the packet was resent since) only penalises
        the echoed EV -- the EV the trimmed copy really took -- and the window. A trim NACK for
        a packet already queued for resending is stale: news for nothing but the EV set.
        """
        c = self.c
        try:
            reason = NackReason(n.reason)
        except ValueError:
            c.malformed["nack_reason"] += 1
            return None
        c.nacks_received[reason.name] += 1
        seq = unwrap(n.psn, una)
        rec = self.records.get(seq) if una <= seq < nxt else None
        if rec is None or rec.sacked:
            self._drop_ack("nack_not_outstanding")
            return None
        if self.evset.state(n.echo_ev) is None:
            self._drop_ack("nack_unknown_ev")
            return None
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            return self._on_trim(rec, n.echo_ev, reason is NackReason.TRIMMED, now_ns)
        if reason is NackReason.OUT_OF_WINDOW:
            return NackProof(rec, out_of_window=True)
        # BAD_RKEY / BAD_ADDRESS: the peer refused the write
        self._refused[(rec.sent_ns, rec.ev)] = None
        if len(self._refused) > REFUSED_MAX:
            del self._refused[next(iter(self._refused))]
        return NackProof(rec, refused=reason.name)

    def _on_trim(self, rec: TxRecord, echo_ev: int, fabric: bool, now_ns: int) -> NackProof:
        c = self.c
        # the trimmed header crossed its whole path to the peer: the path delivers (congested,
        # not failed), as a SACKed packet would show -- what tells a deep last-hop queue, where
        # every path is late, from a path that delivers nothing
        if echo_ev == rec.ev:
            self.evset.note_ok(echo_ev, now_ns, rec.sent_ns)
        elif echo_ev == rec.lost_ev:
            self.evset.note_ok(echo_ev, now_ns, rec.prev_sent_ns)
        if rec.gap_lost and echo_ev == rec.lost_ev:
            # the copy the gap rule or a timer guessed lost was trimmed by a congested
            # switch: congestion, not a failed path -- the retirement it caused is undone
            # and the EV takes the trim penalty instead (a trimmed header, queued in the
            # high class, can arrive after packets sent later on an idle path made the guess)
            rec.gap_lost = False  # answered: neither a later SACK nor another NACK undoes it again
            c.losses_trimmed_after_guess += 1
            if self._retire:
                self._undo(rec.lost_ev, rec.prev_sent_ns, now_ns)
            if rec.lost:  # still queued for resending: only the penalty is new
                c.mark(echo_ev, MARK_TRIMS)
                if fabric and self._retire:
                    self.evset.trimmed(echo_ev, now_ns)
        if rec.lost:
            self._drop_ack("nack_stale")
            return NackProof(rec, trimmed=True, lasthop=not fabric)
        c.mark(echo_ev, MARK_TRIMS)
        if fabric and self._retire:
            self.evset.trimmed(echo_ev, now_ns)
        if echo_ev != rec.ev:
            c.acks_dropped["nack_earlier_copy"] += 1  # penalty taken, current copy flies on
            return NackProof(rec, trimmed=True, lasthop=not fabric, window=True)
        return NackProof(rec, trimmed=True, lasthop=not fabric, window=True, resend=True)
