"""The controller's state files survive concurrent writers, kills, a full disk and damage.

The defects: every save wrote the same ``.tmp`` (issue 44: 8 threads saving 300 times tore the
file); a write the disk cut short was appended behind, and recovery stopped at the torn line
(issue 64: 40 of 40 records acknowledged after the space came back were lost); one damaged
record dropped every record after it, and ids were handed out again. Here: concurrent saves
never tear the file; a writer killed at random points or meeting a full disk loses nothing it
acknowledged; every single flipped bit of a snapshot and every damaged byte of a journal costs
nothing; odd but well-formed content is damage; the next id is above every id any file names.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from controller.faults import Direction, FaultKind, FaultSpec
from controller.state_file import (
    ControllerState,
    SavedFault,
    StateFileError,
    journal_path,
    load_state,
    prev_path,
    read_state,
    recover_state,
    save_state,
)
from controller.state_records import clear_record, fault_record, routes_record
from controller.state_store import StateStore, StateUnavailable


def fault(n: int) -> SavedFault:
    return SavedFault(
        f"f{n}", FaultSpec(FaultKind.LOSS, f"t0p0n0-t1p0n{n % 2}", Direction.A2B, 0.25), 1.0, 0.0
    )


@pytest.fixture
def no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """fsync is about power loss; these tests are about concurrency and kills, and 2,400
    fsyncs would take a minute on a shared disk."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


def test_8_threads_saving_300_times_never_tear_the_file(tmp_path: Path, no_fsync: None) -> None:
    """The issue's reproduction, word for word: 8 concurrent saves x 300 through ``save_state``,
    with a reader loading the file all the while."""
    path = tmp_path / "controller-state.json"
    save_state(path, ControllerState(["s0"], [], 1))
    errors: list[BaseException] = []
    unreadable: list[str] = []
    done = threading.Event()

    def writer(k: int) -> None:
        for i in range(300):
            try:
                save_state(path, ControllerState(["s0"], [fault(j + 1) for j in range(i % 7)], i + 8))
            except BaseException as exc:
                errors.append(exc)

    def reader() -> None:
        while not done.is_set():
            try:
                load_state(path)
            except (StateFileError, OSError) as exc:
                unreadable.append(repr(exc))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    watcher.join()
    assert errors == [] and unreadable == []
    assert load_state(path).routes_installed == ["s0"]
    assert not list(tmp_path.glob("*.tmp")), "a temporary file was left behind"


def new_store(path: Path) -> StateStore:
    """A store on whatever ``path`` holds (nothing: a fresh one)."""
    return StateStore(path, recover_state(path))


def test_the_store_groups_concurrent_records_and_reads_back_every_one(tmp_path: Path) -> None:
    path = tmp_path / "controller-state.json"
    store = new_store(path)
    try:

        def one(k: int) -> None:
            for i in range(25):
                store.commit(fault_record(fault(k * 100 + i + 1)))

        threads = [threading.Thread(target=one, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.writes < 200  # 200 records, fewer flushes: waiting callers share one
    finally:
        store.stop()
    got = load_state(path)
    assert len(got.faults) == 200 and got.next_id == 726


WRITER = """
import random, sys, threading
from pathlib import Path
import controller.state_store as store_module
from controller.faults import Direction, FaultKind, FaultSpec
from controller.state_file import SavedFault, recover_state
from controller.state_records import clear_record, fault_record

store_module.COMPACT_RECORDS = 40  # compact often, so kills land inside compactions too
path, seed = Path(sys.argv[1]), int(sys.argv[2])
store = store_module.StateStore(path, recover_state(path))
lock, out = threading.Lock(), threading.Lock()
rng, live = random.Random(seed), []
ids = iter(range(seed * 1_000_000, (seed + 1) * 1_000_000))

def worker():
    while True:
        with lock:
            clear = bool(live) and rng.random() < 0.4
            n = live.pop(rng.randrange(len(live))) if clear else next(ids)
        spec = FaultSpec(FaultKind.LOSS, "t0p0n0-t1p0n0", Direction.A2B, 0.25)
        rec = clear_record([f"f{n}"]) if clear else fault_record(SavedFault(f"f{n}", spec, 1.0))
        store.commit(rec)
        with out:
            print("clear" if clear else "fault", n, flush=True)  # acknowledged
        if not clear:
            with lock:
                live.append(n)

print("ready", flush=True)
for _ in range(4):
    threading.Thread(target=worker, daemon=True).start()
threading.Event().wait()
"""


def test_a_writer_killed_at_random_points_leaves_every_acknowledged_change(tmp_path: Path) -> None:
    """kill -9 in the middle of appends and compactions, 6 times over the same files: the
    state always loads, holds every acknowledged change (4 writers: at most 4 changes in
    flight may or may not be there), and faults keep their ids across the kills."""
    path = tmp_path / "controller-state.json"
    rng = random.Random(44)
    expected: set[int] = set()
    for round_ in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), str(round_ + 1)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            first = [proc.stdout.readline() for _ in range(10)]  # it runs (however slow the disk)
            time.sleep(rng.random() * 0.5)
        finally:
            proc.kill()
        out, _ = proc.communicate()
        # (a line the kill cut short is a change in flight: its thread's one)
        acked = [line.split() for line in (*first, *out.splitlines(keepends=True)) if line.endswith("\n")]
        assert len(acked) >= 10, "the writer hardly ran"
        for op, n in acked:
            (expected.add if op == "fault" else expected.discard)(int(n))
        got = recover_state(path)
        assert got.source == "file" and got.state is not None and got.notes == got.lost == [], got.notes
        ids = {int(f.id[1:]) for f in got.state.faults}
        assert len(ids ^ expected) <= 4, (round_, sorted(ids ^ expected)[:10])
        expected = ids  # what the next writer starts from


def test_an_unreadable_snapshot_falls_back_to_the_last_good_pair_and_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "controller-state.json"
    store = new_store(path)
    store.commit(routes_record(["s0"]))
    for n in range(1, 4):
        store.commit(fault_record(fault(n)))
    store._compact()  # a new snapshot: the journal starts empty after it
    store.commit(fault_record(fault(4)))
    store.commit(clear_record(["f2"]))
    store.stop()
    want = {f.id for f in load_state(path).faults}
    assert want == {"f1", "f3", "f4"}
    for k, damage in enumerate((b"", b'{"version": 2, "generation": 3, "faults": [', b"\x00" * 300)):
        path.write_bytes(damage)
        got = recover_state(path)
        assert got.source == "previous" and got.state is not None
        assert {f.id for f in got.state.faults} == want and got.state.routes_installed == ["s0"]
        kept = tmp_path / (f"{path.name}.unreadable" + (f".{k + 1}" if k else ""))
        assert any("unreadable" in n for n in got.notes) and kept.read_bytes() == damage
    # and with the last good pair damaged as well: nothing readable, said, not raised
    path.write_bytes(b"garbage")
    prev_path(path).write_bytes(b"")
    got = recover_state(path)
    assert got.source == "unreadable" and got.state is None and len(got.notes) >= 2
    assert got.next_id == 5  # the ids the journal and the mark name still count


def test_a_torn_journal_tail_is_ignored_and_damage_in_the_middle_costs_nothing(tmp_path: Path) -> None:
    path = tmp_path / "controller-state.json"
    store = new_store(path)
    for n in range(1, 4):
        store.commit(fault_record(fault(n)))
    store.stop()
    journal = journal_path(path)
    clean = journal.read_bytes()
    journal.write_bytes(clean + clean[:17])  # a crash mid-append, past the mark: never acknowledged
    got = read_state(path)
    assert got.lost == [] and {f.id for f in got.state.faults} == {"f1", "f2", "f3"}  # type: ignore[union-attr]
    damaged = clean.replace(b'"f2"', b'"f9"', 1)  # one copy of record 2 fails its checksum
    journal.write_bytes(damaged)
    got = read_state(path)
    assert {f.id for f in got.state.faults} == {"f1", "f2", "f3"} and got.lost == []  # type: ignore[union-attr]
    assert any("damaged journal bytes" in n for n in got.notes), got.notes
    journal.write_bytes(clean.replace(b'"f2"', b'"f9"'))  # both copies: record 2 is lost, and said
    got = read_state(path)
    assert {f.id for f in got.state.faults} == {"f1", "f3"}  # type: ignore[union-attr]
    assert got.lost and "record 2 lost" in got.lost[0] and "f9" in got.lost[0], got.lost
    assert got.next_id == 10  # above the id the damaged bytes name, too


def test_a_version_1_file_of_the_previous_release_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "controller-state.json"
    path.write_text(
        '{"version": 1, "routes_installed": ["a"], "next_id": 7, "faults": [{"id": "f6", "spec": '
        '{"kind": "blackhole", "target": "x-y", "direction": "both", "probability": 0.0, '
        '"period_s": 0.0, "duration_s": 0.0}, "created_at": 1.0, "expires_at": 0.0}]}'
    )
    got = load_state(path)
    assert got.next_id == 7 and [f.id for f in got.faults] == ["f6"]


def written_state(path: Path, faults: int = 12, compact_at: int = 8) -> ControllerState:
    """A store's files after routes, ``faults`` injections and a few clears, with a compaction
    after ``compact_at`` records (so both the snapshot and the journal hold faults)."""
    store = new_store(path)
    store.commit(routes_record(["s0", "s1"]))
    for n in range(1, faults + 1):
        store.commit(fault_record(fault(n)))
        if n % 4 == 0:
            store.commit(clear_record([f"f{n - 2}"]))
        if n == compact_at:
            store._compact()
    store.stop()
    return load_state(path)


def same(a: ControllerState | None, b: ControllerState) -> bool:
    return a is not None and (a.routes_installed, a.faults) == (b.routes_installed, b.faults)


def test_every_single_bit_flip_of_the_snapshot_is_caught(tmp_path: Path, no_fsync: None) -> None:
    """The snapshot's checksum: whichever bit flips (each byte, and every bit of the frame's
    header and end), the state read is the one written -- from its copy when the flip hit the
    snapshot's content."""
    path = tmp_path / "controller-state.json"
    truth = written_state(path)
    data = path.read_bytes()
    sources = set()
    rng = random.Random(3)
    edges = {*range(24), len(data) - 1}  # the frame's checksum, length and end: every bit
    bits = [8 * i + b for i in range(len(data)) for b in (range(8) if i in edges else [rng.randrange(8)])]
    for bit in bits:
        path.write_bytes(data[: bit // 8] + bytes([data[bit // 8] ^ (1 << bit % 8)]) + data[bit // 8 + 1 :])
        got = read_state(path)
        assert same(got.state, truth) and got.lost == [], (bit, got.notes)
        assert got.next_id >= truth.next_id
        sources.add(got.source)
    assert sources == {"file", "previous"}  # (a flip in the line end leaves the content whole)


def test_a_damaged_byte_or_a_cut_in_the_journal_costs_nothing(tmp_path: Path, no_fsync: None) -> None:
    """Each record is written twice, side by side: a flipped byte anywhere loses nothing; bytes
    cut out of one place lose nothing unless the cut takes a piece of both copies, and then
    that one record is said lost (what it held named) and the rest read on."""
    path = tmp_path / "controller-state.json"
    truth = written_state(path, compact_at=0)
    journal = journal_path(path)
    data = journal.read_bytes()
    rng = random.Random(64)
    whole = 0
    for at in range(0, len(data), 7):
        cut = rng.randrange(1, 40)
        for bad in (data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :], data[:at] + data[at + cut :]):
            journal.write_bytes(bad)
            got = read_state(path)
            assert got.next_id >= truth.next_id
            if got.lost == []:
                assert same(got.state, truth), at
                whole += 1
            else:  # a cut across the two copies of one record
                assert len(got.lost) == 1 and bad != data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]
                assert "lost (damaged bytes held" in got.lost[0], got.lost
    assert whole > 1.8 * len(range(0, len(data), 7))


def test_random_damage_never_lowers_the_next_id(tmp_path: Path, no_fsync: None) -> None:
    """Flips and cuts in any one of the four files, many times over: the next id is never below
    one past every id handed out; a state read with nothing said lost is the true one."""
    path = tmp_path / "controller-state.json"
    truth = written_state(path, faults=20, compact_at=10)
    files = [path, prev_path(path), journal_path(path), path.with_name(path.name + ".mark")]
    originals = {f: f.read_bytes() for f in files}
    rng = random.Random(7)
    for _ in range(600):
        victim = rng.choice(files)
        data = bytearray(originals[victim])
        for _ in range(rng.randrange(1, 6)):
            at = rng.randrange(len(data))
            if rng.random() < 0.7:
                data[at] ^= 1 << rng.randrange(8)
            else:
                del data[at : at + rng.randrange(1, 60)]
        victim.write_bytes(bytes(data))
        got = read_state(path)
        assert got.next_id >= truth.next_id, (victim.name, got.notes, got.lost)
        if not got.lost and got.state is not None:
            assert same(got.state, truth), (victim.name, got.notes)
        victim.write_bytes(originals[victim])


ODD_VALUES: list[object] = [
    None,
    True,
    -1,
    0,
    1e308,
    float("inf"),
    float("nan"),
    10**30,
    "x",
    "",
    [],
    {},
    "f0",
]


def test_odd_values_in_any_field_are_damage_never_a_crash(tmp_path: Path, no_fsync: None) -> None:
    """Every field of a snapshot and of a journal record replaced by each odd value (checksums
    made to hold): reading never raises, and whatever it keeps passes every check."""
    from controller.state_file import snapshot_bytes
    from controller.state_frames import frame
    from controller.state_records import check_record

    path = tmp_path / "controller-state.json"
    truth = written_state(path, faults=3, compact_at=0)
    snapshot = json.loads(path.read_bytes().split(b" ", 2)[2])
    record = {**fault_record(fault(9)), "n": 1}
    checked = 0
    for doc, where in ((snapshot, "snapshot"), (record, "journal")):
        for keys in _paths(doc):
            for value in ODD_VALUES:
                odd = _replaced(doc, keys, value)
                body = frame(json.dumps(odd, separators=(",", ":")).encode())
                if where == "snapshot":
                    path.write_bytes(body)
                    journal_path(path).write_bytes(b"")
                else:
                    path.write_bytes(
                        snapshot_bytes(ControllerState(truth.routes_installed, truth.faults, 9, 0))
                    )
                    journal_path(path).write_bytes(body)
                got = read_state(path)  # never raises
                assert got.state is not None
                for f in got.state.faults:
                    check_record(fault_record(f))
                assert type(got.next_id) is int and got.next_id >= 4
                checked += 1
    assert checked > 200


def _paths(doc: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    """Every key path of a JSON document (list items by index)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:2]):
            out += _paths(v, (*prefix, i))
    return out


def _replaced(doc: object, keys: tuple[object, ...], value: object) -> object:
    if not keys:
        return value
    if isinstance(doc, dict):
        return {k: (_replaced(v, keys[1:], value) if k == keys[0] else v) for k, v in doc.items()}
    assert isinstance(doc, list)
    return [(_replaced(v, keys[1:], value) if i == keys[0] else v) for i, v in enumerate(doc)]


FILLER = """
import resource, sys
from pathlib import Path
from controller.faults import Direction, FaultKind, FaultSpec
from controller.state_file import SavedFault, recover_state
from controller.state_records import fault_record
from controller.state_store import StateStore, StateUnavailable

path = Path(sys.argv[1])
store = StateStore(path, recover_state(path))
spec = FaultSpec(FaultKind.LOSS, "t0p0n0-t1p0n0", Direction.A2B, 0.25)
for line in sys.stdin:
    cmd, n = line.split()
    if cmd == "compact":  # (the writer is idle: every call waited for its record)
        store._compact()
        print("ok", flush=True)
        continue
    if cmd == "limit":  # a full disk: no file may grow past n bytes (a write across it is cut short)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(n), resource.RLIM_INFINITY))
        print("ok", flush=True)
        continue
    try:
        store.commit(fault_record(SavedFault(f"f{n}", spec, 1.0)))
        print("acked", n, flush=True)
    except StateUnavailable as exc:
        print("refused", n, exc.strerror.replace(" ", "_"), flush=True)
"""


def test_a_full_disk_refuses_records_and_writing_resumes_on_a_clean_boundary(tmp_path: Path) -> None:
    """The offline case of issue 64: a write the disk cuts short was appended behind, and every
    record acknowledged after the space came back was lost. Here each record is acknowledged or
    refused; once there is room again writing goes on, and every acknowledged record -- none of
    the refused ones -- is read back."""
    path = tmp_path / "controller-state.json"
    proc = subprocess.Popen([sys.executable, "-c", FILLER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None

    def say(line: str) -> list[str]:
        proc.stdin.write(line + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return proc.stdout.readline().split()  # type: ignore[union-attr]

    acked, refused = set(), set()
    try:
        for n in range(1, 61):
            assert say(f"fault {n}")[0] == "acked"
        for room in (0, 45, 300):  # nothing, part of a record, part of a batch
            assert say("compact 0") == ["ok"]  # a snapshot larger than the journal: folding it makes no room
            size = journal_path(path).stat().st_size
            assert path.stat().st_size > size + 300, "the journal is not the smaller file"
            assert say(f"limit {size + room}") == ["ok"]
            for n in range(100 + room, 110 + room):
                answer = say(f"fault {n}")
                (acked if answer[0] == "acked" else refused).add(n)
            assert refused, "the full disk refused nothing"
            assert say("limit -1") == ["ok"]  # room again
            for n in range(1000 + room, 1010 + room):
                assert say(f"fault {n}")[0] == "acked"
                acked.add(n)
    finally:
        proc.kill()
        proc.wait()
    got = recover_state(path)
    ids = {int(f.id[1:]) for f in got.state.faults}  # type: ignore[union-attr]
    want = acked | set(range(1, 61))
    assert got.lost == [] and ids == want, sorted(ids ^ want)
    assert not ids & refused


def test_a_record_the_stuck_writer_never_took_is_refused_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk hangs in the middle of a write: a caller whose record is still queued when its
    wait runs out is refused, and that record is taken back (a refusal later undone by the
    write landing would bring a refused change back at the next start)."""
    import controller.state_store as store_module

    path = tmp_path / "controller-state.json"
    store = new_store(path)
    stuck, release = threading.Event(), threading.Event()
    real = os.fdatasync

    def hanging(fd: int) -> None:
        stuck.set()
        release.wait(30)
        real(fd)

    monkeypatch.setattr(store_module, "WAIT_TIMEOUT_S", 0.3)
    monkeypatch.setattr(store_module.os, "fdatasync", hanging)
    first = threading.Thread(target=store.commit, args=(fault_record(fault(1)),))
    first.start()
    assert stuck.wait(10)
    with pytest.raises(StateUnavailable, match="not written within"):
        store.commit(fault_record(fault(2)))
    monkeypatch.setattr(store_module.os, "fdatasync", real)
    release.set()
    first.join(10)
    store.commit(fault_record(fault(3)))
    store.stop()
    assert [f.id for f in load_state(path).faults] == ["f1", "f3"]
