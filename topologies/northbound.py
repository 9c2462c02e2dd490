"""A thin Python client of the controller's northbound gRPC API, for the testbed and its CLI.

Faults always go through here (never straight to a switch), so the testbed exercises
exactly what an operator with ``mrcctl`` would.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc

KINDS = {
    "link_down": pb.LINK_DOWN,
    "blackhole": pb.BLACKHOLE,
    "loss": pb.LOSS,
    "flap": pb.FLAP,
    "switch_down": pb.SWITCH_DOWN,
    "nic_port_down": pb.NIC_PORT_DOWN,
}
DIRECTIONS = {"both": pb.BOTH, "a2b": pb.A_TO_B, "b2a": pb.B_TO_A}


@dataclass(frozen=True)
class CounterCell:
    switch: str
    counter: str
    index: int
    label: str
    packets: int
    bytes: int


class ControllerClient:
    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.ControllerStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def wait_ready(self, timeout: float) -> None:
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def install_routes(self, timeout: float = 60.0) -> pb.InstallRoutesResponse:
        """Install every route, retrying while switches are still connecting (UNAVAILABLE)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=max(1.0, timeout))
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)  # retry interval; the deadline bounds the loop

    def inject(
        self,
        kind: str,
        target: str,
        direction: str = "both",
        probability: float = 0.0,
        period_s: float = 0.0,
        duration_s: float = 0.0,
    ) -> pb.Fault:
        if kind not in KINDS:
            raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
        if direction not in DIRECTIONS:
            raise ValueError(f"direction: {direction!r} is not one of {', '.join(DIRECTIONS)}")
        spec = pb.FaultSpec(
            kind=KINDS[kind],
            target=target,
            direction=DIRECTIONS[direction],
            probability=probability,
            period_s=period_s,
            duration_s=duration_s,
        )
        return self.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=30)

    def clear(self, fault_id: str | None = None) -> list[str]:
        req = pb.ClearFaultRequest(id=fault_id) if fault_id else pb.ClearFaultRequest(all=True)
        return list(self.stub.ClearFault(req, timeout=30).cleared)

    def faults(self) -> list[pb.Fault]:
        return list(self.stub.ListFaults(pb.ListFaultsRequest(), timeout=10).faults)

    def paths(self, src: str, dst: str) -> list[pb.Path]:
        return list(self.stub.ListPaths(pb.ListPathsRequest(src=src, dst=dst), timeout=10).paths)

    def counters(self, switches: list[str] | None = None) -> tuple[list[CounterCell], list[str]]:
        resp = self.stub.GetCounters(pb.GetCountersRequest(switches=switches or []), timeout=30)
        cells = [
            CounterCell(c.switch, c.counter, c.index, c.label, c.packets, c.bytes) for c in resp.counters
        ]
        return cells, list(resp.errors)


def kind_name(kind: int) -> str:
    return pb.FaultKind.Name(kind).lower()


def direction_name(direction: int) -> str:
    return {v: k for k, v in DIRECTIONS.items()}[direction]
