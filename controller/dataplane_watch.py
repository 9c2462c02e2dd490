"""Whether each switch's data plane carries what it is sent, read from its own counters.

A P4Runtime session that answers says nothing of the data plane behind it: a BMv2 switch
whose packet thread hung on a port that went down and up keeps answering as primary while it
receives nothing on any port. So every ``interval_s`` the watch reads, from every switch with
a session, ``port_rx``/``port_tx`` of its cabled ports and ``drop_reason`` (one Read each), and
judges the differences over the last ``WINDOWS`` reads (:class:`DataplaneJudge`, pure):

- a **silent link**: one end sent frames into a switch-to-switch cable (``port_tx``) and the
  other end counted none in (``port_rx``, which the P4 program counts before anything can drop
  a frame: no fault the controller writes makes a cable silent);
- a switch **not receiving**: its neighbours sent it frames and none came in on any port;
- a switch **not forwarding**: frames came in and none went out, and its drop counters do not
  account for them (a fault that drops at a port counts there).

Each needs ``MIN_FRAMES`` frames over ``WINDOWS`` reads, every read showing the symptom, and
ends at the first read that shows the opposite (a frame received, a frame sent). Host links are
not judged: a host's own counters are not the controller's to read. Verdicts are events
(``dataplane_silent`` / ``dataplane_ok``), ``GetHealth`` rows and the status of every path
through them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from controller.p4rt_client import SwitchPool
from mrc_fabric.p4names import Counter
from mrc_fabric.topology import Topology

log = logging.getLogger(__name__)

INTERVAL_S = 2.0  # between two reads of every switch's counters
WINDOWS = 2  # consecutive reads a symptom must show
MIN_FRAMES = 10  # frames over those reads before a verdict
NOT_RECEIVING, NOT_FORWARDING = "not receiving", "not forwarding"


@dataclass(frozen=True)
class PortCounts:
    """One read of a switch: packets in and out per port, and dropped (every reason)."""

    rx: dict[int, int]
    tx: dict[int, int]
    drops: int


@dataclass(frozen=True)
class Verdict:
    """What is wrong (a switch's state, or ``silent`` for a link direction) and the figures."""

    state: str
    detail: str


@dataclass(frozen=True)
class Direction:
    """Frames from ``sender``'s port into ``receiver``'s over one cable."""

    sender: str
    sender_port: int
    receiver: str
    receiver_port: int

    @property
    def name(self) -> str:
        return f"{self.sender}:{self.sender_port} → {self.receiver}:{self.receiver_port}"


def switch_directions(topo: Topology) -> list[Direction]:
    """Both directions of every switch-to-switch cable."""
    out = []
    for link in topo.links:
        a, b = link.a, link.b
        if topo.has_switch(a.node) and topo.has_switch(b.node):
            out += [Direction(a.node, a.port, b.node, b.port), Direction(b.node, b.port, a.node, a.port)]
    return out


@dataclass
class _Window:
    """Differences of one read: per direction (sent, received), per switch (in, out, dropped,
    sent to it by its neighbours)."""

    links: dict[Direction, tuple[int, int]] = field(default_factory=dict)
    switches: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)


class DataplaneJudge:
    """Verdicts from successive counter reads (no I/O: ``update`` takes each read)."""

    def __init__(self, topo: Topology, interval_s: float = INTERVAL_S) -> None:
        self.directions = switch_directions(topo)
        self.interval_s = interval_s
        self._prev: dict[str, PortCounts] = {}
        self._windows: deque[_Window] = deque(maxlen=WINDOWS)
        self.links: dict[Direction, Verdict] = {}
        self.switches: dict[str, Verdict] = {}

    def update(self, snapshot: dict[str, PortCounts]) -> None:
        """One read of the switches that answered; a switch missing from it, or whose counters
        went back (it restarted), is judged again from its next read."""
        delta: dict[str, PortCounts] = {}
        for name, now in snapshot.items():
            before = self._prev.get(name)
            if (
                before is not None
                and all(now.rx.get(p, 0) >= v for p, v in before.rx.items())
                and all(now.tx.get(p, 0) >= v for p, v in before.tx.items())
                and now.drops >= before.drops
            ):
                delta[name] = PortCounts(
                    {p: v - before.rx.get(p, 0) for p, v in now.rx.items()},
                    {p: v - before.tx.get(p, 0) for p, v in now.tx.items()},
                    now.drops - before.drops,
                )
        self._prev = dict(snapshot)
        w = _Window()
        sent_to: dict[str, int] = {}
        for d in self.directions:
            if d.sender in delta and d.receiver in delta:
                sent = delta[d.sender].tx.get(d.sender_port, 0)
                w.links[d] = (sent, delta[d.receiver].rx.get(d.receiver_port, 0))
                sent_to[d.receiver] = sent_to.get(d.receiver, 0) + sent
        for name, dc in delta.items():
            w.switches[name] = (sum(dc.rx.values()), sum(dc.tx.values()), dc.drops, sent_to.get(name, 0))
        self._windows.append(w)
        self._judge(set(delta))

    def _seconds(self) -> str:
        return f"{len(self._windows) * self.interval_s:g} s"

    def _judge(self, seen: set[str]) -> None:
        full = len(self._windows) == WINDOWS
        for d in self.directions:
            flows = [w.links[d] for w in self._windows if d in w.links]
            if flows and flows[-1][1] > 0:
                self.links.pop(d, None)  # it received: whatever was wrong is over
            elif full and len(flows) == WINDOWS and all(s > 0 and r == 0 for s, r in flows):
                sent = sum(s for s, _r in flows)
                if sent >= MIN_FRAMES:
                    self.links[d] = Verdict(
                        "silent",
                        f"{d.sender} sent {sent} frames on port {d.sender_port} in {self._seconds()}, "
                        f"{d.receiver} received none on port {d.receiver_port}",
                    )
        for name in seen:
            self._judge_switch(name, [w.switches[name] for w in self._windows if name in w.switches], full)

    def _judge_switch(self, name: str, rows: list[tuple[int, int, int, int]], full: bool) -> None:
        """``rows``: (in, out, dropped, sent to it) of each read in the window, the last one now."""
        verdict = self.switches.get(name)
        last_in, last_out = rows[-1][0], rows[-1][1]
        if verdict is not None and (last_in if verdict.state == NOT_RECEIVING else last_out) > 0:
            del self.switches[name]
        if not full or len(rows) < WINDOWS:
            return
        rx, tx, drops, sent_to = (sum(r[i] for r in rows) for i in range(4))
        if rx == 0 and sent_to >= MIN_FRAMES and all(r[3] > 0 for r in rows):
            detail = f"its neighbours sent it {sent_to} frames in {self._seconds()}, none came in on any port"
            self.switches[name] = Verdict(NOT_RECEIVING, detail)
        elif tx == 0 and rx - drops >= MIN_FRAMES and all(r[0] > 0 for r in rows):
            detail = f"received {rx} frames in {self._seconds()}, sent none, dropped {drops} (by reason)"
            self.switches[name] = Verdict(NOT_FORWARDING, detail)


def path_silence(
    hops: list[tuple[str, int, int | None]], links: dict[Direction, Verdict], switches: dict[str, Verdict]
) -> str:
    """Why a path's frames die by the counters (its first silent switch or cable), or ""; ``hops``
    are its switches as (name, in port, out port)."""
    for i, (node, _in_port, out_port) in enumerate(hops):
        if node in switches:
            return f"{node} {switches[node].state}: {switches[node].detail}"
        if out_port is not None and i + 1 < len(hops):
            d = Direction(node, out_port, hops[i + 1][0], hops[i + 1][1])
            if d in links:
                return f"link {d.name} silent: {links[d].detail}"
    return ""


Reader = Callable[[str], PortCounts]  # one switch's counters, or raise


class CellReader(Protocol):
    def read_cells(self, cells: Iterable[tuple[str, int | None]]) -> dict[tuple[str, int], int]: ...


def read_port_counts(session: CellReader, ports: Iterable[int]) -> PortCounts:
    """A switch's ``port_rx``/``port_tx`` of ``ports`` and its drops, in one Read."""
    ports = sorted(ports)
    cells: list[tuple[str, int | None]] = [(c, p) for c in (Counter.PORT_RX, Counter.PORT_TX) for p in ports]
    got = session.read_cells([*cells, (Counter.DROP_REASON, None)])
    return PortCounts(
        {p: got.get((Counter.PORT_RX, p), 0) for p in ports},
        {p: got.get((Counter.PORT_TX, p), 0) for p in ports},
        sum(v for (c, _i), v in got.items() if c == Counter.DROP_REASON),
    )


class DataplaneWatch:
    """The judge fed by a thread that reads every switch each ``interval_s``; verdicts changing
    are published as events."""

    def __init__(
        self,
        topo: Topology,
        switches: Callable[[], Iterable[str]],
        read: Reader,
        publish: Callable[..., object],
        interval_s: float = INTERVAL_S,
    ) -> None:
        self.judge = DataplaneJudge(topo, interval_s)
        self.interval_s = interval_s
        self._switches = switches  # the ones with a session now
        self._read = read
        self._publish = publish
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def of_pool(
        cls, topo: Topology, pool: SwitchPool, publish: Callable[..., object], interval_s: float = INTERVAL_S
    ) -> DataplaneWatch:
        """The watch of every switch of ``pool`` that has a session, reading its cabled ports."""
        ports = {sw.name: [e.port for e in topo.ports_of(sw.name)] for sw in topo.switches}

        def ready() -> list[str]:
            return [n for n, s in pool.sessions.items() if s.ready]

        return cls(topo, ready, lambda name: read_port_counts(pool[name], ports[name]), publish, interval_s)

    def start(self) -> None:
        if self.interval_s > 0:
            self._thread = threading.Thread(target=self._run, name="dataplane-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def verdicts(self) -> tuple[dict[Direction, Verdict], dict[str, Verdict]]:
        with self._lock:
            return dict(self.judge.links), dict(self.judge.switches)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.check()
            except Exception:  # the watch must outlive any surprise
                log.exception("data-plane watch")

    def check(self) -> None:
        """One round: read every switch, judge, publish what changed."""
        snapshot = {}
        for name in self._switches():
            try:
                snapshot[name] = self._read(name)
            except Exception as exc:  # a switch that does not answer: judged at its next read
                log.debug("%s: counters unread: %s", name, exc)
        with self._lock:
            links, switches = dict(self.judge.links), dict(self.judge.switches)
            self.judge.update(snapshot)
            new_links, new_switches = dict(self.judge.links), dict(self.judge.switches)
        for d in new_links.keys() - links.keys():
            message = f"link {d.name}: {new_links[d].detail}"
            self._publish("dataplane_silent", switch=d.receiver, message=message)
        for d in links.keys() - new_links.keys():
            self._publish("dataplane_ok", switch=d.receiver, message=f"link {d.name} delivers again")
        for name in new_switches.keys() - switches.keys():
            v = new_switches[name]
            self._publish("dataplane_silent", switch=name, message=f"{name} {v.state}: {v.detail}")
        for name in switches.keys() - new_switches.keys():
            self._publish("dataplane_ok", switch=name, message=f"{name} carries frames again")
