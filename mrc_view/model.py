"""The fabric as the page shows it at one instant, built by applying recording records in order.

Live and replay share this: the live collector applies each record as it makes it, the
replay applies the recorded ones up to the slider's time. ``Snapshot`` is the state now
(link loads, switches, agents, faults, every connection's EVs) and is cheap to copy for
the replay's checkpoints; ``Timeline`` is append-only (goodput points, feed lines), so a
frame at time t takes from it what lies at or before t.
"""

from __future__ import annotations

import bisect
import copy
from dataclasses import dataclass, field
from typing import Any

from mrc_fabric.ev import ev_plane, ev_t1

from .fidelity import state as fidelity_state

ACTIVE_S = 5.0  # a connection that moved data within this long is "active"
MAX_CONNS = 8  # connections on the page: the active ones first, then the most recently active
WINDOW_S = 60.0  # goodput shown over this much of the past
MAX_EVENTS = 200  # feed lines in one frame
STATE_CODES = {"GOOD": 0, "SKIP": 1, "ASSUMED_BAD": 2, "DENIED": 3}


@dataclass
class ConnState:
    id: str
    src: str
    dst: str
    mode: str
    # ev (8 hex digits) -> [state, active (0/1), data packets sent, data packets lost]
    evs: dict[str, list[Any]] = field(default_factory=dict)
    delivered: int = 0
    sent: int = 0
    last_active: float = -1e9


@dataclass
class Snapshot:
    t: float = 0.0
    links: dict[str, list[float]] = field(default_factory=dict)  # name -> [Mbit/s a->b, b->a]
    switches: dict[str, str] = field(default_factory=dict)
    agents: dict[str, str] = field(default_factory=dict)
    faults: list[dict[str, Any]] = field(default_factory=list)
    conns: dict[str, ConnState] = field(default_factory=dict)
    fidelity: dict[str, Any] = field(default_factory=dict)  # the run's verdict so far (live runs)

    def copy(self) -> Snapshot:
        return copy.deepcopy(self)

    def apply(self, r: dict[str, Any]) -> None:
        """One record's effect on the state (goodput and feed lines go to the Timeline)."""
        self.t = max(self.t, float(r["t"]))
        kind = r["k"]
        if kind == "sample":
            self._sample(r)
        elif kind == "ev":
            conn = self.conns.get(str(r.get("conn", "")))
            if conn is not None:
                row = conn.evs.setdefault(str(r.get("ev", "")), ["GOOD", 1, 0, 0])
                row[0] = str(r.get("new", row[0]))
        elif kind == "faults":
            self.faults = [f for f in r.get("faults", []) if isinstance(f, dict)]
        elif kind == "fidelity":
            self.fidelity = fidelity_state(r)

    def _sample(self, r: dict[str, Any]) -> None:
        t = float(r["t"])
        if isinstance(r.get("links"), dict):
            self.links = {str(k): [float(x) for x in v[:2]] for k, v in r["links"].items()}
        if isinstance(r.get("switches"), dict):
            self.switches = {str(k): str(v) for k, v in r["switches"].items()}
        if isinstance(r.get("agents"), dict):
            self.agents = {str(k): str(v) for k, v in r["agents"].items()}
        for c in r.get("conns", []):
            cid = str(c["id"])
            conn = self.conns.get(cid)
            if conn is None:
                conn = self.conns[cid] = ConnState(cid, str(c["src"]), str(c["dst"]), str(c.get("mode", "")))
            if "evs" in c:  # a sample may carry only the goodput (a demo's results.json)
                conn.evs = {
                    str(row[0]): [str(row[1]), int(row[2]), int(row[3]), int(row[4])] for row in c["evs"]
                }
            sent = sum(v[2] for v in conn.evs.values())
            delivered = int(c.get("delivered_bytes", 0))
            if sent != conn.sent or delivered != conn.delivered:
                conn.last_active = t
            conn.sent, conn.delivered = sent, delivered


@dataclass
class Timeline:
    """Goodput points per connection and the feed, both in time order."""

    goodput: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    event_times: list[float] = field(default_factory=list)
    _last: dict[str, tuple[float, int]] = field(default_factory=dict)
    max_events: int = 0  # 0: keep all (replay); live keeps the newest

    def apply(self, r: dict[str, Any]) -> None:
        t = float(r["t"])
        if r["k"] == "event":
            self.events.append(
                {
                    "t": t,
                    "kind": r.get("kind", ""),
                    "text": r.get("text", ""),
                    "level": r.get("level", "info"),
                }
            )
            self.event_times.append(t)
            if self.max_events and len(self.events) > 2 * self.max_events:
                del self.events[: self.max_events]
                del self.event_times[: self.max_events]
        elif r["k"] == "sample":
            for c in r.get("conns", []):
                cid, delivered = str(c["id"]), int(c.get("delivered_bytes", 0))
                last = self._last.get(cid)
                self._last[cid] = (t, delivered)
                points = self.goodput.setdefault(cid, [])
                if last is None or t <= last[0]:
                    if not points:
                        points.append((t, 0.0))
                    continue
                points.append((t, max(0, delivered - last[1]) * 8 / (t - last[0]) / 1e6))
                if self.max_events and len(points) > 4 * self.max_events:
                    del points[: 2 * self.max_events]

    def events_until(self, t: float, n: int = MAX_EVENTS) -> list[dict[str, Any]]:
        end = bisect.bisect_right(self.event_times, t)
        return list(reversed(self.events[max(0, end - n) : end]))

    def goodput_until(self, cid: str, t: float, window: float = WINDOW_S) -> list[list[float]]:
        points = self.goodput.get(cid, [])
        times = [p[0] for p in points]
        lo, hi = bisect.bisect_left(times, t - window), bisect.bisect_right(times, t)
        return [[a, round(b, 3)] for a, b in points[lo:hi]]


def frame(snap: Snapshot, tl: Timeline, t: float) -> dict[str, Any]:
    """What the page draws at ``t``: JSON-ready, compact (an EV is a short list)."""
    faults_on: dict[str, list[str]] = {}
    down: set[str] = {s for s, st in snap.switches.items() if st != "up"}
    for f in snap.faults:
        for name in f.get("links", []):
            faults_on.setdefault(str(name), []).append(str(f.get("id", "")))
        for name in f.get("switches", []):
            faults_on.setdefault(str(name), []).append(str(f.get("id", "")))
            down.add(str(name))
    conns = sorted(snap.conns.values(), key=lambda c: (-c.last_active, c.id))[:MAX_CONNS]
    out_conns = []
    for c in conns:
        counts = dict.fromkeys(STATE_CODES, 0)
        evs = []
        for ev, (state, active, sent, lost) in sorted(c.evs.items()):
            value = int(ev, 16)
            counts[state] = counts.get(state, 0) + 1
            evs.append([ev, ev_plane(value), ev_t1(value), state, active, sent, lost])
        out_conns.append(
            {
                "id": c.id,
                "src": c.src,
                "dst": c.dst,
                "mode": c.mode,
                "active": t - c.last_active <= ACTIVE_S,
                "delivered_bytes": c.delivered,
                "counts": counts,
                "evs": evs,
                "goodput": tl.goodput_until(c.id, t),
            }
        )
    return {
        "t": t,
        "links": snap.links,
        "switches": snap.switches,
        "down": sorted(down),
        "agents": snap.agents,
        "faults": snap.faults,
        "faults_on": faults_on,
        "conns": out_conns,
        "events": tl.events_until(t),
        "fidelity": snap.fidelity,
    }


class LiveModel:
    """The live collector's model: every record applied as it comes, frames of now."""

    def __init__(self, head: dict[str, Any]) -> None:
        self.head = head
        self.snap = Snapshot()
        self.timeline = Timeline(max_events=1000)
        self.version = 0

    def apply(self, r: dict[str, Any]) -> None:
        self.snap.apply(r)
        self.timeline.apply(r)
        self.version += 1

    def frame(self) -> dict[str, Any]:
        return frame(self.snap, self.timeline, self.snap.t)
