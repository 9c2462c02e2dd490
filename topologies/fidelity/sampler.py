"""What the monitor watches in a live fabric, and one raw sample of it.

:class:`WatchPlan` is built from a running testbed (:func:`plan_of`): the processes that
carry the run (every switch process -- simple_switch_grpc, or the Linux shims -- every
agent, the controller, and on the Linux target the kernel's softirq threads, which do its
forwarding), the fabric's link directions and the network namespace each interface lives
in. :class:`Sampler` reads all of it in one go (:meth:`Sampler.sample`); processes are
looked up again every sample, so a switch or agent the supervisor restarted is followed.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topologies.fidelity import procfs
from topologies.fidelity.backlog import FineReader
from topologies.fidelity.bmv2_queues import Bmv2Queues
from topologies.fidelity.figures import LinkDir, ProcessKey, RawSample
from topologies.fidelity.qdiscs import NamespaceQdiscs, QdiscStats

RATES_EVERY = 5  # read the links' configured rates (their HTB classes) every this many samples


@dataclass
class WatchPlan:
    """Everything the sampler reads; ``processes`` is called at every sample."""

    processes: Callable[[], list[ProcessKey]]
    links: list[LinkDir]
    namespaces: dict[str, tuple[int | None, set[str]]]  # label -> (node pid or None: root, ifnames)
    target: str = "linux"
    counters: Callable[[], list[Any]] | None = None  # the switches' P4 counter cells (controller)
    agent_ports: Callable[[], dict[str, list[dict[str, Any]]]] | None = None  # host -> port rows
    bmv2_thrift: dict[str, int] = field(default_factory=dict)  # BMv2 switch -> Thrift port


@dataclass
class Sampler:
    plan: WatchPlan
    backlog_step_s: float = 0.05  # how often links named by watch() are read (backlog.py)
    names: dict[int, str] = field(default_factory=dict)
    readers: list[NamespaceQdiscs] = field(default_factory=list)
    queues: Bmv2Queues | None = None
    fine: FineReader | None = None
    _rates: dict[str, float] = field(default_factory=dict)
    _levels: dict[str, int] = field(default_factory=dict)
    _count: int = 0

    def start(self) -> Sampler:
        for label, (pid, ifnames) in self.plan.namespaces.items():
            with contextlib.suppress(OSError):
                self.readers.append(NamespaceQdiscs(label, pid, ifnames).start())
        if self.plan.bmv2_thrift:
            self.queues = Bmv2Queues(self.plan.bmv2_thrift)
        self.fine = FineReader(self.readers, self.backlog_step_s)
        return self

    def watch(self, ifnames: set[str]) -> None:
        """Read these links' queues finely from now on (the ones that fell short)."""
        if self.fine is not None:
            self.fine.watch(ifnames)

    def close(self) -> None:
        if self.fine is not None:
            self.fine.close()
        for r in self.readers:
            r.close()
        self.readers.clear()
        if self.queues is not None:
            self.queues.close()

    def sample(self, fine: bool = False) -> RawSample:
        """Everything now; ``fine``: with the fine reads since the last such sample (the ones
        that close the monitor's intervals take them, a mark or a verdict's tail does not)."""
        t = time.monotonic()
        tasks = {key: procfs.task_times(key.pid, self.names) for key in self.plan.processes()}
        ifstats: dict[str, procfs.IfStats] = {}
        for pid, ifnames in self.plan.namespaces.values():
            ifstats.update(procfs.interface_stats(pid, ifnames))
        qdiscs: dict[str, QdiscStats] = {}
        for r in self.readers:
            qdiscs.update(r.read())
        if self._count % RATES_EVERY == 0:
            for r in self.readers:
                self._rates.update(r.rates())
                self._levels.update(r.levels())
        self._count += 1
        return RawSample(
            t,
            {k: v for k, v in tasks.items() if v},
            procfs.machine_times(),
            procfs.softnet_drops(),
            procfs.cpu_pressure_us(),
            ifstats,
            qdiscs,
            dict(self._rates),
            self.queues.read() if self.queues is not None else {},
            dict(self._levels),
            self.fine.take() if fine and self.fine is not None else {},
        )


def softirq_threads() -> list[ProcessKey]:
    """The kernel's per-CPU softirq threads: where the Linux target forwards when the CPUs are
    busy (softirq work deferred from interrupts runs there, at normal priority)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
            if comm.startswith("ksoftirqd/"):
                out.append(ProcessKey("kernel", comm, int(entry)))
    return sorted(out, key=lambda k: k.name)


def plan_of(tb: Any) -> WatchPlan:
    """The watch plan of a running :class:`topologies.testbed.Testbed`."""
    topo = tb.topology
    target = tb.choice.target.value
    kernel = softirq_threads() if target == "linux" else []
    links: list[LinkDir] = []
    namespaces: dict[str, tuple[int | None, set[str]]] = {}
    for link in topo.links:
        for end, other in ((link.a, link.b), (link.b, link.a)):
            links.append(LinkDir(f"{end.node}>{other.node}", end.ifname))
            node = tb.net.get(end.node)
            pid = node.pid if getattr(node, "inNamespace", True) else None
            label = end.node if pid is not None else "root"
            namespaces.setdefault(label, (pid, set()))[1].add(end.ifname)

    def processes() -> list[ProcessKey]:
        return [*testbed_processes(tb), *kernel]

    counters = None
    if tb.controller is not None:
        counters = lambda: tb.controller.counters()[0]  # noqa: E731 - a late-bound read
    switches = tb.net.switches if target == "bmv2" else []
    thrift = {sw.name: int(sw.thrift_port) for sw in switches if hasattr(sw, "thrift_port")}
    return WatchPlan(processes, links, namespaces, target, counters, lambda: agent_ports(tb), thrift)


def testbed_processes(tb: Any) -> list[ProcessKey]:
    """The switch processes, agents and controller of a testbed, as they are now."""
    out: list[ProcessKey] = []
    shims: set[int] = set()
    for sw in tb.net.switches if tb.net is not None else []:
        proc = getattr(getattr(sw, "process", None), "proc", None)
        if proc is not None and proc.poll() is None:
            out.append(ProcessKey("bmv2", sw.name, proc.pid))
        shim = getattr(sw, "shim", None)
        if shim is not None and shim.poll() is None and shim.pid not in shims:
            shims.add(shim.pid)
            group = getattr(sw, "group", None)
            out.append(ProcessKey("shim", group.name if group is not None else sw.name, shim.pid))
    for host, agent in list(tb.agents.items()):
        proc = getattr(agent, "proc", None)
        if proc is not None and proc.poll() is None:
            out.append(ProcessKey("agent", host, proc.pid))
    ctl = tb.controller_proc
    if ctl is not None and ctl.poll() is None:
        out.append(ProcessKey("controller", "mrc-controller", ctl.pid))
    out.append(ProcessKey("driver", "testbed", os.getpid()))  # this process: shown, not judged
    return out


def agent_ports(tb: Any) -> dict[str, list[dict[str, Any]]]:
    """Every agent's port counters (socket drops, refused sends), from its control socket, and
    its pacer's per port (``pacer_*``: where a paced agent's frames wait, not the host link)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for host, agent in list(tb.agents.items()):
        with contextlib.suppress(Exception):
            stats = agent.client.stats()
            rows = list(stats.get("ports", []))
            paced = stats.get("departures", {}).get("ports", [])
            for row, pc in zip(rows, paced, strict=False):
                row.update({f"pacer_{k}": pc[k] for k in ("paced", "waited", "wait_ns", "max_queued")})
            out[host] = rows
    return out
