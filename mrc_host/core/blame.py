"""What a loss guess says about the path its packet took (MRC mode), told to the EV set.

A guess (the gap rule, RACK, a timer) that a packet was lost means its path failed -- unless
the path, or the peer's last hop every path ends in, was queueing when the packet left: then
a missing packet is more likely still queued, or trimmed with its NACK on the way. Trimming is
what tells congestion from failure, so on a congested path the trim NACK, not the guess, gets
the last word. This module keeps what the sender knows of congestion for that judgement and
decides; the EV set (``evset.py``) changes the states.
"""

from __future__ import annotations

from mrc_fabric.ev import T1_MASK, T1_SHIFT

from .config import TransportConfig
from .counters import Counters
from .ev_state import EvEvent, EvState
from .evset import EvSet
from .psn import psn_of
from .records import PLANE_SHIFT, TxRecord
from .recovery import Recovery
from .sent import SentPackets

NEVER = -(1 << 62)
_USABLE = (EvState.GOOD, EvState.SKIP)
RECHECK_RTTS = 8  # how long after its send an excused guess is judged again, in SRTTs


class LossBlame:
    """Judges each loss guess of one sender against the congestion it knows of."""

    def __init__(
        self, cfg: TransportConfig, evset: EvSet, counters: Counters, recovery: Recovery, packets: SentPackets
    ) -> None:
        self.cfg = cfg
        self.evset = evset
        self.counters = counters
        self.recovery = recovery  # (read: the reorder window, RTT, RACK's order)
        self.packets = packets  # (read: the packets in flight)
        self.lasthop_trim_ns = NEVER  # when the peer's last hop last trimmed one of ours
        # per (plane, T1) path: (EV, send time of the newest, when to judge again: from the
        # oldest) of the loss guesses excused there as congestion (``recheck``)
        self.excused: dict[tuple[int, int], tuple[int, int, int]] = {}
        self.floor_held: dict[tuple[int, int], None] = {}  # those of them held by the floor instead
        # per (plane, T1) path the NIC's shared verdict retired: (send time of the loss it
        # stands on, when to look again for its packets in flight overdue) (``nic_dead``)
        self.nic_paths: dict[tuple[int, int], tuple[int, int]] = {}

    def lasthop_trimmed(self, now_ns: int) -> None:
        """A NACK TRIMMED_LASTHOP: the peer's own port is queueing."""
        self.lasthop_trim_ns = now_ns

    def blame(self, rec: TxRecord, cause: str, now_ns: int) -> None:
        """What a loss guess of ``rec`` does to the EV set (judged as of when the packet left: a
        timer fires long after the marks it met)."""
        c = self.counters
        evset = self.evset
        hot = evset.is_hot(rec.ev, rec.sent_ns)
        own = hot and evset.hotter_than_most(rec.ev, rec.sent_ns)
        if (hot or self._lasthop_busy(rec)) and not self._delivers_nothing(rec, own):
            c.losses_while_hot += 1
            self._excuse(rec, now_ns)
            if hot:
                # the path is queueing (marked or trimmed lately): its trim NACK gets the last word
                self.evset.lost_while_hot(rec.ev, now_ns)
            # (else the peer's last hop is trimming -- an incast: every path ends in that
            # queue, so a gap says it is deep, not that this path failed; none is to blame)
        else:
            # (judged dead by the same margin, the ``ev_min_active`` floor does not hold it --
            # never a wider one than the path margin: the reorder window swells to hundreds of
            # us once SACKs lost on dead reverse paths report packets late, and the floor then
            # held every dead path through a stall of RTOs)
            why = f"loss ({cause}) of psn {psn_of(rec.seq)}"
            margin = min(self.recovery.reorder_window() * (2 if own else 1), self.evset.path_margin_ns())
            held = evset.floor_holds
            evset.retire(rec.ev, why, now_ns, sent_ns=rec.sent_ns, margin_ns=margin, left_ns=rec.left_ns)
            if evset.floor_holds > held:
                self._hold(rec, now_ns)

    def _excuse(self, rec: TxRecord, now_ns: int) -> None:
        """Remember a guess excused as congestion, to judge it again a round trip after the
        path's oldest: by its newest, so that a delivery between the two clears nothing (a
        link that died just after a mark: its first guess was of a packet queued before a
        later one that arrived, and the path was let go as delivering while the packets lost
        after that one stood unjudged -- its penalty ended and it lost 60 more)."""
        e = self.evset.entries.get(rec.ev)
        if e is None:
            return
        path = (e.plane, e.t1)
        had = self.excused.get(path)
        if had is None:
            due = now_ns + int(self.recovery.rtt.srtt_ns or 0) + self.recovery.reorder_window()
            self.excused[path] = (rec.ev, rec.sent_ns, due)
        elif rec.sent_ns > had[1]:
            self.excused[path] = (had[0], rec.sent_ns, had[2])

    def _hold(self, rec: TxRecord, now_ns: int) -> None:
        """The ``ev_min_active`` floor kept ``rec``'s path (or the rest of it) in use: no proof
        yet that it delivers nothing (the gap rule's later packets may have been handed to the
        NIC just after it). Judged again like an excused guess, on a usable EV of the path,
        from the next SACK a margin on, so that the floor never keeps a path that proves dead:
        with 6 of 8 paths dead at a 2 MiB transfer's tail, the floor kept half of a dead path's
        EVs, which lost 32 packets against a limit of 21."""
        evset = self.evset
        e = evset.entries.get(rec.ev)
        if e is None or (e.plane, e.t1) in self.excused:
            return
        for x in (e, *evset.active[e.plane], *evset.backup[e.plane]):
            if x.t1 == e.t1 and x.state in _USABLE:
                self.excused[(e.plane, e.t1)] = (x.value, rec.sent_ns, now_ns + self._margin())
                self.floor_held[(e.plane, e.t1)] = None
                return

    def unheld_ev(self, ev: int | None, exclude: int | None, now_ns: int) -> int | None:
        """``ev``, or the next EV of the rotation off every path whose loss guess the
        ``ev_min_active`` floor holds (``_hold``), for a resend: a held path has shown no
        delivery since its loss, and with 6 of 8 paths dead at once the resends of the first
        paths retired went to the three the floor held until the recheck (22 lost on one,
        limit 21.1). New data still goes there (the floor is for diffuse loss); the first
        ``ev`` when every usable EV is held."""
        held = self.floor_held
        if exclude is None or not held:
            return ev
        evset = self.evset
        first = pick = ev
        for _ in range(sum(len(lst) for lst in evset.active)):
            if pick is None or ((pick >> PLANE_SHIFT, (pick >> T1_SHIFT) & T1_MASK) not in held):
                return pick
            pick = evset.next_data_ev(exclude, now_ns)
        return first

    def sending(self, writes: bool) -> bool:
        """Whether the sender is in bulk transfer (``writes``: it has more to send), where the
        gap rule alone finds losses, or is to be judged as at its tail (RACK and the tail
        probe): so is a thin window, too few packets in flight for the gap rule ever to see
        one overtaken (``sack_gap_threshold`` or fewer). A 16 -> 1 incast's flows have one or
        two each; when the one in flight died on a failed link, or its SACK did, nothing but
        the RTO found it (7 of 16 connections on one seed)."""
        return writes and len(self.packets.in_flight) > self.cfg.thin_window

    def probed(self, rec: TxRecord, thin: bool, now_ns: int) -> None:
        """The tail probe resent ``rec``. At a transfer's tail that blames no path: nothing says
        its path failed (its SACK may be late). In a thin window (``thin``: more to send,
        ``sending``) the probe is a loss guess like the RTO it stands in for, blamed as one:
        unblamed, 16 -> 1 incast flows that kept their window (no RTO cut it) went on spraying
        a dead link for a round trip more (25 -> 36 packets lost, seeds 1-4)."""
        self.counters.losses_tail += 1
        if thin:
            self.blame(rec, "thin window probe", now_ns)

    def _margin(self) -> int:
        return 2 * self.recovery.reorder_window()

    def recheck(self, now_ns: int, stranded: bool = False) -> list[TxRecord]:
        """Judge again, a round trip plus the reorder window after it was made, each guess
        excused as congestion. A packet that was queued has arrived by then and one that was
        trimmed has had its NACK back (trimmed headers go first), either proving its path
        delivers; a path that proved nothing sent at or after it, while another delivered a
        packet sent twice the reorder window later, died -- congested or not. Without this a
        path that died while hot sat out its penalty, came back, lost again, and was retired
        only by a timeout: a penalty stops it carrying packets, so the rule of ``blame`` (it
        went on carrying and delivered nothing) could never see it.

        Returns the packets in flight on a path so retired that are overdue as RACK waits
        (``Recovery.plane_wait``), for the sender to resend now as guesses a delivery may
        undo. Left to the gap rule, which needs later packets delivered, a sender whose
        window was full of them sent nothing new, and its RTO freed one packet per expiry,
        doubling each time (a 4 MiB incast write took 4 ms, not 1.5). ``stranded`` (an RTO
        fired): also those on paths retired before it that RACK would call lost. Not the
        packets of a path a gap loss or this RTO retires: with 6 of 8 paths dead at once
        such resends found other dead paths first."""
        overdue: list[TxRecord] = self._stranded(now_ns) if stranded else []
        if self.nic_paths:
            overdue += self._nic_overdue(now_ns)
        if not self.excused:
            return _each_once(overdue)
        evset = self.evset
        margin = self._margin()
        for path, (ev, sent_ns, due) in list(self.excused.items()):
            if now_ns < due:
                continue
            e = evset.entries.get(ev)
            if e is None or e.state not in (EvState.GOOD, EvState.SKIP):
                self._forget(path)
                continue
            here, elsewhere = evset.path_proof(path)
            if here > sent_ns:
                # it delivers: the excuse held (a packet handed over with it in one window
                # -- the same send time -- proves nothing either way)
                self._forget(path)
            elif sent_ns + margin <= elsewhere:
                if self._forget(path):
                    self.counters.losses_floor_dead += 1
                    why = "loss the ev_min_active floor held, nothing delivered since"
                else:
                    self.counters.losses_hot_dead += 1
                    why = "loss on a congested path, nothing delivered since"
                if evset.retire(ev, why, now_ns, sent_ns=sent_ns, margin_ns=margin):
                    overdue += self._overdue(path, now_ns)
            else:  # no proof either way yet: again a round trip later, for a few
                srtt = int(self.recovery.rtt.srtt_ns or margin)
                if now_ns - sent_ns > RECHECK_RTTS * srtt:
                    self._forget(path)
                else:  # (held by the floor: at the next SACK a margin on)
                    wait = margin if path in self.floor_held else max(srtt, margin)
                    self.excused[path] = (ev, sent_ns, now_ns + wait)
        return _each_once(overdue)

    def _forget(self, path: tuple[int, int]) -> bool:
        """``path``'s guess is judged: whether the floor, not congestion, had held it."""
        del self.excused[path]
        if path in self.floor_held:
            del self.floor_held[path]
            return True
        return False

    def nic_dead(self, paths: list[tuple[int, int, int]], now_ns: int) -> None:
        """The NIC's shared verdict retired ``paths`` (plane, T1, send time of the loss it stands
        on) here: this sender saw no loss on them, but its packets that left there since are
        lost as well once overdue as RACK waits (gone unseen: a sender whose last packets went
        there would learn it only by its RTO). Those that left before are no business of the
        verdict's: the sender's own rules judge them."""
        for plane, t1, since in paths:
            self.nic_paths[(plane, t1)] = (since, now_ns)

    def _nic_overdue(self, now_ns: int) -> list[TxRecord]:
        """Packets in flight on paths the NIC's verdict retired that left since its loss and are
        overdue now; paths with such packets not yet overdue are looked at again then."""
        out: list[TxRecord] = []
        entries = self.evset.entries
        for path, (since, due) in list(self.nic_paths.items()):
            if now_ns < due:
                continue
            plane, t1 = path
            wait = self.recovery.plane_wait(plane)
            later = -1
            for rec in self.packets.on_plane(plane):
                e = entries.get(rec.ev)
                if e is None or e.t1 != t1 or e.state is not EvState.ASSUMED_BAD or rec.left_ns < since:
                    continue
                if now_ns - rec.left_ns > wait:
                    out.append(rec)
                elif later < 0 or rec.left_ns + wait + 1 < later:
                    later = rec.left_ns + wait + 1
            if later < 0:
                del self.nic_paths[path]
            else:
                self.nic_paths[path] = (since, later)
        return out

    def _stranded(self, now_ns: int) -> list[TxRecord]:
        """At an RTO: packets in flight on a retired EV that RACK would call lost (something
        sent after them delivered, and they overdue) though the sender is not at its tail."""
        entries = self.evset.entries
        recovery = self.recovery
        out = []
        for rec in self.packets.in_flight.values():
            if rec.tx_order >= recovery.rack_order:
                break
            e = entries.get(rec.ev)
            late = now_ns - rec.left_ns > recovery.plane_wait(rec.ev >> PLANE_SHIFT)
            if late and e is not None and e.state is EvState.ASSUMED_BAD:
                out.append(rec)
        return out

    def _overdue(self, path: tuple[int, int], now_ns: int) -> list[TxRecord]:
        plane, t1 = path
        wait = self.recovery.plane_wait(plane)
        return [
            rec
            for rec in self.packets.on_plane(plane)
            if (rec.ev >> T1_SHIFT) & T1_MASK == t1 and now_ns - rec.left_ns > wait
        ]

    def deadline(self, at: int | None) -> int | None:
        """``at``, or sooner when an excused guess is to be judged again (a timer: a sender
        whose window is full of packets on a dead path gets no SACK to judge it by). Only
        with packets in flight: a sender stalled with none (or failed) judges nothing."""
        if not self.packets.in_flight:
            return at
        for _, _, due in self.excused.values():
            if at is None or due < at:
                at = due
        for _, due in self.nic_paths.values():
            if at is None or due < at:
                at = due
        return at

    def _lasthop_busy(self, rec: TxRecord) -> bool:
        cfg = self.cfg
        return cfg.hot_path_heat > 0 and self.lasthop_trim_ns >= rec.sent_ns - cfg.penalty_halflife_ns

    def _delivers_nothing(self, rec: TxRecord, own: bool) -> bool:
        """``rec``'s path has delivered nothing sent at or after it -- no SACKed packet, no
        trimmed header (a trim NACK proves the path reaches the peer) -- while another path
        delivered a packet sent a margin later (``EvSet.path_dead``): congested or not, it
        failed. The margin is the reorder window, the gap rule's own guard (every path late
        behind one queue delivers nothing that late either), twice that where the path has a
        queue of its own (``own``: hot while most paths are not): the window covers how much
        later one path's packets arrive than another's (``RttEstimator.fabric_spread``), its
        own queue included."""
        e = self.evset.entries.get(rec.ev)
        margin = self.recovery.reorder_window() * (2 if own else 1)
        return e is not None and self.evset.path_dead(e, EvEvent.LOSS, rec.sent_ns, margin, carried=True)

    def twin_ev(self, rec: TxRecord, now_ns: int) -> int | None:
        """The EV for a second copy of a resend at the tail, on another plane, or None: only for
        a loss guess with no sign of congestion (a packet missing from a marked path or while
        the peer's last hop trims was queued, and a copy more would only add to the queue).
        Where the rotation's next EV is on the resend's own plane, the path of another plane's
        latest SACK since the lost copy left (``twin_elsewhere``): sending no twin because of
        where the rotation stood left about half the tail resends single at 1 % loss (2 x 4,
        41 us RTT), and one of them lost again cost the message a round trip (seed 20: 3.2 %
        behind ECMP)."""
        recent = now_ns - self.cfg.penalty_halflife_ns
        if self.lasthop_trim_ns >= recent or self.evset.is_hot(rec.lost_ev, rec.prev_sent_ns):
            return None
        ev = self.evset.next_data_ev(rec.ev, now_ns)
        if ev is None:
            return None
        if ev >> PLANE_SHIFT == rec.ev >> PLANE_SHIFT:
            ev = twin_elsewhere(self.evset, rec)  # (already the path of that plane's latest SACK)
            if ev is None:
                return None
        else:
            # the path of the peer's latest SACK on that plane (``EvTable.fresh_ev``), if any
            ev = self.evset.fresh_ev(rec.prev_sent_ns, ev >> PLANE_SHIFT, rec.lost_ev) or ev
        return None if self._owes(ev) else ev

    def _owes(self, ev: int) -> bool:
        """Whether a packet in flight was resent on a guess (a loss, the tail probe) from
        ``ev``'s path after the latest packet the path is known to have delivered: a twin is a
        spare, not sent where the copy given up on likely died (a fuzzed all-to-all with a T1
        and the peer's port of one plane down: after the tail probe gave up on a packet there,
        two tail resends twinned onto that T1 by its fresh SACKs, 3 lost against a limit of
        2.3). A packet merely unacknowledged proves nothing: its SACK may have been lost."""
        path = ev >> T1_SHIFT
        here = self.evset.path_proof((ev >> PLANE_SHIFT, path & T1_MASK))[0]
        for r in self.packets.in_flight.values():
            if r.gap_lost and r.lost_ev >= 0 and r.lost_ev >> T1_SHIFT == path and r.prev_sent_ns > here:
                return True
        return False


def twin_elsewhere(evset: EvSet, rec: TxRecord) -> int | None:
    """Our EV on the path of the peer's latest SACK on the other plane heard from last, if
    that was since ``rec``'s lost copy left (``EvTable.fresh_ev``): the path that delivered
    most recently, if that EV is GOOD (a retired path gets no spare), or None. (The first
    such plane by index instead: one packet more than the floor allows in fuzz seed 18's draw
    99, a flapping NIC link beside a dead one and 5 % loss on a third.)"""
    own = rec.ev >> PLANE_SHIFT
    best, best_ns = -1, rec.prev_sent_ns - 1
    heard_ns = evset.heard_ns
    for plane in range(evset.planes):
        if plane != own and heard_ns[plane] > best_ns:
            best, best_ns = plane, heard_ns[plane]
    ev = None if best < 0 else evset.fresh_ev(rec.prev_sent_ns, best, rec.lost_ev)
    return ev if ev is not None and evset.state(ev) is EvState.GOOD else None


def _each_once(recs: list[TxRecord]) -> list[TxRecord]:
    """``recs`` without repeats, in order: the rules' lists overlap (a packet stranded on a
    retired EV may also be overdue at its NIC), and each packet is guessed lost once."""
    if len(recs) < 2:
        return recs
    return list({rec.seq: rec for rec in recs}.values())
