"""What a believed SACK or NACK does, applied: the book (acks.py) proves, this class applies.

Each owner is asked for its own change: a packet acknowledged or its loss guess answered is a
transition of ``SentPackets``; whether a guess was spurious, and what a delivery teaches the
loss rules (reordering, a plane alive, RTT samples), is ``Recovery``'s; what it proves of a
path -- it delivers, a guess's retirement is undone, an ECN or trim mark -- is the EV set's.
The order is the one the evidence arrives in: a D-SACK's undo first, then each packet newly
acknowledged in PSN order, then the sample of the packet that triggered the SACK. What is
left -- the cumulative ACK, completions, resends, the window, the losses the new evidence
reveals -- is the ``Sender``'s.
"""

from __future__ import annotations

from mrc_fabric.ev import T1_MASK, T1_SHIFT

from .acks import NackProof, SackProof
from .config import TransportConfig
from .counters import MARK_ECN, MARK_TRIMS, Counters
from .evset import EvSet
from .records import PLANE_SHIFT, TxRecord
from .recovery import Recovery
from .sent import SentPackets


class AckEffects:
    """Applies one sender's acknowledgement proofs to its packets, loss rules and EV set."""

    def __init__(
        self, cfg: TransportConfig, counters: Counters, packets: SentPackets, recovery: Recovery, evset: EvSet
    ) -> None:
        self.counters = counters
        self.packets = packets
        self.recovery = recovery
        self.evset = evset
        self._retire = cfg.retires_paths

    def apply_sack(self, proof: SackProof, now_ns: int) -> bool:
        """Apply ``proof``: False when it only undid a guess (a D-SACK; nothing acknowledged)."""
        if proof.undone:
            if proof.undo_rtt >= 0:
                self._rtt_sample(proof.undo_rtt)
            self._spurious(proof.lost_ev, proof.lost_sent, now_ns)
            if proof.undo_ecn:
                self._ecn_echo(proof.echo_ev, now_ns)
        if not proof.newly:
            return False
        # the gap rule's evidence: packets whose latest copy arrived. A resend acknowledged
        # because its original arrived late (the guess was spurious) carries the resend's send
        # time and order, long after the original's: counted, it made every packet sent
        # between the two look overtaken by a whole reorder window, and the next gap loss
        # was spurious too
        evidence = proof.evidence
        for rec in proof.newly:
            if self._deliver(rec, now_ns, proof.echo_ts, proof.echo_ev):
                evidence.append(rec)
        if proof.rtt is not None:
            self._rtt_sample(proof.timed)
            rtt = self.recovery.rtt
            rtt.sample_plane(proof.plane, proof.timed, now_ns)
            if proof.fabric:
                rtt.sample_fabric(proof.rtt - proof.port_wait, proof.plane, now_ns)
        if proof.ecn:
            self._ecn_echo(proof.echo_ev, now_ns, proof.echo_ts)
        elif self.evset.sitting_out and proof.echo_ev >= 0 and proof.echo_ts >= 0:
            self.evset.unmarked_echo(proof.echo_ev, proof.echo_ts)  # (a path's queue drained?)
        return True

    def apply_nack(self, proof: NackProof, now_ns: int) -> None:
        """Apply what a trim NACK says of the paths: the one it crossed delivers, a loss guess
        it answers is undone, the EV it took is penalised."""
        if not proof.trimmed:
            return
        rec = proof.rec
        ev = proof.echo_ev
        self.recovery.path_heard(ev, now_ns)
        if proof.credited:
            self.evset.note_ok(ev, now_ns, proof.credit_sent)
        if proof.answered:
            self.packets.guess_trimmed(rec)
            self.counters.losses_trimmed_after_guess += 1
            if self._retire:
                self._undo(rec.lost_ev, rec.prev_sent_ns, now_ns)
        if proof.penalty:
            self.counters.mark(ev, MARK_TRIMS)
            if not proof.lasthop and self._retire:
                self.evset.trimmed(ev, now_ns)

    def _deliver(self, rec: TxRecord, now_ns: int, echo_ts: int, echo_ev: int) -> bool:
        """Acknowledge ``rec``; False when the copy that arrived is shown to be the one
        before the latest (the loss guess was spurious)."""
        # the SACK echoes the send time and EV of the copy that arrived: the earlier one
        # (Eifel's test) -- decisive where the RTT is too unsettled for the time test
        earlier_copy = echo_ts == rec.prev_sent_ns and echo_ev == rec.lost_ev
        # a late copy gets a SACK of its own at once (out of order, or filling a hole): a
        # guess proven wrong without it (a cumulative point or a bitmap covered the copy) is a
        # SACK lost, or gone past the later SACKs' 64-PSN windows -- not reordering
        reordered = rec.is_copy(echo_ts, echo_ev)
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
        self.packets.acked(rec, spurious)
        counters = self.counters
        row = rec.ev_row  # (that of rec.ev: the sender keeps it with each copy it sends)
        if row is None:
            row = counters.sent_row(rec.ev)
        row.delivered += 1
        counters.data_bytes_delivered += len(rec.payload)
        if rec.twin_ev < 0:
            self.evset.note_ok(rec.ev, now_ns, rec.sent_ns, rec.left_ns)
        elif echo_ts == rec.sent_ns and echo_ev in (rec.ev, rec.twin_ev):
            self.evset.note_ok(echo_ev, now_ns, rec.sent_ns, rec.left_ns if echo_ev == rec.ev else -1)
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
        self.counters.spurious_losses += 1
        if reordered:
            self.recovery.reorder.on_spurious()
        else:
            self.counters.spurious_acks_lost += 1
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
            self.counters.undo_refused_dead += 1
            return
        back = self.evset.undo_loss(lost_ev, now_ns, sent_ns)
        if back:
            self.counters.ev_loss_undone += 1
            self.counters.ev_undone += back

    def _overdue_on_path(self, plane: int, t1: int, after_ns: int, now_ns: int) -> bool:
        """A packet sent on path (``plane``, ``t1``) after ``after_ns`` is still unacknowledged
        as long after it left as RACK waits (``Recovery.plane_wait``; its latest copy, or the
        copy a later loss guess blamed on the path). (The packet being acknowledged counts:
        its state changes after this judgement.)"""
        wait = self.recovery.plane_wait(plane)
        for rec in self.packets.records.values():
            if rec.sacked:
                continue
            for ev, left in ((rec.ev, rec.left_ns), (rec.lost_ev if rec.gap_lost else -1, rec.prev_sent_ns)):
                if ev < 0 or ev >> PLANE_SHIFT != plane or (ev >> T1_SHIFT) & T1_MASK != t1:
                    continue
                if left > after_ns and now_ns - left > wait:
                    return True
        return False

    def _ecn_echo(self, ev: int, now_ns: int, sent_ns: int = -1) -> None:
        counters = self.counters
        counters.ecn_echoes_received += 1
        counters.mark(ev, MARK_ECN)
        if self._retire:
            self.evset.ecn_echo(ev, now_ns, sent_ns)

    def _rtt_sample(self, rtt: int) -> None:
        rtt_est = self.recovery.rtt
        rtt_est.sample(rtt)
        self.evset.tx_delay_spread = rtt_est.spread
