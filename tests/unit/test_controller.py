"""Controller end to end over real gRPC, without root: P4Runtime switches are the Linux
shim's own P4Runtime service with the kernel left out (tables only), one per unix socket.

Covers route install and read-back, every fault kind's entries, combining faults,
FLAP and expiry timers, events, ListPaths, a switch restart re-installed by the
controller, per-update P4Runtime error decoding, and the API's error codes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from controller_lab import FakeSwitch, fake_switches, stop_controller
from finsy.proto import rpc_code

from controller.compiler import compile_routes
from controller.core import ControllerCore
from controller.entries import Exact, Lpm, TableEntry
from controller.p4rt_client import Pipeline, WriteError, diff_entries
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
from controller.server import serve
from linux_target.p4rt_client import P4RuntimeTestClient
from mrc_fabric.p4info import default_index
from mrc_fabric.topology import Topology, build_clos
from mrc_p4rt.channel import CONTROLLER_ELECTION_ID
from mrc_p4rt.codec import encode_entry

DEADLINE_S = 10.0


def wait_for(cond: Callable[[], object], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Fabric:
    topo: Topology
    switches: dict[str, FakeSwitch]
    core: ControllerCore
    stub: pb_grpc.ControllerStub
    channel: grpc.Channel | None = None


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[Fabric]:
    topo = build_clos(2, 2, 2, 2, prefix="cu", p4rt_address_format=f"unix:{tmp_path}/{{name}}.sock")
    switches = fake_switches(topo, tmp_path)
    core = server = channel = None
    try:
        for sw in switches.values():
            sw.start()
        core = ControllerCore(topo, run_dir=tmp_path)
        core.start()
        assert core.wait_ready(DEADLINE_S) == []
        server, _service, address = serve(core, f"unix:{tmp_path}/controller.sock")
        channel = grpc.insecure_channel(address)
        yield Fabric(topo, switches, core, pb_grpc.ControllerStub(channel), channel)
    finally:
        stop_controller(channel, server, core)
        for sw in switches.values():
            sw.stop()


def read_back(f: Fabric, switch: str) -> set[TableEntry]:
    return set(f.core.pool[switch].read_entries())


def test_install_reads_back_every_entry_and_writes_host_configs(fabric: Fabric, tmp_path: Path) -> None:
    resp = fabric.stub.InstallRoutes(pb.InstallRoutesRequest())
    compiled = compile_routes(fabric.topo)
    assert resp.total_entries == sum(len(c.entries) for c in compiled.values())
    for name, entries in compiled.items():
        assert read_back(fabric, name) == set(entries.entries), name
    assert sorted(p.name for p in (tmp_path / "hosts").iterdir()) == [f"cuh{i}.json" for i in range(4)]
    # idempotent: a second install writes nothing new and keeps the same entries
    again = fabric.stub.InstallRoutes(pb.InstallRoutesRequest(switches=["cut0p0n0"]))
    assert again.total_entries == len(compiled["cut0p0n0"].entries)
    assert read_back(fabric, "cut0p0n0") == set(compiled["cut0p0n0"].entries)


def _fault_entries(f: Fabric, switch: str) -> set[TableEntry]:
    return {e for e in read_back(f, switch) if e.table in ("port_fault", "ingress_fault")}


def _inject(f: Fabric, kind: int, target: str, **kw) -> pb.Fault:
    return f.stub.InjectFault(pb.InjectFaultRequest(spec=pb.FaultSpec(kind=kind, target=target, **kw)))


def test_each_fault_kind_writes_and_clears_its_entries(fabric: Fabric) -> None:
    fabric.stub.InstallRoutes(pb.InstallRoutesRequest())
    drop = lambda table, port: TableEntry(table, (("port", Exact(port)),), "fault_drop")  # noqa: E731
    cases = [
        (
            (pb.LINK_DOWN, "cut0p0n0-cut1p0n1"),
            {"cut0p0n0": {drop("port_fault", 4)}, "cut1p0n1": {drop("port_fault", 1)}},
        ),
        ((pb.BLACKHOLE, "cut1p0n1:1", pb.B_TO_A), {"cut1p0n1": {drop("port_fault", 1)}}),
        ((pb.BLACKHOLE, "cut0p0n0-cuh1", pb.A_TO_B), {"cut0p0n0": {drop("ingress_fault", 2)}}),
        ((pb.NIC_PORT_DOWN, "cuh3:1"), {"cut0p1n1": {drop("ingress_fault", 2), drop("port_fault", 2)}}),
        ((pb.NIC_PORT_DOWN, "cuh0-eth0"), {"cut0p0n0": {drop("ingress_fault", 1), drop("port_fault", 1)}}),
        (
            (pb.SWITCH_DOWN, "cut1p1n0"),
            {"cut1p1n0": {drop(t, p) for t in ("port_fault", "ingress_fault") for p in (1, 2)}},
        ),
    ]
    for (kind, target, *direction), want in cases:
        f = _inject(fabric, kind, target, direction=direction[0] if direction else pb.BOTH)
        for switch, entries in want.items():
            assert _fault_entries(fabric, switch) == entries, (target, switch)
        fabric.stub.ClearFault(pb.ClearFaultRequest(id=f.id))
        for switch in want:
            assert _fault_entries(fabric, switch) == set(), (target, switch)
    # LOSS: round(p * 65536), capped at 65535; combined with a second loss on the same port
    f1 = _inject(fabric, pb.LOSS, "cut0p1n0-cut1p1n0", direction=pb.A_TO_B, probability=0.25)
    assert {e.params for e in _fault_entries(fabric, "cut0p1n0")} == {(("prob", 16384),)}
    f2 = _inject(fabric, pb.LOSS, "cut0p1n0-cut1p1n0", direction=pb.A_TO_B, probability=1.0)
    assert {e.params for e in _fault_entries(fabric, "cut0p1n0")} == {(("prob", 65535),)}
    fabric.stub.ClearFault(pb.ClearFaultRequest(id=f2.id))
    assert {e.params for e in _fault_entries(fabric, "cut0p1n0")} == {(("prob", 16384),)}
    listed = fabric.stub.ListFaults(pb.ListFaultsRequest()).faults
    assert [x.id for x in listed] == [f1.id] and listed[0].entries == ["cut0p1n0:port_fault:3 loss 0.25"]
    assert fabric.stub.ClearFault(pb.ClearFaultRequest(all=True)).cleared == [f1.id]
    assert _fault_entries(fabric, "cut0p1n0") == set()


def test_paths_show_fault_status(fabric: Fabric) -> None:
    paths = fabric.stub.ListPaths(pb.ListPathsRequest(src="cuh0", dst="cuh3")).paths
    assert len(paths) == 4 and {p.status for p in paths} == {"ok"}
    assert {p.delivered_to for p in paths} == {"cuh3:0", "cuh3:1"}
    _inject(fabric, pb.BLACKHOLE, "cut0p1n1-cut1p1n1", direction=pb.B_TO_A)
    _inject(fabric, pb.LOSS, "cut0p0n0-cut1p0n0", direction=pb.A_TO_B, probability=0.5)
    by = {
        (p.plane, p.t1): p for p in fabric.stub.ListPaths(pb.ListPathsRequest(src="cuh0", dst="cuh3")).paths
    }
    assert (by[(1, 1)].status, by[(1, 1)].drop_reason, by[(1, 1)].drop_at) == (
        "dropped",
        "egress_fault",
        "cut1p1n1:2",
    )
    assert by[(0, 0)].status == "lossy" and by[(0, 0)].survival == pytest.approx(0.5)
    assert by[(0, 1)].status == by[(1, 0)].status == "ok"
    same_t0 = fabric.stub.ListPaths(pb.ListPathsRequest(src="cuh0", dst="cuh1")).paths
    assert [(p.plane, p.t1, len(p.hops)) for p in same_t0] == [(0, -1, 1), (1, -1, 1)]
    ecmp = fabric.stub.ListPaths(pb.ListPathsRequest(src="cuh0", dst="cuh3", ecmp=True)).paths
    assert sorted(p.hops[1].node for p in ecmp) == ["cut1p0n0", "cut1p0n1", "cut1p1n0", "cut1p1n1"]


def test_flap_and_duration_timers_and_events(fabric: Fabric) -> None:
    events: list[pb.Event] = []
    stream = fabric.stub.WatchEvents(pb.WatchEventsRequest())

    def read() -> None:
        try:
            for e in stream:
                events.append(e)
        except grpc.RpcError as exc:  # cancelled at the end of the test
            assert exc.code() == grpc.StatusCode.CANCELLED

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        flap = _inject(fabric, pb.FLAP, "cut0p0n1-cut1p0n0", period_s=0.1)
        wait_for(lambda: any(e.kind == "flap_up" for e in events), "a flap_up event")
        wait_for(lambda: any(e.kind == "flap_down" for e in events), "a flap_down event")
        fabric.stub.ClearFault(pb.ClearFaultRequest(id=flap.id))
        assert _fault_entries(fabric, "cut0p0n1") == set()
        timed = _inject(fabric, pb.BLACKHOLE, "cut0p0n1-cut1p0n0", duration_s=0.2)
        assert timed.expires_at > timed.created_at
        wait_for(lambda: any(e.kind == "fault_expired" and e.fault_id == timed.id for e in events), "expiry")
        assert _fault_entries(fabric, "cut1p0n0") == set()
        assert not fabric.stub.ListFaults(pb.ListFaultsRequest()).faults
        kinds = [e.kind for e in events]
        assert kinds[0] == "fault_injected" and "fault_cleared" in kinds
        assert all(e.timestamp > 0 for e in events)
    finally:
        stream.cancel()
        reader.join(timeout=5)


def test_restarted_switch_gets_pipeline_and_entries_back(fabric: Fabric) -> None:
    fabric.stub.InstallRoutes(pb.InstallRoutesRequest())
    _inject(fabric, pb.BLACKHOLE, "cut1p1n1:2", direction=pb.B_TO_A)
    want = set(fabric.core.desired("cut1p1n1"))
    sw = fabric.switches["cut1p1n1"]
    session = fabric.core.pool["cut1p1n1"]
    connects = session.connects
    sw.stop()
    wait_for(lambda: not session.ready, "the controller to see the switch gone")
    with pytest.raises(grpc.RpcError) as err:
        _inject(fabric, pb.SWITCH_DOWN, "cut1p1n1")
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "cut1p1n1" in err.value.details()
    sw.start()  # a fresh switch: no pipeline, no entries
    wait_for(lambda: session.ready and session.connects == connects + 1, "re-install")
    assert read_back(fabric, "cut1p1n1") == want
    assert len(fabric.stub.ListFaults(pb.ListFaultsRequest()).faults) == 1  # the failed inject left nothing


@pytest.mark.parametrize(
    ("spec", "code", "needle"),
    [
        (
            pb.FaultSpec(kind=pb.LINK_DOWN, target="cut0p0n0-cut1p1n0"),
            grpc.StatusCode.NOT_FOUND,
            "spec.target",
        ),
        (pb.FaultSpec(kind=pb.SWITCH_DOWN, target="nope"), grpc.StatusCode.NOT_FOUND, "no switch 'nope'"),
        (pb.FaultSpec(kind=pb.NIC_PORT_DOWN, target="cuh0:7"), grpc.StatusCode.NOT_FOUND, "cuh0:7"),
        (
            pb.FaultSpec(kind=pb.LOSS, target="cut0p0n0:3", probability=1.5),
            grpc.StatusCode.INVALID_ARGUMENT,
            "spec.probability",
        ),
        (
            pb.FaultSpec(kind=pb.LOSS, target="cut0p0n0:3", probability=-0.1),
            grpc.StatusCode.INVALID_ARGUMENT,
            "spec.probability",
        ),
        (pb.FaultSpec(kind=pb.FLAP, target="cut0p0n0:3"), grpc.StatusCode.INVALID_ARGUMENT, "spec.period_s"),
        (
            pb.FaultSpec(kind=pb.BLACKHOLE, target="cut0p0n0:3", duration_s=-1),
            grpc.StatusCode.INVALID_ARGUMENT,
            "spec.duration_s",
        ),
        (
            pb.FaultSpec(kind=pb.SWITCH_DOWN, target="cut0p0n0", direction=pb.A_TO_B),
            grpc.StatusCode.INVALID_ARGUMENT,
            "spec.direction",
        ),
        (pb.FaultSpec(target="cut0p0n0:3"), grpc.StatusCode.INVALID_ARGUMENT, "spec.kind"),
    ],
)
def test_api_errors_name_the_problem(
    fabric: Fabric, spec: pb.FaultSpec, code: grpc.StatusCode, needle: str
) -> None:
    with pytest.raises(grpc.RpcError) as err:
        fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec))
    assert err.value.code() == code
    assert needle in err.value.details()
    assert not fabric.stub.ListFaults(pb.ListFaultsRequest()).faults


def test_other_api_errors(fabric: Fabric) -> None:
    for call, req, code, needle in [
        (fabric.stub.ClearFault, pb.ClearFaultRequest(id="f99"), grpc.StatusCode.NOT_FOUND, "f99"),
        (fabric.stub.ClearFault, pb.ClearFaultRequest(), grpc.StatusCode.INVALID_ARGUMENT, "id"),
        (fabric.stub.ListPaths, pb.ListPathsRequest(src="cuh0", dst="x"), grpc.StatusCode.NOT_FOUND, "dst"),
        (fabric.stub.ListPaths, pb.ListPathsRequest(dst="cuh1"), grpc.StatusCode.INVALID_ARGUMENT, "src"),
        (
            fabric.stub.InstallRoutes,
            pb.InstallRoutesRequest(switches=["zz"]),
            grpc.StatusCode.NOT_FOUND,
            "zz",
        ),
        (fabric.stub.GetCounters, pb.GetCountersRequest(switches=["zz"]), grpc.StatusCode.NOT_FOUND, "zz"),
    ]:
        with pytest.raises(grpc.RpcError) as err:
            call(req)
        assert err.value.code() == code and needle in err.value.details(), (req, err.value.details())
    fabric.switches["cut0p0n0"].stop()
    wait_for(lambda: not fabric.core.pool["cut0p0n0"].ready, "switch gone")
    with pytest.raises(grpc.RpcError) as err:
        fabric.stub.InstallRoutes(pb.InstallRoutesRequest())
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE and "cut0p0n0" in err.value.details()
    counters = fabric.stub.GetCounters(pb.GetCountersRequest())
    assert any("cut0p0n0" in e for e in counters.errors)
    assert {c.switch for c in counters.counters} == {s.name for s in fabric.topo.switches} - {"cut0p0n0"}


def test_write_errors_name_switch_table_and_entry(fabric: Fabric) -> None:
    session = fabric.core.pool["cut1p0n0"]
    bad = TableEntry("port_fault", (("port", Exact(9)),), "fault_drop")  # port 9 is not on this switch
    good = TableEntry("port_fault", (("port", Exact(1)),), "fault_drop")
    with pytest.raises(WriteError) as err:
        session.sync([good, bad])
    text = str(err.value)
    assert text.startswith("cut1p0n0: write failed: INSERT port_fault[port=0x9] -> fault_drop()")
    assert "INVALID_ARGUMENT" in text and len(err.value.errors) == 1
    assert read_back(fabric, "cut1p0n0") == {good}  # the good update of the batch went through
    session.sync([])
    assert read_back(fabric, "cut1p0n0") == set()


def test_get_topology_and_counters(fabric: Fabric) -> None:
    from mrc_fabric.drop_reasons import DROP_REASON_LABELS

    topo = Topology.from_json(fabric.stub.GetTopology(pb.GetTopologyRequest()).topology_json)
    assert topo.to_json() == fabric.topo.to_json()
    resp = fabric.stub.GetCounters(pb.GetCountersRequest(switches=["cut0p0n0"]))
    assert not resp.errors
    rx = {c.label for c in resp.counters if c.counter == "port_rx"}
    assert rx == {"cut0p0n0-eth1", "cut0p0n0-eth2", "cut0p0n0-eth3", "cut0p0n0-eth4"}
    assert {c.label for c in resp.counters if c.counter == "drop_reason"} == set(DROP_REASON_LABELS.values())


def test_mrcctl_against_the_service(
    fabric: Fabric, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from controller.cli import main

    ctl = ["--controller", f"unix:{tmp_path}/controller.sock"]
    assert main([*ctl, "--json", "install"]) == 0
    assert json.loads(capsys.readouterr().out)["total_entries"] > 0
    assert (
        main([*ctl, "--json", "fault", "loss", "cut0p0n0-cut1p0n0", "--prob", "0.1", "--direction", "a2b"])
        == 0
    )
    fault = json.loads(capsys.readouterr().out)
    assert fault["spec"]["kind"] == "LOSS" and fault["entries"] == ["cut0p0n0:port_fault:3 loss 0.1"]
    assert main([*ctl, "paths", "cuh0", "cuh2"]) == 0
    table = capsys.readouterr().out
    assert "lossy" in table and "cut1p0n1" in table
    assert main([*ctl, "faults"]) == 0
    assert "cut0p0n0-cut1p0n0" in capsys.readouterr().out
    assert main([*ctl, "fault", "loss", "cut0p0n0-cut1p0n0", "--prob", "2"]) == 1
    assert "INVALID_ARGUMENT: spec.probability" in capsys.readouterr().err
    assert main([*ctl, "fault", "switch_down", "nope"]) == 1
    assert "NOT_FOUND" in capsys.readouterr().err
    assert main([*ctl, "clear", "--all"]) == 0
    assert fault["id"] in capsys.readouterr().out
    assert main([*ctl, "--json", "counters", "cut1p0n0"]) == 0
    assert {c["switch"] for c in json.loads(capsys.readouterr().out)["counters"]} == {"cut1p0n0"}
    with pytest.raises(SystemExit, match="not both"):
        main([*ctl, "clear", "f1", "--all"])
    assert main([*ctl, "--json", "health"]) == 0
    health = json.loads(capsys.readouterr().out)
    assert {s["switch"] for s in health["switches"]} == {s.name for s in fabric.topo.switches}
    assert all(s["reachable"] and s["primary"] for s in health["switches"])
    fabric.switches["cut1p0n0"].stop()
    wait_for(lambda: not fabric.core.pool["cut1p0n0"].reachable, "the switch to be gone")
    with pytest.raises(SystemExit) as down:
        main([*ctl, "health"])
    assert down.value.code == 3 and "unreachable" in capsys.readouterr().out


def test_mrcctl_plan_reproduces_the_paper(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from controller.cli import main

    assert main(["--json", "plan", "--compare"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["multi_plane"]["gpus"] == 131072 and data["multi_plane"]["tiers"] == 2
    assert abs(data["optics_ratio"] - 2 / 3) < 1e-9 and abs(data["switch_ratio"] - 3 / 5) < 1e-9
    assert main(["plan", "--compare"]) == 0
    assert "6,144" in capsys.readouterr().out


def test_mrc_controller_process_installs_and_stops_cleanly(fabric: Fabric, tmp_path: Path) -> None:
    """The real entry point as a process: --install, serve mrcctl, exit on SIGTERM, remove its socket."""
    import json
    import signal
    import subprocess
    import sys

    topo_path = tmp_path / "proc" / "topology.json"
    topo_path.parent.mkdir()
    fabric.topo.save(topo_path)
    fabric.core.stop()  # the process below takes over as the primary controller
    sock = topo_path.parent / "controller.sock"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "controller.server",
            "--topology",
            str(topo_path),
            "--install",
            "--election-id",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(sock.exists, "the controller socket")
        channel = grpc.insecure_channel(f"unix:{sock}")
        stub = pb_grpc.ControllerStub(channel)
        compiled = compile_routes(fabric.topo)
        topo = json.loads(
            stub.GetTopology(pb.GetTopologyRequest(), timeout=10, wait_for_ready=True).topology_json
        )
        assert topo["switches"][0]["name"] == "cut0p0n0"
        want = len(compiled["cut1p1n1"].entries)
        wait_for(
            lambda: (
                len(stub.ListFaults(pb.ListFaultsRequest()).faults) == 0
                and (tmp_path / "proc" / "hosts" / "cuh0.json").exists()
            ),
            "host configs written by --install",
        )
        resp = stub.InstallRoutes(pb.InstallRoutesRequest(switches=["cut1p1n1"]), timeout=30)
        assert resp.total_entries == want
        channel.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "installed" in out
    assert not sock.exists()


def test_mrc_controller_rejects_a_bad_topology(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "topology.json"
    bad.write_text(build_clos(1, 1, 1, 1).to_json().replace('"port": 2,', '"port": 0,', 1))
    proc = subprocess.run(
        [sys.executable, "-m", "controller.server", "--topology", str(bad)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "port 0 is reserved" in proc.stderr


# -- reconciliation -----------------------------------------------------------------------------------
def _route(prefix: int, port: int) -> TableEntry:
    return TableEntry(
        "usid_route", (("dst_addr", Lpm(prefix, 48)),), "set_next_hop", (("port", port), ("dmac", 1))
    )


def test_diff_inserts_missing_modifies_differing_deletes_extra() -> None:
    keep, old, extra, new = _route(1 << 80, 1), _route(2 << 80, 1), _route(3 << 80, 1), _route(4 << 80, 2)
    changed = _route(2 << 80, 2)
    diff = diff_entries({e.key: e for e in (keep, old, extra)}, [keep, changed, new])
    assert (diff.inserts, diff.modifies, diff.deletes) == ([new], [changed], [extra])
    assert diff.size == 3
    same = diff_entries({e.key: e for e in (keep, old)}, [old, keep])
    assert same.size == 0


def test_pipeline_cookie_names_the_pipeline() -> None:
    ix = default_index()
    assert Pipeline(ix.p4info).cookie == Pipeline(ix.p4info).cookie != 0
    assert Pipeline(ix.p4info, b"{}").cookie != Pipeline(ix.p4info).cookie


def test_takeover_and_return_reconciles_without_pushing_the_pipeline(fabric: Fabric) -> None:
    """Another client is primary for a while and changes entries; when it leaves the
    controller is primary again, keeps the pipeline (same cookie: a push would empty the
    tables) and writes back exactly the two differences."""
    fabric.stub.InstallRoutes(pb.InstallRoutesRequest())
    name = "cut0p0n0"
    session = fabric.core.pool[name]
    compiled = set(compile_routes(fabric.topo)[name].entries)
    pushes, connects = session.pipeline_pushes, session.connects
    events = fabric.core.events.subscribe()
    sw = fabric.switches[name]
    taker = P4RuntimeTestClient(f"unix:{sw.socket}", sw.device_id, election_id=CONTROLLER_ELECTION_ID + 1)
    try:
        assert taker.arbitrate().arbitration.status.code == rpc_code.OK
        wait_for(lambda: not session.ready, "the controller to be demoted")
        ix = default_index()
        victim = sorted(compiled, key=lambda e: e.describe())[0]
        taker.delete(encode_entry(ix, victim))
        taker.insert(taker.table_entry("port_fault", {"port": 1}, "fault_drop"))
        with pytest.raises(grpc.RpcError) as err:  # the controller is only a backup now
            fabric.stub.InstallRoutes(pb.InstallRoutesRequest(switches=[name]), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE and name in (err.value.details() or "")
    finally:
        taker.close()
    wait_for(lambda: session.ready and session.connects == connects + 1, "the controller to reconcile")
    assert session.pipeline_pushes == pushes  # the pipeline was kept
    assert read_back(fabric, name) == compiled
    kinds = []
    while not events.empty():
        e = events.get_nowait()
        if e is not None and e.switch == name:
            kinds.append((e.kind, e.message))
    fabric.core.events.unsubscribe(events)
    assert ("switch_reconciled", f"pipeline kept; 2 updates; {len(compiled)} entries") in kinds, kinds
