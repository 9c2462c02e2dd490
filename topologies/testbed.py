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

The command line is ``topologies.testbed_main`` (``mrc-testbed``); Mininet's own ``mn``
loads the same fabric from ``topologies/mn_custom.py``. :func:`add_fabric_arguments` and
:func:`config_from_args` are here because every command that starts a testbed (``mrc-testbed``,
the demo) spells the fabric with the same options.
"""

from __future__ import annotations

from topologies.procs import in_parallel, terminate

if __name__ == "builtins":  # pragma: no cover - someone ran `mn --custom topologies/testbed.py`
    raise SystemExit("the Mininet custom file is topologies/mn_custom.py (see docs/testbed.md)")


import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.northbound import ControllerClient
from mrc_fabric.health import EventKind, ProcessEvent, ProcessHealth, ProcessKind, append_event
from mrc_fabric.thread_errors import ThreadErrors
from mrc_fabric.thread_errors import install as install_thread_errors
from mrc_fabric.topology import Link, LinkEnd, Target, Topology
from topologies.agents import AgentProcess, agent_available
from topologies.captures import MB, Budget, Capture, start_capture
from topologies.fidelity.rates import link_rate_arg
from topologies.prune import keep_runs_from_env, prune_runs, runs_max_bytes_from_env
from topologies.rundir import RunDir, boot_ticks, net_namespace, proc_start_time
from topologies.supervisor import Supervisor
from topologies.target import TargetChoice, choose_target
from topologies.teardown import stop_fabric

CONTROLLER_START_TIMEOUT = 30.0
CONTROLLER_STATE = "controller-state.json"  # routes and faults a restarted controller takes up
INSTALL_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
HANDLED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def nic_pacing_from_env() -> bool:
    """$MRC_NIC_PACING=off runs the agents without their pacer (to compare; docs/testbed.md)."""
    return os.environ.get("MRC_NIC_PACING", "on").strip().lower() not in ("off", "0", "no")


def nic_args(config: TestbedConfig) -> list[str]:
    """The agents' departure clock: their pacer at the host link's rate (a set rate only)."""
    rate = config.link_rate
    if not config.nic_pacing or not isinstance(rate, (int, float)) or rate <= 0:
        return []
    return ["--nic-rate", f"{rate:g}"]


@dataclass
class TestbedConfig:
    """Everything a run is started with (saved as ``run.json``)."""

    __test__ = False  # not a pytest class

    planes: int = 2
    t0: int = 2  # T0 switches per plane
    t1: int = 2  # T1 switches per plane
    hosts_per_t0: int = 2
    # Mbit/s per link (htb); None: as fast as the CPU goes; "calibrated": what calibration found
    # this machine keeps faithful (topologies.fidelity.rates), replaced by the number at start
    link_rate: float | str | None = None
    calibration: Path | None = None  # the calibration cache; None: <runs_root>/calibration.json
    target: str = "auto"  # auto | bmv2 | linux
    prefix: str = ""  # node name prefix (tests use their own)
    runs_root: Path = Path("runs")
    latest: bool = True  # point <runs_root>/latest at this run
    # after start, delete all but the newest N run directories under runs_root (never one in
    # use); None keeps every run. Default: $MRC_KEEP_RUNS, else 10 (topologies.prune)
    keep_runs: int | None = field(default_factory=keep_runs_from_env)
    # ... and then the oldest while all hold more than this (None: no cap). $MRC_RUNS_MAX_MB or 1 GB
    runs_max_bytes: int | None = field(default_factory=runs_max_bytes_from_env)
    controller: bool = True
    agents: bool = True  # start `mrc serve` in every host (when mrc_host.agent is installed)
    agent_args: list[str] = field(default_factory=list)
    # with a link rate, the agents pace their DATA at it and report departures to their cores
    # (mrc_host/agent/pacer.py; docs/testbed.md). Default: on, unless $MRC_NIC_PACING is "off"
    nic_pacing: bool = field(default_factory=nic_pacing_from_env)
    supervise: bool = True  # restart dead switch processes, report dead agents (topologies.supervisor)
    # pcaps of every link under pcap/ (topologies.captures), at most pcap_limit_mb in all; off by
    # default: a full-rate transfer fills hundreds of MB in seconds. The CLI's `capture` takes one.
    pcap: bool = False
    pcap_limit_mb: float = 200.0
    capture_limit_mb: float = 20.0  # each `capture` (Testbed.capture) by default
    # kernel routes for plain IPv6/IPv4 between the hosts (ping, iperf: topologies.kernel_routes)
    kernel_routes: bool = True
    # Linux target: switches served by one shim process (topologies.shim_groups); None:
    # $MRC_SWITCHES_PER_SHIM, else 16; 1: a process per switch
    switches_per_shim: int | None = None
    fidelity: bool = True  # watch the run and judge it (topologies.fidelity; <run>/fidelity.json)
    placement: str | None = (
        None  # CPU placement policy (topologies.placement); None: $MRC_PLACEMENT or default
    )


def _tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a log, for an error message."""
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-lines:])
    except OSError:
        return "(no log)"


def _terminate(proc: subprocess.Popen[bytes] | None, timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM by PID, SIGKILL after ``timeout``; reaps the process."""
    terminate(proc, timeout)


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
        self.controller_proc: subprocess.Popen[bytes] | None = None
        self.controller_standby: subprocess.Popen[bytes] | None = None
        self.controller: ControllerClient | None = None
        self.agents: dict[str, AgentProcess] = {}
        self.agents_note = ""
        self.captures: list[Capture] = []
        self.link_faults: dict[str, str] = {}  # link -> fault holding it down since the CLI's `link A B down`
        self.plain_note = ""  # what topologies.kernel_routes did (summary())
        self.namespaces: set[str] = set()  # net:[inode] of every node, for leak checks
        self.supervisor: Supervisor | None = None
        self.fidelity: Any = None  # topologies.fidelity.monitor.FidelityMonitor while running
        self.fidelity_verdict: Any = None  # its final Verdict, once stopped
        self.rate_source = ""  # where config.link_rate came from (explicit, calibrated, unlimited)
        self._own_net = True
        self._old_handlers: dict[int, Any] = {}
        self._stopped = False
        self._thread_errors: ThreadErrors | None = None
        self.teardown_ticks: int | None = None

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
        self._install_signal_handlers()
        self.choice = choose_target(cfg.target)
        self.progress(self.choice.banner())
        self._resolve_link_rate()
        self.run = RunDir.create(cfg.runs_root, latest=cfg.latest)
        self.progress(f"run directory: {self.run.path}")
        self._report_thread_errors()
        self._write_run_info()
        self._prune_runs()
        link_opts = None
        if cfg.link_rate:
            from mininet.link import TCLink

            link_opts = {"cls": TCLink, "bw": cfg.link_rate}
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

    def _resolve_link_rate(self) -> None:
        """A "calibrated" link rate becomes this machine's number for the data plane and shape."""
        from topologies.fidelity.rates import CACHE_FILE, resolve

        cfg = self.config
        assert self.choice is not None
        cache = cfg.calibration or Path(cfg.runs_root) / CACHE_FILE
        shape = (cfg.planes, cfg.t0, cfg.t1, cfg.hosts_per_t0)
        rate = resolve(cfg.link_rate, cache, self.choice.target.value, shape)
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
        self._install_signal_handlers()
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
        assert self.run is not None and self.topology is not None
        limit = self.config.pcap_limit_mb

        full = f"pcaps: the cap of {limit:g} MB is reached; every link's capture stopped"
        budget = Budget(int(limit * MB), lambda: self.say(full))
        pcap_dir = self.run.sub("pcap")
        for link in self.topology.links:
            self._start_capture(link.a, pcap_dir / f"{link.a.ifname}.pcap", budget, None)
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

    def _controller_popen(self, *extra: str) -> subprocess.Popen[bytes]:
        assert self.run is not None
        cmd = [sys.executable, "-m", "controller.server", "--topology", str(self.run.path / "topology.json"),
               "--listen", f"unix:{self.run.controller_socket}", "--parent", str(os.getpid()),
               "--state-file", str(self.run.path / CONTROLLER_STATE), *extra]  # fmt: skip
        with open(self.run.controller_log, "ab") as log:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.run.record(proc.pid, "controller", "mrc-controller" + (" standby" if extra else ""))
        return proc

    def _launch_controller(self) -> None:
        """Start ``mrc-controller`` and wait until it answers. It keeps its routes and faults in
        the run directory, so one started again after a crash takes up where it left off. A
        *standby* beside it, imports done, takes over the moment it dies (``--standby-for``):
        a restart then costs no interpreter start, which on a busy machine took a second."""
        assert self.run is not None
        sock = self.run.controller_socket
        standby, self.controller_standby = self.controller_standby, None
        if standby is not None and standby.poll() is None:
            self.controller_proc = standby  # it is taking over already
        else:
            _terminate(standby)
            sock.unlink(missing_ok=True)  # a killed controller leaves its socket behind
            self.controller_proc = self._controller_popen()
        if self.controller is None:
            self.controller = ControllerClient(f"unix:{sock}")
        deadline = time.monotonic() + CONTROLLER_START_TIMEOUT
        while not sock.exists():
            if self.controller_proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mrc-controller did not start:\n{_tail(self.run.controller_log)}")
            time.sleep(0.05)  # poll interval; the deadline bounds the wait
        self.controller.wait_ready(CONTROLLER_START_TIMEOUT)
        # (started once this one answers: its interpreter start must not slow the takeover)
        self.controller_standby = self._controller_popen("--standby-for", str(self.controller_proc.pid))

    def restart_controller(self) -> None:
        """The supervisor's restart of a dead controller: the same command; the new one reads
        the routes and faults the old one saved and makes every switch match them."""
        self._launch_controller()
        self.say(
            f"mrc-controller restarted (pid {self.controller_proc.pid if self.controller_proc else '?'})"
        )

    def health(self) -> list[ProcessHealth]:
        """Every watched process: running, restarting, dead or given up (``mrc_fabric.health``)."""
        return [] if self.supervisor is None else self.supervisor.health()

    def start_controller(self) -> None:
        self._launch_controller()
        assert self.controller is not None and self.run is not None
        sock = self.run.controller_socket
        resp = self.controller.install_routes(INSTALL_TIMEOUT)
        self.progress(
            f"mrc-controller on unix:{sock}: {resp.total_entries} entries on {len(resp.switches)} switches, "
            f"host configs in {resp.host_config_dir}"
        )

    def start_agents(self) -> None:
        assert self.run is not None and self.topology is not None and self.choice is not None
        ok, why = agent_available()
        if not ok:
            self.agents_note = f"no host agents: {why}"
            self.say(f"NOTE: {self.agents_note}")
            return
        for h in self.topology.hosts:
            agent = AgentProcess(
                self.net.get(h.name),
                self.run.host_config(h.name),
                self.run.agent_socket(h.name),
                self.run.agent_log(h.name),
                [*self.choice.agent_args(), *nic_args(self.config), *self.config.agent_args],
            )
            self.agents[h.name] = agent
            self.run.record(agent.start(), "agent", h.name)
        for agent in self.agents.values():
            agent.wait_ready()
        self.agents_note = f"{len(self.agents)} agents ({', '.join(self.agents)})"
        self.progress(f"host agents up: {self.agents_note}")

    # -- teardown --------------------------------------------------------------------------------
    def stop(self) -> None:
        """End everything this run started, by PID; idempotent; signals are held off meanwhile."""
        if self._stopped:
            return
        self._stopped = True
        self.teardown_ticks = boot_ticks()  # for leak checks: nothing of ours starts after this
        held = self._hold_signals()
        try:
            if self.supervisor is not None:  # first: what is ended below must stay ended
                self.supervisor.stop()
            self.stop_fidelity()  # while the switches and agents can still be read
            for cap in self.captures:
                cap.stop()
            self.captures.clear()
            in_parallel([agent.stop for agent in self.agents.values()])
            self.agents.clear()
            if self.controller is not None:
                self.controller.close()
                self.controller = None
            _terminate(self.controller_standby)  # first: it would take over from the one below
            self.controller_standby = None
            _terminate(self.controller_proc)
            self.controller_proc = None
            if self.run is not None:
                self.run.controller_socket.unlink(missing_ok=True)
            if self.net is not None and self._own_net:
                stop_fabric(self.net)  # in bulk: every switch at once, then every namespace
            self.net = None
        finally:
            if self._thread_errors is not None:  # after the teardown: its threads are reported too
                self._thread_errors.uninstall()
            self._restore_signals(held)

    # -- signals ---------------------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers; the caller owns cleanup then

        def on_signal(signum: int, _frame: Any) -> None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)

        for sig in HANDLED_SIGNALS:
            self._old_handlers[sig] = signal.signal(sig, on_signal)

    def _hold_signals(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, signal.SIG_IGN) for sig in HANDLED_SIGNALS}

    def _restore_signals(self, held: dict[int, Any]) -> None:
        for sig in held:
            signal.signal(sig, self._old_handlers.pop(sig, held[sig]))

    # -- operations used by the CLI, the demo and tests -------------------------------------------
    def host_names(self) -> list[str]:
        assert self.topology is not None
        return [h.name for h in self.topology.hosts]

    def agent(self, host: str) -> AgentProcess:
        if host not in self.agents:
            why = self.agents_note or "agents not started"
            raise KeyError(f"no agent in {host!r} ({why})")
        return self.agents[host]

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
        for link in self.topology.links:
            for end in (link.a, link.b):
                if ident == end.ifname:
                    return end
        found: Link = self.topology.find_link(ident)
        if ":" in ident:
            node, _, port = ident.rpartition(":")
            return found.a if (found.a.node, str(found.a.port)) == (node, port) else found.b
        return found.a

    def capture(self, ident: str, seconds: float = 10.0, limit_mb: float | None = None) -> Capture:
        """tcpdump on a link end into ``<run_dir>/captures/``; stops after ``seconds`` or at
        ``limit_mb`` (default ``capture_limit_mb``), whichever comes first."""
        assert self.run is not None
        if not seconds > 0:
            raise ValueError(f"seconds: must be > 0, got {seconds}")
        limit = self.config.capture_limit_mb if limit_mb is None else limit_mb
        if not limit > 0:
            raise ValueError(f"size cap: must be > 0 MB, got {limit}")
        end = self.link_end(ident)
        stamp = time.strftime("%H%M%S", time.gmtime())
        path = self.run.sub("captures") / f"{end.ifname}-{stamp}-{len(self.captures) + 1}.pcap"
        return self._start_capture(end, path, Budget(int(limit * MB)), seconds)

    def _start_capture(self, end: LinkEnd, path: Path, budget: Budget, seconds: float | None) -> Capture:
        assert self.run is not None
        cap = start_capture(self.net.get(end.node), end.ifname, path, budget, seconds)
        self.run.record(cap.proc.pid, "capture", end.ifname)
        self.captures.append(cap)
        return cap


def add_fabric_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--planes", type=int, default=2, help="planes = NIC ports per host (default 2)")
    ap.add_argument("--t0", type=int, default=2, help="T0 switches per plane (default 2)")
    ap.add_argument("--t1", type=int, default=2, help="T1 switches per plane (default 2)")
    ap.add_argument("--hosts-per-t0", type=int, default=2, help="hosts under each T0 (default 2)")
    ap.add_argument(
        "--link-rate",
        type=link_rate_arg,
        default="calibrated",
        metavar="MBIT|calibrated|0",
        help="Mbit/s per link (htb); default: what `mrc-testbed calibrate` found this machine keeps "
        "faithful for this data plane and shape; 0: unlimited (the CPU decides)",
    )
    ap.add_argument(
        "--nic-pacing",
        choices=("on", "off"),
        default="off" if not nic_pacing_from_env() else "on",
        help="with a link rate, the agents send DATA at it and time it from when it left, as a NIC "
        "does (default on; $MRC_NIC_PACING=off); off: the host link's qdisc queues it",
    )
    ap.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help="the calibration cache (default <runs>/calibration.json)",
    )
    ap.add_argument(
        "--target",
        choices=("auto", "bmv2", "linux"),
        default="auto",
        help="auto = BMv2 when simple_switch_grpc and p4src/build/mrc_switch.json exist, else Linux",
    )
    ap.add_argument("--runs", type=Path, default=Path("runs"), help="parent of the run directories")
    ap.add_argument(
        "--pcap",
        nargs="?",
        type=float,
        const=200.0,
        default=None,
        metavar="MB",
        help="capture every link into <run>/pcap/ (off by default; at most MB in all, default 200)",
    )
    ap.add_argument("--prefix", default="", help="node name prefix (keeps parallel runs apart)")
    ap.add_argument(
        "--switches-per-shim",
        type=int,
        default=None,
        metavar="N",
        help="Linux target: switches served by one shim process (default $MRC_SWITCHES_PER_SHIM, "
        "else 16; 1: a process per switch)",
    )


def config_from_args(args: argparse.Namespace, **extra: Any) -> TestbedConfig:
    return TestbedConfig(
        planes=args.planes,
        t0=args.t0,
        t1=args.t1,
        hosts_per_t0=args.hosts_per_t0,
        link_rate=args.link_rate,
        target=args.target,
        runs_root=args.runs,
        prefix=args.prefix,
        switches_per_shim=args.switches_per_shim,
        pcap=args.pcap is not None,
        pcap_limit_mb=args.pcap if args.pcap is not None else TestbedConfig.pcap_limit_mb,
        calibration=args.calibration,
        nic_pacing=getattr(args, "nic_pacing", "on") == "on",
        **extra,
    )


def summary(tb: Testbed) -> str:
    assert tb.topology is not None and tb.run is not None and tb.choice is not None
    t = tb.topology
    rate = tb.config.link_rate
    lines = [
        f"fabric: {t.planes} planes x ({t.t0_per_plane} T0, {t.t1_per_plane} T1), "
        f"{len(t.hosts)} hosts, {len(t.switches)} switches, {len(t.links)} links",
        tb.choice.banner(),
        f"links: {f'{rate:g} Mbit/s' if rate else 'unlimited'} ({tb.rate_source})",
        f"run directory: {tb.run.path}",
        f"hosts: {' '.join(h.name for h in t.hosts)}",
        f"agents: {tb.agents_note or 'not started'}",
        f"plain IPv6/IPv4 between hosts: {tb.plain_note or 'not routed'}",
        f"controller: unix:{tb.run.controller_socket} (mrcctl --run-dir {tb.run.path} ...)",
    ]
    return "\n".join(lines)
