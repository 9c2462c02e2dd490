"""The EVs of one endpoint and their states, kept consistent with the rotation lists.

``EvTable`` owns the bookkeeping every EV policy relies on: each EV's entry, the active
(rotation) and backup lists per plane, the ASSUMED_BAD ones, the NIC port bitmaps and the
state-change records. An EV changes state only in ``_fire``, through the transition table
of ``ev_state.py``. The policies -- what to send on, what to penalise, when to retire and
restore -- are ``EvSet``'s (``evset.py``), built on this table.
"""

from __future__ import annotations

import random
import sys
from array import array
from typing import Final

from mrc_fabric.ev import PLANE_SHIFT, T1_MASK, T1_SHIFT

from .actions import EvStateChanged
from .config import TransportConfig
from .ev_draw import EvDraw, PathSpace, draw
from .ev_state import EvEvent, EvState, next_state
from .path_health import NicPathHealth, PathRecord
from .plane_rates import PlaneRates

__all__ = ["EvEntry", "EvSpells", "EvTable"]

# (compiled, a Final module constant is a native read; ``EvState.GOOD`` is a dict look-up and
# a generic attribute read, most of the ~770 instructions of making an entry)
_GOOD: Final = EvState.GOOD


class EvSpells:
    """The fields of an EV that stay at their defaults until it is probed, skipped or retired
    (most EVs of a run never are): one per ``EvEntry`` that needs one, made on the first write
    of another value. Kept apart, they cost an EV that never leaves the rotation one pointer
    instead of twelve fields (the 128-host permutation holds 33,792 EVs: 2.7 MB)."""

    def __init__(self) -> None:
        self.probe_id: int | None = None  # outstanding probe
        self.next_probe_ns: int = 0  # when a retired EV is next probed
        self.probe_successes: int = 0  # answered probes in a row while retired
        self.live_probe_id: int | None = None  # outstanding liveness probe (GOOD EVs)
        self.live_probe_ns: int = 0  # when it left
        self.skips_left: int = 0  # rotations still to sit out while SKIP
        self.skip_until: int = 0  # and when it ends in any case (0: turns only; ``EvSet._penalize``)
        self.restored_ns: int | None = None  # when probes last brought it back
        self.flaps: int = 0  # quick re-failures after restores in a row
        self.retired_for: tuple[int, int] | None = None  # (EV whose loss retired it, when): undo key
        self.ack_lost_strikes: int = 0  # SACKs sent on it that the peer apparently never got
        self.late_probe_id: int | None = None  # the liveness probe whose time-out retired it
        self.placed: int = 0  # when it last (re)joined the rotation, as a count of joins


class EvEntry:
    """One EV of the set and all that is known about it (a plain class: an entry is one EV,
    equal only to itself -- value equality made every ``list.remove`` of the rotation compare
    the entries before it -- and a 64-host all-to-all makes two million of them). The fields
    most EVs never change live in an ``EvSpells`` made when one does (the properties below)."""

    def __init__(self, value: int, plane: int, t1: int, active: bool = False, member: bool = True) -> None:
        self.value = value
        self.plane = plane
        self.t1 = t1
        self.state = _GOOD
        self.active = active  # in the data rotation (else a backup, retired or denied)
        self.member = member  # drawn for this connection (False: only known because denied)
        self.in_use = False  # something left on this EV since it last proved to work
        self.last_ok_ns = 0  # when it last proved to work (an ACKed packet, an answered probe)
        self.ok_sent_ns = -1  # send time of the latest packet or probe on it known delivered
        self.sent_ns = -1  # when something last left on it
        self.heat = 0.0  # ECN/trim penalty level, decaying (see module docstring)
        self.heat_ns = 0
        self._spells: EvSpells | None = None

    def _spelled(self) -> EvSpells:
        s = self._spells
        if s is None:
            s = self._spells = EvSpells()
        return s

    @property
    def placed(self) -> int:
        s = self._spells
        return 0 if s is None else s.placed

    @placed.setter
    def placed(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().placed = v

    @property
    def probe_id(self) -> int | None:
        s = self._spells
        return None if s is None else s.probe_id

    @probe_id.setter
    def probe_id(self, v: int | None) -> None:
        if v is not None or self._spells is not None:
            self._spelled().probe_id = v

    @property
    def next_probe_ns(self) -> int:
        s = self._spells
        return 0 if s is None else s.next_probe_ns

    @next_probe_ns.setter
    def next_probe_ns(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().next_probe_ns = v

    @property
    def probe_successes(self) -> int:
        s = self._spells
        return 0 if s is None else s.probe_successes

    @probe_successes.setter
    def probe_successes(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().probe_successes = v

    @property
    def live_probe_id(self) -> int | None:
        s = self._spells
        return None if s is None else s.live_probe_id

    @live_probe_id.setter
    def live_probe_id(self, v: int | None) -> None:
        if v is not None or self._spells is not None:
            self._spelled().live_probe_id = v

    @property
    def live_probe_ns(self) -> int:
        s = self._spells
        return 0 if s is None else s.live_probe_ns

    @live_probe_ns.setter
    def live_probe_ns(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().live_probe_ns = v

    @property
    def skips_left(self) -> int:
        s = self._spells
        return 0 if s is None else s.skips_left

    @skips_left.setter
    def skips_left(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().skips_left = v

    @property
    def skip_until(self) -> int:
        s = self._spells
        return 0 if s is None else s.skip_until

    @skip_until.setter
    def skip_until(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().skip_until = v

    @property
    def restored_ns(self) -> int | None:
        s = self._spells
        return None if s is None else s.restored_ns

    @restored_ns.setter
    def restored_ns(self, v: int | None) -> None:
        if v is not None or self._spells is not None:
            self._spelled().restored_ns = v

    @property
    def flaps(self) -> int:
        s = self._spells
        return 0 if s is None else s.flaps

    @flaps.setter
    def flaps(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().flaps = v

    @property
    def retired_for(self) -> tuple[int, int] | None:
        s = self._spells
        return None if s is None else s.retired_for

    @retired_for.setter
    def retired_for(self, v: tuple[int, int] | None) -> None:
        if v is not None or self._spells is not None:
            self._spelled().retired_for = v

    @property
    def ack_lost_strikes(self) -> int:
        s = self._spells
        return 0 if s is None else s.ack_lost_strikes

    @ack_lost_strikes.setter
    def ack_lost_strikes(self, v: int) -> None:
        if v != 0 or self._spells is not None:
            self._spelled().ack_lost_strikes = v

    @property
    def late_probe_id(self) -> int | None:
        s = self._spells
        return None if s is None else s.late_probe_id

    @late_probe_id.setter
    def late_probe_id(self, v: int | None) -> None:
        if v is not None or self._spells is not None:
            self._spelled().late_probe_id = v


def find_item(data: bytes, size: int, v: int) -> int:
    """The index of ``v`` among the items of ``size`` bytes in ``data`` (an array's bytes),
    or -1; ``v`` must fit an item. A hit off the item boundaries is skipped."""
    key = v.to_bytes(size, sys.byteorder)
    at = data.find(key)
    while at > 0 and at % size:
        at = data.find(key, at + 1)
    return at // size if at >= 0 else -1


def holds(values: array[int], v: int) -> bool:
    """``v in values`` for a ``v`` the array's type can hold, by a search of its bytes: ``in``
    makes an int of each item it compares (~100 instructions), and a probe answer's EV that
    the table has not made (most: the sender's EV, not drawn here) missed ~250 values, ~19 k
    instructions, ~5 % of an 8->1 incast's simulation."""
    return find_item(values.tobytes(), values.itemsize, v) >= 0


def made_in_order(made: dict[int, EvEntry], values: array[int]) -> list[EvEntry]:
    """``made[v]`` for each ``v`` of ``values`` (distinct) that ``made`` holds, in the order
    of ``values``. With few made, each is found among the values' bytes: looking every value
    up made an int of each, ~26 k instructions a liveness tick over 128 EVs drawn."""
    if 4 * len(made) >= len(values):
        return [e for e in map(made.get, values) if e is not None]
    data = values.tobytes()
    size = values.itemsize
    found: list[tuple[int, EvEntry]] = []
    for v, e in made.items():
        if 0 <= v < 1 << 8 * size:
            at = find_item(data, size, v)
            if at >= 0:
                found.append((at, e))
    found.sort(key=_index)
    return [e for _, e in found]


def _index(found: tuple[int, EvEntry]) -> int:
    return found[0]


class EvTable:
    """Entries, rotation and backup lists, port bitmaps and state changes of one EV set."""

    def __init__(
        self, cfg: TransportConfig, paths: PathSpace, rng: random.Random, port_status: int | None = None
    ) -> None:
        self.cfg = cfg
        self.paths = paths
        self.planes = paths.planes
        all_ports = (1 << paths.planes) - 1
        self.local_ports = all_ports if port_status is None else port_status & all_ports
        self.peer_ports = all_ports
        # (``entries``, ``active``, ``backup``: the table; until it is built (``_build``), the
        # EVs drawn, per plane, and in ``_entries`` only those some answer has used)
        self._entries: dict[int, EvEntry] = {}
        self.retired: dict[int, EvEntry] = {}  # the ASSUMED_BAD ones (probed)
        self._active: list[list[EvEntry]] = [[] for _ in range(self.planes)]
        self._backup: list[list[EvEntry]] = [[] for _ in range(self.planes)]
        self._drawn_active: list[array[int]] | None = None
        self._drawn_backup: list[array[int]] = []
        self.changes: list[EvStateChanged] = []
        # bytes in flight per plane, kept by the sender: the plane choice of the rotation
        self.plane_load: list[int] = [0] * self.planes
        # and what each delivers, kept by the sender's recovery (``plane_rates.py``)
        self.plane_rates = PlaneRates(self.planes)
        self._plane_cursor = 0
        self._ev_cursor = [0] * self.planes
        self._joins = 0  # EVs (re)joined a rotation so far: ``EvEntry.placed``
        self._ctl_cursor = 0
        self._ctl_cursors = [0] * self.planes  # per plane (``next_control_ev``)
        self._skips_served = 0  # SKIP turns served by the data rotation (next_data_ev stops when none)
        self._control_cache: list[list[EvEntry]] | None = None  # (``next_control_ev``)
        self._path_control: dict[int, int] | None = None  # path -> EV (``control_ev_on_path``)
        # paths (plane and T1, ``ev >> T1_SHIFT``) back from SKIP and not proven since: the
        # send time of the one packet they may carry until it is delivered (-1: none sent
        # yet). A penalty stops a path carrying packets, so nothing shows it dying meanwhile:
        # a T0-T1 link that went down just after its ECN mark came back from its 6-RTT
        # penalty at a full share and lost 60 packets in a round trip. Proven, it carries
        # its share again; lost, the loss rules retire it.
        self.scouts: dict[int, int] = {}
        self._scouting = cfg.retires_paths  # (MRC: an ECMP EV names no one path)
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
        drawn = draw(cfg, paths, rng)
        self.quota = [len(a) for a in drawn.active]
        if not self._defer(drawn):
            for plane in range(self.planes):
                for value in drawn.active[plane]:
                    e = self._add(value, active=True)
                    self._active[plane].append(e)
                for value in drawn.backup[plane]:
                    self._backup[plane].append(self._add(value, active=False))
        total = sum(self.quota)
        self.min_active = min(cfg.ev_min_active or max(1, total * 3 // 4), total)
        rules = cfg.ev_profile.deny
        if rules:  # the profile's deny rules: DENIED from the start, backups step in
            for e in [e for e in self.entries.values() if any(r.matches(e.value) for r in rules)]:
                self._deactivate(e)
                self._fire(e, EvEvent.OPERATOR_DENY, "profile deny")

    # ---- the table, built on first use ---------------------------------------------------
    # A receive-only endpoint (a permutation's receivers, an incast's) sends nothing but
    # control, on a few EVs per plane; its other ~130 entries are never read, yet they were
    # built for every such endpoint (4.3 MB of the 128-host permutation's 44 MB). Until
    # something needs the whole table -- the first DATA, any state change, any walk over the
    # entries or the rotation, both of which go through the properties below -- only the
    # values drawn are kept, and an entry is made when an answer uses its EV (``entry``,
    # ``control_evs``, ``control_ev_on_path``). Either way every answer is the same: an entry
    # not yet made is one nothing has changed since it was drawn, and ``_build`` puts the
    # entries made so far where the whole table would have them.
    def _defer(self, drawn: EvDraw) -> bool:
        """Keep ``drawn`` as values instead of entries (False: build the table now: values
        that are not 32-bit EVs fail at once, a list naming one EV twice stays as it was)."""
        # (one walk, no list of them all: compiled, the unpacked tuples cost ~80 k a table; and
        # no set of them when the draw kept one already: ~40 k)
        distinct: set[int] = set()
        count = 0
        for plane in range(self.planes):
            for values in (drawn.active[plane], drawn.backup[plane]):
                for v in values:
                    if v >> 32 or v < 0:
                        raise ValueError(f"EV {v:#x} is not 32 bits")
                    if not drawn.distinct:
                        distinct.add(v)
                count += len(values)
        if not drawn.distinct and len(distinct) != count:
            return False
        self._drawn_active = [array("I", a) for a in drawn.active]
        self._drawn_backup = [array("I", b) for b in drawn.backup]
        return True

    @property
    def entries(self) -> dict[int, EvEntry]:
        """Every EV of the set by value (in the order drawn), whatever its state."""
        if self._drawn_active is not None:
            self._build()
        return self._entries

    @property
    def active(self) -> list[list[EvEntry]]:
        """Per plane, the data rotation."""
        if self._drawn_active is not None:
            self._build()
        return self._active

    @property
    def backup(self) -> list[list[EvEntry]]:
        """Per plane, the backups, next to step in first."""
        if self._drawn_active is not None:
            self._build()
        return self._backup

    def _build(self) -> None:
        """The whole table from the values drawn, keeping the entries made so far."""
        drawn_active = self._drawn_active
        if drawn_active is None:
            return
        self._drawn_active = None
        made = self._entries
        self._entries = {}
        for plane in range(self.planes):
            for value in drawn_active[plane]:
                self._active[plane].append(self._adopt(made.get(value), value, True))
            for value in self._drawn_backup[plane]:
                self._backup[plane].append(self._adopt(made.get(value), value, False))
        self._drawn_backup = []
        for value, e in made.items():  # EVs not drawn (denied by the operator), after the drawn
            if value not in self._entries:
                self._entries[value] = e

    def _adopt(self, e: EvEntry | None, value: int, active: bool) -> EvEntry:
        if e is None:
            return self._add(value, active)
        self._entries[value] = e
        return e

    def entry(self, ev: int) -> EvEntry | None:
        """``entries.get(ev)``, without building the table for it."""
        e = self._entries.get(ev)
        if e is None and self._drawn_active is not None:
            return self._drawn_entry(ev)
        return e

    def _drawn_entry(self, ev: int) -> EvEntry | None:
        """The entry of ``ev`` made now, if it was drawn (the table not built yet)."""
        drawn_active = self._drawn_active
        plane = ev >> PLANE_SHIFT
        if drawn_active is None or not 0 <= plane < self.planes or ev >> 32:
            return None
        if holds(drawn_active[plane], ev):
            return self._add(ev, active=True)
        if holds(self._drawn_backup[plane], ev):
            return self._add(ev, active=False)
        return None

    def rotation_used(self, plane: int) -> list[EvEntry]:
        """A copy of ``plane``'s rotation for a walk over the EVs something was sent on (the
        liveness tick's): before the table is built, the entries made so far, in rotation
        order (no other has been used)."""
        drawn = self._drawn_active
        if drawn is None:
            return list(self._active[plane])
        return made_in_order(self._entries, drawn[plane])

    def state(self, ev: int) -> EvState | None:
        e = self.entry(ev)
        return e.state if e else None

    def active_evs(self) -> list[int]:
        return [e.value for plane in self.active for e in plane]

    def backup_evs(self) -> list[int]:
        return [e.value for plane in self.backup for e in plane]

    def plane_up(self, plane: int) -> bool:
        return bool((self.local_ports & self.peer_ports) >> plane & 1)

    def usable_count(self) -> int:
        """EVs in the rotation that may carry data (GOOD or serving a SKIP)."""
        return sum(len(a) for a in self.active)

    def evs_per_path(self) -> dict[tuple[int, int], int]:
        """How many active EVs each (plane, T1) path has."""
        out: dict[tuple[int, int], int] = {}
        for plane in self.active:
            for e in plane:
                out[(e.plane, e.t1)] = out.get((e.plane, e.t1), 0) + 1
        return out

    def snapshot(self) -> dict[str, str]:
        return {f"{v:08x}": e.state.value + ("" if e.active else "/backup") for v, e in self.entries.items()}

    def _add(self, value: int, active: bool, member: bool = True) -> EvEntry:
        if value >> 32 or value < 0:
            raise ValueError(f"EV {value:#x} is not 32 bits")
        # the plane and T1 bits (mrc_fabric.ev's ev_plane, ev_t1) without two interpreted calls
        e = EvEntry(value, value >> PLANE_SHIFT, (value >> T1_SHIFT) & T1_MASK, active=active, member=member)
        self._entries[value] = e
        return e

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

    def control_evs(self, plane: int) -> list[EvEntry]:
        """The active EVs of ``plane`` that carry control (``control_evs_per_plane``): on as
        many paths (T1s) as there are, the first EV of each path in rotation order, then
        more in turn. A few EVs carry control because each one used must be kept proven
        alive (liveness probes, which cost bandwidth on a big set). Taken from the front of
        the rotation alone, they could all sit on one or two T1s: with three of four T1s of
        each plane dead, some seeds lost every SACK to dead paths, and the sender could
        learn nothing but by timeout while live paths stood by."""
        n = self.cfg.control_evs_per_plane
        drawn = self._drawn_active
        if drawn is not None:  # (the table not built: the same pick from the values drawn)
            return [e for e in map(self.entry, _control_values(drawn[plane], n)) if e is not None]
        picked: list[EvEntry] = []
        rest = list(self._active[plane])
        while rest and len(picked) < n:
            seen: set[int] = set()
            later: list[EvEntry] = []
            for e in rest:
                if e.t1 in seen or len(picked) >= n:
                    later.append(e)
                else:
                    seen.add(e.t1)
                    picked.append(e)
            rest = later
        return picked

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
        scouts = self.scouts
        if event is EvEvent.PENALTY_SERVED and self._scouting:
            if e.value >> T1_SHIFT not in scouts:
                scouts[e.value >> T1_SHIFT] = -1  # back from SKIP: proven first (``scouts``)
        elif scouts and new is not _GOOD:
            scouts.pop(e.value >> T1_SHIFT, None)

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
        # probe at the next timer; a flapping EV waits 2**flaps probe intervals first
        self.schedule_probe(e, now_ns + (self.cfg.probe_interval_ns << e.flaps if e.flaps else 0))

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


def _control_values(rotation: array[int], n: int) -> list[int]:
    """``EvTable.control_evs``'s pick over a rotation's values: the first of each T1 in
    order, then more in turn, ``n`` in all."""
    picked: list[int] = []
    rest = list(rotation)
    while rest and len(picked) < n:
        seen: set[int] = set()
        later: list[int] = []
        for v in rest:
            t1 = (v >> T1_SHIFT) & T1_MASK
            if t1 in seen or len(picked) >= n:
                later.append(v)
            else:
                seen.add(t1)
                picked.append(v)
        rest = later
    return picked


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
