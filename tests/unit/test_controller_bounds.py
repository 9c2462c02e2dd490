# ruff: noqa: F811 (the fabric fixture is imported from test_controller)
"""Absurd northbound requests are refused with a precise status and the controller keeps serving.

Every request the issue lists (issue 14): durations and flap periods of 1e308/1e300/1 µs,
non-finite numbers, loss probabilities of -0.0 and 5e-324, a 10 000-character target,
``ClearFault{id, all}``; each gets INVALID_ARGUMENT or NOT_FOUND naming the field, quoting
at most a bounded prefix of the bad input, and afterwards a normal fault still works.
The flap and expiry threads survive an unexpected exception. Reuses the fake fabric of
test_controller.py (the shim's P4Runtime service without a kernel).
"""

from __future__ import annotations

import math
import queue

import grpc
import pytest
from test_controller import DEADLINE_S, Fabric, fabric, wait_for  # noqa: F401 (the fixture)

from controller.cli import _stamp
from controller.faults import MAX_TARGET_CHARS, MIN_FLAP_PERIOD_S, QUOTE_CHARS
from controller.proto.mrc.controller.v1 import controller_pb2 as pb

LINK = "cut0p0n0:3"
HUGE = "x" * 10_000
MESSAGE_BOUND = QUOTE_CHARS + 200  # the quoted prefix plus the sentence around it


def spec(kind: int = pb.BLACKHOLE, target: str = LINK, **kw: float) -> pb.FaultSpec:
    return pb.FaultSpec(kind=kind, target=target, **kw)


BAD_FAULTS = {
    "duration 1e308": (spec(duration_s=1e308), "spec.duration_s"),
    "duration inf": (spec(duration_s=math.inf), "spec.duration_s"),
    "duration nan": (spec(duration_s=math.nan), "spec.duration_s"),
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
    real_sync = core._sync
    failures = {"left": 2}

    def flaky_sync(switches):  # type: ignore[no-untyped-def]
        if failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("injected bug")
        return real_sync(switches)

    events: queue.Queue = core.events.subscribe()
    flap = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec(pb.FLAP, period_s=MIN_FLAP_PERIOD_S)))
    monkeypatch.setattr(core, "_sync", flaky_sync)
    seen: list[str] = []

    def flapped_after_error() -> bool:
        while not events.empty():
            e = events.get_nowait()
            if e is not None and e.fault_id == flap.id:
                seen.append(e.kind)
        return "error" in seen and seen[-1] in ("flap_up", "flap_down")

    wait_for(flapped_after_error, "the flap to go on after the bug")
    monkeypatch.setattr(core, "_sync", real_sync)
    fabric.stub.ClearFault(pb.ClearFaultRequest(id=flap.id))
    timed = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec(duration_s=0.2)))
    failures["left"] = 1
    monkeypatch.setattr(core, "_sync", flaky_sync)  # the expiry's clear hits the bug
    wait_for(lambda: not any(f.id == timed.id for f in core.faults()), "the fault to expire", DEADLINE_S)
    core.events.unsubscribe(events)


def test_mrcctl_shows_any_expiry_time() -> None:
    assert _stamp(0) == "-"
    assert _stamp(1e308) == "1e+308"
    assert _stamp(1.0).startswith("00:00:01")


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
