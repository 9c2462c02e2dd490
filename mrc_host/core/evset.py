"""The EV set of one endpoint: which paths carry packets, and when.

An EV names a path: plane (NIC port) + T1 (T0 uplink) + entropy (only hashed in the
ECMP baseline). Which EVs a connection has is drawn once (``ev_draw.py``); this module
keeps the spraying rotation, retirement and replacement on top of the bookkeeping in
``ev_table.py`` and the penalties of ``ev_heat.py``; ``ev_probe.py`` probes them.

States and the events that move between them are in ``ev_state.py`` (one table). A
retired or denied EV is replaced from the same plane's backups (preferring another T1).
Loss retires no EV once only ``ev_min_active`` usable EVs are left (OCP's floor): below
that, loss is more likely everywhere than on one path. An ECN/trim mark heats the EV's
path, and a repeat makes it sit out turns of the rotation (``ev_heat.py``). An EV that
fails again soon after probes restored it is flapping: it waits 2**flaps probe
intervals before it is probed again, at most half as long as it last stayed up once that
was a few round trips (``EvTable._flap_wait``).

The data rotation picks a plane first -- the up plane with the fewest bytes in flight, so
planes carry equally while they are healthy, each weighed by its port's rate and by the
queue that stands on it where those differ (``weigh_planes``), so a slow plane holds bytes
in proportion to what it delivers rather than queueing the difference -- and then the next
EV of that plane round-robin.
"""

from __future__ import annotations

from typing import Final

from mrc_fabric.addressing import MAX_INDEX
from mrc_fabric.ev import T1_SHIFT

from .ev_draw import PathSpace
from .ev_heat import EvHeat
from .ev_shared import NIC_KEY_BASE
from .ev_state import EvEvent, EvState, allowed
from .ev_table import EvEntry

__all__ = ["NIC_KEY_BASE", "EvEntry", "EvEvent", "EvSet", "EvState", "PathSpace"]


_PATH_EVENTS = frozenset({EvEvent.LOSS, EvEvent.LIVENESS_LOST})
# read per packet by the rotation: a static, not a lookup of ``EvState`` (not compiled) each time
_SKIP: Final = EvState.SKIP


class EvSet(EvHeat):
    """The spraying rotation, retirement, replacement and restoring (penalties: ``EvHeat``)."""

    # ---- rotation ---------------------------------------------------------------------
    def next_data_ev(
        self, exclude: int | None = None, now_ns: int = -1, backed_up: int = 0, late: int = 0
    ) -> int | None:
        """The EV for the next DATA packet: the least loaded up plane, then its EVs round-robin.

        ``exclude`` (the EV a retransmitted packet was lost on) is avoided unless it is the
        only usable one; the planes in ``backed_up`` (a bit mask, ``PlanePassing.passed``:
        slow NIC ports holding their part of the backlog, planes whose packets would arrive
        after the rest near the tail) only when no other plane can take the packet, and of
        those the planes in ``late`` (held by a queue that a packet sent now would wait out
        after the rest: ``PlaneQueueWeights.late_at_tail``) last: a port's backlog drains at
        the port's rate, such a queue at its plane's (two planes, 5 Gb/s inside beside 75 at
        the port: 2.6 x as long as with the slow one dead, where the port first takes 1.004 x).
        Planes are weighed by their ports' rates where those differ (``weigh_planes``).
        A path back from SKIP takes one packet until it is proven (``ev_scouts.py``); a penalty
        is over once its turns are served or at its time (``now_ns``). With no GOOD EV
        anywhere, the least bad option is an ASSUMED_BAD EV of an up plane (counted by the
        caller as a last-resort send).
        """
        planes = self.planes
        load = self.plane_load
        weight = self.plane_weight
        active = self.active
        # A pass that finds only SKIP EVs serves one turn of each penalty; passes go on while
        # they serve some, so a connection whose every usable EV sits out (one path, or
        # every path marked) sends on the least penalised one instead of stalling. A pass
        # that passed GOOD EVs waiting for their path's scout ends the passes: the first of
        # them goes (below) rather than a congested path's penalty ending early, in one pick.
        self._scout_wait_ev = -1
        for _ in range(self._max_turns + 1):
            served = self._skips_served
            # the planes tried, counting those down from the start (``plane_up``, once a packet)
            tried = ((1 << planes) - 1) & ~(self.local_ports & self.peer_ports) | backed_up
            while True:
                best = -1
                best_load = 0
                cursor = self._plane_cursor
                for k in range(planes):
                    plane = (cursor + k) % planes
                    if tried >> plane & 1 or not active[plane]:
                        continue
                    if weight is None:
                        if best < 0 or load[plane] < best_load:
                            best, best_load = plane, load[plane]
                    elif best < 0 or load[plane] * weight[best] < best_load * weight[plane]:
                        best, best_load = plane, load[plane]
                if best < 0:
                    break
                tried |= 1 << best
                ev = self._pick_in_plane(best, exclude, now_ns)
                if ev is not None:
                    self._plane_cursor = (best + 1) % planes
                    return ev
            if self._scout_wait_ev >= 0 or self._skips_served == served:
                break
        if self._scout_wait_ev >= 0:  # every path left waits for its scout: one goes anyway
            plane = self._scout_wait_plane
            self._ev_cursor[plane] = self._scout_wait_idx + 1
            self._plane_cursor = (plane + 1) % planes
            return self._scout_wait_ev
        if backed_up:
            return self.next_data_ev(exclude, now_ns, late & backed_up)
        if exclude is not None:
            return self.next_data_ev(None, now_ns)
        return None

    def _pick_in_plane(self, plane: int, exclude: int | None, now_ns: int) -> int | None:
        lst = self._active[plane]  # (built: next_data_ev read self.active)
        n = len(lst)
        start = self._ev_cursor[plane]
        scouts = self.scouts
        for k in range(n):
            idx = (start + k) % n
            e = lst[idx]
            if e.value == exclude:
                continue
            if e.state is _SKIP:
                until = e.skip_until
                if until <= 0 or now_ns < until:
                    self._skips_served += 1
                    e.skips_left -= 1
                    if e.skips_left <= 0:
                        self._fire(e, EvEvent.PENALTY_SERVED, "skip served")
                else:  # its time is up: so is its path siblings' (a slow sender passes each rarely)
                    self._skip_over(lst, e, now_ns)
                continue
            if scouts.out and scouts.waiting(e.value, now_ns):
                if self._scout_wait_ev < 0:
                    self._scout_wait_ev, self._scout_wait_plane, self._scout_wait_idx = e.value, plane, idx
                continue  # its path's scout is out, not proven yet
            self._ev_cursor[plane] = idx + 1
            return e.value
        return None

    def weigh_planes(self, rates: list[float], queues: list[float] | None = None) -> None:
        """The NIC's ports run at ``rates`` (Gb/s, per plane; 0: not said), and ``queues`` (per
        plane, ``PlaneQueueWeights``) says the share a queue standing on a plane leaves it: the
        rotation gives each plane bytes in flight in proportion to both, so a port at a lower
        rate holds no queue the others do not (equal bytes left a plane at 10 Gb/s under an
        incast a last-hop queue its timers took for loss), nor does a plane slowed inside."""
        fastest = max(rates) if rates else 0.0
        ported = fastest > 0 and min(rates) > 0 and min(rates) < fastest
        if not ported and queues is None:
            self.plane_weight = None
            return
        weight = [g / fastest for g in rates] if ported else [1.0] * self.planes
        if queues is not None:
            weight = [w * q for w, q in zip(weight, queues, strict=True)]
        self.plane_weight = weight

    def prove_paths(self, plane: int, silent: int, oldest: dict[int, int]) -> None:
        """``plane``'s path ``silent`` (``ev >> T1_SHIFT``) went silent while its other paths
        were still unjudged: each other GOOD path of the plane carries one packet until it
        proves to work (``PathScouts.hold``). ``oldest``: per path, the send time of its oldest
        packet in flight, which stands as its scout; a path with none sends one."""
        for e in self.active[plane]:
            path = e.value >> T1_SHIFT
            if e.state is EvState.GOOD and path != silent:
                self.scouts.hold(path, oldest.get(path, -1))

    def hold_path(self, ev: int, sent_ns: int) -> None:
        """``ev``'s path is overdue by its own delay, its packet sent at ``sent_ns`` not yet
        delivered (``PathWatch.look``): while GOOD, it carries nothing more until a packet sent
        on it then or later is (``PathScouts.suspect``). A dead link is fed no more while the
        verdict waits out its guard; a path only slow takes packets again at its next delivery."""
        e = self.entry(ev)  # (not ``entries``: that builds a lazily drawn set's whole table)
        if e is not None and e.state is EvState.GOOD:
            self.scouts.suspect(ev >> T1_SHIFT, sent_ns)

    def _skip_over(self, lst: list[EvEntry], e: EvEntry, now_ns: int) -> None:
        """``e``'s penalty is over in time (``EvHeat._skip_end``): it and every EV of its path in
        the rotation whose penalty is over too are GOOD again."""
        for x in lst:
            if x.t1 == e.t1 and x.state is _SKIP and 0 < x.skip_until <= now_ns:
                self._fire(x, EvEvent.PENALTY_SERVED, "skip served")

    def last_resort_ev(self, exclude: int | None = None) -> int | None:
        """An ASSUMED_BAD EV on an up plane, for when no GOOD EV exists at all."""
        bad = [e for e in self.retired.values() if self.plane_up(e.plane)]
        if not bad:
            return None
        choices = [e for e in bad if e.value != exclude] or bad
        self._ctl_cursor += 1
        return choices[self._ctl_cursor % len(choices)].value

    def next_control_ev(self, plane: int | None = None) -> int | None:
        """EV for a SACK/NACK/PROBE_ACK: rotate over a few usable active EVs per plane
        (``control_evs``), never serving SKIPs.

        With ``plane`` (the plane the packet being answered arrived on) the answer goes
        back on that plane when it has a usable EV: a plane the peer has stopped sending
        on -- failed, or its port down -- then stops carrying our answers too, without
        waiting for our own detection of the dead reverse path."""
        lists = self._control_cache
        if lists is None:
            # (per plane, then the up planes' together, last: rebuilt when the rotation or a
            # port changes)
            lists = [self.control_evs(p) for p in range(self.planes)]
            lists.append([e for p in range(self.planes) if self.plane_up(p) for e in lists[p]])
            self._control_cache = lists
        if plane is not None and 0 <= plane < self.planes and self.plane_up(plane):
            lst = lists[plane]
            if lst:
                # (a cursor per plane: one shared, with answers alternating between two planes,
                # served every other control EV of each and never the rest)
                k = self._ctl_cursors[plane] + 1
                self._ctl_cursors[plane] = k
                return lst[k % len(lst)].value
        usable = lists[self.planes]
        if usable:
            self._ctl_cursor += 1
            return usable[self._ctl_cursor % len(usable)].value
        return self.last_resort_ev()

    # ---- state changes ----------------------------------------------------------------
    def retire(
        self,
        ev: int,
        reason: str,
        now_ns: int = 0,
        event: EvEvent = EvEvent.LOSS,
        sent_ns: int | None = None,
        margin_ns: int | None = None,
        left_ns: int = -1,
    ) -> bool:
        """GOOD/SKIP -> ASSUMED_BAD at once, replaced from the plane's backups.

        ``sent_ns``: when the lost packet left (for a loss); ``margin_ns``: the margin
        ``path_dead`` judges it with (default ``path_margin_ns``). Refused (False, counted in
        ``floor_holds``) when it would leave fewer than ``ev_min_active`` usable EVs --
        unless the whole plane failed or the path is dead (``path_dead``): the floor is
        for diffuse loss, and never holds traffic on a path that delivers nothing."""
        e = self.entry(ev)
        if e is None or not allowed(e.state, event) or e.state is EvState.ASSUMED_BAD:
            return False
        dead = event is EvEvent.PLANE_FAILED or self.path_dead(e, event, sent_ns, margin_ns)
        if not dead and e.active and not self._may_shrink(e.plane, None):
            self.floor_holds += 1
            return False
        # the undo key names the guess: the EV and send time of the copy guessed lost
        key = (e.value, now_ns if sent_ns is None else sent_ns)
        self._retire_one(e, reason, now_ns, event)
        e.retired_for = key if event in (EvEvent.LOSS, EvEvent.LIVENESS_LOST) else None
        if event in _PATH_EVENTS:
            # the EVs that differ only in entropy take the very same source-routed path; the
            # floor does not split it while nothing sent on it at or after the lost packet has
            # been delivered (kept, half a dead path's EVs lost a third more packets than the
            # limit with 6 of 8 paths dead at a 2 MiB transfer's tail)
            why = f"same path as {e.value:08x}: {reason}"
            quiet = sent_ns is not None and self.path_proof((e.plane, e.t1))[0] < sent_ns
            for sib in [*self.active[e.plane], *self.backup[e.plane]]:
                if sib.t1 == e.t1 and sib is not e and allowed(sib.state, event):
                    if not dead and not quiet and sib.active and not self._may_shrink(e.plane, e.t1):
                        self.floor_holds += 1
                        break
                    self._retire_one(sib, why, now_ns, event)
                    sib.retired_for = e.retired_for
            if dead and self.nic is not None:
                # proved dead, not diffuse loss: the NIC's other connections may use it
                since = e.live_probe_ns if event is EvEvent.LIVENESS_LOST else key[1]
                since = max(since, left_ns)  # (when the lost packet left its port, if known)
                if self.nic.dead(self.nic_group, e.value >> T1_SHIFT, since):
                    self.nic_changed = True
        return True

    def path_dead(
        self,
        e: EvEntry,
        event: EvEvent,
        sent_ns: int | None,
        margin_ns: int | None = None,
        carried: bool = False,
    ) -> bool:
        """Per-path evidence that ``e``'s path (plane, T1) delivers nothing, as opposed to
        diffuse loss: a liveness probe on it went unanswered, or no EV of it has delivered
        anything sent at or after the lost packet (``sent_ns``) while another path delivered
        one sent ``margin_ns`` later. Under diffuse loss the path's later packets get
        through, so the lost packet's path siblings prove it alive and the ``ev_min_active``
        floor holds. ``carried``: and the path went on carrying packets after the lost one
        (one sitting out a penalty since proves nothing either way)."""
        if event is EvEvent.LIVENESS_LOST:
            return True
        if event is not EvEvent.LOSS or sent_ns is None:
            return False
        path = (e.plane, e.t1)
        here = -1
        last_sent = -1
        elsewhere = -1
        for x in self.entries.values():
            if (x.plane, x.t1) == path:
                here = max(here, x.ok_sent_ns)
                last_sent = max(last_sent, x.sent_ns)
            else:
                elsewhere = max(elsewhere, x.ok_sent_ns)
        margin = self.path_margin_ns() if margin_ns is None else margin_ns
        return here < sent_ns < (last_sent if carried else sent_ns + 1) and sent_ns + margin <= elsewhere

    def path_proof(self, path: tuple[int, int]) -> tuple[int, int]:
        """(latest send time known delivered on ``path``, the same on every other path)."""
        here = -1
        elsewhere = -1
        for x in self.entries.values():
            if (x.plane, x.t1) == path:
                here = max(here, x.ok_sent_ns)
            else:
                elsewhere = max(elsewhere, x.ok_sent_ns)
        return here, elsewhere

    def path_margin_ns(self) -> int:
        """How much later than a lost packet other paths' delivered packets must have left
        for its path to count as dead: a reorder window and the delay spread (on a jittery
        fabric a path's next packets may merely be late)."""
        return max(self.cfg.reorder_window_ns, int(2 * max(self.tx_delay_spread, self.rx_delay_spread)))

    def echo_margin_ns(self) -> int:
        """The same margin for a SACK judged by the echoes of later ones (``ack_echo``): 1.5
        times the delay spread, not 2. A SACK's echo comes back on DATA, whose own delay is
        in the spread already; at 2 a fault early in a transfer (slow start's queue swing
        still in the spread) was found only after 3 RTT. At 1.5 no healthy reverse EV is
        retired on a lossless fabric with 1-6 us of jitter per hop (30 seeds each); at 1
        some are."""
        return max(self.cfg.reorder_window_ns, int(1.5 * max(self.tx_delay_spread, self.rx_delay_spread)))

    def fail_plane(self, plane: int, now_ns: int) -> int:
        """Every EV of ``plane`` is retired at once (the plane stopped delivering); they are
        probed back one by one. Not bound by ``ev_min_active``. Returns how many went.

        The EVs of one path (plane and T1) share an undo key, which names the path (negative:
        never an EV's value): a packet that was in flight on the path and arrives after all
        shows it had stalled -- a software switch descheduled for longer than the guard -- and
        ``undo_loss`` brings that path's EVs back at once, before any probe; a stalled plane's
        paths come back as their packets arrive. Per path, not per plane: when one T1 of the
        plane is dead and another's late packets arrive, the dead one's EVs stay retired."""
        victims = [
            e for e in (*self.active[plane], *self.backup[plane]) if allowed(e.state, EvEvent.PLANE_FAILED)
        ]
        for e in victims:
            self._retire_one(e, "plane failed", now_ns, EvEvent.PLANE_FAILED)
            e.retired_for = (-1 - (e.plane * MAX_INDEX + e.t1), now_ns)
        return len(victims)

    def undo_loss(self, ev: int, now_ns: int, sent_ns: int | None = None) -> int:
        """The packet whose loss retired ``ev`` was delivered after all (reordering, as a
        jittery fabric causes): ``ev`` and the path siblings (or the plane) retired with it
        come back at once, before any probe. Returns how many came back. ``sent_ns``: the send
        time of the copy delivered; only the retirement that very guess caused is undone (a
        late undo of an earlier guess brought back a path retired since for its later losses)."""
        e = self.entry(ev)
        if e is None or e.state is not EvState.ASSUMED_BAD or e.retired_for is None:
            return 0  # not retired for a loss or a plane (probes, ACK paths): not ours to undo
        if sent_ns is not None and e.retired_for[0] >= 0 and e.retired_for != (ev, sent_ns):
            return 0  # (a plane's failure, keyed by the plane, is undone by any of its packets)
        key = e.retired_for
        shared = key[0] <= NIC_KEY_BASE
        if shared and sent_ns is not None and sent_ns < key[1]:
            return 0  # sent before the loss the NIC's verdict stands on: proves nothing
        back = [x for x in self.retired.values() if x.retired_for == key]
        why = f"loss of a packet or probe on {ev:08x} was reordering"
        for x in back:
            x.retired_for = None
            x.probe_id = None
            x.flaps = max(0, x.flaps - 1)
            self._fire(x, EvEvent.LOSS_UNDONE, why)
            x.last_ok_ns = now_ns
            self._place_good(x)
        if back and (shared or key[0] >= 0):
            # the path delivered what was taken for lost: a verdict the NIC made of it goes too
            self.nic_alive(ev, key[1] if sent_ns is None else max(sent_ns, key[1]))
        return len(back)

    def ack_lost(self, ev: int, now_ns: int) -> bool:
        """A SACK we sent on ``ev`` never reached the peer (it resent data we had acked).
        One such sign can be a SACK merely delayed past the peer's timer on a jittery
        path: the EV goes on the second, and alone (not its path siblings)."""
        e = self.entry(ev)
        if e is None:
            return False
        e.ack_lost_strikes += 1
        if e.ack_lost_strikes < 2:
            return False
        e.ack_lost_strikes = 0
        return self.retire(ev, "ack lost (duplicate retransmissions)", now_ns, EvEvent.ACK_LOST)

    def deny(self, ev: int) -> None:
        """Operator: never use ``ev``. Unknown EVs are remembered so they are never drawn."""
        e = self.entry(ev)
        if e is None:
            e = self._add(ev, active=False, member=False)  # EV.decode validates the value
        self._deactivate(e)
        e.probe_id = None
        e.live_probe_id = None
        self._fire(e, EvEvent.OPERATOR_DENY, "operator deny")

    def allow(self, ev: int) -> None:
        """Operator: lift a deny; the EV is GOOD again (active if its plane has room)."""
        e = self.entry(ev)
        if e is None:
            raise KeyError(f"EV {ev:#010x} is not in this connection's set")
        if e.state is not EvState.DENIED:
            return
        if not e.member:
            self._fire(e, EvEvent.FORGOTTEN, "operator allow")
            del self.entries[ev]
            return
        self._fire(e, EvEvent.OPERATOR_ALLOW, "operator allow")
        self._place_good(e)

    # ---- liveness of GOOD EVs -----------------------------------------------------------
    def note_sent(self, ev: int, now_ns: int) -> None:
        e = self.entry(ev)
        if e is not None:
            e.in_use = True
            e.sent_ns = now_ns
            if self.scouts.out:  # (a path waits for its scout: rarely, so no call per packet)
                self.scouts.sent(ev, now_ns)
            if self.next_liveness_ns is None:
                self.next_liveness_ns = now_ns + self.cfg.probe_interval_ns

    def note_ok(self, ev: int, now_ns: int, sent_ns: int | None = None, left_ns: int = -1) -> None:
        """Something sent on ``ev`` (at ``sent_ns``; it left its NIC port at ``left_ns``, if
        known) was acknowledged: the path works."""
        e = self.entry(ev)
        if e is not None:
            if sent_ns is not None and sent_ns > e.ok_sent_ns:
                e.ok_sent_ns = sent_ns
            if sent_ns is not None and self.scouts.out:
                self.scouts.delivered(ev, sent_ns)
            e.in_use = False
            e.live_probe_id = None
            e.last_ok_ns = now_ns
            e.ack_lost_strikes = 0
            if self._nic_paths and sent_ns is not None and ev >> T1_SHIFT in self._nic_paths:
                # a path the NIC holds dead delivered (when the packet left, which orders it
                # among the NIC's other connections' packets: a window is handed over at once)
                self.nic_alive(ev, left_ns if left_ns >= 0 else sent_ns)

    def probe_timed_out(self, e: EvEntry) -> None:
        """A probe of the retired ``e`` went unanswered (reported, state unchanged)."""
        self._fire(e, EvEvent.PROBE_TIMEOUT, "probe timeout")

    def restore_path(self, e: EvEntry, now_ns: int, answered: int = 0) -> None:
        """Enough probes of ``e``'s path came back: it and the retired EVs of its path are GOOD again."""
        path = (e.plane, e.t1)
        why = f"{answered or e.probe_successes} probes answered"
        sibling_why = f"{why} on {e.value:08x}, same path"
        for x in [e, *(x for x in self.retired.values() if (x.plane, x.t1) == path and x is not e)]:
            self._fire(x, EvEvent.PROBES_ANSWERED, why if x is e else sibling_why)
            x.restored_ns = now_ns
            x.last_ok_ns = now_ns
            x.ok_sent_ns = max(x.ok_sent_ns, now_ns)
            x.heat = 0.0
            x.probe_id = None
            x.retired_for = None
            self._place_good(x)
        self.nic_alive(e.value, now_ns)  # (its last probe left after any loss a verdict stands on)
