"""``kill -9`` of mrc-controller in the middle of concurrent inject/clear calls, repeated: it
always starts again, lists the faults it had acknowledged, and the switches hold exactly those.

The defect (issue 44): concurrent calls tore ``controller-state.json`` within 0.05 s; a
controller killed then never came back (``JSONDecodeError`` at every start), ``mrcctl clear
--all`` met UNAVAILABLE and every fault -- a black hole included -- stayed in the switches.
Here the controller is the real process (``python -m controller.server --state-file``), the
switches are the Linux shim's P4Runtime service in this process (they outlive the controller,
as real switches do), and the kills land at random moments of 6 callers' traffic.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from controller_lab import ControllerProcess, expected_tables, served_clos, switch_fault_tables

from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from linux_target.p4rt_client import P4RuntimeTestClient
from mrc_fabric.topology import Topology

DEADLINE_S = 20.0
CALLERS = 6


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[Topology, Path]]:
    with served_clos(tmp_path, "kc") as topo:
        topo.save(tmp_path / "topology.json")
        yield topo, tmp_path


SPECS = [
    pb.FaultSpec(kind=pb.BLACKHOLE, target="kct0p0n0-kct1p0n0", direction=pb.A_TO_B),
    pb.FaultSpec(kind=pb.LOSS, target="kch0-kct0p0n0", probability=0.25),
    pb.FaultSpec(kind=pb.LINK_DOWN, target="kct0p1n1-kct1p1n0"),
    pb.FaultSpec(kind=pb.SWITCH_DOWN, target="kct1p0n1"),
    pb.FaultSpec(kind=pb.LOSS, target="kct0p1n0:2", direction=pb.B_TO_A, probability=0.5),
]


def traffic(ctl: ControllerProcess, stop: threading.Event, seed: int, acked: list[tuple[str, str]]) -> None:
    """Inject and clear at random until ``stop``; every acknowledged call goes into ``acked``."""
    rng = random.Random(seed)
    mine: list[str] = []
    while not stop.is_set():
        try:
            if mine and rng.random() < 0.45:
                fid = mine.pop(rng.randrange(len(mine)))
                ctl.stub.ClearFault(pb.ClearFaultRequest(id=fid), timeout=5)
                acked.append(("clear", fid))
            else:
                f = ctl.stub.InjectFault(pb.InjectFaultRequest(spec=rng.choice(SPECS)), timeout=5)
                mine.append(f.id)
                acked.append(("fault", f.id))
        except grpc.RpcError:
            return  # the controller died under the call


def test_killed_during_concurrent_calls_it_comes_back_with_what_it_acknowledged(
    fabric: tuple[Topology, Path],
) -> None:
    topo, run = fabric
    ctl = ControllerProcess(run)
    ctl.start()
    deadline = time.monotonic() + DEADLINE_S
    while not ctl.ready() and time.monotonic() < deadline:
        time.sleep(0.05)
    ctl.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=DEADLINE_S)
    rng = random.Random(44)
    live: set[str] = set()
    readers = {sw.name: P4RuntimeTestClient(sw.p4rt_address, sw.device_id, 0) for sw in topo.switches}
    try:
        for round_ in range(4):
            acked: list[tuple[str, str]] = []
            stop = threading.Event()
            callers = [threading.Thread(target=traffic, args=(ctl, stop, round_ * 10 + k, acked))
                       for k in range(CALLERS)]  # fmt: skip
            for t in callers:
                t.start()
            time.sleep(0.3 + rng.random() * 0.6)
            ctl.kill()
            stop.set()
            for t in callers:
                t.join(timeout=10)
            assert len(acked) > 5, "the callers hardly got through"
            for op, fid in acked:
                (live.add if op == "fault" else live.discard)(fid)
            ctl.start()  # the same command the supervisor runs: it must come up every time
            got = ctl.faults()
            # each caller had at most one call in flight when the controller died
            assert len(set(got) ^ live) <= CALLERS, (round_, sorted(set(got) ^ live))
            live = set(got)
            deadline = time.monotonic() + DEADLINE_S
            while not ctl.ready() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert switch_fault_tables(readers) == expected_tables(topo, got)
        assert live, "no fault survived to be cleared"
        assert set(ctl.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=10).cleared) == live
        assert all(not v for v in switch_fault_tables(readers).values())
    finally:
        ctl.kill()
        ctl.channel.close()
        for r in readers.values():
            r.close()


def test_a_standby_takes_over_the_moment_the_controller_dies(fabric: tuple[Topology, Path]) -> None:
    """The testbed keeps ``mrc-controller --standby-for PID`` beside the controller: imports
    done, it waits on the controller's exit and then serves what the state file holds."""
    _topo, run = fabric
    ctl = ControllerProcess(run)
    ctl.start()
    standby = None
    try:
        deadline = time.monotonic() + DEADLINE_S
        while not ctl.ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        ctl.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=DEADLINE_S)
        fault = ctl.stub.InjectFault(pb.InjectFaultRequest(spec=SPECS[0]), timeout=10)
        assert ctl.proc is not None
        cmd = [
            sys.executable,
            "-m",
            "controller.server",
            "--topology",
            str(run / "topology.json"),
            "--state-file",
            str(run / "controller-state.json"),
            "--standby-for",
            str(ctl.proc.pid),
        ]
        standby = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        assert standby.poll() is None and list(ctl.faults()) == [fault.id]  # the first one serves
        ctl.kill()
        deadline = time.monotonic() + DEADLINE_S
        while True:  # (a call sent on the dead one's connection before the channel saw it close fails)
            try:
                got = ctl.stub.ListFaults(pb.ListFaultsRequest(), timeout=DEADLINE_S, wait_for_ready=True)
                break
            except grpc.RpcError:
                assert time.monotonic() < deadline, "the standby did not take over"
        assert [f.id for f in got.faults] == [fault.id] and standby.poll() is None  # the standby
    finally:
        ctl.kill()
        if standby is not None:
            standby.kill()
            standby.wait()
        ctl.channel.close()


def _orphaned_standby_exits(tmp_path: Path, parent_lives_s: float) -> None:
    """A shell starts a standby (``--parent`` the shell) and exits after ``parent_lives_s``: the
    standby, waiting on a controller that lives on, must exit by itself, with nothing to say."""
    sleeper = subprocess.Popen(["sleep", "60"])
    errors = tmp_path / "standby.err"
    try:
        script = (f"{sys.executable} -m controller.server --topology {tmp_path}/none.json "
                  f"--standby-for {sleeper.pid} --parent $$ >/dev/null 2>{errors} & echo $!; "
                  f"sleep {parent_lives_s}")  # fmt: skip
        pid = int(subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout)
        deadline = time.monotonic() + DEADLINE_S
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not Path(f"/proc/{pid}").exists(), "the orphaned standby still waits"
        assert errors.read_text() == ""  # (it left because its parent went, not on an error)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_standby_whose_parent_goes_takes_nothing_over(tmp_path: Path) -> None:
    """The parent outlives the standby's start (on an idle machine): its exit wakes the wait."""
    _orphaned_standby_exits(tmp_path, 1.0)


def test_a_standby_whose_parent_went_before_its_imports_takes_nothing_over(tmp_path: Path) -> None:
    """The parent exits at once, before the standby's interpreter has read its parent pid (on a
    busy machine a start takes a second or more): reading ``os.getppid()`` then found the reaper
    and waited on forever; the parent's pid given on the command line tells it apart."""
    _orphaned_standby_exits(tmp_path, 0)
