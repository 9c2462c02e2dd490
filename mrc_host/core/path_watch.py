"""Paths that stop delivering while their plane's others go on, each judged by its own delay
(``look``, on SACKs, ``LOOKS_PER_GUARD`` times a guard): a T1 down or a dead T0-T1 link takes
one path of a plane.

The gap rule and the loss blame compare a path with the others by send time, and so wait out
the reordering between paths: under a permutation beside a flapping link the other paths of
its plane queued 20-40 us deeper than the rest, the reordering window grew to 50 us (twice
the SRTT), and a connection sprayed the dead link for 85 us (65 packets) before its RTO found
it. A path's own latest delay is no such guess: a packet that left longer ago than that plus
a quarter of a round trip, on a path that has delivered nothing (no SACK, no trimmed header)
for twice its own spacing between deliveries, while a packet of the same plane sent that
quarter later arrived by another path, is on a dead path. A path only queued deeper keeps
delivering at its own spacing (``PlaneWatch.delivering`` asks the same of a plane), and a
plane slow as a whole (behind a slow NIC link) delivers no later packet past the silent one.

The verdict retires the path and leaves its packets to the other rules: the packet named is
marked judged (as the RTO's suspects are), and its arrival undoes the retirement. Resending
the path's packets at once as well cost more than it saved in a congested permutation, where
some verdicts fall on paths that are only slow.

The guard is waited out before a verdict, but not before the path stops taking packets: a
path whose oldest packet is only past its latest delay, with nothing from it for one service
gap and a packet of its plane sent no earlier in by another path, is overdue. The sender holds
it to that packet as its scout (``PathScouts.suspect``) until one of its packets is delivered.
A dead T0-T1 link under a flapping permutation was fed a packet a microsecond for that guard:
its down phases cost the worst connection up to 1.6 x its limit, up to 1.3 x held. A path only
slow, or jittery, takes packets again at its next delivery; its siblings carry them meanwhile.

The watch keeps, per path, the departure time of the newest packet it delivered, that
packet's delay, when it last delivered and its service gap; the sender's recovery
(recovery.py) tells it of each delivery and trimmed header, and the sender retires the silent
paths it returns and holds the overdue ones.
"""

from __future__ import annotations

from typing import Final

from .config import TransportConfig
from .records import PATH_SHIFT, PLANE_SHIFT, TxRecord
from .rtt import RttEstimator
from .sent import SentPackets
from .service_gap import widened_gap

PLANE_OF_PATH: Final = PLANE_SHIFT - PATH_SHIFT  # a path key's plane: ``path >> PLANE_OF_PATH``
LOOKS_PER_GUARD: Final = 4  # how often the paths are looked at, per guard (a quarter SRTT)


class PathWatch:
    """Which paths of one sender have gone silent while the others deliver."""

    def __init__(self, cfg: TransportConfig, packets: SentPackets, rtt: RttEstimator) -> None:
        self.cfg = cfg
        self.packets = packets  # (read: the packets in flight)
        self.rtt = rtt
        self.departures = cfg.nic_departures  # (times from when packets left the NIC)
        # per path (``ev >> PATH_SHIFT``): the departure of the newest packet it delivered, that
        # packet's delay (SACK arrival minus departure), when it last delivered, and the longest
        # wait lately between two of its deliveries while packets waited on it
        self.ok_left: dict[int, int] = {}
        self.delay: dict[int, int] = {}
        self.delivered_at: dict[int, int] = {}
        self.service_gap: dict[int, float] = {}
        # when the paths are looked at next: every SACK cost a tenth of the simulator's speed on
        # 8 planes x 16 T1s (128 paths, hundreds of packets in flight); a sixteenth of the SRTT
        # between looks adds that much to a verdict's time at most
        self._next_look_ns = 0

    def delivered(self, path: int, left_ns: int, now_ns: int) -> None:
        """A copy that left on ``path`` at ``left_ns`` was delivered, its SACK arriving at
        ``now_ns`` (as ``PlaneWatch.delivered``, per path)."""
        if left_ns > self.ok_left.get(path, -1):
            self.ok_left[path] = left_ns
            self.delay[path] = now_ns - left_ns
        last = self.delivered_at.get(path, 0)
        if now_ns > last:
            self.service_gap[path] = widened_gap(self.service_gap.get(path, 0.0), last, left_ns, now_ns)
            self.delivered_at[path] = now_ns

    def heard(self, path: int, now_ns: int) -> None:
        """A trimmed header that took ``path`` reached the peer at about ``now_ns``: the path
        delivers, only congested. Its delay says nothing of the data's (headers go first)."""
        if path in self.delay and now_ns > self.delivered_at[path]:
            self.delivered_at[path] = now_ns

    def due(self, path: int, left_ns: int, now_ns: int) -> int:
        """When a packet that left on ``path`` at ``left_ns`` should have arrived, by the path's
        own latest delay: what the gap rule's time guard waits out as well under the
        experimental ``path_delay_losses`` (a path queued deeper than the one that overtook its
        packet delivers it later, not never). ``left_ns`` itself when the path has no delay yet
        or has gone quiet (nothing for twice its service gap plus the guard): a dead path's
        last delay is no promise."""
        delay = self.delay.get(path)
        if delay is None:
            return left_ns
        quiet = now_ns - self.delivered_at[path] >= 2 * self.service_gap.get(path, 0.0) + self.guard()
        return left_ns if quiet else left_ns + delay

    def guard(self) -> int:
        """What a path's own delay may grow by before its silence counts: a quarter of the
        SRTT (the reordering window before any widens it) and at least the configured window."""
        srtt = self.rtt.srtt_ns
        quarter = int(srtt) // 4 if srtt is not None else 0
        floor = self.cfg.reorder_window_ns
        return quarter if quarter > floor else floor

    def look(self, newly: list[TxRecord], now_ns: int) -> tuple[list[TxRecord], list[TxRecord]]:
        """The paths silent past their own delay and those only overdue, each by its oldest
        packet in flight (``LOOKS_PER_GUARD`` times a guard; empty lists between looks).

        Silent: that packet left longer ago than the path's latest delay plus ``guard``, on a
        path that has delivered nothing for twice its service gap plus it, while a packet of
        the same plane sent ``guard`` later arrived by another path and this SACK delivered
        one sent after it (the peer hears us); never a packet already judged.

        Overdue (a silent path too): that packet left longer ago than the path's latest delay,
        on a path that has delivered nothing for its service gap, while a packet of the same
        plane sent no earlier arrived by another path. Not a verdict (jitter and a growing queue
        do as much): the sender holds the path to that packet as its scout until one of its
        packets is delivered, so a dead link is fed no more while the verdict waits its guard
        (or a silent path the sender kept, hot or at its floor, is fed no more).

        Never a path that has not delivered yet (its delay is unknown), nor a packet still at
        the NIC."""
        if now_ns < self._next_look_ns:
            return [], []
        guard = self.guard()
        self._next_look_ns = now_ns + guard // LOOKS_PER_GUARD
        dep = self.departures
        gaps = self.service_gap
        # per path not delivering for its service gap: whether for twice it plus the guard
        quiet: dict[int, bool] = {}
        for path, at in self.delivered_at.items():
            gap = gaps.get(path, 0.0)
            if now_ns - at >= gap:
                quiet[path] = now_ns - at >= 2 * gap + guard
        if not quiet:
            return [], []
        newest = -1
        for r in newly:  # (a loop: compiled, max() over a generator is a generic call)
            t = r.left_ns if dep else r.sent_ns
            if t > newest:
                newest = t
        first, second = self._latest_by_plane()
        silent: list[TxRecord] = []
        overdue: list[TxRecord] = []
        seen: set[int] = set()
        paths = len(quiet)
        for r in self.packets.in_flight.values():  # (in transmission order: oldest first)
            if len(seen) == paths:
                break  # (every quiet path's oldest packet found)
            path = r.ev >> PATH_SHIFT
            if r.lost or path in seen or path not in quiet:
                continue
            left = r.left_ns if dep else r.sent_ns
            if left <= self.ok_left[path]:
                continue  # (left before its latest delivery: the gap rule's business)
            seen.add(path)
            waited = now_ns - left - self.delay[path]
            if r.at_nic or waited < 0:
                continue
            plane = path >> PLANE_OF_PATH
            top_left, top_path = first[plane]
            sibling = top_left if top_path != path else second.get(plane, -1)
            if sibling < left:
                continue
            if (
                quiet[path]
                and waited >= guard
                and sibling >= left + guard
                and left < newest
                and r.suspect_sent != r.sent_ns
            ):
                silent.append(r)
            overdue.append(r)
        return silent, overdue

    def _latest_by_plane(self) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
        """Per plane, the latest send time any of its paths delivered and that path, and the
        latest of its other paths: what a path's silence is set against. Its plane's own
        queue (a slow NIC link, every path behind it) delivers no later packet past it."""
        first: dict[int, tuple[int, int]] = {}
        second: dict[int, int] = {}
        for path, ok in self.ok_left.items():
            plane = path >> PLANE_OF_PATH
            top = first.get(plane)
            if top is None or ok > top[0]:
                if top is not None:
                    second[plane] = top[0]
                first[plane] = (ok, path)
            elif ok > second.get(plane, -1):
                second[plane] = ok
        return first, second
