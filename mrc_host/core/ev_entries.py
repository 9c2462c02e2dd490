"""The EVs one endpoint drew and their entries: the rotation (active) and backup lists per
plane, built on first use.

``EvEntries`` owns the entries and the lists; ``EvTable`` (ev_table.py) keeps them consistent
with the EVs' states as they change, and ``EvSet`` (evset.py) decides the changes. A
receive-only endpoint never needs most entries: until something needs the whole table, only
the values drawn are kept (see ``EvEntries._defer``).
"""

from __future__ import annotations

import random
import sys
from array import array
from typing import Final

from mrc_fabric.ev import PLANE_SHIFT, T1_MASK, T1_SHIFT

from .config import TransportConfig
from .ev_draw import EvDraw, PathSpace, draw
from .ev_state import EvState

__all__ = ["EvEntries", "EvEntry", "EvSpells", "find_item", "holds", "made_in_order"]

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


class EvEntries:
    """The EVs drawn for one endpoint, their entries, and the rotation and backup lists."""

    def __init__(self, cfg: TransportConfig, paths: PathSpace, rng: random.Random) -> None:
        self.cfg = cfg
        self.paths = paths
        self.planes = paths.planes
        # (``entries``, ``active``, ``backup``: the table; until it is built (``_build``), the
        # EVs drawn, per plane, and in ``_entries`` only those some answer has used)
        self._entries: dict[int, EvEntry] = {}
        self._active: list[list[EvEntry]] = [[] for _ in range(self.planes)]
        self._backup: list[list[EvEntry]] = [[] for _ in range(self.planes)]
        self._drawn_active: list[array[int]] | None = None
        self._drawn_backup: list[array[int]] = []
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
