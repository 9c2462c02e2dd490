"""The one Python client of the controller's northbound gRPC API (mrc.controller.v1.Controller).

``mrcctl``, the testbed (``topologies``), the benchmarks and the tests all use this
class, so each request is built in one place and every caller exercises exactly what
an operator with ``mrcctl`` would. Faults always go through the controller, never
straight to a switch. Errors are the server's ``grpc.RpcError`` (its status code and a
message naming the bad field); only names that cannot be sent (an unknown fault kind
or direction) are refused here, with ValueError.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import grpc

from controller.faults import Direction, FaultKind
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from mrc_fabric.time_scale import scaled

KINDS: dict[str, pb.FaultKind] = {k.value: getattr(pb, k.name) for k in FaultKind}
DIRECTIONS: dict[str, pb.Direction] = {
    Direction.BOTH.value: pb.BOTH,
    Direction.A2B.value: pb.A_TO_B,
    Direction.B2A.value: pb.B_TO_A,
}
RETRY_INTERVAL_S = 0.2
# each call's deadline on the reference machine, times mrc_fabric.time_scale (a slow VM's
# GetCounters took 2-21 s: it reads every switch)
READ_TIMEOUT_S = 10.0
CHANGE_TIMEOUT_S = 30.0  # a fault's table writes on every switch it touches
COUNTERS_TIMEOUT_S = 30.0
# A restarted controller answers within a few hundred ms; gRPC's default reconnect backoff (1 s,
# growing to 120 s) would leave a client that saw it die waiting long after. The socket is
# local, so trying again every 50-500 ms costs nothing.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
)


class EventStream(Protocol):
    """A WatchEvents call: its events, and cancel() to end it."""

    def __iter__(self) -> Iterator[pb.Event]: ...
    def __next__(self) -> pb.Event: ...
    def cancel(self) -> bool: ...


@dataclass(frozen=True)
class CounterCell:
    """One counter cell of one switch: the controller's reply row and the client's, one type."""

    switch: str
    counter: str
    index: int
    label: str
    packets: int
    bytes: int


class ControllerClient:
    """A channel to one controller (``unix:PATH`` or ``127.0.0.1:PORT``) and its calls."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.stub = pb_grpc.ControllerStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def wait_ready(self, timeout: float) -> None:
        """Until the controller answers (``wait_for_ready`` rather than a ready future, whose
        watcher thread dies with a traceback when the channel closes under it)."""
        self.stub.GetHealth(pb.GetHealthRequest(), timeout=timeout, wait_for_ready=True)

    # -- calls -----------------------------------------------------------------------------------
    def topology_json(self, timeout: float | None = None) -> str:
        limit = scaled(READ_TIMEOUT_S) if timeout is None else timeout
        return str(self.stub.GetTopology(pb.GetTopologyRequest(), timeout=limit).topology_json)

    def install_routes(
        self, timeout: float = 60.0, switches: list[str] | None = None, retry_unavailable: bool = True
    ) -> pb.InstallRoutesResponse:
        """Install the compiled routes; with ``retry_unavailable`` keep retrying while switches are
        still connecting (UNAVAILABLE) until ``timeout``."""
        deadline = time.monotonic() + timeout
        req = pb.InstallRoutesRequest(switches=switches or [])
        while True:
            try:
                resp: pb.InstallRoutesResponse = self.stub.InstallRoutes(req, timeout=max(1.0, timeout))
                return resp
            except grpc.RpcError as exc:
                if (
                    not retry_unavailable
                    or exc.code() != grpc.StatusCode.UNAVAILABLE
                    or time.monotonic() > deadline
                ):
                    raise
            time.sleep(RETRY_INTERVAL_S)  # the deadline bounds the loop

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
        req = pb.InjectFaultRequest(spec=spec)
        fault: pb.Fault = self.stub.InjectFault(req, timeout=scaled(CHANGE_TIMEOUT_S))
        return fault

    def clear(self, fault_id: str | None = None) -> list[str]:
        """Clear one fault, or every fault when ``fault_id`` is None; the ids cleared."""
        req = pb.ClearFaultRequest(id=fault_id) if fault_id else pb.ClearFaultRequest(all=True)
        return list(self.stub.ClearFault(req, timeout=scaled(CHANGE_TIMEOUT_S)).cleared)

    def faults(self) -> list[pb.Fault]:
        """Every active fault, in id order, read a page at a time."""
        out: list[pb.Fault] = []
        token = ""
        while True:
            req = pb.ListFaultsRequest(page_token=token)
            resp = self.stub.ListFaults(req, timeout=scaled(READ_TIMEOUT_S))
            out.extend(resp.faults)
            token = resp.next_page_token
            if not token:
                return out

    def paths(self, src: str, dst: str, ecmp: bool = False) -> list[pb.Path]:
        req = pb.ListPathsRequest(src=src, dst=dst, ecmp=ecmp)
        return list(self.stub.ListPaths(req, timeout=scaled(READ_TIMEOUT_S)).paths)

    def get_counters(self, switches: list[str] | None = None) -> pb.GetCountersResponse:
        resp: pb.GetCountersResponse = self.stub.GetCounters(
            pb.GetCountersRequest(switches=switches or []), timeout=scaled(COUNTERS_TIMEOUT_S)
        )
        return resp

    def counters(self, switches: list[str] | None = None) -> tuple[list[CounterCell], list[str]]:
        resp = self.get_counters(switches)
        cells = [
            CounterCell(c.switch, c.counter, c.index, c.label, c.packets, c.bytes) for c in resp.counters
        ]
        return cells, list(resp.errors)

    def health(self) -> pb.GetHealthResponse:
        """Every switch's P4Runtime session and every agent's control socket."""
        req = pb.GetHealthRequest()
        resp: pb.GetHealthResponse = self.stub.GetHealth(req, timeout=scaled(READ_TIMEOUT_S))
        return resp

    def events(self) -> EventStream:
        """Follow the controller's events: iterate over the result; ``cancel()`` it to stop."""
        stream: EventStream = self.stub.WatchEvents(pb.WatchEventsRequest())
        return stream


def kind_name(kind: int) -> str:
    return str(pb.FaultKind.Name(kind)).lower()


def direction_name(direction: int) -> str:
    return {int(v): k for k, v in DIRECTIONS.items()}[direction]
