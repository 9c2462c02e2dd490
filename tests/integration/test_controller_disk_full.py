"""The controller's state on a real full disk: a 64 KiB tmpfs (issue 64).

Measured on main before: with the state directory on a 64 KiB tmpfs and nothing left to write,
all 75 API calls answered OK; after kill -9 and a restart 32 acknowledged faults were gone from
the switches, 9 cleared faults were back and ids were handed out twice. Here the tmpfs lives in
a private mount namespace that a holder process keeps (``unshare -m --propagation private``),
the controller runs in it (``nsenter``), and a filler file takes the last free byte and gives it
back; nothing stays mounted once the holder is gone. The switches are the Linux shim's
P4Runtime service in a helper process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from bench.bench_controller_durability import STATE, Lab, TmpfsDisk, kill_loop, specs
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    disk = TmpfsDisk(tmp_path / "state")
    lab = None
    try:
        lab = Lab(tmp_path, disk, prefix="tf")
        yield lab
    finally:
        if lab is not None:
            lab.close()
        disk.close()
    assert not any(str(tmp_path) in line for line in Path("/proc/self/mountinfo").read_text().splitlines())


def test_a_full_tmpfs_refuses_changes_and_writing_resumes_when_space_returns(lab: Lab) -> None:
    lab.start()
    assert lab.reconciled()
    lab.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=scaled(60))
    menu = specs(lab.topo)
    live = {
        lab.stub.InjectFault(pb.InjectFaultRequest(spec=menu[i % len(menu)]), timeout=scaled(10)).id
        for i in range(6)
    }
    ids = set(live)
    assert lab.tables_match(lab.faults())
    lab.disk.fill()
    refused = []
    for i in range(400):  # the controller folds its journal into its own pages while the state fits
        try:
            f = lab.stub.InjectFault(pb.InjectFaultRequest(spec=menu[i % len(menu)]), timeout=scaled(10))
            live.add(f.id)
            ids.add(f.id)
        except grpc.RpcError as exc:
            refused.append((exc.code(), exc.details() or ""))
            if len(refused) == 10:
                break
    assert len(refused) == 10, f"{len(live)} faults and not one change refused on a full disk"
    assert all(c == grpc.StatusCode.UNAVAILABLE and STATE in d for c, d in refused), refused[0]
    assert "No space left on device" in refused[0][1] or "kept to fold" in refused[0][1], refused[0]
    now = lab.faults()
    assert set(now) == live and lab.tables_match(now)  # what was refused was not made
    lab.disk.drain()
    for i in range(40):  # space is back: every change is made, the journal folded when it grows
        if i % 3 == 2:
            fid = sorted(live)[0]
            lab.stub.ClearFault(pb.ClearFaultRequest(id=fid), timeout=scaled(10))
            live.discard(fid)
        else:
            f = lab.stub.InjectFault(pb.InjectFaultRequest(spec=menu[i % len(menu)]), timeout=scaled(10))
            assert f.id not in ids
            live.add(f.id)
            ids.add(f.id)
    lab.kill()
    lab.start()
    got = lab.faults()
    assert set(got) == live
    assert lab.reconciled() and lab.tables_match(got)
    fresh = lab.stub.InjectFault(pb.InjectFaultRequest(spec=menu[0]), timeout=scaled(10)).id
    assert int(fresh[1:]) > max(int(i[1:]) for i in ids)


def test_killed_while_the_tmpfs_fills_and_drains_nothing_acknowledged_is_lost(lab: Lab) -> None:
    tally = kill_loop(lab, rounds=4, max_rounds=16)["tally"]  # (the first round starts full)
    assert tally["injects"] > 30 and tally["refused"] > 0, tally
    wrong = ("lost", "back", "reused", "unexplained", "tables", "not_reconciled", "other_errors")
    assert {k: tally[k] for k in wrong} == dict.fromkeys(wrong, 0), tally
