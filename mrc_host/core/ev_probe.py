"""Probes of an EV set: liveness probes of GOOD EVs in use, and probes that bring retired
(ASSUMED_BAD) EVs back.

A retired path is probed every ``retired_probe_interval_ns`` (a flapping one first waits
2**flaps ``probe_interval_ns``, capped by how long it last stayed up: see ``EvSet``);
``probe_successes_to_restore`` answers in a row bring it and its path siblings back, K probes
at once (each on its own EV of the path), so K answers take one round trip. A GOOD EV that
carried something and has not proved to work within an interval gets a liveness probe; one
left unanswered for the probe timeout retires it. That is how an endpoint that only sends
SACKs (no data of its own, so no acknowledgements to learn from) finds a dead reverse path
when nothing faster does.
"""

from __future__ import annotations

from .ev_state import EvEvent, EvState
from .evset import EvEntry, EvSet

PROBE_RTT_DECAY = 1 - 1 / 64  # per probe answer: the slowest probe round trip forgets slowly


class EvProber:
    """Decides which probes leave when, and what their answers (or silence) mean."""

    def __init__(self, evset: EvSet) -> None:
        self.evset = evset
        self.cfg = evset.cfg
        self._probe_seq = 0
        self.probe_rtt_max = 0.0  # slowest probe round trip lately (decaying)

    def _next_id(self) -> int:
        self._probe_seq = (self._probe_seq + 1) & 0xFFFFFFFF
        return self._probe_seq

    # ---- liveness of GOOD EVs -----------------------------------------------------------
    def liveness_tick(self, now_ns: int) -> list[tuple[int, int]]:
        """Every probe interval: a GOOD EV used since it last proved to work, and not proved
        within the last interval, gets a probe; one whose probe from the previous tick is
        still unanswered is retired."""
        evset = self.evset
        due = evset.next_liveness_ns
        if due is None or now_ns < due:
            return []
        out = []
        pending = False
        timeout = self.probe_timeout_ns()
        interval = self.cfg.probe_interval_ns
        for plane in range(evset.planes):
            for e in evset.rotation_used(plane):
                if e.live_probe_id is not None:
                    if now_ns - e.live_probe_ns < timeout:
                        pending = True  # a slow (jittery) round trip: give it its time
                        continue
                    e.late_probe_id = e.live_probe_id  # if its answer comes after all: undo
                    e.live_probe_id = None
                    e.in_use = False
                    evset.retire(e.value, "liveness probe lost", now_ns, EvEvent.LIVENESS_LOST)
                elif e.in_use and now_ns - e.last_ok_ns >= interval and evset.plane_up(e.plane):
                    e.live_probe_id = self._next_id()
                    e.live_probe_ns = now_ns
                    e.in_use = False
                    out.append((e.value, e.live_probe_id))
                    pending = True
                elif e.in_use:
                    pending = True  # used, recently fine: look again next tick
        evset.next_liveness_ns = now_ns + interval if pending else None
        return out

    # ---- probing retired EVs ------------------------------------------------------------
    def due_probes(self, now_ns: int) -> list[tuple[int, int]]:
        """(ev, probe_id) for every ASSUMED_BAD EV whose probe is due; a probe still
        unanswered at that point counts as a failure and resets the success streak."""
        evset = self.evset
        out = []
        # one probe per (plane, T1) path: EVs that differ only in entropy share its fate, and
        # come back with it (probing each would multiply probe traffic: on a plane at 10 Gb/s
        # the probes of 30 connections crowded out their data); once one is answered, the
        # rest of the K at once (``_answered``), each on its own EV of the path
        k = max(1, self.cfg.probe_successes_to_restore)
        probing: dict[tuple[int, int], int] = {}  # per path, the probes out (not due yet)
        streak: dict[tuple[int, int], int] = {}  # and its answers so far
        for e in evset.retired.values():
            path = (e.plane, e.t1)
            if e.probe_id is not None and e.next_probe_ns > now_ns:
                probing[path] = probing.get(path, 0) + 1
            if e.probe_successes:
                streak[path] = streak.get(path, 0) + e.probe_successes
        interval = self.retired_interval_ns()
        for e in list(evset.retired.values()):
            if not evset.plane_up(e.plane) or e.next_probe_ns > now_ns:
                continue
            path = (e.plane, e.t1)
            if e.probe_id is not None:  # unanswered: the path's streak starts again
                e.probe_id = None
                self._reset_path(e)
                streak[path] = 0
                evset.probe_timed_out(e)
            allowed = k - streak.get(path, 0) if streak.get(path, 0) else 1
            if probing.get(path, 0) >= allowed:
                evset.schedule_probe(e, now_ns + interval)  # its path is being probed
                continue
            probing[path] = probing.get(path, 0) + 1
            e.probe_id = self._next_id()
            evset.schedule_probe(e, now_ns + interval)
            out.append((e.value, e.probe_id))
        return out

    def _reset_path(self, e: EvEntry) -> None:
        for x in self.evset.retired.values():
            if x.plane == e.plane and x.t1 == e.t1:
                x.probe_successes = 0

    def retired_interval_ns(self) -> int:
        """How often a retired path is probed, which is also how long its probe may stay
        unanswered: ``retired_probe_interval_ns``, or twice the slowest probe round trip or
        round-trip delay variation seen lately (a jittery fabric's slow answers must not
        reset the success streak, or a path that works would never come back)."""
        evset = self.evset
        spread = max(evset.tx_delay_spread, evset.rx_delay_spread)
        return max(self.cfg.retired_probe_interval_ns, int(2 * self.probe_rtt_max), int(2 * spread))

    def probe_timeout_ns(self) -> int:
        """How long a probe may stay unanswered before it counts as lost: one probe
        interval; twice the slowest probe round trip seen lately; or twice the round-trip
        delay variation measured on the data (a jittery fabric delays probes as much as
        packets: a probe takes at most the minimum RTT plus that variation), whichever is
        longest. (Not interval + variation: liveness ticks come once per interval, so any
        excess over it would cost a whole extra interval of detection on a quiet fabric.)"""
        evset = self.evset
        spread = max(evset.tx_delay_spread, evset.rx_delay_spread)
        return max(self.cfg.probe_interval_ns, int(2 * self.probe_rtt_max), int(2 * spread))

    def note_probe_rtt(self, rtt_ns: int) -> None:
        self.probe_rtt_max = max(float(rtt_ns), self.probe_rtt_max * PROBE_RTT_DECAY)

    def probe_acked(self, ev: int, probe_id: int, now_ns: int) -> bool | None:
        """A PROBE_ACK arrived. None: not a reply to a probe we have outstanding (ignored);
        True: the K-th success in a row (EV back to GOOD); False: accepted, not yet."""
        evset = self.evset
        e = evset.entry(ev)
        if e is None:
            return None
        if e.live_probe_id is not None and e.live_probe_id == probe_id:
            if e.state in (EvState.GOOD, EvState.SKIP):
                evset.note_ok(ev, now_ns, e.live_probe_ns)
                return False
            return None
        if e.state is EvState.ASSUMED_BAD and e.late_probe_id is not None and e.late_probe_id == probe_id:
            e.late_probe_id = None  # the liveness probe was slow, not lost: the path works
            return evset.undo_loss(ev, now_ns) > 0
        if e.state is not EvState.ASSUMED_BAD or e.probe_id != probe_id:
            return None
        return self._answered(e, now_ns)

    def _answered(self, e: EvEntry, now_ns: int) -> bool:
        """A probe of ``e`` came back: its path is restored once K of its probes have, since
        the path's last one went unanswered (on any of its EVs)."""
        e.probe_id = None
        e.probe_successes += 1
        got = sum(
            x.probe_successes for x in self.evset.retired.values() if x.plane == e.plane and x.t1 == e.t1
        )
        if got >= self.cfg.probe_successes_to_restore:
            self.evset.restore_path(e, now_ns, got)
            return True
        # the rest of the K at once, each on an EV of the path (this one first) not probed now
        left = self.cfg.probe_successes_to_restore - got
        for x in self.evset.retired.values():
            if left > 1 and x is not e and x.plane == e.plane and x.t1 == e.t1 and x.probe_id is None:
                self.evset.schedule_probe(x, now_ns)
                left -= 1
        self.evset.schedule_probe(e, now_ns)
        return False

    def next_deadline(self) -> int | None:
        """The next liveness tick or probe of a retired EV on an up plane."""
        evset = self.evset
        best = evset.earliest_probe_ns()
        live = evset.next_liveness_ns
        if live is not None and (best is None or live < best):
            best = live
        return best
