"""Helpers for tests that run the controller in process (unit and live fabrics alike)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from finsy.proto import p4r_grpc

from linux_target.counters import CounterReader
from linux_target.netlink_backend import LinkStats
from linux_target.p4rt_service import P4RuntimeShim
from linux_target.switch_tables import SwitchTables
from mrc_fabric.p4info import default_index
from mrc_fabric.topology import Topology, build_clos


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
