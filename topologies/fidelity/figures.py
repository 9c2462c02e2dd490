"""One interval of a live run in numbers: what two raw samples ``dt`` seconds apart say.

Pure: :func:`interval` takes two :class:`RawSample` and returns :class:`Interval` (per
process its CPU, how close its busiest thread came to a whole core, how long its threads
waited for a CPU; per link direction what it carried against its configured rate and
whether its queue held packets; the machine's CPU), which ``judge`` holds against the
thresholds. Kept apart from the sampling so every rule can be tested on made-up numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from topologies.fidelity.procfs import IfStats, MachineTimes, TaskTimes
from topologies.fidelity.qdiscs import QdiscStats

QUEUED_MIN_BYTES = 3000  # two full frames: a queue that held less was only passing them on
# HTB counts an "overlimit" each time its rate holds back a packet that is waiting: a link whose
# queue never ran dry meets about one per packet it sends; one that idled part of the interval,
# fewer. Below this share the link was not backlogged long enough to be judged on its rate.
HELD_MIN = 0.5


@dataclass
class Backlogged:
    """One link read every few tens of ms (``backlog.FineReader``): the steps whose queue held
    at least ``QUEUED_MIN_BYTES`` at both ends, how long they lasted and what the link sent in
    them. A link fed in bursts sends at its rate in such steps and idles, its queue empty, in
    others; a link the machine does not serve falls short in them."""

    seconds: float = 0.0
    bytes: int = 0
    read_s: float = 0.0  # the time its reads covered in all

    def add_step(self, before: QdiscStats, after: QdiscStats, dt: float) -> None:
        self.read_s += dt
        if before.backlog_bytes >= QUEUED_MIN_BYTES and after.backlog_bytes >= QUEUED_MIN_BYTES:
            self.seconds += dt
            self.bytes += max(0, after.bytes - before.bytes)

    @property
    def mbit_s(self) -> float:
        return self.bytes * 8 / self.seconds / 1e6 if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class ProcessKey:
    """A watched process: its role (bmv2, shim, agent, controller), name and pid."""

    kind: str
    name: str
    pid: int

    @property
    def label(self) -> str:
        return f"{self.kind} {self.name}"


@dataclass(frozen=True)
class LinkDir:
    """One direction of a link: it leaves through ``ifname`` (whose qdisc queues it)."""

    name: str  # "a>b"
    ifname: str


@dataclass
class RawSample:
    t: float  # time.monotonic()
    tasks: dict[ProcessKey, dict[int, TaskTimes]]
    machine: MachineTimes
    softnet_drops: int
    psi_us: int | None
    ifstats: dict[str, IfStats]
    qdiscs: dict[str, QdiscStats]
    rates: dict[str, float]  # ifname -> configured Mbit/s (its HTB), where one is set
    switch_queues: dict[str, int] = field(default_factory=dict)  # BMv2 switch -> deepest queue
    # ifname -> rate-limited HTB classes a frame passes (qdiscs.held_levels; absent: 1)
    held_levels: dict[str, int] = field(default_factory=dict)
    # ifname -> its fine reads since the previous sample (only links read finely: suspects)
    backlogged: dict[str, Backlogged] = field(default_factory=dict)


@dataclass(frozen=True)
class ProcessFig:
    key: ProcessKey
    cpu: float  # cores used by all its threads
    busiest: str  # name of the thread closest to a whole core (run + wait)
    demand: float  # that thread's share of the interval running or waiting to run
    waited: float  # the largest share of the interval one of its threads waited for a CPU
    delay_ms: float  # mean wait per scheduling-in over its threads


@dataclass(frozen=True)
class LinkFig:
    link: LinkDir
    mbit_s: float
    configured: float | None  # Mbit/s, None: no rate limit
    queued: bool  # its queue held packets at both ends of the interval and the rate held it back
    backlog: int  # packets in its queue at the end of the interval
    held: float = 0.0  # times the rate held a packet back, per packet sent (HTB overlimits / packets)
    fine: Backlogged | None = None  # read finely in this interval: its steps with a standing queue


@dataclass
class Interval:
    t: float
    dt: float
    machine_busy: float  # share of all CPUs busy
    softirq: float  # share of all CPUs in softirq (the Linux target's forwarding)
    cpu_pressure: float | None  # share of the interval some task waited for a CPU (PSI)
    outside_cores: float = 0.0  # CPU used by work outside this run (other users, builds...)
    switch_queues: dict[str, int] = field(default_factory=dict)  # BMv2: deepest data queue, packets
    procs: list[ProcessFig] = field(default_factory=list)
    links: list[LinkFig] = field(default_factory=list)

    @property
    def fabric_mbit_s(self) -> float:
        return sum(link.mbit_s for link in self.links)


def process_fig(
    key: ProcessKey, before: dict[int, TaskTimes], after: dict[int, TaskTimes], dt: float
) -> ProcessFig:
    """A process's interval from its threads' schedstat lines (threads born meanwhile count
    from zero; threads that ended are gone from both sums)."""
    zero = TaskTimes("", 0, 0, 0)
    cpu_ns = wait_ns = slices = 0
    busiest, demand, waited = "", 0.0, 0.0
    for tid, now in after.items():
        was = before.get(tid, zero)
        run, wait, n = now.cpu_ns - was.cpu_ns, now.wait_ns - was.wait_ns, now.slices - was.slices
        if run < 0 or wait < 0:  # a reused tid: not the same thread
            run, wait, n = now.cpu_ns, now.wait_ns, now.slices
        cpu_ns, wait_ns, slices = cpu_ns + run, wait_ns + wait, slices + max(0, n)
        share = (run + wait) / 1e9 / dt
        if share > demand:
            busiest, demand = now.name, share
        waited = max(waited, wait / 1e9 / dt)
    delay = wait_ns / slices / 1e6 if slices else 0.0
    return ProcessFig(key, cpu_ns / 1e9 / dt, busiest, min(demand, 1.0), min(waited, 1.0), delay)


def link_fig(link: LinkDir, a: RawSample, b: RawSample, dt: float) -> LinkFig:
    before, after = a.ifstats.get(link.ifname), b.ifstats.get(link.ifname)
    mbit = 0.0
    if before is not None and after is not None:
        mbit = max(0, after.tx_bytes - before.tx_bytes) * 8 / dt / 1e6
    q0, q1 = a.qdiscs.get(link.ifname), b.qdiscs.get(link.ifname)
    held = 0.0
    if q0 is not None and q1 is not None and q1.packets > q0.packets:
        # per frame sent and per HTB class it passes: 1 for a link that never ran dry, however
        # many classes count each held-back frame
        levels = max(1, b.held_levels.get(link.ifname, 1))
        held = max(0, q1.overlimits - q0.overlimits) / (q1.packets - q0.packets) / levels
    queued = (
        q0 is not None
        and q1 is not None
        and q0.backlog_bytes >= QUEUED_MIN_BYTES
        and q1.backlog_bytes >= QUEUED_MIN_BYTES
        and held >= HELD_MIN
    )
    backlog = 0 if q1 is None else q1.qlen
    fine = b.backlogged.get(link.ifname)
    return LinkFig(link, mbit, b.rates.get(link.ifname), queued, backlog, round(held, 3), fine)


def interval(a: RawSample, b: RawSample, links: list[LinkDir]) -> Interval:
    """The figures of the interval between samples ``a`` and ``b``."""
    dt = max(b.t - a.t, 1e-6)
    total = max(b.machine.total - a.machine.total, 1)
    psi = None
    if a.psi_us is not None and b.psi_us is not None:
        psi = min(1.0, (b.psi_us - a.psi_us) / 1e6 / dt)
    out = Interval(
        b.t,
        dt,
        (b.machine.busy - a.machine.busy) / total,
        (b.machine.softirq - a.machine.softirq) / total,
        psi,
    )
    for key, after in b.tasks.items():
        if key in a.tasks:  # a process born meanwhile (a restart) starts in the next interval
            out.procs.append(process_fig(key, a.tasks[key], after, dt))
    out.links = [link_fig(link, a, b, dt) for link in links]
    own = sum(p.cpu for p in out.procs if p.key.kind != "kernel")  # softirq threads: in softirq
    cpus = b.machine.cpus
    out.outside_cores = max(0.0, (out.machine_busy - out.softirq) * cpus - own)
    out.switch_queues = dict(b.switch_queues)
    return out
