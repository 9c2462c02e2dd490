"""Open event streams never starve the controller's other calls.

The defect (issue 64): each ``WatchEvents`` stream held one of the server's 16 worker threads
for as long as it was open, so 16 ``mrcctl events`` made ``mrcctl faults`` and ``clear --all``
fail with DEADLINE_EXCEEDED. Here 100 streams are open, each on its own channel as 100
``mrcctl events`` would be: ListFaults, InjectFault and ClearFault(all) still answer (a
generous deadline: the outcome is asserted, not a time), and every stream sees the events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from controller_lab import served_clos, stop_controller

from controller.core import ControllerCore
from controller.northbound import CHANNEL_OPTIONS
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from controller.server import serve

STREAMS = 100
ANSWER_S = 5.0  # generous on a loaded machine: with the streams starving it, it never answers


@pytest.fixture
def address(tmp_path: Path) -> Iterator[str]:
    with served_clos(tmp_path, "es") as topo:
        core = ControllerCore(topo, run_dir=tmp_path)
        server = None
        try:
            core.start()
            assert core.wait_ready(20) == []
            server, _service, bound = serve(core, f"unix:{tmp_path}/controller.sock")
            yield bound
        finally:
            stop_controller(None, server, core)


class Follower:
    """One ``mrcctl events``: its own channel, a stream, the kinds it has seen."""

    def __init__(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
        self.stream = pb_grpc.ControllerStub(self.channel).WatchEvents(pb.WatchEventsRequest())
        self.seen: list[str] = []
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        try:
            for e in self.stream:
                with self.cond:
                    self.seen.append(e.kind)
                    self.cond.notify_all()
        except grpc.RpcError:
            pass

    def saw(self, kind: str, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: kind in self.seen, timeout)

    def close(self) -> None:
        self.stream.cancel()
        self.thread.join(timeout=10)
        self.channel.close()


def test_100_open_event_streams_leave_the_other_calls_answering(address: str) -> None:
    followers = [Follower(address) for _ in range(STREAMS)]
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    stub = pb_grpc.ControllerStub(channel)
    try:
        spec = pb.FaultSpec(kind=pb.BLACKHOLE, target="est0p0n0-est1p0n0")
        # (the first call also waits for the streams' connections to be up)
        stub.ListFaults(pb.ListFaultsRequest(), timeout=30, wait_for_ready=True)
        fault = stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=ANSWER_S)
        assert all(f.saw("fault_injected", 30) for f in followers), "a stream missed the event"
        listed = stub.ListFaults(pb.ListFaultsRequest(), timeout=ANSWER_S)
        assert [f.id for f in listed.faults] == [fault.id]
        cleared = stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=ANSWER_S)
        assert list(cleared.cleared) == [fault.id]
        health = stub.GetHealth(pb.GetHealthRequest(), timeout=ANSWER_S)
        assert all(s.primary for s in health.switches)
    finally:
        channel.close()
        for f in followers:
            f.close()


def test_streams_past_the_cap_are_refused_by_name_and_the_rest_still_answers(
    address: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import controller.server as server_module

    assert server_module.MAX_STREAMS >= STREAMS
    monkeypatch.setattr(server_module, "MAX_STREAMS", 3)
    followers = [Follower(address) for _ in range(3)]
    channel = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    stub = pb_grpc.ControllerStub(channel)
    try:
        stub.InjectFault(
            pb.InjectFaultRequest(spec=pb.FaultSpec(kind=pb.SWITCH_DOWN, target="est1p1n1")), timeout=30
        )
        assert all(f.saw("fault_injected", 30) for f in followers)
        with pytest.raises(grpc.RpcError) as err:
            next(iter(stub.WatchEvents(pb.WatchEventsRequest(), timeout=ANSWER_S)))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "MAX_STREAMS" in (
            err.value.details() or ""
        )
        assert len(stub.ListFaults(pb.ListFaultsRequest(), timeout=ANSWER_S).faults) == 1
    finally:
        channel.close()
        for f in followers:
            f.close()
