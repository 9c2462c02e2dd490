"""The controller's state never lies: a full disk refuses changes, damage costs only what it
touched, and odd files are damage -- checked through ``mrc-controller`` itself.

The defects (issue 64, main at the time): with the state file's disk full every call answered
OK; after a kill -9, 32 acknowledged faults were gone from the switches, 9 cleared ones were
back and ids were handed out twice. One flipped byte in the journal dropped every record after
it; the snapshot had no checksum (a flipped bit moved a black hole to another link); an odd but
well-formed file (``"next_id": 1e999``) stopped the controller from starting.

Here the controller is the real process (``python -m controller.server --state-file``) and the
switches are the Linux shim's P4Runtime service in this process (they outlive the controller).
The disk fills by a file-size limit set on the running controller (``prlimit``: its writes past
the limit fail, as on a full disk) and drains when the limit is lifted;
``tests/integration/test_controller_disk_full.py`` does the same on a real 64 KiB tmpfs.
"""

from __future__ import annotations

import json
import random
import resource
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from controller_lab import (
    ControllerProcess,
    expected_tables,
    fault_readers,
    served_clos,
    switch_fault_tables,
    tables_settle_on,
)

from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from mrc_fabric.topology import Topology

PREFIX = "dd"
SPECS = [
    pb.FaultSpec(kind=pb.BLACKHOLE, target=f"{PREFIX}t0p0n0-{PREFIX}t1p0n0", direction=pb.A_TO_B),
    pb.FaultSpec(kind=pb.LOSS, target=f"{PREFIX}h0-{PREFIX}t0p0n0", probability=0.25),
    pb.FaultSpec(kind=pb.LINK_DOWN, target=f"{PREFIX}t0p1n1-{PREFIX}t1p1n0"),
    pb.FaultSpec(kind=pb.SWITCH_DOWN, target=f"{PREFIX}t1p0n1"),
    pb.FaultSpec(kind=pb.LOSS, target=f"{PREFIX}t0p1n0:2", direction=pb.B_TO_A, probability=0.5),
]
UNLIMITED = resource.RLIM_INFINITY


@pytest.fixture
def fabric(tmp_path: Path) -> Iterator[tuple[Topology, Path]]:
    with served_clos(tmp_path, PREFIX) as topo:
        topo.save(tmp_path / "topology.json")
        yield topo, tmp_path


@pytest.fixture
def ctl(fabric: tuple[Topology, Path]) -> Iterator[ControllerProcess]:
    c = ControllerProcess(fabric[1])
    try:
        yield c
    finally:
        c.close()


def number(fault_id: str) -> int:
    return int(fault_id[1:])


def disk_full(ctl: ControllerProcess) -> None:
    """No file of the controller's may grow past 200 bytes: every write that needs room fails
    (the journal, a new snapshot; the mark's second slot is cut short)."""
    assert ctl.proc is not None
    resource.prlimit(ctl.proc.pid, resource.RLIMIT_FSIZE, (200, UNLIMITED))


def disk_drained(ctl: ControllerProcess) -> None:
    assert ctl.proc is not None
    resource.prlimit(ctl.proc.pid, resource.RLIMIT_FSIZE, (UNLIMITED, UNLIMITED))


class Ledger:
    """What the controller acknowledged: the faults in force, and every id it handed out."""

    def __init__(self) -> None:
        self.live: dict[str, pb.FaultSpec] = {}
        self.ids: set[str] = set()

    def inject(self, ctl: ControllerProcess, spec: pb.FaultSpec) -> str:
        f = ctl.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=10)
        assert f.id not in self.ids, f"{f.id} handed out twice"
        self.ids.add(f.id)
        self.live[f.id] = spec
        return str(f.id)

    def clear(self, ctl: ControllerProcess, fault_id: str) -> None:
        ctl.stub.ClearFault(pb.ClearFaultRequest(id=fault_id), timeout=10)
        del self.live[fault_id]

    def churn(self, ctl: ControllerProcess, rng: random.Random, calls: int) -> None:
        for _ in range(calls):
            if self.live and rng.random() < 0.35:
                self.clear(ctl, rng.choice(sorted(self.live)))
            else:
                self.inject(ctl, rng.choice(SPECS))


def restarted_faithfully(ctl: ControllerProcess, topo: Topology, ledger: Ledger) -> None:
    """kill -9, start again: every acknowledged fault and no other, the switches holding exactly
    those, and the next id above every id handed out before."""
    ctl.kill()
    ctl.start()
    got = ctl.faults()
    assert sorted(got, key=number) == sorted(ledger.live, key=number)
    ctl.wait_reconciled()
    assert tables_settle_on(topo, got)
    fresh = ledger.inject(ctl, SPECS[0])
    assert number(fresh) > max(map(number, ledger.ids - {fresh})), (
        fresh,
        sorted(ledger.ids, key=number)[-3:],
    )


def test_a_full_disk_refuses_changes_and_loses_nothing_acknowledged(
    fabric: tuple[Topology, Path], ctl: ControllerProcess
) -> None:
    topo, _run = fabric
    rng = random.Random(64)
    ctl.start()
    ctl.wait_reconciled()
    ctl.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=20)
    ledger = Ledger()
    ledger.churn(ctl, rng, 12)
    readers = fault_readers(topo)
    try:
        before = switch_fault_tables(readers)
        assert before == expected_tables(topo, ctl.faults())
        disk_full(ctl)
        refused = []
        for i in range(16):
            try:
                if i % 3 == 2 and ledger.live:
                    fid = sorted(ledger.live, key=number)[0]
                    ctl.stub.ClearFault(pb.ClearFaultRequest(id=fid), timeout=10)
                    del ledger.live[fid]  # (acknowledged: it must stay cleared)
                elif i % 5 == 4:
                    ctl.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=10)
                    ledger.live.clear()
                else:
                    ledger.inject(ctl, SPECS[i % len(SPECS)])
            except grpc.RpcError as exc:
                refused.append((exc.code(), exc.details() or ""))
        assert len(refused) == 16, f"{16 - len(refused)} changes answered OK with the disk full"
        assert {code for code, _ in refused} == {grpc.StatusCode.UNAVAILABLE}, refused[:2]
        assert all("controller-state.json" in d for _, d in refused), refused[0]
        assert switch_fault_tables(readers) == before  # nothing refused reached a switch
        assert set(ctl.faults()) == set(ledger.live)
    finally:
        for r in readers.values():
            r.close()
    assert ctl.logged(("controller-state.json", "change not made")), "the refusal was not logged"
    disk_drained(ctl)
    ledger.churn(ctl, rng, 20)  # space is back: changes are made again
    restarted_faithfully(ctl, topo, ledger)


def flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x10]) + data[at + 1 :]


def lines_of(journal: Path) -> list[tuple[int, int]]:
    """(start, end) of every line of the journal."""
    data, out, start = journal.read_bytes(), [], 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end + 1
        out.append((start, end))
        start = end
    return out


@pytest.mark.parametrize(
    "damage", ["flipped byte", "record cut short", "two flipped bytes", "every 7th byte"]
)
def test_a_damaged_journal_costs_nothing_else_and_is_kept(
    fabric: tuple[Topology, Path], ctl: ControllerProcess, damage: str
) -> None:
    """One byte flipped, or a record cut short inside the journal (its line end included): the
    controller starts with every acknowledged fault, keeps the damaged journal beside the state
    (not overwritten by the next start), and hands out no id twice."""
    topo, run = fabric
    rng = random.Random(damage)
    ctl.start()
    ctl.wait_reconciled()
    ctl.stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=20)
    ledger = Ledger()
    ledger.churn(ctl, rng, 30)
    ctl.kill()
    journal = run / "controller-state.json.journal"
    data = journal.read_bytes()
    lines = lines_of(journal)
    start, end = lines[len(lines) // 2]
    if damage == "flipped byte":
        bad = flip(data, rng.randrange(start, end - 1))
    elif damage == "record cut short":
        bad = data[: end - 25] + data[end:]
    elif damage == "two flipped bytes":
        bad = flip(flip(data, start + 3), rng.randrange(len(data) // 4, len(data) - 1))
    else:
        bad = bytes(b ^ 1 if i % 7 == 3 and start <= i < end else b for i, b in enumerate(data))
    journal.write_bytes(bad)
    ctl.start()
    got = ctl.faults()
    assert sorted(got, key=number) == sorted(ledger.live, key=number)
    kept = run / "controller-state.json.journal.damaged"
    assert kept.read_bytes() == bad, "the damaged journal was not kept for a post-mortem"
    assert ctl.logged(("damaged",))
    restarted_faithfully(ctl, topo, ledger)
    assert kept.read_bytes() == bad  # not overwritten by the next start


def test_a_journal_cut_off_loses_what_it_held_says_so_and_reuses_no_id(
    fabric: tuple[Topology, Path], ctl: ControllerProcess
) -> None:
    """The journal's last records gone (a truncated file): what they held is said as lost, and
    the ids they carried are never handed out again."""
    _topo, run = fabric
    ctl.start()
    ctl.wait_reconciled()
    ledger = Ledger()
    for i in range(8):
        ledger.inject(ctl, SPECS[i % len(SPECS)])
    ctl.kill()
    journal = run / "controller-state.json.journal"
    lines = lines_of(journal)
    journal.write_bytes(journal.read_bytes()[: lines[-5][0] + 11])  # the last two injections and a bit
    ctl.start()
    got = ctl.faults()
    assert set(got) < set(ledger.live) and len(ledger.live) - len(got) <= 2
    lost = set(ledger.live) - set(got)
    assert ctl.logged(("state", "lost")), "the loss was not said"
    ledger.live = {k: v for k, v in ledger.live.items() if k in got}
    # (as the other restarts here: an injection before every switch is back is UNAVAILABLE, by
    # design -- CI met it once, the first switch still on the killed controller's stream)
    ctl.wait_reconciled()
    fresh = ledger.inject(ctl, SPECS[0])
    assert number(fresh) > max(map(number, lost)), f"{fresh}: an id of a lost fault handed out again"


def snapshot_with_faults(run: Path, topo: Topology) -> dict[str, str]:
    """A snapshot written by the controller's own writer: a black hole and a loss (the ids and
    the targets to compare after a bit flip)."""
    from controller.faults import Direction, FaultKind, FaultSpec
    from controller.state_file import ControllerState, SavedFault, save_state

    faults = [
        SavedFault(
            "f3", FaultSpec(FaultKind.BLACKHOLE, f"{PREFIX}t0p0n0-{PREFIX}t1p0n0", Direction.A2B), 1.0
        ),
        SavedFault(
            "f7", FaultSpec(FaultKind.LOSS, f"{PREFIX}t0p1n0-{PREFIX}t1p1n1", Direction.BOTH, 0.01), 1.0
        ),
    ]
    save_state(run / "controller-state.json", ControllerState([s.name for s in topo.switches], faults, 8))
    return {f.id: f.spec.target for f in faults}


@pytest.mark.parametrize("flip_in", ["target", "probability", "id", "next_id", "seeded"])
def test_a_flipped_bit_in_the_snapshot_is_caught_and_its_copy_used(
    fabric: tuple[Topology, Path], ctl: ControllerProcess, flip_in: str
) -> None:
    """One bit flipped in the snapshot (a black hole's link t1p0n0 -> t1p0n1, a loss 0.01 ->
    0.03, an id): the controller starts from the snapshot's copy, exactly as it was."""
    topo, run = fabric
    want = snapshot_with_faults(run, topo)
    snapshot = run / "controller-state.json"
    data = snapshot.read_bytes()
    at, bit = {
        "target": (data.find(b"t1p0n0") + 5, 0x01),  # ...t1p0n0 -> ...t1p0n1, a link that exists
        "probability": (data.find(b"0.01") + 3, 0x02),  # 0.01 -> 0.03
        "id": (data.find(b'"f7"') + 2, 0x01),  # f7 -> f6
        "next_id": (data.find(b'"next_id":') + 10, 0x01),  # 8 -> 9
        "seeded": (random.Random(7).randrange(len(data)), 0x04),
    }[flip_in]
    bad = data[:at] + bytes([data[at] ^ bit]) + data[at + 1 :]
    snapshot.write_bytes(bad)
    ctl.start()
    got = ctl.faults()
    assert {f.id: f.spec.target for f in got.values()} == want
    assert {round(f.spec.probability, 6) for f in got.values()} == {0.0, 0.01}
    ctl.wait_reconciled()
    assert tables_settle_on(topo, got)
    assert (run / "controller-state.json.unreadable").read_bytes() == bad


GOOD_SPEC: dict[str, Any] = {
    "kind": "blackhole",
    "target": f"{PREFIX}t0p0n0-{PREFIX}t1p0n0",
    "direction": "a2b",
    "probability": 0.0,
    "period_s": 0.0,
    "duration_s": 0.0,
}
GOOD_FAULT: dict[str, Any] = {"id": "f4", "spec": GOOD_SPEC, "created_at": 1.0, "expires_at": 0.0}


def with_spec(**changes: object) -> list[dict[str, Any]]:
    return [{**GOOD_FAULT, "spec": {**GOOD_SPEC, **changes}}]


def legacy_snapshot(**changes: object) -> bytes:
    """The previous release's snapshot (plain JSON: the form both it and this one read)."""
    doc = {"version": 2, "generation": 1, "routes_installed": [], "next_id": 5, "faults": [GOOD_FAULT]}
    return json.dumps({**doc, **changes}).encode()


def legacy_line(record: object) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


HEADER = legacy_line({"journal": 1})
ODD = {
    "next_id 1e999": (
        b'{"version":2,"generation":1,"routes_installed":[],"next_id":1e999,"faults":[]}',
        None,
    ),
    "next_id a string": (legacy_snapshot(next_id="5"), None),
    "next_id 10**30": (legacy_snapshot(next_id=10**30), None),
    "faults null": (legacy_snapshot(faults=None), None),
    "a null fault": (legacy_snapshot(faults=[None]), None),
    "probability null": (legacy_snapshot(faults=with_spec(probability=None)), None),
    "a negative duration": (legacy_snapshot(faults=with_spec(duration_s=-5.0)), None),
    "a flap of period 0": (legacy_snapshot(faults=with_spec(kind="flap", direction="both")), None),
    "nested 100000 deep": (b"[" * 100000 + b"]" * 100000, None),
    "journal header null": (None, legacy_line({"journal": None})),
    "journal record of nulls": (
        None,
        HEADER + legacy_line({"op": "fault", "fault": None}),
    ),
    "journal record, next_id inf": (
        None,
        HEADER + legacy_line({"op": "next_id", "next_id": 1e999}),
    ),
}


@pytest.mark.parametrize("case", list(ODD))
def test_an_odd_but_well_formed_file_is_damage_not_a_crash(
    fabric: tuple[Topology, Path], ctl: ControllerProcess, case: str
) -> None:
    """A snapshot or journal whose every checksum holds but that says something no controller
    wrote: the controller starts, takes the good copy (or the snapshot without the odd record),
    and programs nothing it made up."""
    topo, run = fabric
    snapshot, journal = ODD[case]
    good = legacy_snapshot()
    (run / "controller-state.json").write_bytes(snapshot if snapshot is not None else good)
    (run / "controller-state.json.prev").write_bytes(good)
    (run / "controller-state.json.journal").write_bytes(
        journal if journal is not None else legacy_line({"journal": 1})
    )
    ctl.start()
    got = ctl.faults()
    assert list(got) == ["f4"] and got["f4"].spec.target == GOOD_SPEC["target"]
    ctl.wait_reconciled()
    assert tables_settle_on(topo, got)
    assert number(ctl.stub.InjectFault(pb.InjectFaultRequest(spec=SPECS[1]), timeout=10).id) >= 5


def test_killed_while_its_disk_fills_and_drains_it_keeps_every_acknowledged_change(tmp_path: Path) -> None:
    """The issue's loop, short: 3 rounds of 6 callers injecting and clearing while the disk
    fills and drains every 50-300 ms, each ended by kill -9 (``python -m
    bench.bench_controller_durability`` runs it long, on a real tmpfs)."""
    from bench.bench_controller_durability import Lab, LimitDisk, kill_loop

    lab = Lab(tmp_path, LimitDisk(tmp_path / "state"), prefix="kl")
    try:
        tally = kill_loop(lab, rounds=3)["tally"]
    finally:
        lab.close()
    assert tally["injects"] > 30 and tally["clears"] > 10 and tally["refused"] > 0, tally
    wrong = ("lost", "back", "reused", "unexplained", "tables", "not_reconciled", "other_errors")
    assert {k: tally[k] for k in wrong} == dict.fromkeys(wrong, 0), tally
