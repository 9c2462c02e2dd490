"""The live MRC testbed as a library: :class:`Testbed` and :class:`TestbedConfig`.

::

    with Testbed(TestbedConfig(prefix="tb")) as tb:
        tb.send("tbh0", "tbh3", 8 << 20)
        tb.controller.inject("blackhole", "tbt0p0n0-tbt1p0n0")

:class:`Testbed` brings up the Mininet Clos (``topologies.clos``), ``mrc-controller`` on a
unix socket in the run directory (routes installed, host configs written) and one
``mrc serve`` agent per host. Every process it starts is recorded in ``<run_dir>/pids``;
``stop()`` ends them by PID, stops the net (namespaces and veths go with it) and is run
on normal exit, on errors and on SIGINT/SIGTERM/SIGHUP.

Each piece of a run's state has one owner the testbed asks: the config and its options
(``testbed_config``), the controller and its standby (``controller_procs``), the agents
(``agents.AgentFleet``), the captures (``captures.LinkCaptures``), the signal handlers
(``signal_guard``), restarts (``supervisor``), the verdict (``fidelity``). The testbed owns the
order of the bring-up and the teardown, and the net.

The command line is ``topologies.testbed_main`` (``mrc-testbed``); Mininet's own ``mn``
loads the same fabric from ``topologies/mn_custom.py``.
"""

from __future__ import annotations

if __name__ == "builtins":  # pragma: no cover - someone ran `mn --custom topologies/testbed.py`
    raise SystemExit("the Mininet custom file is topologies/mn_custom.py (see docs/testbed.md)")


import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from controller.northbound import ControllerClient
from mrc_fabric.health import EventKind, ProcessEvent, ProcessHealth, ProcessKind, append_event
from mrc_fabric.thread_errors import ThreadErrors
from mrc_fabric.thread_errors import install as install_thread_errors
from mrc_fabric.time_scale import settle
from mrc_fabric.topology import LinkEnd, Target, Topology, build_clos
from topologies import preflight, user_p4
from topologies.agents import AgentFleet, AgentProcess
from topologies.captures import Capture, LinkCaptures, link_end
from topologies.controller_procs import ControllerProcesses
from topologies.prune import prune_runs
from topologies.rundir import RunDir, boot_ticks, net_namespace, proc_start_time
from topologies.signal_guard import SignalGuard
from topologies.supervisor import Supervisor
from topologies.switch_records import SWITCHES_FILE
from topologies.target import TargetChoice
from topologies.teardown import stop_fabric
from topologies.testbed_config import (
    TestbedConfig,
    add_fabric_arguments,
    config_from_args,
    nic_args,
    nic_pacing_from_env,
)

__all__ = [  # the config and its options live in testbed_config; its users import them from here too
    "Testbed",
    "TestbedConfig",
    "add_fabric_arguments",
    "announce",
    "config_from_args",
    "nic_args",
    "nic_pacing_from_env",
    "summary",
]


def announce(msg: str) -> None:
    print(f"*** {msg}", file=sys.stderr, flush=True)


class Testbed:
    """A running fabric + controller + agents; use as a context manager."""

    __test__ = False  # not a pytest class

    def __init__(
        self,
        config: TestbedConfig | None = None,
        say: Callable[[str], None] = announce,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config or TestbedConfig()
        self.say = say  # notes and errors
        self.progress = progress or say  # the routine steps of a bring-up (summary() repeats them)
        self.choice: TargetChoice | None = None
        self.run: RunDir | None = None
        self.net: Any = None
        self.topology: Topology | None = None
        self.controllers: ControllerProcesses | None = None
        self.fleet = AgentFleet()
        self.link_captures: LinkCaptures | None = None
        self.link_faults: dict[str, str] = {}  # link -> fault holding it down since the CLI's `link A B down`
        self.plain_note = ""  # what topologies.kernel_routes did (summary())
        self.namespaces: set[str] = set()  # net:[inode] of every node, for leak checks
        self.supervisor: Supervisor | None = None
        self.fidelity: Any = None  # topologies.fidelity.monitor.FidelityMonitor while running
        self.fidelity_verdict: Any = None  # its final Verdict, once stopped
        self.rate_source = ""  # where config.link_rate came from (explicit, calibrated, unlimited)
        self.time_scale = 1.0  # every time limit's factor on this machine (mrc_fabric.time_scale)
        self._own_net = True
        self._signals = SignalGuard()
        self._stopped = False
        self._thread_errors: ThreadErrors | None = None
        self.teardown_ticks: int | None = None

    # -- the state others own, under the names the testbed's users know -------------------------
    @property
    def controller(self) -> ControllerClient | None:
        """The client of the run's controller (``controller.northbound``), once it runs."""
        return None if self.controllers is None else self.controllers.client

    @property
    def controller_proc(self) -> subprocess.Popen[bytes] | None:
        return None if self.controllers is None else self.controllers.proc

    @property
    def agents(self) -> dict[str, AgentProcess]:
        return self.fleet.agents

    @property
    def agents_note(self) -> str:
        return self.fleet.note

    @property
    def captures(self) -> list[Capture]:
        return [] if self.link_captures is None else self.link_captures.captures

    # -- context manager -------------------------------------------------------------------------
    def __enter__(self) -> Testbed:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- bring-up --------------------------------------------------------------------------------
    def start(self) -> None:
        from topologies.clos import start_clos

        cfg = self.config
        self._signals.install()
        self.choice = user_p4.target_for(cfg.target, cfg.p4)
        self.progress(self.choice.banner())
        self.time_scale = settle(self.say)  # first: the pre-flight's probes are timed with it
        self._preflight()
        self._resolve_link_rate()
        self.run = RunDir.create(cfg.runs_root, latest=cfg.latest)
        self.progress(f"run directory: {self.run.path}")
        self._report_thread_errors()
        self._write_run_info()
        self._prune_runs()
        user_p4.prepare(cfg.p4, self.run, self.progress)  # a program of one's own: <run>/p4/
        link_opts = None
        if cfg.link_rate:
            from topologies.rate_link import RateLink

            link_opts = {"cls": RateLink, "bw": cfg.link_rate}
        self.net, self.topology = start_clos(
            self.run.path,
            cfg.planes,
            cfg.t0,
            cfg.t1,
            cfg.hosts_per_t0,
            node_prefix=cfg.prefix,
            switch_cls=self._switch_cls(),
            target=self.choice.target,
            link_opts=link_opts,
            switches_per_shim=cfg.switches_per_shim,
        )
        self._record_net()
        self.start_services()

    def _preflight(self) -> None:
        """Everything this fabric needs, checked before anything starts (PreflightError)."""
        cfg = self.config
        assert self.choice is not None
        shape = (cfg.planes, cfg.t0, cfg.t1, cfg.hosts_per_t0)
        planned = build_clos(*shape, prefix=cfg.prefix, target=self.choice.target)
        preflight.require(self.choice.target, cfg.runs_root, preflight.root_ifnames(planned), cfg.pcap)

    def _resolve_link_rate(self) -> None:
        """A "calibrated" link rate becomes this machine's number for the data plane and shape."""
        from topologies.fidelity.rates import CACHE_FILE, resolve

        cfg = self.config
        assert self.choice is not None
        cache = cfg.calibration or Path(cfg.runs_root) / CACHE_FILE
        shape = (cfg.planes, cfg.t0, cfg.t1, cfg.hosts_per_t0)
        rate = resolve(cfg.link_rate, cache, self.choice.target.value, shape, self.time_scale)
        cfg.link_rate, self.rate_source = rate.mbit_s, rate.source
        self.say(f"link rate: {f'{rate.mbit_s:g} Mbit/s' if rate.mbit_s else 'unlimited'} ({rate.source})")

    def _prune_runs(self) -> None:
        """Old run directories go once this run's run.json marks it (and its owner) as live."""
        try:
            pruned = prune_runs(
                self.config.runs_root, self.config.keep_runs, max_bytes=self.config.runs_max_bytes
            )
        except OSError as exc:  # a run directory we cannot read or delete: not fatal to this run
            self.say(f"pruning old runs under {self.config.runs_root} failed: {exc}")
            return
        if pruned.removed:
            self.progress(
                f"removed {len(pruned.removed)} old run directories (keeping {self.config.keep_runs})"
            )
        for line in pruned.kept_in_use:
            self.progress(f"kept old run {line}")

    def _switch_cls(self) -> type:
        """BMv2 without its own per-port pcaps (uncapped): ``pcap`` captures every link, capped."""
        assert self.choice is not None
        if self.choice.target == Target.BMV2:
            from topologies.fast_start import ParallelBmv2SwitchNoPcap

            return ParallelBmv2SwitchNoPcap
        return self.choice.switch_cls

    def adopt(self, net: Any, topology: Topology, run: RunDir, choice: TargetChoice) -> None:
        """Run controller and agents on a net someone else (``mn``) built, started and will stop."""
        self._own_net = False
        self.net, self.topology, self.run, self.choice = net, topology, run, choice
        self._signals.install()
        self._report_thread_errors()
        self._write_run_info()
        self._record_net()
        self.start_services()

    def _report_thread_errors(self) -> None:
        """An exception that ends one of this process's threads (grpc's among them) becomes
        one line in the run's events and on the console, once, instead of a traceback."""
        run = self.run
        assert run is not None

        def report(line: str) -> None:
            kind, who = EventKind.THREAD_ERROR, ProcessKind.TESTBED
            append_event(run.path, ProcessEvent(time.time(), kind, who, "testbed", os.getpid(), line))
            self.say(f"error in a background thread: {line}")

        self._thread_errors = install_thread_errors(report)

    def _write_run_info(self) -> None:
        assert self.run is not None and self.choice is not None
        info = asdict(self.config)
        info["runs_root"] = str(self.config.runs_root)
        info["calibration"] = None if self.config.calibration is None else str(self.config.calibration)
        self.run.write_run_info(
            {
                "config": info,
                "target": self.choice.target.value,
                "target_reason": self.choice.reason,
                "link_rate_source": self.rate_source,
                "started_at": time.time(),
                "pid": os.getpid(),
                "pid_start_time": proc_start_time(os.getpid()),
            }
        )

    def _record_net(self) -> None:
        assert self.run is not None
        launcher = getattr(self.net, "shim_launcher", None)
        if launcher is not None and launcher.pid is not None:
            self.run.record(launcher.pid, "launcher", "shims")
        for node in [*self.net.hosts, *self.net.switches]:
            if getattr(node, "shell", None) is not None:
                self.run.record(node.pid, "node", node.name)
                if node.inNamespace and (ns := net_namespace(node.pid)):
                    self.namespaces.add(ns)
            shim = getattr(node, "shim", None)
            if shim is not None:
                self.run.record(shim.pid, "shim", node.name)
            process = getattr(node, "process", None)
            if process is not None and getattr(process, "proc", None) is not None:
                self.run.record(process.proc.pid, "bmv2", node.name)

    def start_services(self) -> None:
        assert self.run is not None and self.topology is not None
        self.link_captures = LinkCaptures(self.net, self.topology, self.run, self.say)
        self.route_plain_traffic()
        if self.config.pcap:
            self.start_pcaps()
        if self.config.controller:
            self.start_controller()
            if self.config.agents:
                self.start_agents()
        self.apply_placement()
        if self.config.supervise:
            self.start_supervisor()
        if self.config.fidelity:
            self.start_fidelity()

    def apply_placement(self) -> None:
        """Give the run's processes the CPU placement that keeps them faithful longest."""
        from topologies.placement import apply, chosen

        for line in apply(self, chosen(self.config.placement)):
            self.say(line)

    def start_fidelity(self) -> None:
        """Watch this run from now on: its processes, links and drops (topologies.fidelity)."""
        from topologies.fidelity.monitor import monitor_of

        self.fidelity = monitor_of(self).start()

    def stop_fidelity(self) -> Any:
        """The verdict of the run so far, sampling stopped (None without a monitor)."""
        monitor, self.fidelity = self.fidelity, None
        if monitor is not None:
            try:
                self.fidelity_verdict = monitor.stop()
            except Exception as exc:  # a verdict that cannot be made must not hold up a teardown
                self.say(f"fidelity verdict failed: {type(exc).__name__}: {exc}")
        return self.fidelity_verdict

    def route_plain_traffic(self) -> None:
        """Plain IPv6/IPv4 between every pair of hosts, by their kernels (Mininet's ping, iperf)."""
        assert self.topology is not None and self.choice is not None
        from topologies import kernel_routes

        userspace = self.choice.target != Target.LINUX
        self.plain_note = kernel_routes.route_plain(
            self.net, self.topology, userspace, self.config.kernel_routes
        )
        if self.plain_note.startswith("not routed:"):  # a kernel without seg6: MRC works, ping not
            self.say(f"plain IPv6/IPv4 between the hosts {self.plain_note}")

    def start_pcaps(self) -> None:
        """tcpdump on one end of every link into pcap/<ifname>.pcap, sharing one size cap."""
        assert self.link_captures is not None and self.topology is not None
        limit = self.config.pcap_limit_mb
        pcap_dir = self.link_captures.every_link(limit)
        self.progress(
            f"pcaps of {len(self.topology.links)} links into {pcap_dir} (at most {limit:g} MB in all)"
        )

    def start_supervisor(self) -> None:
        """Watch every switch process and agent from now on (restarts recorded in the run)."""
        assert self.run is not None
        self.supervisor = Supervisor(self.run, say=self.say)
        for sw in self.net.switches:
            self.supervisor.watch_switch(sw)
        for name, agent in self.agents.items():
            self.supervisor.watch_agent(name, agent)
        if self.controller_proc is not None:
            self.supervisor.watch(
                ProcessKind.CONTROLLER,
                "mrc-controller",
                lambda: self.controller_proc,
                self.restart_controller,
            )
        self.supervisor.start()

    def restart_controller(self) -> None:
        """The supervisor's restart of a dead controller: the same command; the new one reads
        the routes and faults the old one saved and makes every switch match them."""
        assert self.controllers is not None
        self.controllers.launch()
        pid = self.controller_proc.pid if self.controller_proc else "?"
        self.say(f"mrc-controller restarted (pid {pid})")

    def health(self) -> list[ProcessHealth]:
        """Every watched process: running, restarting, dead or given up (``mrc_fabric.health``)."""
        return [] if self.supervisor is None else self.supervisor.health()

    def start_controller(self) -> None:
        assert self.run is not None
        self.controllers = ControllerProcesses(self.run)
        self.controllers.start(self.progress)

    def start_agents(self) -> None:
        assert self.run is not None and self.topology is not None and self.choice is not None
        args = [*self.choice.agent_args(), *nic_args(self.config), *self.config.agent_args]
        for pid, host in self.fleet.start(self.net, self.host_names(), self.run, args):
            self.run.record(pid, "agent", host)
        if self.fleet.agents:
            self.progress(f"host agents up: {self.fleet.note}")
        else:
            self.say(f"NOTE: {self.fleet.note}")

    # -- teardown --------------------------------------------------------------------------------
    def stop(self) -> None:
        """End everything this run started, by PID; idempotent; signals are held off meanwhile."""
        if self._stopped:
            return
        self._stopped = True
        self.teardown_ticks = boot_ticks()  # for leak checks: nothing of ours starts after this
        held = self._signals.hold()
        try:
            if self.supervisor is not None:  # first: what is ended below must stay ended
                self.supervisor.stop()
            self.stop_fidelity()  # while the switches and agents can still be read
            if self.link_captures is not None:
                self.link_captures.stop()
            self.fleet.stop()
            if self.controllers is not None:
                self.controllers.stop()
            if self.net is not None and self._own_net:
                stop_fabric(self.net)  # in bulk: every switch at once, then every namespace
            self.net = None
        finally:
            if self._thread_errors is not None:  # after the teardown: its threads are reported too
                self._thread_errors.uninstall()
            self._signals.restore(held)

    # -- operations used by the CLI, the demo and tests -------------------------------------------
    def host_names(self) -> list[str]:
        assert self.topology is not None
        return [h.name for h in self.topology.hosts]

    def agent(self, host: str) -> AgentProcess:
        return self.fleet.get(host)

    def send(
        self,
        src: str,
        dst: str,
        size: int,
        mode: str = "mrc",
        on_progress: Callable[..., Any] | None = None,
    ) -> dict[str, Any]:
        """One transfer from ``src``'s agent to ``dst``; returns the agent's summary."""
        summary: dict[str, Any] = self.agent(src).client.send(dst, size, mode=mode, on_progress=on_progress)
        return summary

    def link_end(self, ident: str) -> LinkEnd:
        """A link end by interface name, ``node:port`` or link name ``a-b`` (its lower end)."""
        assert self.topology is not None
        return link_end(self.topology, ident)

    def capture(self, ident: str, seconds: float = 10.0, limit_mb: float | None = None) -> Capture:
        """tcpdump on a link end into ``<run_dir>/captures/``; stops after ``seconds`` or at
        ``limit_mb`` (default ``capture_limit_mb``), whichever comes first."""
        assert self.link_captures is not None
        limit = self.config.capture_limit_mb if limit_mb is None else limit_mb
        return self.link_captures.one(ident, seconds, limit)


def summary(tb: Testbed) -> str:
    assert tb.topology is not None and tb.run is not None and tb.choice is not None
    t = tb.topology
    rate = tb.config.link_rate
    lines = [
        f"fabric: {t.planes} planes x ({t.t0_per_plane} T0, {t.t1_per_plane} T1), "
        f"{len(t.hosts)} hosts, {len(t.switches)} switches, {len(t.links)} links",
        tb.choice.banner(),
        f"links: {f'{rate:g} Mbit/s' if rate else 'unlimited'}"
        + (f" ({tb.rate_source})" if tb.rate_source else ""),
        *[
            f"P4 program: {p.source} (its P4Info: {p.p4info})"
            for p in filter(None, [user_p4.load(tb.run.path)])
        ],
        f"run directory: {tb.run.path}",
        f"switches: {tb.run.path / SWITCHES_FILE} (Thrift, P4Runtime; CLI: switches, p4 SWITCH ...)",
        f"hosts: {' '.join(h.name for h in t.hosts)}",
        f"agents: {tb.agents_note or 'not started'}",
        f"plain IPv6/IPv4 between hosts: {tb.plain_note or 'not routed'}",
        f"controller: unix:{tb.run.controller_socket} (mrcctl --run-dir {tb.run.path} ...)",
    ]
    return "\n".join(lines)
