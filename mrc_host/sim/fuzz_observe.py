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

from .fabric import CONTROL_BYTES, DATA_OVERHEAD, Port
from .fault_state import Drop, Fault, ns_per_byte
from .faults import KILLING_KINDS
from .network import START_NS, Connection, Network

# the state that carries data (a SKIP EV sits out a penalty and turns GOOD before it carries any)
ALIVE = frozenset({"GOOD"})
FAIR_MIN_RTTS = 10  # a fair group is judged over at least this many base RTTs of common running
RTT_SAMPLE_RTTS = 1  # the smoothed RTT of every connection is read once per base RTT after a fault
AVERAGE_RTTS = 4  # a floor is also taken as the entries per base RTT over this many before a failure
BLIND_RTTS = 1.5  # a young connection's first RTT, in drop times at the element (half an RTT on the way)
QUEUE_SAMPLES = 60  # the receivers' last hops are read this many times over 3 base RTTs from a failure
QUEUE_RTT_SHARE = 4  # a failure is under a queue when the last hop waits a base RTT over this or more


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
    # the receivers' last hops on the failed element's plane: port -> [(time, bytes queued)]
    lasthop: dict[Port, list[tuple[int, int]]] = field(default_factory=dict)

    def data_drops(self) -> list[Drop]:
        """The DATA packets the fault dropped in this window (its phase, for a flap)."""
        start, end = self.start, self.end
        return [d for d in self.fault.drops if d.data and start <= d.at_ns and (end is None or d.at_ns < end)]


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
        plane = _plane_of(w.fault.target)
        if plane is None or not self.rtts:
            return
        fab = self.net.fabric
        w.lasthop = {fab.leaf_down[plane][h]: [] for h in sorted({c.spec.dst for c in self.net.connections})}
        step = max(25, 3 * self.rtts[-1] // QUEUE_SAMPLES)
        for k in range(QUEUE_SAMPLES + 1):
            self.net.loop.at(w.start + k * step, self._sample_lasthop, w)

    def _sample_lasthop(self, w: _Window) -> None:
        now = self.net.loop.now
        for port, samples in w.lasthop.items():
            samples.append((now, port.queued))

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
        failures = [self._failure(w) for w in self.windows]
        for w, f in zip(self.windows, failures, strict=True):
            self._oracle(w, f)
        return {
            "now_ns": net.loop.now,
            "flows": [self._flow(c) for c in net.connections],
            "failures": failures,
            "dead_paths": [row for w in self.windows for row in self._dead_paths(w)],
            "fair_groups": self._fair_groups(),
            "slow_planes": self._slow_planes(),
        }

    def _oracle(self, w: _Window, f: dict[str, Any]) -> None:
        """Each connection's loss no endpoint could have saved (``bench/fault_oracle.py``, per
        receiver): its first DATA dropped reaches the far end of the failed element, waits what
        the receiver's last hop held then (nothing if it would be trimmed), crosses the last
        link: the receiver could know then, from any of its connections (``due``). Its report
        reaches a sender over the reverse hops, and that sender's packets reach the element
        over the hops before it: each ``flow`` row gets ``oracle_sent`` (its drops before then)
        and ``queue_ns`` (the last hop's wait at ``due``, under which the floor says little)."""
        if not w.reached or not f["flows"]:
            return
        shape = self.net.shape
        by_name = {c.name: c for c in self.net.connections}
        data_hop = shape.link_delay_ns + int((MTU + DATA_OVERHEAD) * 8 / shape.link_gbps)
        ctl_hop = shape.link_delay_ns + int(CONTROL_BYTES * 8 / shape.link_gbps)
        first: dict[int, list[int]] = {}
        for d in w.data_drops():
            first.setdefault(d.qp, []).append(d.at_ns)
        due: dict[int, tuple[int, int]] = {}  # receiver -> (due, queue wait then)
        rows = []
        for x in f["flows"]:
            c = by_name[x["flow"]]
            drops = first.get(c.receiver.local_qp)
            at = _hop_index(w.fault.target, shape, c.spec.src, c.spec.dst)
            if not drops or at is None:
                continue
            reach = drops[0] + (4 - at) * data_hop if at < 4 else drops[0]
            port = self.net.fabric.leaf_down[_plane_of(w.fault.target) or 0][c.spec.dst]
            queued = 0
            for t, q in w.lasthop.get(port, []):
                if t > reach:
                    break
                queued = q
            trimmed = at == 4 or queued + DATA_OVERHEAD + MTU > port.trim_bytes
            wait = 0 if trimmed else int(queued * port.ns_per_byte)
            arrive = reach + wait + (0 if at == 4 else data_hop)
            was = due.get(c.spec.dst)
            if was is None or arrive < was[0]:
                due[c.spec.dst] = (arrive, wait)
            rows.append((x, c, at, drops))
        for x, c, at, drops in rows:
            arrive, wait = due[c.spec.dst]
            back = 4 if shape.t0_of(c.spec.src) != shape.t0_of(c.spec.dst) else 2
            heard = arrive + back * ctl_hop + (at - 1) * data_hop
            x["oracle_sent"] = sum(1 for t in drops if t < heard)
            x["queue_ns"] = wait
            x["under_queue"] = wait * QUEUE_RTT_SHARE >= c.base_rtt_ns

    def _slow_planes(self) -> list[dict[str, Any]]:
        """Per connection alone in its time (no other connection had a write outstanding then,
        no other fault acted) on a fabric with planes slowed (``rate`` faults): its DATA bytes
        per plane against each plane's capacity between its hosts (the slowest of its NIC
        links and of the sum over its T1s, each the slowest of its hops), and how long it ran
        against the time its bytes take at the summed capacity."""
        net = self.net
        if not any(f.kind == "rate" for f in net.faults):
            return []
        rows = []
        for c in net.connections:
            posted = min((w.posted_ns for w in c.writes), default=None)
            done = _done_ns(c)
            if (
                posted is None
                or done is None
                or any(o is not c and _overlaps(o, posted, done) for o in net.connections)
            ):
                continue
            if any(f.kind != "rate" and f.down_between(posted, done) for f in net.faults):
                continue  # (a failure or loss meanwhile: its capacity is not the planes' rates)
            cap = _plane_capacity(net, c.spec.src, c.spec.dst, (posted + done) // 2)
            sent = [0] * net.shape.planes
            for ev, row in c.sender.counters.per_ev.items():
                sent[ev >> 28] += row.data_bytes_sent
            total = sum(sent) or 1
            size = sum(w.size for w in c.writes)
            rows.append(
                {
                    "flow": c.name,
                    "capacity_gbps": [round(g, 3) for g in cap],
                    "share": [round(b / total, 4) for b in sent],
                    "capacity_share": [round(g / sum(cap), 4) for g in cap],
                    "goodput_gbps": round(size * 8 / (done - posted), 3),
                    "ideal_rtts": size * 8 / sum(cap) / c.base_rtt_ns,
                }
            )
        return rows

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
        for d in w.data_drops():
            lost.setdefault(d.qp, []).append(d.at_ns)
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
        for d in w.data_drops():
            if d.qp in self.by_rx_qp:
                first.setdefault((d.qp, d.plane, d.t1), d.at_ns)
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
        if any(d.qp in qps for d in f.drops):
            row["skipped"] = f"fault {f.spec} dropped their packets"
            return row
    gbps = [c.throughput_gbps(start, end) for c in conns]
    row["gbps"] = [round(g, 3) for g in gbps]
    row["jain"] = round(sum(gbps) ** 2 / (len(gbps) * sum(g * g for g in gbps)), 4) if any(gbps) else None
    return row


MTU = 4096


def _plane_of(target: str) -> int | None:
    """The plane of a fault target (``p1-t0_0-t1_2``, ``p1-t1_3``, ``h4-p1``), or None."""
    if target.startswith("p"):
        return int(target[1:].split("-", 1)[0])
    if target.startswith("h") and "-p" in target:
        return int(target.rsplit("-p", 1)[1])
    return None


def _hop_index(target: str, shape: Any, src: int, dst: int) -> int | None:
    """Which hop of a cross-leaf path (1: the sender's NIC link, 2: its leaf's uplink, 3: the
    spine's downlink, 4: the receiver's last hop) a failed element is, for ``src`` to ``dst``;
    a same-leaf path's two hops are 1 and 4. None when the path does not cross it."""
    a, b = shape.t0_of(src), shape.t0_of(dst)
    if target.startswith("h"):
        host = int(target[1:].split("-p")[0])
        return 1 if host == src else 4 if host == dst else None
    parts = target.split("-")
    if len(parts) == 3:  # a T0-T1 link
        leaf = int(parts[1].split("_")[1])
        return None if a == b else 2 if leaf == a else 3 if leaf == b else None
    kind, _, idx = parts[1].partition("_")
    if kind == "t1":
        return None if a == b else 3
    leaf = int(idx)
    return 4 if leaf == b else 2 if leaf == a else None


def _plane_capacity(net: Network, src: int, dst: int, at_ns: int) -> list[float]:
    """Each plane's rate in Gb/s between ``src`` and ``dst`` at ``at_ns``: the slower of the two
    NIC links and, across the leaves, the sum over T1s of each one's slowest hop."""
    fab = net.fabric
    s = net.shape
    a, b = s.t0_of(src), s.t0_of(dst)

    def gbps(port: Port) -> float:
        return 8 / ns_per_byte(port.passive_faults, at_ns, port.ns_per_byte)

    out = []
    for p in range(s.planes):
        cap = min(gbps(fab.nic_up[src][p]), gbps(fab.leaf_down[p][dst]))
        if a != b:
            spine = sum(min(gbps(fab.leaf_up[p][a][t]), gbps(fab.spine_down[p][t][b])) for t in range(s.t1))
            cap = min(cap, spine)
        out.append(cap)
    return out


def _overlaps(c: Connection, start: int, end: int) -> bool:
    """Whether connection ``c`` had a write outstanding at some time in [start, end)."""
    for w in c.writes:
        fin = max(w.sent_ns or 0, w.received_ns or 0) if w.done else None
        if w.posted_ns < end and (fin is None or fin > start):
            return True
    return False
