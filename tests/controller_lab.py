"""Helpers for tests that run the controller in process (unit and live fabrics alike)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from finsy.proto import p4r_grpc

from controller.northbound import CHANNEL_OPTIONS
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from linux_target.counters import CounterReader
from linux_target.netlink_backend import LinkStats
from linux_target.p4rt_service import P4RuntimeShim
from linux_target.switch_tables import SwitchTables
from mrc_fabric.p4info import default_index
from mrc_fabric.time_scale import scaled
from mrc_fabric.topology import Topology, build_clos
from mrc_p4rt.codec import decode_entry


def stop_controller(channel: Any, server: Any, core: Any) -> None:
    """Closes what a test fixture started of the controller, newest first (None: never started)."""
    if channel is not None:
        channel.close()
    if server is not None:
        server.stop(grace=0).wait()
    if core is not None:
        core.stop()


class NoKernel:
    """The shim's tables without a data plane: every transition is accepted."""

    def transition(self, old: Any, new: Any) -> None:
        pass


@dataclass
class FakeSwitch:
    """One switch's P4Runtime service (the Linux shim's) in this process, on a unix socket."""

    name: str
    device_id: int
    socket: Path
    ports: dict[int, str]
    server: grpc.Server | None = None
    # what its port counters read (by interface name; none: every cell reads 0)
    stats: dict[str, LinkStats] = field(default_factory=dict)

    def start(self) -> None:
        index = default_index()
        tables = SwitchTables(index, self.ports, NoKernel())
        service = P4RuntimeShim(
            self.name,
            self.device_id,
            index,
            tables,
            lambda: CounterReader(self.ports, dict(self.stats), {}, {}),
        )
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        p4r_grpc.add_P4RuntimeServicer_to_server(service, self.server)
        assert self.server.add_insecure_port(f"unix:{self.socket}")
        self.server.start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace=0).wait()
            self.server = None
        self.socket.unlink(missing_ok=True)


def fake_switches(topo: Any, directory: Path) -> dict[str, FakeSwitch]:
    """One in-process switch per switch of ``topo``, on ``<directory>/<name>.sock`` (not started)."""
    return {
        s.name: FakeSwitch(
            s.name,
            s.device_id,
            directory / f"{s.name}.sock",
            {e.port: e.ifname for e in topo.ports_of(s.name)},
        )
        for s in topo.switches
    }


@contextmanager
def served_clos(directory: Path, prefix: str) -> Iterator[Topology]:
    """A 2x2x2x1 fabric's topology with every switch served in process while the block runs.

    The controller tests that need a small fabric and nothing else share this one, so each
    fixture names only its node prefix (which keeps concurrent runs' sockets apart).
    """
    topo = build_clos(2, 2, 2, 1, prefix=prefix, p4rt_address_format=f"unix:{directory}/{{name}}.sock")
    switches = fake_switches(topo, directory)
    try:
        for sw in switches.values():
            sw.start()
        yield topo
    finally:
        for sw in switches.values():
            sw.stop()


T = TypeVar("T")


# -- mrc-controller as a process (kill -9, restarts, a disk that fills) -----------------------------
DEADLINE_S = 20.0


class ControllerProcess:
    """``python -m controller.server --state-file`` on a fabric's run directory, and a client
    channel that outlives it. Its log is read into :attr:`log` (a pipe: a file-size limit put
    on the process for a "full disk" must not hit its log). ``wrap``: a command prefix (e.g.
    ``nsenter`` into a mount namespace)."""

    def __init__(self, run: Path, state: Path | None = None, wrap: tuple[str, ...] = ()) -> None:
        self.run = run
        self.state = state or run / "controller-state.json"
        self.wrap = wrap
        self.proc: subprocess.Popen[str] | None = None
        self.log: list[str] = []
        self.channel = grpc.insecure_channel(f"unix:{run}/controller.sock", options=CHANNEL_OPTIONS)
        self.stub = pb_grpc.ControllerStub(self.channel)

    def start(self, wait: bool = True) -> None:
        (self.run / "controller.sock").unlink(missing_ok=True)
        cmd = [*self.wrap, sys.executable, "-m", "controller.server",
               "--topology", str(self.run / "topology.json"), "--state-file", str(self.state)]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        threading.Thread(target=self._read_log, args=(self.proc,), daemon=True).start()
        if wait:
            self.wait_serving()

    def wait_serving(self) -> None:
        """The new process answers. The channel outlives the process it last reached: a call sent
        on the dead one's connection before the channel saw it close fails with UNAVAILABLE
        ("Stream removed"), so that answer means "not this process yet", not a failed start."""
        assert self.proc is not None
        deadline = time.monotonic() + scaled(DEADLINE_S)
        while True:
            try:
                self.stub.ListFaults(pb.ListFaultsRequest(), timeout=scaled(DEADLINE_S), wait_for_ready=True)
                return
            except grpc.RpcError as err:
                if err.code() != grpc.StatusCode.UNAVAILABLE or self.proc.poll() is not None:
                    raise
                assert time.monotonic() < deadline, f"the controller did not serve: {err.details()}"
                time.sleep(0.05)  # (the channel notices the dead connection; no busy loop meanwhile)

    def _read_log(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.log.append(line)

    def logged(self, words: tuple[str, ...], timeout: float = DEADLINE_S) -> bool:
        """A log line holding every one of ``words`` (read by a thread: it may come a moment
        after the call that caused it answered)."""
        deadline = time.monotonic() + scaled(timeout)
        while not any(all(w in line for w in words) for line in list(self.log)):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        self.channel.close()

    def ready(self) -> bool:
        """Every switch's session is primary (the controller has reconciled each one)."""
        return all(s.primary for s in self.stub.GetHealth(pb.GetHealthRequest(), timeout=scaled(10)).switches)

    def wait_reconciled(self) -> None:
        deadline = time.monotonic() + scaled(DEADLINE_S)
        while not self.ready():
            assert time.monotonic() < deadline, "the controller did not reconcile every switch"
            time.sleep(0.05)

    def faults(self) -> dict[str, Any]:
        listed = self.stub.ListFaults(pb.ListFaultsRequest(page_size=1000), timeout=scaled(10))
        return {f.id: f for f in listed.faults}


def switch_fault_tables(readers: dict[str, Any]) -> dict[str, set[Any]]:
    """Every switch's fault entries, read over P4Runtime by a client of our own."""
    index = default_index()
    return {
        name: {decode_entry(index, e) for t in ("port_fault", "ingress_fault") for e in r.read_table(t)}
        for name, r in readers.items()
    }


def expected_tables(topo: Topology, faults: dict[str, Any]) -> dict[str, set[Any]]:
    """The fault entries the switches hold when exactly ``faults`` (ListFaults' answer) are in force."""
    from controller.faults import Direction, FaultKind, FaultSpec, fault_entries, resolve
    from controller.northbound import KINDS

    kind_of = {v: FaultKind(k) for k, v in KINDS.items()}
    dirs = {pb.BOTH: Direction.BOTH, pb.A_TO_B: Direction.A2B, pb.B_TO_A: Direction.B2A}
    actions = []
    for f in faults.values():
        s = f.spec
        actions += resolve(topo, FaultSpec(kind_of[s.kind], s.target, dirs[s.direction], s.probability,
                                           s.period_s, s.duration_s))  # fmt: skip
    want = fault_entries(actions)
    return {sw.name: set(want.get(sw.name, [])) for sw in topo.switches}


def fault_readers(topo: Topology) -> dict[str, Any]:
    from linux_target.p4rt_client import P4RuntimeTestClient

    return {sw.name: P4RuntimeTestClient(sw.p4rt_address, sw.device_id, 0) for sw in topo.switches}


def settled(read: Callable[[], T], want: T) -> T:
    """What ``read`` gives once it equals ``want`` (or the deadline): the switches' tables while
    a controller reconciles them."""
    deadline = time.monotonic() + scaled(DEADLINE_S)
    got = read()
    while got != want and time.monotonic() < deadline:
        time.sleep(0.05)
        got = read()
    return got


def tables_settle_on(topo: Topology, faults: dict[str, Any]) -> bool:
    """The switches' fault tables come to be exactly what ``faults`` (ListFaults' answer) write."""
    readers = fault_readers(topo)
    try:
        want = expected_tables(topo, faults)
        return settled(lambda: switch_fault_tables(readers), want) == want
    finally:
        for r in readers.values():
            r.close()
