"""The heat of an EV set's paths: every ECN echo or trim NACK on an EV heats its path, and a
repeat mark makes the path sit out turns of the rotation (a penalty) -- until its queue is
seen drained; a loss guess on a hot path is taken for a queue, not a failure (``blame.py``
asks ``is_hot``).

The EVs of one (plane, T1) differ only in entropy bits, which a source-routed fabric ignores:
they cross the very same queues, so a mark on one is a mark on all of them. Every mark adds
one to the *heat* of the EV and its path siblings, which halves every
``penalty_halflife_ns``; once the heat says the mark is a repeat (``skip_heat``) they sit out
a number of rotations scaled by the heat and by the set's size (``_turns``), served by the
rotation (``EvSet._pick_in_plane``). A packet sent on the path after the marked one that
arrives unmarked has crossed the same queue below the marking threshold: the penalty ends
there (``unmarked_echo``, ``drained_ends_penalty``).
"""

from __future__ import annotations

import math
import random

from mrc_fabric.ev import T1_SHIFT

from .config import Mode, TransportConfig
from .ev_draw import PathSpace
from .ev_entries import EvEntry
from .ev_shared import SharedEvTable
from .ev_state import EvEvent, EvState, allowed

# a path marked within about a half-life: its heat (one per mark, halving) is at least this
WARM = 0.5


class EvHeat(SharedEvTable):
    """ECN/trim heat per path, and the turns it makes the path sit out."""

    def __init__(
        self, cfg: TransportConfig, paths: PathSpace, rng: random.Random, port_status: int | None = None
    ) -> None:
        super().__init__(cfg, paths, rng, port_status)
        # a penalty's turns per turn of a ``penalty_evs`` set (see ``_turns``), and its cap
        others = sum(self.quota) - self.planes
        ref = cfg.penalty_evs - self.planes
        self._turn_scale = max(1, ref) / max(1, others) if cfg.penalty_evs else 1.0
        self._max_turns = self._turns(float(cfg.max_skip_rotations))
        # per path (``ev >> T1_SHIFT``) sitting out: the send time of the packet whose mark
        # (or of the moment the trim or loss) put it there; a packet sent later and delivered
        # unmarked ends the penalty (``unmarked_echo``)
        self.sitting_out: dict[int, int] = {}

    def _turns(self, rotations: float) -> int:
        """``rotations`` of a set of ``penalty_evs`` EVs in turns of this set's rotation, so
        that a penalty lasts as many packets (as long at the same rate) whatever the set's
        size. A turn ends when the plane's rotation passes the sitting-out EV: after its
        plane's other EVs, so a turn lasts about (EVs - planes) packets of the connection.
        Counted in turns alone, 4 turns with 16 EVs (2 a plane) lasted about 3 us, a third
        of an RTT, and a marked EV came back before its queue drained (a second flow pinned
        to a's path: 0.64 of line rate)."""
        return math.ceil(rotations * self._turn_scale - 1e-9)

    def _penalize(self, ev: int, now_ns: int, event: EvEvent, marked_sent_ns: int = -1) -> bool:
        """An ECN echo or a trim NACK on ``ev`` (for a packet sent at ``marked_sent_ns``; -1:
        not known, taken as now): its path heats up; a repeat mark makes ``ev`` and the active
        EVs on its path sit out (``skip_heat``).

        The EVs of one (plane, T1) differ only in entropy bits, which a source-routed fabric
        ignores: they cross the very same queues, so a mark on one is a mark on all of them.
        Penalising the echoed EV alone moved 1/16 to 1/32 of a congested path's traffic per
        echo (the live E9 run kept the queue growing until the gap rule took the delayed
        packets for lost and retired the path). In ECMP mode the switches hash the entropy
        bits, so there the siblings are other paths and every mark skips ``ev`` alone.
        """
        e = self.entry(ev)
        if e is None or not allowed(e.state, event) or not e.member:
            return False
        group = [e]
        if self.cfg.mode is not Mode.ECMP:
            group += [s for s in self.active[e.plane] if s.t1 == e.t1 and s is not e and s.member]
        threshold = self.cfg.skip_heat if self.cfg.mode is not Mode.ECMP else 0.0
        why = f"{event.value} on {e.value:08x}, same path"
        may_sit: bool | None = None  # (worked out at the first sibling hot enough to sit out)
        for x in group:
            if allowed(x.state, event):
                x.heat = self.heat(x.value, now_ns) + 1.0
                x.heat_ns = now_ns
                if x.heat >= threshold:
                    if may_sit is None:
                        may_sit = self.cfg.mode is Mode.ECMP or self._may_sit_out(e.plane, e.t1, now_ns)
                    if not may_sit:
                        continue
                    turns = min(self._turns(self.cfg.skip_rotations * x.heat), self._max_turns)
                    x.skips_left = max(x.skips_left, turns)
                    x.skip_until = max(x.skip_until, self._skip_end(x.heat, now_ns))
                    self._fire(x, event, event.value if x is e else why)
        if may_sit:  # (some EV of the path sat out: all of them cross one queue)
            self._sat_out(ev, marked_sent_ns if marked_sent_ns >= 0 else now_ns)
        return True

    def _sat_out(self, ev: int, since_ns: int) -> None:
        """``ev``'s path sat out for what a packet sent at ``since_ns`` met (MRC mode: an ECMP
        EV names no one path, so no other EV's echo speaks for its queue)."""
        if self.cfg.drained_ends_penalty and self.cfg.mode is not Mode.ECMP:
            key = ev >> T1_SHIFT
            self.sitting_out[key] = max(self.sitting_out.get(key, since_ns), since_ns)

    def unmarked_echo(self, ev: int, sent_ns: int) -> None:
        """A packet sent on ``ev`` at ``sent_ns`` was delivered unmarked (its SACK echoed it
        without CE). Sent after the packet whose mark made its path sit out, it crossed the
        same queue below the marking threshold: the queue drained, and the penalty ends for
        every EV of the path, proven (no scout). Why: a penalty lasts up to ``skip_rotations``
        base RTTs, and a queue drains within a round trip of its senders backing off. After a
        flapping link came back, the marks of the plane's other paths sent every sender's EVs
        there to sit out 84 us at once, and a T0 uplink ran at a fifth of its rate for 100 us;
        ended by their first unmarked echo, a 500 us flap under a 16-host permutation takes
        1.067 x as long as no flap (median of seeds 1-10; 1.091 x without)."""
        key = ev >> T1_SHIFT
        since = self.sitting_out.get(key)
        if since is None or sent_ns <= since:
            return
        del self.sitting_out[key]
        e = self.entry(ev)
        if e is None:
            return
        sitting = [x for x in self.active[e.plane] if x.t1 == e.t1 and x.state is EvState.SKIP]
        for x in sitting:
            self._fire(x, EvEvent.PENALTY_SERVED, "queue drained")
        if sitting:  # (a penalty already served waits for its scout: sent since, not before)
            self.scouts.release(ev)

    def _may_sit_out(self, plane: int, t1: int, now_ns: int) -> bool:
        """A mark on the path (``plane``, ``t1``) makes it sit out unless its plane is short
        of capacity as a whole while the other planes are not: most of the plane's other
        active paths marked within about a half-life (``WARM``), and most of the other
        planes' paths not. A T0 uplink down leaves its hosts' traffic on the other three:
        sitting out moved each connection's packets onto paths just as full, and as every
        connection did it at once, they herded (a flapping T0-T1 link under a 16-host
        permutation kept the plane's other uplinks trimming through its up phases as well
        as its down ones: 5,695 trims where the run without the flap had none, 1.45 x its
        time). There the planes' bytes in flight move the load (``EvSet.next_data_ev``:
        the plane's longer queues hold more in flight, the other planes take the packets).
        A path marked alone in its plane (a second flow on it) is an imbalance the other
        paths mend, and marks on every plane (an incast's receiver) are the window's to
        answer, and sitting out there still thins what enters a path that dies."""
        seen, warm = self._marked_paths(plane, t1, now_ns, WARM, -1)
        if not seen[plane] or 2 * warm[plane] < seen[plane]:
            return True  # marked alone in its plane (or its plane's only path)
        rest = sum(seen) - seen[plane]
        return 2 * (sum(warm) - warm[plane]) >= rest  # every plane marked, or no other plane

    def _skip_end(self, heat: float, now_ns: int) -> int:
        """When a penalty of ``heat`` ends whatever the turns served: after as long as its
        turns last a sender at line rate (a turn of ``penalty_evs`` EVs, about a base RTT), at
        most ``skip_rotations`` base RTTs -- a queue drains within a round trip or two of its
        senders backing off, and a hotter path is penalised by more turns, not for longer.
        Counted in turns alone, an incast's flows (an eighth of the rate each, their paths hot
        from the marks of its first round trips) sat out their penalties for hundreds of round
        trips, and a link that healed took twice its siblings' share for 20 RTT."""
        rotations = min(self.cfg.skip_rotations * heat, float(self.cfg.skip_rotations))
        return now_ns + max(1, int(rotations * self.cfg.cc.base_rtt_ns))

    def ecn_echo(self, ev: int, now_ns: int, sent_ns: int = -1) -> bool:
        """A SACK echoed CE for a packet sent on ``ev`` at ``sent_ns``: it sits out a few rotations."""
        return self._penalize(ev, now_ns, EvEvent.ECN_ECHO, sent_ns)

    def trimmed(self, ev: int, now_ns: int) -> bool:
        """A packet sent on ``ev`` was trimmed in the fabric: the same penalty as ECN."""
        return self._penalize(ev, now_ns, EvEvent.TRIM_NACK)

    def heat(self, ev: int, now_ns: int) -> float:
        """``ev``'s ECN/trim heat decayed to ``now_ns`` (0.0 for an EV not in the set)."""
        e = self.entry(ev)
        return 0.0 if e is None else self._decayed(e, now_ns)

    def _decayed(self, e: EvEntry, now_ns: int) -> float:
        if not e.heat:
            return 0.0
        decay: float = 0.5 ** (max(0, now_ns - e.heat_ns) / max(self.cfg.penalty_halflife_ns, 1))
        return e.heat * decay

    def is_hot(self, ev: int, at_ns: int) -> bool:
        """Whether ``ev``'s path had signalled congestion recently enough at ``at_ns`` (or has
        since) that a packet missing on it is more likely still queued, or trimmed with its
        NACK on the way, than lost to a failure (``hot_path_heat``; never in ECMP mode, where
        the EV names no one path). Only for two half-lives after its last mark: the heat of
        a burst of marks (an incast's first round trips) kept a path "hot" for hundreds of
        round trips, and a path that failed there was taken for a queue all that time."""
        threshold = self.cfg.hot_path_heat
        if threshold <= 0 or self.cfg.mode is Mode.ECMP:
            return False
        e = self.entry(ev)
        if e is None or at_ns - e.heat_ns > 2 * self.cfg.penalty_halflife_ns:
            return False
        return self.heat(ev, at_ns) >= threshold

    def hotter_than_most(self, ev: int, at_ns: int) -> bool:
        """``ev`` is hot (``is_hot``) and most other paths in the rotation are not: a queue of
        its own, not one that every path ends in (an incast's receiver T0 marks all of them)."""
        if not self.is_hot(ev, at_ns):
            return False
        e = self.entries[ev]
        within = 2 * self.cfg.penalty_halflife_ns
        seen, hot = self._marked_paths(e.plane, e.t1, at_ns, self.cfg.hot_path_heat, within)
        return 2 * sum(hot) < sum(seen)

    def _marked_paths(
        self, plane: int, t1: int, at_ns: int, threshold: float, within_ns: int
    ) -> tuple[list[int], list[int]]:
        """Per plane, the active paths other than (``plane``, ``t1``), and how many of them were
        marked: an EV of the path with heat at least ``threshold`` at ``at_ns``, its last mark
        at most ``within_ns`` before (``is_hot``'s two half-lives; -1: any time)."""
        seen = [0] * self.planes
        marked = [0] * self.planes
        paths: dict[tuple[int, int], bool] = {}
        for entries in self.active:
            for x in entries:
                path = (x.plane, x.t1)
                if path == (plane, t1) or paths.get(path, False):
                    continue  # (itself, or a path already found marked)
                if path not in paths:
                    seen[x.plane] += 1
                recent = within_ns < 0 or at_ns - x.heat_ns <= within_ns
                hot = recent and self._decayed(x, at_ns) >= threshold
                paths[path] = hot
                if hot:
                    marked[x.plane] += 1
        return seen, marked

    def lost_while_hot(self, ev: int, now_ns: int) -> bool:
        """A loss guess on a hot ``ev``: it and its path siblings sit out the turns their heat
        already earns, as for a mark, but the heat does not grow -- a path that has failed
        sends no more marks, cools within a few half-lives, and its next loss retires it."""
        e = self.entry(ev)
        event = EvEvent.LOSS_WHILE_HOT
        if e is None or not allowed(e.state, event) or not e.member:
            return False
        why = f"{event.value} on {e.value:08x}, same path"
        sat = False
        for x in (e, *(sib for sib in self.active[e.plane] if sib.t1 == e.t1 and sib is not e)):
            if x.member and allowed(x.state, event):
                heat = self.heat(x.value, now_ns)
                turns = self._turns(self.cfg.skip_rotations * heat)
                x.skips_left = max(x.skips_left, min(turns, self._max_turns))
                x.skip_until = max(x.skip_until, self._skip_end(heat, now_ns))
                self._fire(x, event, event.value if x is e else why)
                sat = True
        if sat:
            self._sat_out(ev, now_ns)
        return True
