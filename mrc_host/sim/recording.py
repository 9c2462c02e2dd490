"""What ``mrc view`` needs to replay a simulated run: a recording (``mrc_fabric.recording``).

``SimRecorder`` samples a ``Network`` every ``interval_ns`` of simulated time through an
event on its loop -- link loads from the ports' byte counters, every connection's EV
states and per-EV packet counts, the bytes its peer acknowledged -- and adds the exact EV
changes the network already logs (``Connection.ev_timeline``) and the faults with their
start and end. Sampling only reads: the run's packets and timers are the same with it or
without it (the sample events take sequence numbers, which order only ties among themselves).
Times in the recording are seconds of simulated time since the run's start.

A recording is bounded (``max_bytes``, ``mrc-sim --record-max-mib``): a run that stalls
samples until its time limit, and before the bound one such run held 24 GB of samples and
was killed for memory. Samples are kept as the JSON lines they will be written as; once
they reach the bound, sampling stops (the run goes on), stderr says so, and the file's
header carries ``truncated`` (the time from which records are missing) and ends with a
``recording_truncated`` event; the records between stay within the bound.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mrc_fabric import recording

from .fabric import LEAF_TO_SPINE, NIC_TO_LEAF, FabricShape
from .network import START_NS, Network

SAMPLES = 400  # samples over the expected run time by default
MAX_BYTES = 512 << 20  # a recording's size bound by default (mrc view reads it whole)


def sim_graph(shape: FabricShape) -> dict[str, Any]:
    """The simulator's fabric in the recording's terms, with the simulator's own names."""
    nodes: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for p in range(shape.planes):
        nodes += [{"name": f"p{p}-t1_{j}", "role": "t1", "plane": p, "index": j} for j in range(shape.t1)]
        nodes += [{"name": f"p{p}-t0_{i}", "role": "t0", "plane": p, "index": i} for i in range(shape.t0)]
        for h in range(shape.hosts):
            links.append({"name": f"h{h}-p{p}", "a": f"h{h}", "b": f"p{p}-t0_{shape.t0_of(h)}", "plane": p})
        for i in range(shape.t0):
            for j in range(shape.t1):
                links.append(
                    {"name": f"p{p}-t0_{i}-t1_{j}", "a": f"p{p}-t0_{i}", "b": f"p{p}-t1_{j}", "plane": p}
                )
    nodes += [{"name": f"h{h}", "role": "host", "plane": -1, "index": h} for h in range(shape.hosts)]
    return recording.graph(shape.planes, nodes, links)


def fault_marks(kind: str, target: str, shape: FabricShape) -> tuple[list[str], list[str]]:
    """(links, switches) a simulator fault marks on the drawing."""
    links = {lk["name"] for lk in sim_graph(shape)["links"]}
    if kind == "switch-down":
        return [], [target]
    if target in links:
        return [target], []
    return [], []


def _t_us(change: dict[str, object]) -> float:
    t = change["t_us"]
    assert isinstance(t, int | float)
    return float(t)


def _line(record: dict[str, Any]) -> str:
    """A record as the recording's writer writes it (one JSON line)."""
    return json.dumps(record, separators=(",", ":")) + "\n"


class SimRecorder:
    def __init__(
        self, net: Network, interval_ns: int, title: str = "mrc-sim", max_bytes: int = MAX_BYTES
    ) -> None:
        self.net = net
        self.interval_ns = max(1, interval_ns)
        self.title = title
        self.max_bytes = max_bytes
        self.samples: list[tuple[float, str]] = []  # (t, its JSON line)
        self.sample_bytes = 0
        self.truncated: float | None = None  # the time from which records are missing
        self._tx: dict[str, list[int]] = {}
        self._last_ns = START_NS
        self._evs_before: dict[str, dict[str, str]] = {}

    def start(self) -> None:
        self.net.loop.at(self.net.loop.now, self._tick)

    def _t(self, ns: int) -> float:
        return max(0, ns - START_NS) / 1e9

    def _tick(self) -> None:
        self.sample()
        loop = self.net.loop
        if self.truncated is None and not loop.stopped and loop.waiting():
            loop.at(loop.now + self.interval_ns, self._tick)

    def _truncate(self, t: float) -> None:
        self.truncated = t
        sys.stderr.write(
            f"mrc-sim: the recording reached its bound of {self.max_bytes / 2**20:g} MiB "
            f"(--record-max-mib) at t = {t:.6f} s; it stops there and is marked truncated, "
            "the run goes on\n"
        )

    def sample(self) -> None:
        now = self.net.loop.now
        dt = (now - self._last_ns) / 1e9
        links: dict[str, list[float]] = {}
        tx: dict[str, list[int]] = {}
        for port in self.net.fabric.ports.values():
            d = 0 if port.kind in (NIC_TO_LEAF, LEAF_TO_SPINE) else 1  # a->b is upwards
            tx.setdefault(port.link, [0, 0])[d] = port.tx_bytes
        for link, (up, down) in tx.items():
            before = self._tx.get(link, [0, 0])
            links[link] = [
                round((up - before[0]) * 8 / dt / 1e6, 3) if dt > 0 else 0.0,
                round((down - before[1]) * 8 / dt / 1e6, 3) if dt > 0 else 0.0,
            ]
        self._tx, self._last_ns = tx, now
        conns = []
        for c in self.net.connections:
            ep = c.sender
            evs = []
            for value, e in sorted(ep.evset.entries.items()):
                k = ep.counters.per_ev.get(value)
                evs.append(
                    [
                        f"{value:08x}",
                        e.state.value,
                        1 if e.active else 0,
                        k.data_packets_sent if k else 0,
                        k.packets_lost if k else 0,
                    ]
                )
            conns.append(
                {
                    "id": c.name,
                    "src": f"h{c.spec.src}",
                    "dst": f"h{c.spec.dst}",
                    "mode": c.spec.mode.value,
                    "delivered_bytes": ep.counters.data_bytes_delivered,
                    "evs": evs,
                }
            )
        t = self._t(now)
        line = _line({"k": "sample", "t": t, "links": links, "conns": conns})
        if self.sample_bytes + len(line) > self.max_bytes:
            self._truncate(t)
            return
        self.samples.append((t, line))
        self.sample_bytes += len(line)

    def records(self) -> list[dict[str, Any]]:
        """The records other than samples, in no order: EV changes, faults, the feed."""
        shape = self.net.shape
        t1_names = {(p, j): f"p{p}-t1_{j}" for p in range(shape.planes) for j in range(shape.t1)}
        out: list[dict[str, Any]] = []
        end = self.net.loop.now
        for c in self.net.connections:
            changes = [e for e in c.ev_timeline if e["side"] == "sender"]
            for e in changes:
                out.append(
                    {
                        "k": "ev",
                        "t": _t_us(e) / 1e6,
                        "conn": c.name,
                        "ev": e["ev"],
                        "old": e["old"],
                        "new": e["new"],
                        "reason": e.get("reason", ""),
                    }
                )
            # one feed line per path and change within each sampling interval
            bins: dict[int, list[tuple[str, str, str]]] = {}
            for e in changes:
                b = int(_t_us(e) * 1e3 // self.interval_ns)
                bins.setdefault(b, []).append((str(e["ev"]), str(e["old"]), str(e["new"])))
            for b, group in sorted(bins.items()):
                t = (b + 1) * self.interval_ns / 1e9
                out += recording.ev_feed(min(t, self._t(end)), c.name, group, t1_names)
        edges: list[tuple[int, str, Any]] = []
        for f in self.net.faults:
            edges.append((f.start_ns, "fault_injected", f))
            if f.end_ns is not None and f.end_ns <= end:
                edges.append((f.end_ns, "fault_cleared", f))
        active: list[Any] = []
        for ns, kind, f in sorted(edges, key=lambda x: x[0]):
            if kind == "fault_injected":
                active.append(f)
            else:
                active = [a for a in active if a is not f]
            t = self._t(ns)
            out.append(
                {
                    "k": "event",
                    "t": t,
                    "kind": kind,
                    "level": "warn" if kind == "fault_injected" else "info",
                    "text": f.spec,
                }
            )
            faults = []
            for a in active:
                links, switches = fault_marks(a.kind, a.target, shape)
                faults.append(
                    {
                        "id": f"f{self.net.faults.index(a) + 1}",
                        "kind": a.kind,
                        "target": a.target,
                        "direction": "both",
                        "detail": a.spec,
                        "links": links,
                        "switches": switches,
                    }
                )
            out.append({"k": "faults", "t": t, "faults": faults})
        return out

    def lines(self) -> list[tuple[float, str]]:
        """Every record after the header as (t, JSON line), in time order (samples first among
        records of one time), cut where the bound is reached (``truncated`` then says when)."""
        out = list(self.samples)
        out += [(float(r["t"]), _line(r)) for r in self.records()]
        out.sort(key=lambda x: x[0])
        total = 0
        for n, (t, line) in enumerate(out):
            total += len(line)
            if self.truncated is not None and t >= self.truncated:
                return out[:n]  # sampling stopped here: nothing from then on
            if total > self.max_bytes:
                if self.truncated is None:
                    self._truncate(t)
                self.truncated = t
                return out[:n]
        return out

    def write(self, path: Path) -> Path:
        shape = self.net.shape
        lines = self.lines()
        # started_unix 0: simulated time has no wall clock (the page shows seconds since the start)
        head = recording.header("mrc-sim", self.title, 0.0, sim_graph(shape), shape.link_gbps * 1000)
        if self.truncated is not None:
            head["truncated"] = self.truncated
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w") as f:
            f.write(_line(head))
            f.writelines(line for _, line in lines)
            if self.truncated is not None:
                text = f"the recording reached its bound ({self.max_bytes / 2**20:g} MiB): nothing after this"
                end = {"k": "event", "t": self.truncated, "kind": "recording_truncated", "level": "warn"}
                f.write(_line({**end, "text": text}))
        return path
