"""What a restarted controller needs to carry on: the switches its routes were installed on,
the faults in force and the next fault id -- on disk, in a form no crash can tear.

Why: the switches keep their tables when the controller dies, and the first thing a new
controller does on each switch is make the tables match its desired state. A controller
that had forgotten the routes and faults would delete them, and every packet would meet no
route until someone installed them again; one that could not read its file at all would not
start, and then nothing clears the faults it left in the switches.

Layout (``S`` is the path given, ``controller-state.json`` in a testbed run):

- ``S``: a *snapshot* -- one JSON document with a ``generation`` number;
- ``S.journal``: a header line naming the generation it continues, then one line per change
  (``<crc32> <json>``), appended and fdatasync'ed before the change is acknowledged;
- ``S.prev``: a second copy of the snapshot, written after ``S`` (a separate file, so what
  damages one leaves the other): the last good state should ``S`` ever be unreadable; the
  journal applies on top of it as it does on ``S``.

Every file is written to a unique temporary name, fsync'ed, renamed into place and its
directory fsync'ed, so a reader sees the old file or the new one, never half of either. A
journal's torn last line (a crash mid-append: never acknowledged) is ignored. The records are
idempotent (a fault by its id, a clear by ids), so a snapshot that already holds a record's
effect may meet it again. Only one writer exists (``state_store.StateStore``).
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.faults import Direction, FaultKind, FaultSpec

__all__ = [
    "ControllerState",
    "Recovered",
    "SavedFault",
    "StateFileError",
    "load_state",
    "recover_state",
    "save_state",
]

VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: a snapshot alone (no generation, no journal)
JOURNAL = ".journal"
PREV = ".prev"
UNREADABLE = ".unreadable"


class StateFileError(ValueError):
    """The state file is not one this controller wrote (the message names the file and field)."""


@dataclass(frozen=True)
class SavedFault:
    id: str
    spec: FaultSpec
    created_at: float  # wall clock (time.time())
    expires_at: float = 0.0  # 0: until cleared


@dataclass
class ControllerState:
    routes_installed: list[str] = field(default_factory=list)
    faults: list[SavedFault] = field(default_factory=list)
    next_id: int = 1
    generation: int = 0

    # -- records: what the journal says happened, applied the same way on write and on load --
    def apply(self, record: dict[str, Any]) -> None:
        """One journal record; StateFileError names what is wrong with it."""
        op = record.get("op")
        if op == "fault":
            fault = _fault_from_doc(record["fault"])
            self.faults = [f for f in self.faults if f.id != fault.id] + [fault]
            self.next_id = max(self.next_id, _id_number(fault.id) + 1)
        elif op == "clear":
            gone = {str(i) for i in record["ids"]}
            self.faults = [f for f in self.faults if f.id not in gone]
        elif op == "routes":
            self.routes_installed = sorted({*self.routes_installed, *map(str, record["switches"])})
        elif op == "next_id":
            self.next_id = max(self.next_id, int(record["next_id"]))
        else:
            raise StateFileError(f"op: {op!r} is no journal record")

    def to_doc(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "generation": self.generation,
            "routes_installed": sorted(self.routes_installed),
            "next_id": self.next_id,
            "faults": [fault_doc(f) for f in self.faults],
        }


def fault_doc(f: SavedFault) -> dict[str, Any]:
    return {
        **asdict(f),
        "spec": {**asdict(f.spec), "kind": str(f.spec.kind), "direction": str(f.spec.direction)},
    }


def fault_record(f: SavedFault) -> dict[str, Any]:
    return {"op": "fault", "fault": fault_doc(f)}


def clear_record(ids: Iterable[str]) -> dict[str, Any]:
    return {"op": "clear", "ids": sorted(ids)}


def routes_record(switches: Iterable[str]) -> dict[str, Any]:
    return {"op": "routes", "switches": sorted(switches)}


def _id_number(fault_id: str) -> int:
    return int(fault_id[1:]) if fault_id[:1] == "f" and fault_id[1:].isdigit() else 0


def _fault_from_doc(f: Any) -> SavedFault:
    s = f["spec"]
    spec = FaultSpec(
        FaultKind(s["kind"]),
        str(s["target"]),
        Direction(s["direction"]),
        float(s["probability"]),
        float(s["period_s"]),
        float(s["duration_s"]),
    )
    return SavedFault(str(f["id"]), spec, float(f["created_at"]), float(f["expires_at"]))


# -- writing ------------------------------------------------------------------------------------
def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or what it held before, whatever happens: a unique temporary
    file (no two writers share one), fsync'ed before the rename, the directory after it."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def journal_line(record: dict[str, Any]) -> bytes:
    body = json.dumps(record, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def journal_header(generation: int) -> bytes:
    return journal_line({"journal": generation})


def save_state(path: Path, state: ControllerState) -> None:
    """A snapshot of ``state`` (and its second copy) and an empty journal continuing it (one
    writer at a time: the controller's is ``state_store.StateStore``)."""
    data = json.dumps(state.to_doc(), separators=(",", ":")).encode()
    write_atomic(path, data)
    write_atomic(prev_path(path), data)
    write_atomic(journal_path(path), journal_header(state.generation))


def journal_path(path: Path) -> Path:
    return path.with_name(path.name + JOURNAL)


def prev_path(path: Path) -> Path:
    return path.with_name(path.name + PREV)


# -- reading ------------------------------------------------------------------------------------
def read_snapshot(path: Path) -> ControllerState:
    """StateFileError names the file and what is wrong with it."""
    try:
        doc: Any = json.loads(path.read_bytes())
        if not isinstance(doc, dict) or doc.get("version") not in READABLE_VERSIONS:
            raise StateFileError(f"{path}: version: not one of {READABLE_VERSIONS}")
        return ControllerState(
            [str(s) for s in doc["routes_installed"]],
            [_fault_from_doc(f) for f in doc["faults"]],
            int(doc["next_id"]),
            int(doc.get("generation", 0)),
        )
    except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
        if isinstance(exc, StateFileError):
            raise
        raise StateFileError(f"{path}: {exc!r}"[:300]) from exc


def read_journal(path: Path) -> tuple[int | None, list[dict[str, Any]], str]:
    """(the generation it continues, its good records, what was wrong past them or "").
    A missing file is generation None. Records end at the first line that fails its CRC or
    does not parse: the torn tail of a crash (harmless), or damage (said in the note)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, [], ""
    except OSError as exc:
        return None, [], f"{path}: {exc}"
    lines = raw.split(b"\n")
    records: list[dict[str, Any]] = []
    generation: int | None = None
    for n, line in enumerate(lines):
        if not line:
            continue
        try:
            crc, body = line.split(b" ", 1)
            if int(crc, 16) != zlib.crc32(body):
                raise ValueError("CRC mismatch")
            rec = json.loads(body)
            if not isinstance(rec, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            tail = all(not rest for rest in lines[n + 1 :])
            return generation, records, "" if tail else f"{path}: line {n + 1}: {exc}; the rest ignored"
        if n == 0:
            generation = int(rec.get("journal", -1))
            continue
        if generation is None:
            return None, [], f"{path}: no header line"
        records.append(rec)
    return generation, records, ""


def _replay(state: ControllerState, records: list[dict[str, Any]], where: Path) -> None:
    for i, rec in enumerate(records):
        try:
            state.apply(rec)
        except (KeyError, TypeError, ValueError) as exc:
            raise StateFileError(f"{where}: record {i + 1}: {exc!r}"[:300]) from exc


def load_state(path: Path) -> ControllerState:
    """The snapshot and the journal that continues it; StateFileError if the snapshot (or a
    journal record that passed its CRC) cannot be read."""
    state = read_snapshot(path)
    generation, records, _note = read_journal(journal_path(path))
    if generation == state.generation:
        _replay(state, records, journal_path(path))
    return state


@dataclass
class Recovered:
    """What :func:`recover_state` found: the state (None: nothing readable, or no file at all)
    and, when it was not simply the file, what happened (said by the controller at start)."""

    state: ControllerState | None
    source: str  # "file", "previous" (the second copy), "none" (no file yet), "unreadable"
    notes: list[str] = field(default_factory=list)


def recover_state(path: Path) -> Recovered:
    """The newest state that can be read: the snapshot and its journal; else the snapshot's
    second copy and the journal (the bad one kept aside as ``S.unreadable``); else nothing
    readable (the caller reads the switches' own tables). Never raises for a bad file."""
    if not path.exists() and not prev_path(path).exists():
        return Recovered(None, "none")
    notes: list[str] = []
    for source, snapshot in (("file", path), ("previous", prev_path(path))):
        try:
            state = read_snapshot(snapshot)
            generation, records, note = read_journal(journal_path(path))
            if generation == state.generation:
                _replay(state, records, journal_path(path))
        except (StateFileError, OSError) as exc:
            notes.append(f"unreadable: {exc}"[:300])
            if source == "file":
                _keep_aside(path, notes)
            continue
        notes.extend([note] if note else [])
        if source == "previous":
            notes.append(f"started from the last good state {snapshot} (generation {state.generation})")
        return Recovered(state, source, notes)
    return Recovered(None, "unreadable", notes)


def _keep_aside(path: Path, notes: list[str]) -> None:
    """An unreadable snapshot is kept for a post-mortem, never overwritten by the next one."""
    if path.exists():
        aside = path.with_name(path.name + UNREADABLE)
        try:
            os.replace(path, aside)
            notes.append(f"kept as {aside}")
        except OSError as exc:
            notes.append(f"could not keep it aside: {exc}")
