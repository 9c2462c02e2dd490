"""What a loss does, for one sender: every loss the rules find or the sender learns goes
through here.

The rules (recovery.py, plane_watch.py, blame.py's recheck) return the packets and planes they
judge lost; this class asks each owner for its change: the packet leaves the flight for the
retransmit queue (``SentPackets``: a guess its delivery may undo, or a fact), the loss is
counted, the window is told (the congestion control), the path is blamed (``LossBlame``, MRC
mode) and a silent plane is failed (the EV set). In MRC mode a guessed loss means the path
failed: its EV is retired at once and the packet resent on another; in single-path mode the
timer goes back N from the first missing PSN, as RoCE does. It keeps no state of its own.
"""

from __future__ import annotations

from .acks import SackProof
from .blame import LossBlame
from .cc_base import CongestionControl
from .config import TransportConfig
from .counters import MARK_LOST, Counters
from .ev_state import EvEvent
from .evset import EvSet
from .psn import psn_of
from .records import PATH_SHIFT, TxRecord
from .recovery import Recovery
from .sent import SentPackets


class LossResponse:
    """Turns one sender's loss findings into resends, counts, window cuts and blame."""

    def __init__(
        self,
        cfg: TransportConfig,
        counters: Counters,
        packets: SentPackets,
        recovery: Recovery,
        blame: LossBlame,
        evset: EvSet,
        congestion: CongestionControl,
    ) -> None:
        self.cfg = cfg
        self.counters = counters
        self.packets = packets
        self.recovery = recovery
        self.blame = blame
        self.evset = evset
        self.congestion = congestion
        self._retire = cfg.retires_paths
        self._gbn = cfg.go_back_n

    # ---- on a SACK ----------------------------------------------------------------------
    def shown(self, proof: SackProof, now_ns: int, writes: bool, weighed: int = 0) -> None:
        """The losses a believed SACK's evidence reveals (``writes``: the sender has more to
        send): the gap rule, a dead plane, RACK, and the excused guesses judged again.
        ``weighed``: the planes the sender's queue weights hold below their full share (a bit
        mask, ``Recovery.gap_losses``)."""
        recovery = self.recovery
        recovery.note_rack(proof.evidence)
        for rec in recovery.gap_losses(proof.evidence, now_ns, weighed):
            self.lose(rec, "gap", now_ns)  # no-op for a record already lost
        if self._retire and self.evset.planes > 1:
            watch = recovery.plane_watch
            for plane in watch.dead_planes(proof.newly, now_ns):
                path = watch.silent_path(plane, now_ns)
                if path >= 0:
                    watch.one_path_silent(plane)
                    self._path_silent(plane, path, now_ns)
                else:
                    self._fail_plane(plane, now_ns)
        if self._retire:
            # after the plane check (a dead plane is flushed whole): paths silent by their own
            # delay are retired, those only overdue by it carry nothing more until they deliver
            silent, overdue = recovery.look_at_paths(proof.newly, now_ns)
            for rec in silent:
                why = f"path silent past its own delay, psn {psn_of(rec.seq)}"
                self.evset.retire(rec.ev, why, now_ns, EvEvent.LOSS, sent_ns=rec.sent_ns)
            for rec in overdue:
                self.evset.hold_path(rec.ev, rec.sent_ns)
        for rec in recovery.rack_losses(now_ns, self.blame.sending(writes)):
            self.lose(rec, "gap", now_ns)
        self._recheck(now_ns)

    # ---- losses -------------------------------------------------------------------------
    def lose(self, rec: TxRecord, cause: str, now_ns: int = 0) -> None:
        """A loss rule (``cause``: "gap" or "rto") guessed ``rec`` lost: no-op for a packet
        already lost or acknowledged."""
        if rec.sacked or rec.lost:
            return
        # a guess (gap rule or timer) a delivery may prove wrong
        self.packets.guessed_lost(rec, "gap" if cause == "gap" else "timeout")
        counters = self.counters
        if cause == "gap":
            counters.losses_gap += 1
        else:
            counters.losses_rto += 1
        counters.mark(rec.ev, MARK_LOST)
        self.congestion.on_loss(len(rec.payload), now_ns)
        if self._retire and cause != "rto":  # (the RTO blamed its path already: _blame_suspects)
            self.blame.blame(rec, cause, now_ns)

    def flush_plane(self, plane: int, cause: str) -> int:
        """Every packet in flight on ``plane`` is resent elsewhere now (its port is down,
        or the plane stopped delivering): no timer, no SACK gap needed."""
        n = 0
        for rec in self.packets.on_plane(plane):
            if cause == "port":  # a port-status report is a fact
                self.packets.known_lost(rec, "port_down")
            else:  # a silent plane is inferred: a delivery after all proves it stalled (undo_loss)
                self.packets.guessed_lost(rec, "plane_dead")
            n += 1
        if cause == "port":
            self.counters.losses_port += n
        else:
            self.counters.losses_plane += n
        return n

    def ports_down(self, bitmap: int) -> None:
        """Planes whose local or peer NIC port just went down (port-status bitmap)."""
        for plane in range(self.evset.planes):
            if bitmap >> plane & 1:
                self.flush_plane(plane, "port")

    def rewind(self, seq: int, cause: str) -> None:
        """Go-back-N: everything from ``seq`` on is resent in order (counted under ``cause``)."""
        self.counters.go_back_n_rewinds += 1
        self.packets.rewind(seq, cause)

    def _path_silent(self, plane: int, path: int, now_ns: int) -> None:
        """A silent plane's overdue packets are all on ``path`` (``PlaneWatch.silent_path``):
        that path is retired (whatever the ``ev_min_active`` floor: it delivers nothing while
        the other planes deliver) and its packets in flight resent, as a guess its delivery may
        undo. The plane's other GOOD paths then carry one packet each until one of theirs is
        delivered (``EvSet.prove_paths``; a packet in flight stands for it): a dead T0-T1 link
        costs its own path, and a dead plane (a NIC link) takes nothing more until a second
        path's packets fall due and fail it."""
        on_plane = self.packets.on_plane(plane)
        on_path = [r for r in on_plane if r.ev >> PATH_SHIFT == path]
        scouts: dict[int, int] = {}
        for r in on_plane:  # (in transmission order: the first seen is the oldest)
            if r.ev >> PATH_SHIFT != path and r.ev >> PATH_SHIFT not in scouts:
                scouts[r.ev >> PATH_SHIFT] = r.sent_ns
        self.evset.prove_paths(plane, path, scouts)
        if not on_path:
            return
        oldest = on_path[0]
        why = f"path silent, psn {psn_of(oldest.seq)}"
        self.evset.retire(oldest.ev, why, now_ns, EvEvent.LOSS, sent_ns=oldest.sent_ns, margin_ns=0)
        for rec in on_path:
            self.packets.guessed_lost(rec, "path")
        self.counters.losses_path += len(on_path)

    def _fail_plane(self, plane: int, now_ns: int) -> None:
        self.counters.planes_failed += 1
        self.evset.fail_plane(plane, now_ns)
        self.flush_plane(plane, "plane")

    def _recheck(self, now_ns: int, stranded: bool = False) -> None:
        """Excused loss guesses judged again: overdue packets on a path they retire go again now."""
        for rec in self.blame.recheck(now_ns, stranded):
            self.counters.losses_path += 1
            self.packets.guessed_lost(rec, "path")

    # ---- timers -------------------------------------------------------------------------
    def on_timer(self, now_ns: int, writes: bool) -> bool:
        """The loss timers (``writes``: the sender has more to send): RACK, the tail probe, the
        RTO's blame and, a slack later, the timeout proper. True when the RTO has fired more
        than ``retry_cnt`` times in a row without progress: the peer is gone."""
        recovery = self.recovery
        sending = self.blame.sending(writes)
        for rec in recovery.rack_losses(now_ns, sending):
            self.lose(rec, "gap", now_ns)
        tail = recovery.tail_at(sending)
        if tail is not None and now_ns >= tail:
            for rec in recovery.tail_losses(now_ns):
                self.packets.guessed_lost(rec, "tail_probe")
                self.blame.probed(rec, writes and self._retire, now_ns)
        suspects = recovery.suspects(now_ns)
        self._recheck(now_ns, stranded=bool(suspects))  # (before the RTO retires more)
        self._blame_suspects(suspects, now_ns)
        expired = recovery.expired(now_ns)
        return bool(expired) and self._on_rto(expired, now_ns)

    def _blame_suspects(self, suspects: list[TxRecord], now_ns: int) -> None:
        """The RTO ran out on ``suspects`` (``Recovery.suspects``): their paths are blamed now,
        the packets resent only a slack later (``rto_slack``); one that arrives meanwhile
        undoes the blame (``AckEffects._deliver``). Not before any RTT sample: a timeout then
        says the RTT is unknown, not that a path died."""
        if self._retire and self.recovery.rtt.srtt_ns is not None:
            for rec in suspects:
                self.blame.blame(rec, "rto", now_ns)
            # (a plane's paths not yet blamed go too)
            for plane in self.recovery.plane_watch.rto_dead_planes(suspects, now_ns):
                self._fail_plane(plane, now_ns)

    def _on_rto(self, expired: list[TxRecord], now_ns: int) -> bool:
        """The timeout proper, on the packets past the RTO and its slack: True when it has
        fired too often (OCP retry count)."""
        self.counters.rto_fired += 1
        recovery = self.recovery
        recovery.on_rto()
        if recovery.retries > self.cfg.retry_cnt:  # OCP retry count: the peer is gone
            return True
        self.congestion.on_timeout(now_ns)
        if self._gbn:
            self.counters.losses_rto += len(expired)
            self.rewind(self.packets.una, "timeout")
            return False
        if recovery.rtt.srtt_ns is None:
            # no RTT sample yet: the timer was a guess, and its expiry says the RTT is
            # unknown, not that every packet sent died. Resend the oldest one as a probe
            # (RFC 6298 resends one segment; RACK-TLP's probe elicits feedback) with the
            # timer backed off; its SACK -- or the original's -- gives the first sample.
            self.counters.rto_probes += 1
            self.packets.guessed_lost(expired[0], "timeout_probe")  # its delivery proves it spurious
            return False
        for rec in expired:
            self.lose(rec, "rto", now_ns)
        return False
