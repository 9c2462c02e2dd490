"""The EV set of one direction of a connection: which paths carry packets, and when.

An EV names a path: plane (NIC port) + T1 (T0 uplink) + entropy (only hashed in the
ECMP baseline). Each connection draws its EVs once (``draw``), split equally across
planes, distinct (plane, T1) paths while there are enough, plus a backup set per plane.

States: GOOD carries data; SKIP is passed over once by the data rotation (after an ECN
echo or a trim NACK) and then becomes GOOD again; ASSUMED_BAD is retired after an
unexplained loss and probed until K probes in a row succeed; DENIED is set by an operator
and never used. A retired or denied EV is replaced from the same plane's backups, so
planes stay equally loaded. The data rotation goes round the planes first and round
the EVs of each plane second, so a plane that lost paths still gets its share.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from mrc_fabric.ev import ENTROPY_MASK, EV

from .actions import EvStateChanged
from .config import Mode, TransportConfig


class EvState(enum.StrEnum):
    GOOD = "GOOD"
    SKIP = "SKIP"
    ASSUMED_BAD = "ASSUMED_BAD"
    DENIED = "DENIED"


@dataclass(slots=True)
class EvEntry:
    value: int
    plane: int
    t1: int
    state: EvState = EvState.GOOD
    active: bool = False  # in the data rotation (else a backup, retired or denied)
    member: bool = True  # drawn for this connection (False: only known because denied)
    probe_id: int | None = None  # outstanding probe
    next_probe_ns: int = 0
    probe_successes: int = 0
    in_use: bool = False  # something left on this EV since it last proved to work
    last_ok_ns: int = 0  # when it last proved to work (an ACKed packet, an answered probe)
    live_probe_id: int | None = None  # outstanding liveness probe (GOOD EVs)


@dataclass(frozen=True, slots=True)
class PathSpace:
    """What the fabric offers between two NIC sets: planes, and T1 choices per plane.

    ``t1_count`` is 1 when both hosts hang off the same T0 (one path per plane).
    """

    planes: int
    t1_count: int

    def __post_init__(self) -> None:
        if not 1 <= self.planes <= 16 or not 1 <= self.t1_count <= 1024:
            raise ValueError(f"path space planes={self.planes} t1_count={self.t1_count} out of range")


@dataclass(slots=True)
class EvDraw:
    active: list[list[int]] = field(default_factory=list)  # per plane
    backup: list[list[int]] = field(default_factory=list)


def draw(cfg: TransportConfig, paths: PathSpace, rng: random.Random) -> EvDraw:
    """Draw a connection's EVs (see module docstring); deterministic for a seeded ``rng``."""
    out = EvDraw([[] for _ in range(paths.planes)], [[] for _ in range(paths.planes)])
    if cfg.mode is Mode.SINGLE_PATH:
        plane = rng.randrange(paths.planes)
        out.active[plane].append(EV(plane, rng.randrange(paths.t1_count), rng.randint(0, ENTROPY_MASK)).value)
        return out
    per_plane = max(1, cfg.max_evs // paths.planes)
    for plane in range(paths.planes):
        t1s = list(range(paths.t1_count))
        rng.shuffle(t1s)
        n_active = min(per_plane, paths.t1_count)
        if cfg.mode is Mode.ECMP:
            # same number of EVs as MRC would use, but the T1 is left to the switches' hash
            out.active[plane] = [EV(plane, 0, rng.randint(0, ENTROPY_MASK)).value for _ in range(n_active)]
            continue
        out.active[plane] = [EV(plane, t1, rng.randint(0, ENTROPY_MASK)).value for t1 in t1s[:n_active]]
        spare = t1s[n_active : n_active + cfg.backup_evs_per_plane]
        out.backup[plane] = [EV(plane, t1, rng.randint(0, ENTROPY_MASK)).value for t1 in spare]
    return out


class EvSet:
    """EV states, the spraying rotation, retirement, replacement and probing."""

    def __init__(
        self, cfg: TransportConfig, paths: PathSpace, rng: random.Random, port_status: int | None = None
    ) -> None:
        self.cfg = cfg
        self.paths = paths
        self.planes = paths.planes
        all_ports = (1 << paths.planes) - 1
        self.local_ports = all_ports if port_status is None else port_status & all_ports
        self.peer_ports = all_ports
        self.entries: dict[int, EvEntry] = {}
        self.retired: dict[int, EvEntry] = {}  # the ASSUMED_BAD ones (probed)
        self.active: list[list[EvEntry]] = [[] for _ in range(self.planes)]
        self.backup: list[list[EvEntry]] = [[] for _ in range(self.planes)]
        self.changes: list[EvStateChanged] = []
        self._plane_cursor = 0
        self._ev_cursor = [0] * self.planes
        self._ctl_cursor = 0
        self._usable_cache: list[EvEntry] | None = None
        self._probe_seq = 0
        self.next_liveness_ns: int | None = None
        drawn = draw(cfg, paths, rng)
        for plane in range(self.planes):
            for value in drawn.active[plane]:
                e = self._add(value, active=True)
                self.active[plane].append(e)
            for value in drawn.backup[plane]:
                self.backup[plane].append(self._add(value, active=False))
        self.quota = [len(a) for a in self.active]

    # ---- inspection -------------------------------------------------------------------
    def state(self, ev: int) -> EvState | None:
        e = self.entries.get(ev)
        return e.state if e else None

    def active_evs(self) -> list[int]:
        return [e.value for plane in self.active for e in plane]

    def backup_evs(self) -> list[int]:
        return [e.value for plane in self.backup for e in plane]

    def plane_up(self, plane: int) -> bool:
        return bool((self.local_ports & self.peer_ports) >> plane & 1)

    def snapshot(self) -> dict[str, str]:
        return {f"{v:08x}": e.state.value + ("" if e.active else "/backup") for v, e in self.entries.items()}

    # ---- rotation ---------------------------------------------------------------------
    def next_data_ev(self, exclude: int | None = None) -> int | None:
        """The EV for the next DATA packet: planes round-robin, then EVs round-robin.

        ``exclude`` (the EV a retransmitted packet was lost on) is avoided unless it is the
        only usable one. With no GOOD EV anywhere, the least bad option is an ASSUMED_BAD
        EV of an up plane (counted by the caller as a last-resort send).
        """
        for _ in range(2):  # the first pass may only consume SKIPs
            for _ in range(self.planes):
                plane = self._plane_cursor
                self._plane_cursor = (plane + 1) % self.planes
                if not self.active[plane] or not self.plane_up(plane):
                    continue
                ev = self._pick_in_plane(plane, exclude)
                if ev is not None:
                    return ev
        if exclude is not None:
            return self.next_data_ev(None)
        return None

    def _pick_in_plane(self, plane: int, exclude: int | None) -> int | None:
        lst = self.active[plane]
        n = len(lst)
        start = self._ev_cursor[plane]
        for k in range(n):
            idx = (start + k) % n
            e = lst[idx]
            if e.value == exclude:
                continue
            if e.state is EvState.SKIP:
                self._set(e, EvState.GOOD, "skip consumed")
                continue
            self._ev_cursor[plane] = idx + 1
            return e.value
        return None

    def last_resort_ev(self, exclude: int | None = None) -> int | None:
        """An ASSUMED_BAD EV on an up plane, for when no GOOD EV exists at all."""
        bad = [e for e in self.retired.values() if self.plane_up(e.plane)]
        if not bad:
            return None
        choices = [e for e in bad if e.value != exclude] or bad
        self._ctl_cursor += 1
        return choices[self._ctl_cursor % len(choices)].value

    def next_control_ev(self) -> int | None:
        """EV for a SACK/NACK/PROBE_ACK: rotate over usable active EVs, never consuming SKIPs."""
        usable = self._usable_cache
        if usable is None:
            usable = [e for plane in self.active for e in plane if self.plane_up(e.plane)]
            self._usable_cache = usable
        if usable:
            self._ctl_cursor += 1
            return usable[self._ctl_cursor % len(usable)].value
        return self.last_resort_ev()

    # ---- state changes ----------------------------------------------------------------
    def _add(self, value: int, active: bool, member: bool = True) -> EvEntry:
        ev = EV.decode(value)
        e = EvEntry(value, ev.plane, ev.t1, active=active, member=member)
        self.entries[value] = e
        return e

    def _set(self, e: EvEntry, new: EvState, reason: str) -> None:
        if e.state is not new:
            self.changes.append(EvStateChanged(e.value, e.state.value, new.value, reason))
            e.state = new
            if new is EvState.ASSUMED_BAD:
                self.retired[e.value] = e
            else:
                self.retired.pop(e.value, None)

    def _deactivate(self, e: EvEntry) -> None:
        """Take ``e`` out of the rotation or the backups; promote a backup of its plane."""
        self._usable_cache = None
        if e.active:
            self.active[e.plane].remove(e)
            e.active = False
            for b in self.backup[e.plane]:
                if b.state is EvState.GOOD:
                    self.backup[e.plane].remove(b)
                    b.active = True
                    self.active[e.plane].append(b)
                    why = f"replaces {e.value:08x}"
                    self.changes.append(EvStateChanged(b.value, "GOOD/backup", "GOOD", why))
                    break
        elif e in self.backup[e.plane]:
            self.backup[e.plane].remove(e)

    def _place_good(self, e: EvEntry) -> None:
        self._usable_cache = None
        if len(self.active[e.plane]) < self.quota[e.plane]:
            e.active = True
            self.active[e.plane].append(e)
        else:
            self.backup[e.plane].append(e)

    def skip(self, ev: int, reason: str) -> bool:
        e = self.entries.get(ev)
        if e is None or e.state is not EvState.GOOD:
            return False
        self._set(e, EvState.SKIP, reason)
        return True

    def retire(self, ev: int, reason: str) -> bool:
        """GOOD/SKIP -> ASSUMED_BAD at once, replaced from the plane's backups."""
        e = self.entries.get(ev)
        if e is None or e.state in (EvState.ASSUMED_BAD, EvState.DENIED):
            return False
        self._deactivate(e)
        self._set(e, EvState.ASSUMED_BAD, reason)
        e.probe_id = None
        e.probe_successes = 0
        e.next_probe_ns = 0  # probe at the next timer
        return True

    def deny(self, ev: int) -> None:
        """Operator: never use ``ev``. Unknown EVs are remembered so they are never drawn."""
        e = self.entries.get(ev)
        if e is None:
            e = self._add(ev, active=False, member=False)  # EV.decode validates the value
        self._deactivate(e)
        e.probe_id = None
        self._set(e, EvState.DENIED, "operator deny")

    def allow(self, ev: int) -> None:
        """Operator: lift a deny; the EV is GOOD again (active if its plane has room)."""
        e = self.entries.get(ev)
        if e is None:
            raise KeyError(f"EV {ev:#010x} is not in this connection's set")
        if e.state is not EvState.DENIED:
            return
        if not e.member:
            del self.entries[ev]
            self.changes.append(EvStateChanged(ev, "DENIED", "UNKNOWN", "operator allow"))
            return
        self._set(e, EvState.GOOD, "operator allow")
        self._place_good(e)

    def set_local_ports(self, bitmap: int) -> None:
        self.local_ports = bitmap & ((1 << self.planes) - 1)
        self._usable_cache = None

    def set_peer_ports(self, bitmap: int) -> None:
        """The peer's NIC port-status bitmap from a SACK. 0 means 'not reported' (ignored)."""
        bitmap &= (1 << self.planes) - 1
        if bitmap and bitmap != self.peer_ports:
            self.peer_ports = bitmap
            self._usable_cache = None

    # ---- liveness of GOOD EVs -----------------------------------------------------------
    def note_sent(self, ev: int, now_ns: int) -> None:
        e = self.entries.get(ev)
        if e is not None:
            e.in_use = True
            if self.next_liveness_ns is None:
                self.next_liveness_ns = now_ns + self.cfg.probe_interval_ns

    def note_ok(self, ev: int, now_ns: int) -> None:
        """Something sent on ``ev`` was acknowledged: the path works."""
        e = self.entries.get(ev)
        if e is not None:
            e.in_use = False
            e.live_probe_id = None
            e.last_ok_ns = now_ns

    def liveness_tick(self, now_ns: int) -> list[tuple[int, int]]:
        """Every probe interval: a GOOD EV used since it last proved to work, and not proved
        within the last interval, gets a probe; one whose probe from the previous tick is
        still unanswered is retired. This is how
        an endpoint that only sends SACKs (no data of its own, so no acks to learn from)
        finds a dead reverse path."""
        if self.next_liveness_ns is None or now_ns < self.next_liveness_ns:
            return []
        out = []
        pending = False
        for plane in self.active:
            for e in list(plane):
                if e.live_probe_id is not None:
                    e.live_probe_id = None
                    e.in_use = False
                    self.retire(e.value, "liveness probe lost")
                elif (
                    e.in_use
                    and now_ns - e.last_ok_ns >= self.cfg.probe_interval_ns
                    and self.plane_up(e.plane)
                ):
                    self._probe_seq = (self._probe_seq + 1) & 0xFFFFFFFF
                    e.live_probe_id = self._probe_seq
                    e.in_use = False
                    out.append((e.value, e.live_probe_id))
                    pending = True
                elif e.in_use:
                    pending = True  # used, recently fine: look again next tick
        self.next_liveness_ns = now_ns + self.cfg.probe_interval_ns if pending else None
        return out

    # ---- probing ----------------------------------------------------------------------
    def due_probes(self, now_ns: int) -> list[tuple[int, int]]:
        """(ev, probe_id) for every ASSUMED_BAD EV whose probe is due; a probe still
        unanswered at that point counts as a failure and resets the success streak."""
        out = []
        for e in list(self.retired.values()):
            if not self.plane_up(e.plane) or e.next_probe_ns > now_ns:
                continue
            if e.probe_id is not None:
                e.probe_successes = 0
                self.changes.append(EvStateChanged(e.value, "ASSUMED_BAD", "ASSUMED_BAD", "probe timeout"))
            self._probe_seq = (self._probe_seq + 1) & 0xFFFFFFFF
            e.probe_id = self._probe_seq
            e.next_probe_ns = now_ns + self.cfg.probe_interval_ns
            out.append((e.value, e.probe_id))
        return out

    def probe_acked(self, ev: int, probe_id: int, now_ns: int) -> bool:
        """A PROBE_ACK arrived; True when it was the K-th success in a row (EV back to GOOD)."""
        e = self.entries.get(ev)
        if e is not None and e.live_probe_id is not None and e.live_probe_id == probe_id:
            self.note_ok(ev, now_ns)
            return False
        if e is None or e.state is not EvState.ASSUMED_BAD or e.probe_id != probe_id:
            return False
        e.probe_id = None
        e.probe_successes += 1
        if e.probe_successes >= self.cfg.probe_successes_to_restore:
            self._set(e, EvState.GOOD, f"{e.probe_successes} probes answered")
            self._place_good(e)
            return True
        e.next_probe_ns = now_ns  # next probe right away: K successes take K RTTs
        return False

    def next_probe_deadline(self) -> int | None:
        times = [e.next_probe_ns for e in self.retired.values() if self.plane_up(e.plane)]
        if self.next_liveness_ns is not None:
            times.append(self.next_liveness_ns)
        return min(times) if times else None

    def take_changes(self) -> list[EvStateChanged]:
        out, self.changes = self.changes, []
        return out
