# ruff: noqa: F811 (the fabric fixture is imported from test_controller)
"""Absurd northbound requests are refused with a precise status and the controller keeps serving.

Every request the issues list (14, 44): durations and flap periods of 1e308/1e300/1 µs, a
duration of 5e-324 s, non-finite numbers, loss probabilities of -0.0 and 5e-324, a 10 000-character target,
``ClearFault{id, all}``; each gets INVALID_ARGUMENT or NOT_FOUND naming the field, quoting
at most a bounded prefix of the bad input, and afterwards a normal fault still works.
The flap and expiry threads survive an unexpected exception. Reuses the fake fabric of
test_controller.py (the shim's P4Runtime service without a kernel).
"""

from __future__ import annotations

import math
import os
import queue
import threading

import grpc
import pytest
from test_controller import DEADLINE_S, Fabric, fabric, wait_for  # noqa: F401 (the fixture)

from controller.fault_cli import clock_time
from controller.faults import MAX_ACTIVE_FAULTS, MAX_TARGET_CHARS, MIN_FLAP_PERIOD_S, QUOTE_CHARS
from controller.northbound import ControllerClient
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.server import LIST_PAGE_DEFAULT, LIST_PAGE_MAX
from controller.switch_set import SYNC_PARALLEL

LINK = "cut0p0n0:3"
HUGE = "x" * 10_000
MESSAGE_BOUND = QUOTE_CHARS + 200  # the quoted prefix plus the sentence around it


def spec(kind: int = pb.BLACKHOLE, target: str = LINK, **kw: float) -> pb.FaultSpec:
    return pb.FaultSpec(kind=kind, target=target, **kw)


BAD_FAULTS = {
    "duration 1e308": (spec(duration_s=1e308), "spec.duration_s"),
    "duration inf": (spec(duration_s=math.inf), "spec.duration_s"),
    "duration nan": (spec(duration_s=math.nan), "spec.duration_s"),
    "duration 5e-324": (spec(duration_s=5e-324), "spec.duration_s"),
    "duration 1 ms": (spec(duration_s=1e-3), "spec.duration_s"),
    "duration -1": (spec(duration_s=-1.0), "spec.duration_s"),
    "flap period 1e300": (spec(pb.FLAP, period_s=1e300), "spec.period_s"),
    "flap period 1 us": (spec(pb.FLAP, period_s=1e-6), "spec.period_s"),
    "flap period nan": (spec(pb.FLAP, period_s=math.nan), "spec.period_s"),
    "loss -0.0": (spec(pb.LOSS, probability=-0.0), "spec.probability"),
    "loss 5e-324": (spec(pb.LOSS, probability=5e-324), "spec.probability"),
    "loss inf": (spec(pb.LOSS, probability=math.inf), "spec.probability"),
    "target 10k chars": (spec(target=HUGE), "spec.target"),
    "target just too long": (spec(target="y" * (MAX_TARGET_CHARS + 1)), "spec.target"),
}


def assert_serving(f: Fabric) -> None:
    """A normal fault goes in and out after the bad request."""
    fault = f.stub.InjectFault(pb.InjectFaultRequest(spec=spec()), timeout=10)
    assert [x.id for x in f.stub.ListFaults(pb.ListFaultsRequest(), timeout=10).faults] == [fault.id]
    assert list(f.stub.ClearFault(pb.ClearFaultRequest(id=fault.id), timeout=10).cleared) == [fault.id]


@pytest.mark.parametrize("case", sorted(BAD_FAULTS))
def test_bad_fault_parameters_are_invalid_argument(fabric: Fabric, case: str) -> None:
    bad, field = BAD_FAULTS[case]
    with pytest.raises(grpc.RpcError) as err:
        fabric.stub.InjectFault(pb.InjectFaultRequest(spec=bad), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    details = err.value.details() or ""
    assert details.startswith(field) and len(details) < MESSAGE_BOUND, details
    assert not fabric.stub.ListFaults(pb.ListFaultsRequest(), timeout=10).faults
    assert_serving(fabric)


def test_flap_period_floor_is_accepted(fabric: Fabric) -> None:
    f = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec(pb.FLAP, period_s=MIN_FLAP_PERIOD_S)))
    fabric.stub.ClearFault(pb.ClearFaultRequest(id=f.id))


def test_clear_with_id_and_all_is_refused_and_clears_nothing(fabric: Fabric) -> None:
    kept = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec()))
    with pytest.raises(grpc.RpcError) as err:
        fabric.stub.ClearFault(pb.ClearFaultRequest(id=kept.id, all=True), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not both" in err.value.details()
    assert [x.id for x in fabric.stub.ListFaults(pb.ListFaultsRequest()).faults] == [kept.id]
    fabric.stub.ClearFault(pb.ClearFaultRequest(all=True))


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda s: s.ClearFault(pb.ClearFaultRequest(id=HUGE), timeout=10), "id"),
        (lambda s: s.ListPaths(pb.ListPathsRequest(src=HUGE, dst="cuh1"), timeout=10), "src"),
        (lambda s: s.InstallRoutes(pb.InstallRoutesRequest(switches=[HUGE]), timeout=10), "switches[0]"),
        (
            lambda s: s.GetCounters(pb.GetCountersRequest(switches=["cut0p0n0", HUGE]), timeout=10),
            "switches[1]",
        ),
    ],
)
def test_unknown_huge_names_are_not_found_with_a_bounded_quote(fabric: Fabric, call, field: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        call(fabric.stub)
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.NOT_FOUND, details
    assert details.startswith(field) and len(details) < MESSAGE_BOUND and "10000 characters" in details
    assert_serving(fabric)


def test_flap_and_expiry_threads_survive_an_unexpected_exception(
    fabric: Fabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = fabric.core
    real_sync = core.switches.sync
    failures = {"left": 2}

    def flaky_sync(switches):  # type: ignore[no-untyped-def]
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("injected bug")
        return real_sync(switches)

    events: queue.Queue = core.events.subscribe()
    flap = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec(pb.FLAP, period_s=MIN_FLAP_PERIOD_S)))
    monkeypatch.setattr(core.switches, "sync", flaky_sync)
    seen: list[str] = []

    def flapped_after_error() -> bool:
        while not events.empty():
            e = events.get_nowait()
            if e is not None and e.fault_id == flap.id:
                seen.append(e.kind)
        return "error" in seen and seen[-1] in ("flap_up", "flap_down")

    wait_for(flapped_after_error, "the flap to go on after the bug")
    monkeypatch.setattr(core.switches, "sync", real_sync)
    fabric.stub.ClearFault(pb.ClearFaultRequest(id=flap.id))
    timed = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec(duration_s=0.2)))
    failures["left"] = 1
    monkeypatch.setattr(core.switches, "sync", flaky_sync)  # the expiry's clear hits the bug
    wait_for(lambda: not any(f.id == timed.id for f in core.faults()), "the fault to expire", DEADLINE_S)
    core.events.unsubscribe(events)


def test_mrcctl_shows_any_expiry_time() -> None:
    assert clock_time(0) == "-"
    assert clock_time(1e308) == "1e+308"
    assert clock_time(1.0).startswith("00:00:01")


def test_an_unexpected_error_is_internal_and_the_service_goes_on(
    fabric: Fabric, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken() -> list[object]:
        raise RuntimeError("injected bug " + "z" * 1000)

    monkeypatch.setattr(fabric.core, "faults", broken)
    with pytest.raises(grpc.RpcError) as err:
        fabric.stub.ListFaults(pb.ListFaultsRequest(), timeout=10)
    details = err.value.details() or ""
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert details.startswith("ListFaults: RuntimeError: injected bug") and len(details) <= 300
    monkeypatch.undo()
    assert_serving(fabric)


def _threads_but_rpc_workers() -> int:
    """Threads other than the gRPC server's request workers ("ctl_N") and the switch writers
    ("sync_N"), which their executors start on demand up to their bounds however the faults
    are scheduled."""
    assert sum(1 for t in threading.enumerate() if t.name.startswith("sync")) <= SYNC_PARALLEL
    return sum(1 for t in threading.enumerate() if not t.name.startswith(("ctl_", "sync")))


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_10000_faults_keep_threads_and_memory_bounded_and_the_cap_is_resource_exhausted(
    fabric: Fabric,
) -> None:
    """Timed faults are entries in one scheduler, not a thread each; past MAX_ACTIVE_FAULTS
    an inject is RESOURCE_EXHAUSTED naming the field, and ListFaults pages stay small."""
    threads_before = _threads_but_rpc_workers()
    names_before = {t.name for t in threading.enumerate()}
    rss_before = _rss_bytes()
    accepted: list[str] = []
    refused: list[grpc.RpcError] = []
    for i in range(10_000):
        req = pb.InjectFaultRequest(spec=spec(pb.LOSS, probability=0.001, duration_s=3600.0 + i))
        try:
            accepted.append(fabric.stub.InjectFault(req, timeout=10).id)
        except grpc.RpcError as err:
            refused.append(err)
    assert len(accepted) == MAX_ACTIVE_FAULTS and len(refused) == 10_000 - MAX_ACTIVE_FAULTS
    assert {e.code() for e in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
    assert refused[0].details().startswith("spec: ") and "MAX_ACTIVE_FAULTS" in refused[0].details()
    # a thread per timed fault would add thousands; a few may come from the rest of the
    # process (earlier tests' channels and executors on a loaded machine), so the ceiling is 16
    added = _threads_but_rpc_workers() - threads_before
    new_names = sorted({t.name for t in threading.enumerate()} - names_before)
    assert added <= 16, (added, new_names)
    assert fabric.core.scheduler.pending() == MAX_ACTIVE_FAULTS
    assert _rss_bytes() - rss_before < 64 << 20
    first = fabric.stub.ListFaults(pb.ListFaultsRequest(), timeout=10)
    assert len(first.faults) == LIST_PAGE_DEFAULT and first.next_page_token
    assert first.ByteSize() < 1 << 20
    client = ControllerClient("unix:/nonexistent")  # its paging loop, on the fixture's channel
    client.stub = fabric.stub
    listed = client.faults()
    client.channel.close()
    assert [f.id for f in listed] == accepted
    cleared = fabric.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=60).cleared
    assert len(cleared) == MAX_ACTIVE_FAULTS
    assert fabric.core.scheduler.pending() == 0  # cancelled timers are compacted away
    assert_serving(fabric)


def test_list_faults_pages_in_id_order_and_refuses_bad_paging(fabric: Fabric) -> None:
    ids = [fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec()), timeout=10).id for _ in range(5)]
    seen: list[str] = []
    token = ""
    while True:
        page = fabric.stub.ListFaults(pb.ListFaultsRequest(page_size=2, page_token=token), timeout=10)
        assert len(page.faults) <= 2
        seen += [f.id for f in page.faults]
        token = page.next_page_token
        if not token:
            break
    assert seen == ids
    for bad, field in (
        (pb.ListFaultsRequest(page_size=LIST_PAGE_MAX + 1), "page_size"),
        (pb.ListFaultsRequest(page_token="x" * 500), "page_token"),
    ):
        with pytest.raises(grpc.RpcError) as err:
            fabric.stub.ListFaults(bad, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details().startswith(f"{field}: ") and len(err.value.details()) <= MESSAGE_BOUND


@pytest.mark.parametrize("method", ["InjectFault", "ListFaults", "ClearFault", "WatchEvents", "GetTopology"])
def test_garbage_bytes_are_invalid_argument_not_internal(fabric: Fabric, method: str) -> None:
    channel = fabric.channel
    assert channel is not None
    path = f"/mrc.controller.v1.Controller/{method}"
    garbage = b"\xff\xff\xff\xff\x0f garbage"
    with pytest.raises(grpc.RpcError) as err:
        if method == "WatchEvents":
            list(channel.unary_stream(path)(garbage, timeout=10))
        else:
            channel.unary_unary(path)(garbage, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert err.value.details().startswith("request: ")
    assert_serving(fabric)


def test_the_controller_socket_is_0600_whatever_the_umask(fabric: Fabric, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import stat

    from controller.server import serve

    old = os.umask(0)
    try:
        server, _service, bound = serve(fabric.core, f"unix:{tmp_path}/ctl.sock")
    finally:
        os.umask(old)
    try:
        st = os.stat(tmp_path / "ctl.sock")
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
        assert bound == f"unix:{tmp_path}/ctl.sock"
    finally:
        server.stop(grace=None)
