"""BMv2 switch for the testbed: a ``simple_switch_grpc`` process, and the Mininet node around it.

Interface for the controller and topology code (kept alike with
:mod:`topologies.linux_switch`)::

    from topologies.bmv2_switch import Bmv2Switch
    sw = net.addSwitch("s1", cls=Bmv2Switch, device_id=1, run_dir="runs/x")
    ...                      # add links; Mininet numbers the switch's ports 1, 2, ... in link order
    net.start()              # start(): simple_switch_grpc, returns once it answers P4Runtime
    sw.p4rt_address          # "unix:<run_dir>/<name>.p4rt.sock" (mode 0700: root only)
    sw.device_id             # P4Runtime device id (also BMv2's --device-id)
    sw.pipeline_json         # compiled program (p4src/build/mrc_switch.json) for the pipeline push
    sw.port_of("s1-eth2")    # P4 port number of an interface (name or Intf); sw.port_map() for all
    sw.switch_log            # <run_dir>/<name>.bmv2.txt; pcaps in <run_dir>/pcap/<name>/
    sw.set_queue_rate(2, 100)    # congestion on purpose: port 2 drains 100 packets/s
    sw.set_queue_depth(2, 16)    # and holds at most 16 packets per priority queue
    sw.restart_switch()      # kill and restart simple_switch_grpc: the pipeline must be pushed again
    net.stop()               # stop(): SIGTERM to the process group by PID (SIGKILL after 5 s)

BMv2 reads its ports through libpcap, which sizes its capture buffer from each port's MTU
when the switch starts, and BMv2 silently drops every frame that arrived cut short
(``caplen != len`` in its BMI layer; not even its pcaps show them). A port's MTU must
therefore be final before simple_switch_grpc starts: :meth:`Bmv2Switch.start` raises every
port to ``mtu`` (the fabric's RoCE-sized MTU by default) first, and :class:`Bmv2Process`
writes each port's MTU at start into ``<name>.bmv2.out``.

simple_switch_grpc starts without a program (``--no-p4``); the controller pushes
the P4Info and the BMv2 JSON with SetForwardingPipelineConfig, exactly as it does
for the Linux shim (which ignores the JSON). The switch runs in the root network
namespace (Mininet's default for switches); BMv2 binds its ports with pcap. Its
listeners are for root alone: P4Runtime on a unix socket in the run directory (created
under umask 077), Thrift (which BMv2 binds to every address) behind an nftables guard
that refuses other users and other interfaces (``topologies.listener_guard``).

:class:`Bmv2Process` is the process alone, without Mininet, for tests and
scripts that wire veths themselves.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from linux_target.p4rt_client import wait_until_serving
from mrc_fabric.frames import FABRIC_MTU
from mrc_fabric.time_scale import scaled
from topologies import listener_guard
from topologies.bmv2_build import switch_binary
from topologies.p4_switch import P4PortsSwitch

PIPELINE_JSON = Path(__file__).resolve().parent.parent / "p4src" / "build" / "mrc_switch.json"
SWITCH_BINARY = "simple_switch_grpc"
CLI_BINARY = "simple_switch_CLI"
LOOPBACK = "127.0.0.1"
PRIORITY_QUEUES = 8  # p4src/include/constants.p4: PRIORITY_TRIMMED = 7 needs 8 queues
CPU_PORT = 510  # P4Runtime packet I/O; never a data port (511 is BMv2's drop port)
START_TIMEOUT = 30.0
# Real-time round-robin priority of every switch thread (chrt --rr), 0: the normal scheduler.
# BMv2 hands each packet across four threads per hop; on a busy host each wake-up can wait for
# the CPU, so without it one hop's delay reached 50-230 ms while the path's minimum is ~1 ms.
# A hardware switch forwards whatever its host is doing; the Linux target's kernel forwarding
# (softirq) also runs ahead of user processes. BMv2 blocks when idle, and the kernel keeps 5 %
# of the CPU for normal tasks (sched_rt_runtime_us).
REALTIME_PRIORITY = 10
STOP_TIMEOUT = 5.0
CLI_TIMEOUT = 15.0
PORT_POOL_LOW = 20000  # gRPC/Thrift ports are drawn from here up to the ephemeral range
_HANDED_OUT: set[int] = set()
_RANDOM = random.Random()


class Bmv2Error(RuntimeError):
    """simple_switch_grpc did not start, or a Thrift CLI command failed; the message says why."""


def free_tcp_port(host: str = LOOPBACK) -> int:
    """A TCP port nothing is bound to right now, for a gRPC/Thrift server started later.

    Drawn below the kernel's ephemeral range: a port the kernel picked (``bind(0)``) stays
    up for grabs as the local port of any outgoing connection -- the controller's own gRPC
    channels to the switches started first -- until the switch binds it, seconds later
    (one such clash left a switch without its Thrift server). Never the same port twice in
    this process, so two switches cannot be handed one port before either binds it.
    """
    low = _ephemeral_low()
    for _ in range(1000):
        port = _RANDOM.randrange(PORT_POOL_LOW, low)
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise Bmv2Error(f"no free TCP port in {PORT_POOL_LOW}..{low - 1} on {host}")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (``ip_local_port_range``)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # the kernel's default
    return max(low, PORT_POOL_LOW + 1024)


def _exited_unreaped(pid: int) -> bool:
    """Has ``pid`` (our child) exited? Leaves it a zombie so its pid stays ours."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _tcp_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


@dataclass
class Bmv2Process:
    """One simple_switch_grpc process: command line, start, readiness, Thrift CLI, stop."""

    name: str
    device_id: int
    ports: Mapping[int, str]  # P4 port number -> interface name
    run_dir: Path
    thrift_port: int = 0  # 0: pick a free one
    priority_queues: int = PRIORITY_QUEUES
    cpu_port: int = CPU_PORT
    log_level: str = "info"
    pcap: bool = True
    start_timeout: float = START_TIMEOUT
    binary: str = SWITCH_BINARY
    realtime_priority: int = REALTIME_PRIORITY  # 0 or where not permitted: the normal scheduler
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.binary == SWITCH_BINARY:  # the fast build where installed (topologies.bmv2_build)
            self.binary = switch_binary(self.log_level)
        self.run_dir = Path(self.run_dir).resolve()
        if self.cpu_port in self.ports:
            raise ValueError(f"{self.name}: port {self.cpu_port} is the CPU port, not a data port")
        if not self.thrift_port:
            self.thrift_port = free_tcp_port()

    @property
    def p4rt_address(self) -> str:
        return f"unix:{self.socket_path}"

    @property
    def socket_path(self) -> Path:
        return self.run_dir / f"{self.name}.p4rt.sock"

    @property
    def log_path(self) -> Path:
        """BMv2's own log; bmv2 appends ".txt" to the --log-file name it is given."""
        return self.run_dir / f"{self.name}.bmv2.txt"

    @property
    def stdout_path(self) -> Path:
        return self.run_dir / f"{self.name}.bmv2.out"

    @property
    def pcap_dir(self) -> Path:
        return self.run_dir / "pcap" / self.name

    def command(self) -> list[str]:
        cmd = [*realtime_prefix(self.realtime_priority), self.binary]
        cmd += ["--device-id", str(self.device_id), "--no-p4"]
        for port, ifname in sorted(self.ports.items()):
            cmd += ["-i", f"{port}@{ifname}"]
        cmd += [
            "--thrift-port", str(self.thrift_port),
            "--log-level", self.log_level,
            "--log-file", str(self.log_path.with_suffix("")),
            "--log-flush",
        ]  # fmt: skip
        if self.pcap:
            cmd += ["--pcap", str(self.pcap_dir)]
        # After "--": options of simple_switch_grpc itself rather than of bmv2's core.
        cmd += [
            "--",
            "--grpc-server-addr", self.p4rt_address,
            "--cpu-port", str(self.cpu_port),
            "--priority-queues", str(self.priority_queues),
        ]  # fmt: skip
        return cmd

    def port_mtus(self) -> dict[int, int | None]:
        """P4 port -> its interface's MTU now (None: no such interface in this namespace)."""
        mtus: dict[int, int | None] = {}
        for port, ifname in sorted(self.ports.items()):
            try:
                mtus[port] = int(Path(f"/sys/class/net/{ifname}/mtu").read_text())
            except (OSError, ValueError):
                mtus[port] = None
        return mtus

    def start(self) -> None:
        """Start the process and return once it answers P4Runtime and Thrift (or raise Bmv2Error)."""
        if shutil.which(self.binary) is None:
            raise Bmv2Error(f"{self.binary} not found: install BMv2 (make setup BMV2=1)")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.pcap:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        # The packet log goes to log_path; stdout/stderr (start-up messages, crashes) to stdout_path.
        with open(self.stdout_path, "ab") as out:
            out.write(f"# {' '.join(self.command())}\n".encode())
            # libpcap fixes each port's capture size now: a frame above this MTU is dropped unseen
            out.write(f"# port MTUs at start: {self.port_mtus()}\n".encode())
            out.flush()
            why = listener_guard.guard(self.thrift_port)
            if why:
                out.write(f"# warning: {why}\n".encode())
            self.socket_path.unlink(missing_ok=True)
            self.proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() kills it and any children
                umask=0o077,  # its P4Runtime socket (and logs, pcaps): root only
            )
        proc = self.proc

        def alive() -> bool:
            return proc.poll() is None

        limit = scaled(self.start_timeout)  # a figure for the reference machine
        try:
            wait_until_serving(self.p4rt_address, limit, alive=alive)
            deadline = time.monotonic() + limit
            while not _tcp_accepts(LOOPBACK, self.thrift_port):
                if not alive():
                    raise RuntimeError(f"{self.binary} exited")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"Thrift port {self.thrift_port} does not accept connections")
                time.sleep(0.05)  # poll interval; the deadline bounds the wait
        except (TimeoutError, RuntimeError) as exc:
            self.stop()
            raise Bmv2Error(f"{self.name}: {exc}\n{self.log_tail()}") from exc

    def log_tail(self, lines: int = 20) -> str:
        texts = []
        for path in (self.stdout_path, self.log_path):
            try:
                texts.append("".join(path.read_text(errors="replace").splitlines(True)[-lines:]))
            except OSError:
                continue
        return "\n".join(texts) or "(no BMv2 log)"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM to the process group by PID, SIGKILL after STOP_TIMEOUT; idempotent.

        The leader is waited for without being reaped (WNOWAIT), so its process group
        id cannot be reused by anyone else before the final SIGKILL sweeps children.
        """
        proc, self.proc = self.proc, None
        if proc is None:
            return
        listener_guard.unguard(self.thrift_port)
        self.socket_path.unlink(missing_ok=True)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while time.monotonic() < deadline and not _exited_unreaped(proc.pid):
                time.sleep(0.05)  # poll interval; the deadline bounds the wait
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    # -- Thrift runtime CLI -------------------------------------------------------
    def cli(self, *commands: str) -> str:
        """Run simple_switch_CLI commands over Thrift; raise Bmv2Error when one fails."""
        res = subprocess.run(
            [*cli_command(), "--thrift-port", str(self.thrift_port), "--thrift-ip", LOOPBACK],
            input="\n".join(commands) + "\n",
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=False,
        )
        out = res.stdout + res.stderr
        bad = [ln for ln in out.splitlines() if ln.strip().startswith(("Error", "Invalid", "***"))]
        if res.returncode != 0 or bad or "Traceback" in out:
            raise Bmv2Error(f"{self.name}: {CLI_BINARY} {commands!r} failed: {(bad or [out.strip()])[0]}")
        return out

    def set_queue_depth(self, port: int | None, depth_pkts: int, priority: int | None = None) -> None:
        """Capacity of egress queue(s) in packets: one port (every priority, or one), or all ports."""
        self.cli(_queue_command("set_queue_depth", depth_pkts, port, priority))

    def set_queue_rate(self, port: int | None, rate_pps: int, priority: int | None = None) -> None:
        """Drain rate of egress queue(s) in packets/s (0 = unlimited); same scoping as set_queue_depth."""
        self.cli(_queue_command("set_queue_rate", rate_pps, port, priority))


@functools.cache
def realtime_prefix(priority: int) -> tuple[str, ...]:
    """``chrt --rr <priority>`` where this process may raise a child to that real-time priority
    (root with CAP_SYS_NICE, an RT budget), else nothing: the switch then runs, with more jitter."""
    if priority <= 0 or shutil.which("chrt") is None:
        return ()
    prefix = ("chrt", "--rr", str(priority))
    ok = subprocess.run([*prefix, "true"], capture_output=True, check=False).returncode == 0
    return prefix if ok else ()


def cli_command() -> list[str]:
    """How to run simple_switch_CLI: it is a Python script whose ``#!/usr/bin/env python3`` finds
    whatever python3 comes first on PATH (pyenv, a venv without Thrift...); run it with this
    interpreter instead, which sees the system's Thrift and BMv2 modules."""
    path = shutil.which(CLI_BINARY)
    if path is None:
        raise Bmv2Error(f"{CLI_BINARY} not found: install BMv2 (make setup BMV2=1)")
    with open(path, "rb") as f:
        first = f.readline()
    return [sys.executable, path] if first.startswith(b"#!") and b"python" in first else [path]


def _queue_command(verb: str, value: int, port: int | None, priority: int | None) -> str:
    if value < 0:
        raise ValueError(f"{verb}: value must be >= 0, got {value}")
    if port is None:
        if priority is not None:
            raise ValueError(f"{verb}: a priority needs a port")
        return f"{verb} {value}"
    return f"{verb} {value} {port}" + ("" if priority is None else f" {priority}")


class Bmv2Switch(P4PortsSwitch):
    """A Mininet switch whose data plane is BMv2 simple_switch_grpc, programmed over P4Runtime."""

    def __init__(
        self,
        name: str,
        device_id: int,
        run_dir: str | os.PathLike[str] = "runs",
        start_timeout: float = START_TIMEOUT,
        pipeline_json: str | os.PathLike[str] = PIPELINE_JSON,
        thrift_port: int = 0,
        log_level: str = "info",
        pcap: bool = True,
        mtu: int = FABRIC_MTU,
        realtime_priority: int = REALTIME_PRIORITY,
        **params: Any,
    ) -> None:
        params.setdefault("inNamespace", False)  # beside the controller; listeners for root only
        params.setdefault("dpid", f"{device_id:x}")
        super().__init__(name, **params)
        self.device_id = device_id
        self.run_dir = Path(run_dir).resolve()
        self.start_timeout = start_timeout
        self.pipeline_json = Path(pipeline_json).resolve()
        self._thrift_port = thrift_port or free_tcp_port()
        self.log_level = log_level
        self.pcap = pcap
        self.mtu = mtu
        self.realtime_priority = realtime_priority
        self.process: Bmv2Process | None = None

    # -- what the controller needs ---------------------------------------------------
    @property
    def p4rt_address(self) -> str:
        return f"unix:{self.run_dir / f'{self.name}.p4rt.sock'}"

    @property
    def thrift_port(self) -> int:
        return self._thrift_port

    @property
    def switch_log(self) -> Path:
        """BMv2's log (packets, table hits at log level debug/trace); start-up output: <name>.bmv2.out."""
        return self.run_dir / f"{self.name}.bmv2.txt"

    # -- life cycle -------------------------------------------------------------------
    def start(self, controllers: object = None) -> None:
        for ifname in self.port_map().values():
            # No kernel IPv6 on switch ports (no RS/MLD/ND frames into the data plane), no offloads.
            self.cmd(f"sysctl -qw net.ipv6.conf.{ifname}.disable_ipv6=1")
            self.cmd(f"ethtool -K {ifname} tx off rx off tso off gso off gro off >/dev/null 2>&1")
            # The MTU before BMv2 opens the port: its capture size is fixed from then on.
            self.cmd(f"ip link set dev {ifname} mtu {self.mtu} up")
        self.start_switch()

    def start_switch(self) -> None:
        """Start simple_switch_grpc (empty: no program, no entries); returns once it serves P4Runtime."""
        self.process = Bmv2Process(
            name=self.name,
            device_id=self.device_id,
            ports=self.port_map(),
            run_dir=self.run_dir,
            thrift_port=self._thrift_port,
            log_level=self.log_level,
            pcap=self.pcap,
            start_timeout=self.start_timeout,
            realtime_priority=self.realtime_priority,
        )
        self.process.start()

    def restart_switch(self) -> None:
        """Kill and restart the switch process (same ports): pipeline and entries are gone until
        the controller pushes them again, as after a real switch reboot."""
        self.stop_switch()
        self.start_switch()

    def _require_process(self) -> Bmv2Process:
        if self.process is None or not self.process.running():
            raise Bmv2Error(f"{self.name}: simple_switch_grpc is not running")
        return self.process

    def set_queue_depth(self, port: int | None, depth_pkts: int, priority: int | None = None) -> None:
        self._require_process().set_queue_depth(port, depth_pkts, priority)

    def set_queue_rate(self, port: int | None, rate_pps: int, priority: int | None = None) -> None:
        self._require_process().set_queue_rate(port, rate_pps, priority)

    def stop_switch(self) -> None:
        proc, self.process = self.process, None
        if proc is not None:
            proc.stop()

    def stop(self, deleteIntfs: bool = True) -> None:
        self.stop_switch()
        super().stop(deleteIntfs)

    def terminate(self) -> None:
        self.stop_switch()
        super().terminate()
