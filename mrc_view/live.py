"""The live side of the view: read a running testbed's state every interval, as records.

Everything comes through the interfaces an operator has, never a process's internals:
the controller's northbound API (``controller.northbound.ControllerClient``: counters,
faults, health, the event stream), the agents' control sockets (``AgentClient.stats``:
connections, EV states and counters, the exact times of recent EV changes) and the
supervisor's files in the run directory (``events.jsonl``, ``health.json``). Each poll
becomes ``mrc_fabric.recording`` records, applied to a :class:`LiveModel` for the page and,
with ``record_to``, appended to a recording file that ``mrc view <run dir>`` replays.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.northbound import ControllerClient, direction_name, kind_name
from mrc_fabric import recording
from mrc_fabric.health import EVENTS_FILE, ProcessState, read_health
from mrc_fabric.p4names import Counter
from mrc_fabric.topology import Role, Topology
from mrc_host.agent.client import AgentClient, AgentError

from . import fidelity
from .model import LiveModel
from .replay import fault_marks

log = logging.getLogger("mrc_view")

DEFAULT_INTERVAL_S = 0.25
HEALTH_EVERY_S = 1.0
COUNTERS_EVERY_S = 1.0  # link loads: reading 8 switches' counters 4x a second cost them 0.3 CPU
AGENT_TIMEOUT_S = 2.0
EVENT_LEVELS = {
    "fault_injected": "warn",
    "fault_expired": "info",
    "fault_cleared": "info",
    "flap_down": "warn",
    "switch_disconnected": "error",
    "agent_dead": "error",
    "error": "error",
    "process_exited": "error",
    "restart_failed": "error",
    "restarts_given_up": "error",
}


@dataclass
class RunSources:
    """Where a live run's state is: its topology, controller address, agent sockets."""

    run_dir: Path
    topology: Topology
    controller: str
    link_mbps: float

    @classmethod
    def of(cls, run_dir: Path) -> RunSources:
        run_dir = run_dir.resolve()
        topo = Topology.load(run_dir / "topology.json")
        link = 0.0
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            link = float(json.loads((run_dir / "run.json").read_text())["config"].get("link_rate") or 0)
        return cls(run_dir, topo, f"unix:{run_dir / 'controller.sock'}", link)

    def agent_sockets(self) -> dict[str, Path]:
        socks = {h.name: self.run_dir / "agents" / f"{h.name}.sock" for h in self.topology.hosts}
        return {h: p for h, p in socks.items() if p.exists()}


def fault_record(topo: Topology, f: Any) -> dict[str, Any]:
    """A northbound ``Fault`` as the recording has it, with the links and switches it marks."""
    kind, target = kind_name(f.spec.kind), f.spec.target
    links, switches = fault_marks(topo, kind, target)
    if not links and not switches:  # a target named by interface or port: the entries say where
        for entry in f.entries:  # "switch:table:port action"
            parts = entry.split(":")
            if len(parts) >= 3 and parts[2].split()[0].isdigit():
                link = topo.link_at(parts[0], int(parts[2].split()[0]))
                if link is not None and link.name not in links:
                    links.append(link.name)
    detail = []
    if f.spec.probability:
        detail.append(f"p={f.spec.probability:g}")
    if f.spec.period_s:
        detail.append(f"period {f.spec.period_s:g} s")
    if f.spec.duration_s:
        detail.append(f"for {f.spec.duration_s:g} s")
    if not f.active:
        detail.append("up (flap)")
    return {
        "id": f.id,
        "kind": kind,
        "target": target,
        "direction": direction_name(f.spec.direction),
        "detail": " ".join(detail),
        "links": links if f.active else [],
        "switches": switches if f.active else [],
    }


def link_rates(
    topo: Topology, cells: list[Any], prev: dict[tuple[str, str, int], int], dt: float
) -> tuple[dict[str, list[float]], dict[tuple[str, str, int], int]]:
    """Mbit/s per link direction from two reads of the switches' port counters ``dt`` apart.

    a->b is a's port_tx where a is a switch, else b's port_rx (a host's NIC); b->a is b's port_tx.
    """
    ports = (Counter.PORT_TX, Counter.PORT_RX)
    now = {(c.switch, c.counter, c.index): int(c.bytes) for c in cells if c.counter in ports}
    rates: dict[str, list[float]] = {}
    if dt <= 0:
        return rates, now

    def rate(key: tuple[str, str, int]) -> float:
        if key not in now or key not in prev:
            return 0.0
        return round(max(0, now[key] - prev[key]) * 8 / dt / 1e6, 3)

    for lk in topo.links:
        a_is_switch = topo.has_switch(lk.a.node)
        up = (
            (lk.a.node, Counter.PORT_TX, lk.a.port)
            if a_is_switch
            else (lk.b.node, Counter.PORT_RX, lk.b.port)
        )
        rates[lk.name] = [rate(up), rate((lk.b.node, Counter.PORT_TX, lk.b.port))]
    return rates, now


class Collector:
    """Polls a live run every ``interval`` seconds in a thread; the model is what the page reads."""

    def __init__(
        self,
        sources: RunSources,
        interval: float = DEFAULT_INTERVAL_S,
        record_to: Path | None = None,
        source: str = "testbed",
    ) -> None:
        self.src = sources
        self.interval = interval
        self.mono0 = time.monotonic()
        self.unix0 = time.time()
        topo = sources.topology
        self.head = recording.header(
            source,
            f"{source} {sources.run_dir.name}",
            self.unix0,
            recording.graph_from_topology(topo),
            sources.link_mbps,
        )
        self.model = LiveModel(self.head)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.writer = recording.RecordingWriter(record_to, self.head) if record_to else None
        self.controller = ControllerClient(sources.controller)
        self.t1_names = {(s.plane, s.index): s.name for s in topo.switches if s.role == Role.T1}
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="view-read")
        self._threads: list[threading.Thread] = []
        self._stream: Any = None
        self._counters_prev: dict[tuple[str, str, int], int] = {}
        self._counters_t = -1e9
        self._faults_key: tuple[Any, ...] = ()
        self._faults_lock = threading.Lock()
        self._health_t = -1e9
        self._fidelity_seen = 0.0  # updated_unix of the last fidelity verdict read
        self._ev_seen_ns: dict[str, int] = {}
        self._ev_states: dict[str, dict[str, str]] = {}
        self._events_offset = 0
        # how long each poll took, per poller
        self.poll_seconds: dict[str, deque[float]] = {
            "fabric": deque(maxlen=1000),
            "agents": deque(maxlen=1000),
        }

    def now(self) -> float:
        return time.monotonic() - self.mono0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        with contextlib.suppress(OSError):  # only what the supervisor writes from now on
            self._events_offset = (self.src.run_dir / EVENTS_FILE).stat().st_size
        threads = {
            "view-fabric": lambda: self._run(self.poll_fabric, "fabric"),
            "view-agents": lambda: self._run(self.poll_agents, "agents"),
            "view-events": self._watch_events,
        }
        for name, fn in threads.items():
            th = threading.Thread(target=fn, name=name, daemon=True)
            th.start()
            self._threads.append(th)

    def stop(self) -> None:
        self._stop.set()
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.cancel()
        for th in self._threads:
            th.join(timeout=5)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.controller.close()
        with self.lock:
            if self.writer is not None:
                self.writer.close()

    def emit(self, records: list[dict[str, Any]]) -> None:
        with self.changed:
            for r in records:
                self.model.apply(r)
                if self.writer is not None:
                    self.writer.write(r)
            self.changed.notify_all()

    # -- the poll loop ----------------------------------------------------------------------------
    def _run(self, poll: Callable[[], list[dict[str, Any]]], name: str) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.emit(poll())
                self.poll_seconds[name].append(time.monotonic() - started)
            except Exception as exc:  # one bad poll (a controller restart...) must not end the view
                log.warning("%s poll failed: %s: %s", name, type(exc).__name__, exc)
            next_at = max(next_at + self.interval, time.monotonic())
            self._stop.wait(next_at - time.monotonic())

    def poll_fabric(self) -> list[dict[str, Any]]:
        """The controller's side: link loads, faults, switch and agent health, supervisor events."""
        records: list[dict[str, Any]] = []
        sample: dict[str, Any] = {"k": "sample"}
        # the switches' counters cost their P4Runtime servers a read of every port: once a second
        links = self._pool.submit(self._links) if self.now() - self._counters_t >= COUNTERS_EVERY_S else None
        with contextlib.suppress(Exception):
            faults = self._faults()
            if faults is not None:
                records.append({"k": "faults", "t": self.now(), "faults": faults})
        if self.now() - self._health_t >= HEALTH_EVERY_S:
            with contextlib.suppress(Exception):
                sample["switches"], sample["agents"] = self._health()
            verdict = fidelity.read_record(self.src.run_dir, self.now(), self._fidelity_seen)
            if verdict is not None:
                self._fidelity_seen = verdict.pop("updated_unix")
                records.append(verdict)
        records += self._supervisor_events()
        if links is not None:
            with contextlib.suppress(Exception):
                sample["links"] = links.result()
        sample["t"] = self.now()
        return [*records, sample]

    def poll_agents(self) -> list[dict[str, Any]]:
        """The hosts' side, every agent read side by side: connections, EV states and changes."""
        hosts = sorted(self.src.agent_sockets().items())
        stats = [(host, self._pool.submit(_stats, sock), self.now()) for host, sock in hosts]
        conns, ev_records, feed = self._agents([(h, f.result(), t) for h, f, t in stats])
        sample = {"k": "sample", "t": self.now(), "conns": conns}
        return [*sorted(ev_records, key=lambda r: float(r["t"])), sample, *feed]

    def _links(self) -> dict[str, list[float]]:
        cells, _errors = self.controller.counters()
        t = self.now()
        rates, self._counters_prev = link_rates(
            self.src.topology, cells, self._counters_prev, t - self._counters_t if self._counters_prev else 0
        )
        self._counters_t = t
        return rates

    def _faults(self) -> list[dict[str, Any]] | None:
        """The active faults when they differ from the last read's, else None."""
        with self._faults_lock:  # the poller and the event stream both read them
            faults = [fault_record(self.src.topology, f) for f in self.controller.faults()]
            key = tuple((f["id"], tuple(f["links"]), tuple(f["switches"]), f["detail"]) for f in faults)
            if key == self._faults_key:
                return None
            self._faults_key = key
            return faults

    def _emit_faults(self) -> None:
        faults = self._faults()
        if faults is not None:
            self.emit([{"k": "faults", "t": self.now(), "faults": faults}])

    def _health(self) -> tuple[dict[str, str], dict[str, str]]:
        self._health_t = self.now()
        resp = self.controller.health()
        switches = {s.switch: "up" if s.reachable else "unreachable" for s in resp.switches}
        agents = {a.host: a.state for a in resp.agents}
        for p in read_health(self.src.run_dir):  # the supervisor knows a switch it is restarting
            if p.name in switches and p.state in (ProcessState.RESTARTING, ProcessState.GAVE_UP):
                switches[p.name] = "restarting" if p.state == ProcessState.RESTARTING else "down"
        return switches, agents

    def _supervisor_events(self) -> list[dict[str, Any]]:
        path = self.src.run_dir / EVENTS_FILE
        try:
            with open(path) as f:
                f.seek(self._events_offset)
                text = f.read()
        except OSError:
            return []
        complete = text[: text.rfind("\n") + 1]
        self._events_offset += len(complete.encode())
        out = []
        for line in complete.splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                d = json.loads(line)
                kind = str(d["kind"])
                out.append(
                    {
                        "k": "event",
                        "t": max(0.0, float(d["time"]) - self.unix0),
                        "kind": kind,
                        "level": EVENT_LEVELS.get(kind, "info"),
                        "text": f"{d['process']} {d['name']}: {kind.replace('_', ' ')} {d.get('detail', '')}",
                    }
                )
        return out

    def _agents(
        self, replies: list[tuple[str, dict[str, Any] | None, float]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """(the sending connections of every agent, their exact EV changes, feed lines)."""
        conns: list[dict[str, Any]] = []
        ev_records: list[dict[str, Any]] = []
        feed: list[dict[str, Any]] = []
        for host, stats, t in replies:
            if stats is None:
                continue  # dead or busy: its health says which
            rows: dict[str, list[list[Any]]] = {}
            for r in stats.get("evs", []):
                if r.get("conn") == "send":
                    cid = f"{host}>{r['peer']}/{r['mode']}"
                    rows.setdefault(cid, []).append(
                        [r["ev"], r["state"], 1 if r["active"] else 0, r["data_sent"], r["lost"]]
                    )
            for c in stats.get("connections", []):
                if c.get("conn") != "send":
                    continue
                cid = f"{host}>{c['peer']}/{c['mode']}"
                conns.append(
                    {
                        "id": cid,
                        "src": host,
                        "dst": c["peer"],
                        "mode": c["mode"],
                        "delivered_bytes": int(c["counters"].get("data_bytes_delivered", 0)),
                        "evs": rows.get(cid, []),
                    }
                )
                ev_records += self._history(cid, c.get("ev_history", []))
                states = {row[0]: row[1] for row in rows.get(cid, [])}
                before = self._ev_states.get(cid, {})
                changed = [(ev, before[ev], new) for ev, new in states.items() if ev in before]
                feed += recording.ev_feed(t, cid, changed, self.t1_names)
                self._ev_states[cid] = states
        return conns, ev_records, feed

    def _history(self, cid: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The agent's exact EV changes (monotonic ns, the clock we read too) not seen before."""
        seen = self._ev_seen_ns.get(cid, int(self.mono0 * 1e9))
        out = []
        for h in history:
            t_ns = int(h["t_ns"])
            if t_ns > seen:
                out.append(
                    {
                        "k": "ev",
                        "t": max(0.0, t_ns / 1e9 - self.mono0),
                        "conn": cid,
                        "ev": h["ev"],
                        "old": h["old"],
                        "new": h["new"],
                        "reason": h.get("reason", ""),
                    }
                )
        if history:
            self._ev_seen_ns[cid] = max(seen, max(int(h["t_ns"]) for h in history))
        return out

    # -- the controller's event stream --------------------------------------------------------------
    def _watch_events(self) -> None:
        while not self._stop.is_set():
            try:
                self._stream = self.controller.events()
                for ev in self._stream:
                    if ev.timestamp < self.unix0 - 1:
                        continue  # the history the stream replays first
                    text = " ".join(
                        x for x in (ev.kind.replace("_", " "), ev.switch, ev.fault_id, ev.message) if x
                    )
                    self.emit(
                        [
                            {
                                "k": "event",
                                "fault": ev.fault_id,
                                "t": max(0.0, ev.timestamp - self.unix0),
                                "kind": ev.kind,
                                "level": EVENT_LEVELS.get(ev.kind, "info"),
                                "text": text,
                            }
                        ]
                    )
                    if ev.kind.startswith(("fault_", "flap_")):  # mark it now, not at the next poll
                        with contextlib.suppress(Exception):
                            self._emit_faults()
            except Exception as exc:  # the stream broke (controller restart) or was cancelled
                if self._stop.is_set():
                    return
                log.info("event stream: %s; reconnecting", exc)
            self._stop.wait(1.0)


def _stats(sock: Path) -> dict[str, Any] | None:
    try:
        return AgentClient(sock, timeout_s=AGENT_TIMEOUT_S).stats()
    except (AgentError, OSError, ValueError):
        return None


@contextlib.contextmanager
def recorded(run_dir: Path, source: str, interval: float = DEFAULT_INTERVAL_S) -> Iterator[Collector]:
    """Record a live run into ``<run_dir>/recording.jsonl`` while the block runs (demo, bench)."""
    collector = Collector(RunSources.of(run_dir), interval, run_dir / recording.FILE_NAME, source)
    collector.start()
    try:
        yield collector
    finally:
        collector.stop()
