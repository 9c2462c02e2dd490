"""The EVs of one endpoint and their states, kept consistent with the rotation lists.

``EvTable`` owns the bookkeeping every EV policy relies on, on top of the entries and lists
``EvEntries`` (ev_entries.py) keeps: the ASSUMED_BAD ones, the NIC port bitmaps, the
rotation cursors, the paths of the peer's latest SACKs and the state-change records. An EV
changes state only in ``_fire``, through the transition table of ``ev_state.py``. The
policies -- what to send on, what to penalise, when to retire and restore -- are ``EvSet``'s
(``evset.py``) and ``EvHeat``'s (``ev_heat.py``), built on this table.
"""

from __future__ import annotations

import random
from typing import Final

from mrc_fabric.ev import PLANE_SHIFT, T1_SHIFT

from .actions import EvStateChanged
from .config import TransportConfig
from .ev_draw import PathSpace
from .ev_entries import EvEntries, EvEntry
from .ev_scouts import PathScouts
from .ev_state import EvEvent, EvState, next_state
from .path_health import NicPathHealth, PathRecord

__all__ = ["EvEntry", "EvTable"]

_GOOD: Final = EvState.GOOD
# a flapping EV that stayed up this many base RTTs waits at most half that for its probe
FLAP_USEFUL_RTTS: Final = 4


class EvTable(EvEntries):
    """Retired EVs, port bitmaps, rotation cursors and state changes of one EV set."""

    def __init__(
        self, cfg: TransportConfig, paths: PathSpace, rng: random.Random, port_status: int | None = None
    ) -> None:
        super().__init__(cfg, paths, rng)
        all_ports = (1 << paths.planes) - 1
        self.local_ports = all_ports if port_status is None else port_status & all_ports
        self.peer_ports = all_ports
        self.retired: dict[int, EvEntry] = {}  # the ASSUMED_BAD ones (probed)
        self.changes: list[EvStateChanged] = []
        # bytes in flight per plane, kept by the sender's ``SentPackets``: the rotation's plane choice
        self.plane_load: list[int] = [0] * self.planes
        # each plane's NIC port rate over the fastest's, while one is slower (``weigh_planes``;
        # None: all alike): the rotation balances bytes in flight over it, so a plane carries
        # in proportion to what its port sends
        self.plane_weight: list[float] | None = None
        self._plane_cursor = 0
        self._ev_cursor = [0] * self.planes
        self._joins = 0  # EVs (re)joined a rotation so far: ``EvEntry.placed``
        self._ctl_cursor = 0
        self._ctl_cursors = [0] * self.planes  # per plane (``next_control_ev``)
        self._skips_served = 0  # SKIP turns served by the data rotation (next_data_ev stops when none)
        # the first GOOD EV a data pick passed because its path's scout is out (-1: none), and where
        self._scout_wait_ev = -1
        self._scout_wait_plane = 0
        self._scout_wait_idx = 0
        self._control_cache: list[list[EvEntry]] | None = None  # (``next_control_ev``)
        self._path_control: dict[int, int] | None = None  # path -> EV (``control_ev_on_path``)
        # paths back from SKIP, each proven by one packet before it carries a full share
        self.scouts = PathScouts(cfg.retires_paths, cfg.rto_min_ns)
        self.heard = [-1] * self.planes  # per plane, the peer's EV of its latest SACK (``fresh_ev``)
        self.heard_ns = [0] * self.planes  # and when it came
        self._heard_plane = -1  # the plane of the latest one
        self.next_liveness_ns: int | None = None  # when liveness probes are next due (ev_probe)
        # the earliest probe due of a retired EV on an up plane (``earliest_probe_ns``): asked
        # after every packet with dozens of EVs retired, kept until a state change, a probe
        # scheduled (``schedule_probe``) or a port change moves it
        self._earliest_probe: int | None = None
        self._earliest_probe_stale = False
        self.floor_holds = 0  # losses that retired nothing because of ev_min_active
        # round-trip delay variation measured lately (jitter), written per packet by the
        # sender (RTT samples: max - min, decaying) and the receiver (2 x the one-way spread
        # of arriving data): a probe may be that much slower than usual without being lost
        self.tx_delay_spread = 0.0
        self.rx_delay_spread = 0.0
        # the NIC's shared path verdicts (``path_health.py``; None: this set learns alone), this
        # connection's group there (its destination T0), the verdicts' version it last read,
        # and whether evidence reported here changed one (the NIC's others should read them)
        self.nic: NicPathHealth | None = None
        self.nic_group = 0
        self.nic_version = -1
        self.nic_changed = False
        self._nic_paths: dict[int, PathRecord] = {}  # the NIC's paths with a verdict (read per ACK)
        rules = cfg.ev_profile.deny
        if rules:  # the profile's deny rules: DENIED from the start, backups step in
            for e in [e for e in self.entries.values() if any(r.matches(e.value) for r in rules)]:
                self._deactivate(e)
                self._fire(e, EvEvent.OPERATOR_DENY, "profile deny")

    def plane_up(self, plane: int) -> bool:
        return bool((self.local_ports & self.peer_ports) >> plane & 1)

    def control_ev_on_path(self, ev: int) -> int | None:
        """An EV of ours in the rotation on the path (plane, T1) that ``ev`` -- the peer's, on
        which a packet just reached us -- names: the path an answer to that packet takes.
        That path has just proved it delivers, while our own control EVs may sit on dead T1s,
        found only by the echoes of data (which stops coming at a transfer's tail) or by a
        liveness probe 10 RTT later: with three of four T1s dead in both planes, a 2 MiB
        transfer's last packets were resent five times at doubled timeouts (17 x the
        fault-free time). None: we have none there (or its plane is down)."""
        paths = self._path_control
        if paths is None:
            paths = {}
            drawn = self._drawn_active
            if drawn is not None:  # (the table not built: the same, from the values drawn)
                for values in drawn:
                    for v in values:
                        if v >> T1_SHIFT not in paths:
                            paths[v >> T1_SHIFT] = v
            else:
                for plane in self._active:
                    for e in plane:
                        if e.value >> T1_SHIFT not in paths:
                            paths[e.value >> T1_SHIFT] = e.value
            self._path_control = paths
        mine = paths.get(ev >> T1_SHIFT)
        if mine is None or not self.plane_up(mine >> PLANE_SHIFT):
            return None
        return mine

    def heard_on(self, ev: int, now_ns: int) -> None:
        """A SACK of the peer's reached us now on its EV ``ev``: its path delivers."""
        plane = ev >> PLANE_SHIFT
        if 0 <= plane < self.planes:
            self.heard[plane] = ev
            self.heard_ns[plane] = now_ns
            self._heard_plane = plane

    def fresh_ev(self, since_ns: int, plane: int = -1, avoid: int | None = None) -> int | None:
        """Our EV on the path (of ``plane``; -1: of any) that carried the peer's latest SACK, not
        on the path of ``avoid``: where a resend goes at a tail gone silent (the tail probe or a
        timeout fired since the last SACK of new data; the sender's choice). Nothing new is sent
        there, so nothing else shows which paths died: with three of four T1s of both planes
        dead at a 2 MiB transfer's tail, its tail probe and its resends at each timeout went
        out on dead paths from the rotation (3.8 x the fault-free time) while the path of the
        SACKs still arriving stood by. Only a SACK heard at ``since_ns`` or later (when the copy
        resent left) counts: an older one proves nothing the rotation does not know (a tail
        probe's second copy sent every time on a plane's last path heard before the fault was
        lost every time). None: none such (``since_ns`` < 0: not at a tail), or no EV of ours on
        its path. (Not for every resend at a tail: moved off the rotation, the gap
        losses of a short incast no longer fell on a dead plane's paths, which then stayed GOOD
        5.3 RTT after its first loss, limit 5: CI fuzz draw 8.)"""
        p = self._heard_plane if plane < 0 else plane
        if since_ns < 0 or p < 0 or p >= self.planes or self.heard[p] < 0 or self.heard_ns[p] < since_ns:
            return None
        ev = self.heard[p]
        if avoid is not None and ev >> T1_SHIFT == avoid >> T1_SHIFT:
            return None
        return self.control_ev_on_path(ev)

    def schedule_probe(self, e: EvEntry, at_ns: int) -> None:
        """``e`` (retired) is next probed at ``at_ns``."""
        e.next_probe_ns = at_ns
        self._earliest_probe_stale = True

    def probes_changed(self) -> None:
        """The retired EVs or the up planes changed: ``earliest_probe_ns`` is worked out anew."""
        self._earliest_probe_stale = True

    def earliest_probe_ns(self) -> int | None:
        """When the first probe of a retired EV on an up plane is due (None: none is)."""
        if self._earliest_probe_stale:
            up = self.local_ports & self.peer_ports  # (``plane_up``, inline)
            best: int | None = None
            for e in self.retired.values():
                if up >> e.plane & 1 and (best is None or e.next_probe_ns < best):
                    best = e.next_probe_ns
            self._earliest_probe = best
            self._earliest_probe_stale = False
        return self._earliest_probe

    def _fire(self, e: EvEntry, event: EvEvent, reason: str) -> None:
        """The only place an EV changes state: through the transition table."""
        self._earliest_probe_stale = True
        old = e.state
        new = next_state(old, event)
        if new is not old or event in (EvEvent.PROBE_TIMEOUT, EvEvent.PROMOTED):
            self.changes.append(EvStateChanged(e.value, old, new, reason, event))
        e.state = new
        if new is EvState.ASSUMED_BAD:
            self.retired[e.value] = e
        else:
            self.retired.pop(e.value, None)
        if event is EvEvent.PENALTY_SERVED:
            self.scouts.served(e.value)
        elif new is not _GOOD:
            self.scouts.release(e.value)

    def _deactivate(self, e: EvEntry) -> None:
        """Take ``e`` out of the rotation or the backups; promote a backup of its plane
        (one on another T1 if there is one: the same path is likely dead as well)."""
        self._control_cache = None
        self._path_control = None
        if e.active:
            self.active[e.plane].remove(e)
            e.active = False
            spares = [b for b in self.backup[e.plane] if b.state is _GOOD]
            if spares:
                b = next((b for b in spares if b.t1 != e.t1), spares[0])
                self.backup[e.plane].remove(b)
                b.active = True
                self._joins += 1
                b.placed = self._joins
                self.active[e.plane].append(b)
                self._fire(b, EvEvent.PROMOTED, f"replaces {e.value:08x}")
        elif e in self.backup[e.plane]:
            self.backup[e.plane].remove(e)

    def _place_good(self, e: EvEntry) -> None:
        """A GOOD-again EV rejoins the rotation, in the middle of the longest stretch without
        its T1 (``_spread_slot``): probes restore a path's EVs in a burst, and appended
        together they sent the next ~9 packets of the plane down that one T1 (8 ms on a paced
        live link); a flap inside such a run left the plane nothing but silence, and whole
        planes were declared dead. When its plane's quota is full (backups
        stepped in while it was out), the rotation gives back an EV of the T1 that has
        the most of them, so the restored path regains its share instead of waiting
        among the backups for a failure elsewhere."""
        self._control_cache = None
        self._path_control = None
        lst = self.active[e.plane]
        e.active = True
        self._joins += 1
        e.placed = self._joins
        at = _spread_slot(lst, e.t1)
        lst.insert(at, e)
        if at < self._ev_cursor[e.plane]:
            self._ev_cursor[e.plane] += 1  # (the EV the cursor stood on is still next)
        if len(lst) <= self.quota[e.plane]:
            return
        per_t1: dict[int, int] = {}
        for x in lst:
            per_t1[x.t1] = per_t1.get(x.t1, 0) + 1
        # the T1 with the most active EVs gives one back (another T1 than ``e``'s on a tie)
        crowded = max(per_t1, key=lambda t: (per_t1[t], t != e.t1, t))
        # the one that joined last (a promoted backup, a sibling restored just now) goes
        out = e
        best = -1
        for x in lst:
            if x.t1 == crowded and x is not e and x.placed >= best:
                best = x.placed
                out = x
        lst.remove(out)
        out.active = False
        self.backup[e.plane].append(out)
        self._ev_cursor[e.plane] = 0

    def _may_shrink(self, plane: int, avoid_t1: int | None) -> bool:
        """Whether one more active EV of ``plane`` may go: a backup (off ``avoid_t1``) steps
        in, or the usable count stays at or above ``ev_min_active``."""
        if self.usable_count() - 1 >= self.min_active:
            return True
        return any(b.state is _GOOD and b.t1 != avoid_t1 for b in self.backup[plane])

    def _retire_one(self, e: EvEntry, reason: str, now_ns: int, event: EvEvent) -> None:
        self._deactivate(e)
        self._fire(e, event, reason)
        e.probe_id = None
        e.live_probe_id = None  # a liveness probe sent before must not retire it again later
        e.in_use = False
        e.probe_successes = 0
        e.skips_left = 0
        e.skip_until = 0
        if e.restored_ns is not None and now_ns - e.restored_ns < self.cfg.flap_window_ns:
            e.flaps = min(e.flaps + 1, self.cfg.max_flap_backoff)
        else:
            e.flaps = 0
        self.schedule_probe(e, now_ns + self._flap_wait(e, now_ns))

    def _flap_wait(self, e: EvEntry, now_ns: int) -> int:
        """How long the just retired ``e`` waits for its first probe: not at all unless it is
        flapping (it failed within ``flap_window_ns`` of a restore), then 2**flaps probe
        intervals -- but no longer than half the time it last stayed up, once that was at
        least ``FLAP_USEFUL_RTTS`` base RTTs. Damping spares a link that fails as soon as it
        is back (a 20 us flap cycled one EV 16 times); one that stays up for many round trips
        carries its share while up and loses its floor when it goes down, as any link does.
        Waiting 2**flaps intervals alone left a T0-T1 link flapping every 200 us unused
        through most of its up phases: it carried 0.14 of its siblings' bytes where it was up
        half the time."""
        if not e.flaps:
            return 0
        wait: int = self.cfg.probe_interval_ns << e.flaps
        if e.restored_ns is not None:
            up = now_ns - e.restored_ns
            if up >= FLAP_USEFUL_RTTS * self.cfg.cc.base_rtt_ns and up // 2 < wait:
                wait = up // 2
        return wait

    def set_local_ports(self, bitmap: int) -> int:
        """This host's NIC port-status bitmap; returns the bitmap of planes that just went down."""
        before = self.local_ports & self.peer_ports
        self.local_ports = bitmap & ((1 << self.planes) - 1)
        self._control_cache = None
        self._path_control = None
        self._earliest_probe_stale = True
        return before & ~(self.local_ports & self.peer_ports)

    def set_peer_ports(self, bitmap: int) -> int:
        """The peer's NIC port-status bitmap (SACK, PROBE_ACK). 0 means 'not reported'
        (ignored). Returns the bitmap of planes that just went down."""
        bitmap &= (1 << self.planes) - 1
        if not bitmap or bitmap == self.peer_ports:
            return 0
        before = self.local_ports & self.peer_ports
        self.peer_ports = bitmap
        self._control_cache = None
        self._path_control = None
        self._earliest_probe_stale = True
        return before & ~(self.local_ports & self.peer_ports)

    def take_changes(self) -> list[EvStateChanged]:
        """The changes since the last call, to read at once: an empty list may be the one the
        next changes go to (asked after every packet, it makes no new list while nothing
        changes: ~30 ns a packet)."""
        out = self.changes
        if out:
            self.changes = []
        return out


def _spread_slot(lst: list[EvEntry], t1: int) -> int:
    """Where an EV of ``t1`` joins the rotation ``lst``: the middle of the longest circular
    stretch between two of ``t1``'s EVs already in it (the end when it has none), so a
    path's EVs stay spread through the rotation instead of being sent in a row."""
    n = len(lst)
    first = -1
    prev = -1
    best_gap = -1
    at = n
    for i in range(n):
        if lst[i].t1 != t1:
            continue
        if prev < 0:
            first = i
        else:
            gap = i - prev
            if gap > best_gap:
                best_gap = gap
                at = prev + (gap + 1) // 2
        prev = i
    if prev < 0:
        return n
    wrap = first + n - prev  # from the last of them round to the first
    if wrap > best_gap:
        at = prev + (wrap + 1) // 2
    return at if at <= n else at - n
