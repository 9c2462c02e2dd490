"""What the fuzzer's invariants read from one run: observed, never steering it.

``Observer`` attaches to a built ``Network`` before it runs. It only reads: the events it
puts on the loop look at counters and queues and change nothing (the run's packets, timers
and results are the same with it or without it; ``tests/unit/test_sim_fuzz.py`` checks).
After the run ``observations()`` returns one JSON-able dict that ``invariants.py`` judges:

- ``flows``: per connection, its writes, bytes, resends and how many of its packets (both
  ways) the fabric dropped or trimmed (``Fabric.drops_by_qp`` / ``trims_by_qp``).
- ``failures``: per failure of a killing fault (each down phase of a flap) and per
  connection that met it, the DATA it lost there and its *floor*: its DATA packets that
  entered the failed element in its base RTT before the failure (``Fault.entered`` counts
  entries into a link's ports or a switch's ingress ports), plus those that entered
  earlier and still sat in its queues -- packets no transport could have kept off it
  (``_failure`` says how young connections and sparse ones are counted).
- ``dead_paths``: per (failure, connection, path) that lost DATA there, when it first did,
  the connection's RTT then (its smoothed RTT, at least the base RTT), and what the
  connection's EVs on that path did afterwards (from its EV timeline: when one was GOOD);
  for the report, how long after the failure the connection began and its RTT 5 of those
  RTTs on.
- ``fair_groups``: connections into one host with one base RTT, and their goodput over the
  time all of them were running, with the reason when the group cannot be judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mrc_host.wire.messages import DataPacket

from .fault_state import Fault
from .faults import KILLING_KINDS
from .network import START_NS, Connection, Network

# the state that carries data (a SKIP EV sits out a penalty and turns GOOD before it carries any)
ALIVE = frozenset({"GOOD"})
FAIR_MIN_RTTS = 10  # a fair group is judged over at least this many base RTTs of common running
RTT_SAMPLE_RTTS = 1  # the smoothed RTT of every connection is read once per base RTT after a fault
AVERAGE_RTTS = 4  # a floor is also taken as the entries per base RTT over this many before a failure
BLIND_RTTS = 1.5  # a young connection's first RTT, in drop times at the element (half an RTT on the way)


@dataclass
class _Window:
    """Snapshots of one failure's element: at ``at`` (its start) and ``at - rtt`` per base RTT."""

    fault: Fault
    phase: int
    start: int
    end: int | None
    entered: dict[int, dict[int, int]] = field(default_factory=dict)  # snapshot time -> qp -> count
    queued: dict[int, list[Any]] = field(default_factory=dict)  # snapshot time -> DATA packets queued
    reached: bool = False


class Observer:
    def __init__(self, net: Network, jobs: list[Any], sample_rtt: bool = True) -> None:
        self.net = net
        self.jobs = jobs
        self.by_rx_qp: dict[int, Connection] = {c.receiver.local_qp: c for c in net.connections}
        self.rtts = sorted({c.base_rtt_ns for c in net.connections})
        self.windows: list[_Window] = []
        self.srtt: dict[int, list[tuple[int, float]]] = {c.index: [] for c in net.connections}
        self.sample_rtt = sample_rtt
        self.initial: dict[int, set[int]] = {}

    # ---- arming -------------------------------------------------------------------------
    def arm(self) -> None:
        loop = self.net.loop
        for fault in self.net.faults:
            if fault.kind in KILLING_KINDS:
                self._phase(fault, 0)
        first = min((f.start_ns for f in self.net.faults), default=None)
        if first is not None and self.sample_rtt and self.rtts:
            loop.at(max(first - self.rtts[0], START_NS), self._sample)

    def _phase(self, fault: Fault, k: int) -> None:
        """Schedule the snapshots of down phase ``k`` of ``fault`` (one phase unless a flap)."""
        if fault.kind == "flap":
            period = int(fault.value or 1)
            start = fault.start_ns + 2 * k * period
            end: int | None = start + period
            if fault.end_ns is not None:
                if start >= fault.end_ns:
                    return
                end = min(end, fault.end_ns) if end is not None else fault.end_ns
        else:
            start, end = fault.start_ns, fault.end_ns
        w = _Window(fault, k, start, end)
        self.windows.append(w)
        loop = self.net.loop
        for rtt in self.rtts:
            loop.at(start - rtt, self._snap, w, start - rtt)
            loop.at(start - AVERAGE_RTTS * rtt, self._snap, w, start - AVERAGE_RTTS * rtt)
        loop.at(start, self._at_failure, w)

    def _element_ports(self, fault: Fault) -> list[Any]:
        return [p for p in self.net.fabric.ports.values() if fault in p.kill_faults]

    def _snap(self, w: _Window, t: int) -> None:
        w.entered[t] = dict(w.fault.entered)
        w.queued[t] = [
            pkt
            for port in self._element_ports(w.fault)
            for q in (port.lo, port.hi)
            for pkt in q
            if isinstance(pkt.msg, DataPacket)
        ]

    def _at_failure(self, w: _Window) -> None:
        w.reached = True
        self._snap(w, w.start)
        if w.fault.kind == "flap":
            self._phase(w.fault, w.phase + 1)

    def _sample(self) -> None:
        """Every connection's smoothed RTT now (read-only), then again one base RTT later."""
        loop = self.net.loop
        for c in self.net.connections:
            srtt = _srtt(c)
            if srtt is not None:
                self.srtt[c.index].append((loop.now, srtt))
        if not self.net.loop.stopped:
            loop.at(loop.now + self.rtts[0] * RTT_SAMPLE_RTTS, self._sample)

    # ---- after the run ------------------------------------------------------------------
    def observations(self) -> dict[str, Any]:
        net = self.net
        return {
            "now_ns": net.loop.now,
            "flows": [self._flow(c) for c in net.connections],
            "failures": [self._failure(w) for w in self.windows],
            "dead_paths": [row for w in self.windows for row in self._dead_paths(w)],
            "fair_groups": self._fair_groups(),
        }

    def _flow(self, c: Connection) -> dict[str, Any]:
        fab = self.net.fabric
        s = c.sender.counters
        qps = (c.sender.local_qp, c.receiver.local_qp)
        return {
            "name": c.name,
            "src": c.spec.src,
            "dst": c.spec.dst,
            "base_rtt_ns": c.base_rtt_ns,
            "writes": len(c.writes),
            "writes_done": sum(1 for w in c.writes if w.done and w.ok),
            "data_ok": c.data_ok,
            "resends": s.retransmissions + s.tail_twins,
            "fabric_drops": sum(fab.drops_by_qp.get(q, 0) for q in qps),
            "fabric_trims": sum(fab.trims_by_qp.get(q, 0) for q in qps),
            "posted_ns": min((w.posted_ns for w in c.writes), default=None),
            "done_ns": _done_ns(c),
        }

    def _failure(self, w: _Window) -> dict[str, Any]:
        """One failure: per connection that met its element, the DATA it lost and its floor.

        A connection's floor is what it could not have kept off the element: its DATA that
        entered it in its base RTT before the failure -- or, if more, the entries per base
        RTT over the four before (at a packet or two per RTT, one RTT's count is mostly
        luck) -- plus its DATA that entered earlier and still sat queued there, plus what it
        lost there in its own first base RTT if it started less than one before the failure
        or after it (a connection knows nothing of a failure older than itself until the
        answers to its first packets return; drop times run up to half an RTT behind)."""
        f = w.fault
        lost: dict[int, list[int]] = {}
        for t, qp, data, _, _ in f.drops:
            if data and w.start <= t and (w.end is None or t < w.end):
                lost.setdefault(qp, []).append(t)
        flows = []
        for c in self.net.connections:
            qp, rtt = c.receiver.local_qp, c.base_rtt_ns
            entered = 0.0
            queued = blind = 0
            if w.reached:
                at = w.entered[w.start].get(qp, 0)
                one = at - w.entered.get(w.start - rtt, {}).get(qp, 0)
                avg = (at - w.entered.get(w.start - AVERAGE_RTTS * rtt, {}).get(qp, 0)) / AVERAGE_RTTS
                entered = float(max(one, avg))
                now = {id(p) for p in w.queued[w.start] if p.msg.qp == qp}
                queued = sum(1 for p in w.queued.get(w.start - rtt, []) if p.msg.qp == qp and id(p) in now)
            posted = min((x.posted_ns for x in c.writes), default=None)
            if posted is not None:
                blind = sum(1 for t in lost.get(qp, []) if t < posted + BLIND_RTTS * rtt)
            n = len(lost.get(qp, []))
            if entered or queued or n:
                flows.append(
                    {
                        "flow": c.name,
                        "floor": entered + queued + blind,
                        "entered": entered,
                        "queued": queued,
                        "first_rtt": blind,
                        "lost": n,
                        "srtt_ns": self._srtt_at(c, w.start),
                    }
                )
        return {
            "fault": f.spec,
            "kind": f.kind,
            "phase": w.phase,
            "start_ns": w.start,
            "end_ns": w.end,
            "reached": w.reached,
            "flows": flows,
            "floor": sum(x["floor"] for x in flows),
            "lost": sum(len(v) for v in lost.values()),
        }

    def _dead_paths(self, w: _Window) -> list[dict[str, Any]]:
        """Each (connection, path) that lost DATA to this failure, and its EVs on that path after."""
        first: dict[tuple[int, int, int], int] = {}
        for t, qp, data, plane, t1 in w.fault.drops:
            if data and w.start <= t and (w.end is None or t < w.end) and qp in self.by_rx_qp:
                first.setdefault((qp, plane, t1), t)
        rows = []
        for (qp, plane, t1), t in sorted(first.items(), key=lambda kv: (kv[1], kv[0])):
            c = self.by_rx_qp[qp]
            rtt = max(c.base_rtt_ns, int(self._srtt_at(c, t) or 0))
            late = max(c.base_rtt_ns, int(self._srtt_at(c, t + 5 * rtt) or 0))
            born = min((wr.posted_ns for wr in c.writes), default=t)
            done = _sent_ns(c)
            until = min(x for x in (w.end, done, self.net.loop.now) if x is not None)
            rows.append(
                {
                    "fault": w.fault.spec,
                    "phase": w.phase,
                    "flow": c.name,
                    "path": [plane, t1],
                    "first_loss_ns": t,
                    "base_rtt_ns": c.base_rtt_ns,
                    "rtt_ns": rtt,
                    # read only for the report: a connection that began after the failure
                    # knew nothing of it, and an incast's first round trips can triple its RTT
                    "born_after_ns": born - w.start,
                    "rtt_late_ns": late,
                    "until_ns": until,
                    **_path_evs(c, plane, t1, t, until),
                }
            )
        return rows

    def _srtt_at(self, c: Connection, t: int) -> float | None:
        """The connection's smoothed RTT sampled last at or before ``t``; for a connection with
        no sample yet (its first RTT), its first one after (what its first answers took)."""
        best = None
        for when, srtt in self.srtt[c.index]:
            if when > t:
                return best if best is not None else srtt
            best = srtt
        return best

    def _fair_groups(self) -> list[dict[str, Any]]:
        """Connections into one host with one base RTT (those with another RTT into the same
        host, if they run at the same time, share its leaf: the group is then not judged)."""
        groups: dict[tuple[int, int], list[Connection]] = {}
        for c in self.net.connections:
            groups.setdefault((c.spec.dst, c.base_rtt_ns), []).append(c)
        return [_fair(self.net, key[0], conns) for key, conns in sorted(groups.items()) if len(conns) > 1]


def _srtt(c: Connection) -> float | None:
    """The sender's smoothed RTT (None before its first sample, or if the core keeps it elsewhere)."""
    sender = getattr(c.sender, "sender", None)
    rtt = getattr(getattr(sender, "recovery", None), "rtt", None)
    value = getattr(rtt, "srtt_ns", None)
    return float(value) if value is not None else None


def _done_ns(c: Connection) -> int | None:
    """When the last byte of the connection's last write was placed (None if any is missing)."""
    if not c.writes or any(w.received_ns is None for w in c.writes):
        return None
    return max(w.received_ns or 0 for w in c.writes)


def _sent_ns(c: Connection) -> int | None:
    """When the sender saw its last write acknowledged (None while one is outstanding)."""
    if not c.writes or any(w.sent_ns is None for w in c.writes):
        return None
    return max(w.sent_ns or 0 for w in c.writes)


def _path_evs(c: Connection, plane: int, t1: int, lost_ns: int, until_ns: int) -> dict[str, Any]:
    """When, from ``lost_ns`` to ``until_ns``, some sender EV on (plane, t1) was in the rotation
    GOOD: ``alive_ns``, a list of [from, to) intervals, from its EV timeline."""
    evs = {v for v, e in c.sender.evset.entries.items() if e.member and e.plane == plane and e.t1 == t1}
    keys = {f"{v:08x}": v for v in evs}
    state = {v: "GOOD" for v in evs}
    alive_ns: list[list[int]] = []
    since: int | None = None  # alive since (from lost_ns on)

    def step(t: int) -> None:
        nonlocal since
        alive = any(s in ALIVE for s in state.values())
        if alive and since is None:
            since = t
        elif not alive and since is not None:
            if t > since:
                alive_ns.append([since, t])
            since = None

    settled = False
    for ev in c.ev_timeline:
        if ev["side"] != "sender" or ev["ev"] not in keys:
            continue
        t = START_NS + round(float(ev["t_us"]) * 1000)  # type: ignore[arg-type]
        if t >= until_ns:
            break
        if t >= lost_ns and not settled:
            settled = True
            step(lost_ns)
        state[keys[str(ev["ev"])]] = str(ev["new"])
        if settled:
            step(t)
    if not settled:
        step(lost_ns)
    if since is not None and until_ns > since:
        alive_ns.append([since, until_ns])
    return {"evs": len(evs), "alive_ns": alive_ns}


def _fair(net: Network, dst: int, conns: list[Connection]) -> dict[str, Any]:
    """A group of connections into ``dst`` and their goodput while all ran, or why not judged."""
    row: dict[str, Any] = {"dst": dst, "flows": [c.name for c in conns], "jain": None, "skipped": None}
    rtts = {c.base_rtt_ns for c in conns}
    posted = [min((w.posted_ns for w in c.writes), default=None) for c in conns]
    done = [_done_ns(c) for c in conns]
    if any(p is None for p in posted) or any(d is None for d in done):
        row["skipped"] = "not every flow ran to its end"
        return row
    start = max(p for p in posted if p is not None)
    end = min(d for d in done if d is not None)
    rtt = rtts.pop()
    row |= {"start_ns": start, "end_ns": end, "base_rtt_ns": rtt}
    if end - start < FAIR_MIN_RTTS * rtt:
        row["skipped"] = f"ran together less than {FAIR_MIN_RTTS} base RTTs"
        return row
    shape = net.shape
    mine = {c.index for c in conns}
    t0s = {shape.t0_of(c.spec.src) for c in conns} | {shape.t0_of(dst)}
    for other in net.connections:
        if other.index in mine or not _overlaps(other, start, end):
            continue
        if shape.t0_of(other.spec.src) in t0s or shape.t0_of(other.spec.dst) in t0s:
            row["skipped"] = f"{other.name} shares their leaves while they run"
            return row
    qps = {q for c in conns for q in (c.sender.local_qp, c.receiver.local_qp)}
    for f in net.faults:
        if any(d[1] in qps for d in f.drops):
            row["skipped"] = f"fault {f.spec} dropped their packets"
            return row
    gbps = [c.throughput_gbps(start, end) for c in conns]
    row["gbps"] = [round(g, 3) for g in gbps]
    row["jain"] = round(sum(gbps) ** 2 / (len(gbps) * sum(g * g for g in gbps)), 4) if any(gbps) else None
    return row


def _overlaps(c: Connection, start: int, end: int) -> bool:
    """Whether connection ``c`` had a write outstanding at some time in [start, end)."""
    for w in c.writes:
        fin = max(w.sent_ns or 0, w.received_ns or 0) if w.done else None
        if w.posted_ns < end and (fin is None or fin > start):
            return True
    return False
