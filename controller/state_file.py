"""What a restarted controller needs to carry on: the switches its routes were installed on,
the faults in force and the next fault id -- on disk, in a form no crash, full disk or damaged
byte can make lie.

Why: the switches keep their tables when the controller dies, and the first thing a new
controller does on each switch is make the tables match its desired state. A controller that
had forgotten the routes and faults would delete them; one that read a damaged file as truth
would program its guesses; one that could not read its file would not start, and then nothing
clears the faults it left in the switches.

Layout (``S`` is the path given, ``controller-state.json`` in a testbed run), every piece a
checksummed frame (``state_frames.py``):

- ``S``: a *snapshot* -- the state, and ``upto``: the number of the last record it includes;
- ``S.prev``: a second copy of it, written after ``S`` (what damages one leaves the other);
- ``S.journal``: each change since, as a record carrying its number ``n`` (one more than the
  last), appended -- in two copies, side by side -- before the change is acknowledged;
- ``S.mark``: the last acknowledged record number and the next fault id (``state_mark.py``).

Reading (:func:`read_state`) takes the snapshot (else its copy) and applies the journal's records
numbered past its ``upto`` and up to the mark's, in order. A damaged frame is skipped and the
rest read on; a record number that is missing is said as lost, with what its damaged bytes seem
to have held; records past the mark were never acknowledged and are left out; the next fault id
is above every id any of the files names, readable or not. A snapshot with neither copy readable
yields no state: the controller then reads the switches' own tables back (``adopt.py``).
:func:`recover_state` does the same and keeps every damaged file aside for a post-mortem.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.atomic_files import NO_SPACE, keep_aside, write_atomic
from controller.state_frames import Damage, frame, scan
from controller.state_mark import MARK, Mark, mark_path, read_mark
from controller.state_records import (
    ControllerState,
    SavedFault,
    StateFileError,
    check_record,
    record_ids,
    state_from_doc,
)

__all__ = [
    "ControllerState",
    "Recovered",
    "SavedFault",
    "StateFileError",
    "load_state",
    "read_state",
    "recover_state",
    "save_state",
]

JOURNAL = ".journal"
PREV = ".prev"
UNREADABLE = ".unreadable"
DAMAGED = ".damaged"
MAX_RECORD_NUMBER = 2**62
SCRAPED_ID = re.compile(rb'"(?:id|ids)":\[?"f([1-9][0-9]{0,11})"')
ANY_ID = re.compile(rb'"f([1-9][0-9]{0,11})"')
SCRAPED_OP = re.compile(rb'"op":"(fault|clear|routes)"')


def journal_path(path: Path) -> Path:
    return path.with_name(path.name + JOURNAL)


def prev_path(path: Path) -> Path:
    return path.with_name(path.name + PREV)


# -- writing ------------------------------------------------------------------------------------
def snapshot_bytes(state: ControllerState) -> bytes:
    return frame(json.dumps({**state.to_doc(), "upto": state.upto}, separators=(",", ":")).encode())


def journal_entry(record: dict[str, Any], n: int) -> bytes:
    """Record ``n``, twice: a damaged byte or a cut inside one copy leaves the other."""
    one = frame(json.dumps({**record, "n": n}, separators=(",", ":")).encode())
    return one + one


def save_state(path: Path, state: ControllerState) -> int:
    """A snapshot of ``state``, its copy, and an empty journal after it (the snapshot's size).
    Any step may fail and leave the files consistent: the journal still holds every record
    past the older copy. On a disk too full for a new file beside the old one, the old one goes
    first -- the snapshot only while its copy is readable, the copy once the new snapshot is in
    place -- so a journal that filled the disk can still be folded away."""
    data = snapshot_bytes(state)
    for target, spare in ((path, prev_path(path)), (prev_path(path), path)):
        try:
            write_atomic(target, data)
        except OSError as exc:
            if exc.errno not in NO_SPACE or not target.exists() or not _readable(spare):
                raise
            target.unlink()
            write_atomic(target, data)
    write_atomic(journal_path(path), b"")
    return len(data)


def _readable(snapshot: Path) -> bool:
    try:
        read_snapshot(snapshot)
    except (StateFileError, OSError):
        return False
    return True


# -- reading ------------------------------------------------------------------------------------
def read_snapshot(path: Path) -> tuple[ControllerState, int | None]:
    """(its state, the generation of a previous release's file or None); StateFileError (or
    OSError) names the file and what is wrong."""
    raw = path.read_bytes()
    try:
        if raw[:1] == b"{":  # the previous releases' unframed snapshot (no checksum)
            doc = json.loads(raw)
            state = state_from_doc(doc)
            if doc["version"] == 3:
                raise StateFileError("version 3 without its checksum")
            generation = doc.get("generation", 0)
            return state, generation if type(generation) is int else 0
        frames, _damage = scan(raw)
        if len(frames) != 1 or frames[0].start != 0 or frames[0].end != len(raw):
            raise StateFileError("checksum: the snapshot is damaged")
        doc = json.loads(frames[0].body)
        state = state_from_doc(doc)
        upto = doc.get("upto")
        if doc["version"] != 3 or type(upto) is not int or not 0 <= upto <= MAX_RECORD_NUMBER:
            raise StateFileError(f"upto: {str(upto)[:40]!r} is no record number")
        state.upto = upto
        return state, None
    except StateFileError as exc:
        raise StateFileError(f"{path}: {exc}"[:300]) from None
    except (ValueError, KeyError, TypeError, RecursionError) as exc:  # JSON a writer never wrote
        raise StateFileError(f"{path}: {type(exc).__name__}: {exc}"[:300]) from None


@dataclass
class JournalRecord:
    n: int | None  # None: a previous release's record (numbered by its place)
    record: dict[str, Any]
    end: int  # byte offset just past it


@dataclass
class JournalScan:
    path: Path
    records: list[JournalRecord] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # frames whose checksum held but not their content
    damage: list[Damage] = field(default_factory=list)
    raw: bytes = b""
    legacy_generation: int | None = None  # the previous release's header line
    error: str = ""  # the file could not be read at all


def read_journal(path: Path) -> JournalScan:
    out = JournalScan(path)
    try:
        out.raw = path.read_bytes()
    except FileNotFoundError:
        return out
    except OSError as exc:
        out.error = f"{path}: {exc}"
        return out
    frames, out.damage = scan(out.raw)
    for f in frames:
        try:
            doc = json.loads(f.body)
            if isinstance(doc, dict) and set(doc) == {"journal"} and type(doc["journal"]) is int:
                out.legacy_generation = doc["journal"]
                continue
            n = doc.pop("n", None) if isinstance(doc, dict) else None
            if n is not None and (type(n) is not int or not 0 < n <= MAX_RECORD_NUMBER):
                raise StateFileError(f"n: {str(n)[:40]!r} is no record number")
            out.records.append(JournalRecord(n, check_record(doc), f.end))
        except (StateFileError, ValueError, RecursionError) as exc:
            out.bad.append(f"bytes {f.start}-{f.end}: {exc}"[:200])
            out.damage.append(Damage(f.start, f.end))
    out.damage.sort(key=lambda d: d.start)
    return out


@dataclass
class Recovered:
    """What the files hold: the state (None: nothing trustworthy, or no file at all) and how it
    was found. ``lost`` says what acknowledged changes are gone (damage); ``notes`` the rest."""

    state: ControllerState | None
    source: str  # "file", "previous" (the second copy), "none" (no file yet), "unreadable"
    notes: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    next_id: int = 1  # above every fault id any file names
    last_n: int = 0  # the highest record number any file names
    append_at: int | None = None  # the journal may be appended to from here (None: start anew)
    damaged: list[Path] = field(default_factory=list)  # files to keep for a post-mortem
    mark: Mark | None = None  # the newest good slot of the mark, if any

    @property
    def clean(self) -> bool:
        return self.source == "file" and not self.notes and not self.lost and self.append_at is not None


def read_state(path: Path) -> Recovered:
    """The newest state the files prove; never raises for a bad file (reads only)."""
    journal = journal_path(path)
    if not any(p.exists() for p in (path, prev_path(path), journal, mark_path(path))):
        return Recovered(None, "none")
    found = Recovered(None, "unreadable")
    mark, why = read_mark(path)
    found.mark = mark
    if why:
        found.notes.append(why)
        found.damaged.append(mark_path(path))
    scanned = read_journal(journal)
    if scanned.error:
        found.notes.append(scanned.error)
    for source, snapshot in (("file", path), ("previous", prev_path(path))):
        try:
            state, legacy = read_snapshot(snapshot)
        except (StateFileError, OSError) as exc:
            found.notes.append(f"unreadable: {exc}"[:300])
            if snapshot.exists():
                found.damaged.append(snapshot)
            continue
        found.state, found.source = state, source
        if legacy is None:
            _replay(found, state, scanned, mark)
        else:
            _replay_legacy(found, state, scanned, legacy)
        if source == "previous":
            found.notes.append(f"started from the second copy {snapshot} (record {state.upto})")
        break
    if found.state is None:
        found.lost.append("no readable snapshot: the switches' own tables are read back instead")
        if scanned.raw:
            found.damaged.append(journal)
    _floors(found, scanned, mark)
    return found


def _replay(found: Recovered, state: ControllerState, scanned: JournalScan, mark: Mark | None) -> None:
    """The journal's records past the snapshot, in number order; a number missing, or a journal
    that stops short of the ``mark``, lost the records in between (said, with what the damaged
    bytes seem to have held)."""
    records = [r for r in scanned.records if r.n is not None]
    append_at = max((r.end for r in records), default=0)
    expected = state.upto + 1
    for r in sorted(records, key=lambda r: r.n or 0):
        n = r.n or 0
        if n < expected:
            continue  # in the snapshot already (or the same record twice: the first counts)
        if n > expected:
            found.lost.append(_lost(expected, n - 1, scanned))
        state.apply(r.record)
        expected = n + 1
    if mark is not None and expected <= mark.n:
        found.lost.append(_lost(expected, mark.n, scanned) + " (the journal ends early)")
    state.upto = expected - 1
    inner = [d for d in scanned.damage if d.start < append_at or not _torn(scanned, d)]
    if inner and not found.lost:
        where = ", ".join(d.describe() for d in inner[:4])
        found.notes.append(f"damaged journal {where}: no acknowledged change among them")
    if inner or found.lost:
        found.damaged.append(scanned.path)
    # appending goes on in place, so only where nothing is kept aside (a kept copy is a hard link:
    # a change in place would change it too); a torn last record is cut off first
    found.append_at = append_at if not inner else None


def _torn(scanned: JournalScan, d: Damage) -> bool:
    """A crash mid-append: an unfinished frame at the very end, no line after it."""
    return d.end == len(scanned.raw) and b"\n" not in scanned.raw[d.start : d.end]


def _lost(first: int, last: int, scanned: JournalScan) -> str:
    what = f"record {first}" if first == last else f"records {first}-{last}"
    looked = "; ".join(_looked_like(scanned.raw[d.start : d.end]) for d in scanned.damage[:4])
    causes = "; ".join(scanned.bad[:2])
    return (
        f"journal {what} lost"
        + (f" (damaged bytes held {looked})" if looked else "")
        + (f" [{causes}]" if causes else "")
    )


def _lost_bytes(d: Damage, scanned: JournalScan) -> str:
    return f"journal {d.describe()} unreadable (held {_looked_like(scanned.raw[d.start : d.end])})"


def _looked_like(chunk: bytes) -> str:
    ops = [m.decode() for m in SCRAPED_OP.findall(chunk)]
    ids = sorted({int(i) for i in ANY_ID.findall(chunk)})
    if not ops and not ids:
        return "nothing recognisable"
    return " ".join([*ops[:3], *(f"f{i}" for i in ids[:6])])


def _replay_legacy(found: Recovered, state: ControllerState, scanned: JournalScan, generation: int) -> None:
    """A previous release's files: the journal applies when its header names the snapshot's
    generation; a torn last line is a crash's, anything else damage (said)."""
    if scanned.legacy_generation == generation:
        for r in scanned.records:
            if r.n is None:
                state.apply(r.record)
    inner = [d for d in scanned.damage if not _torn(scanned, d)]
    if inner:
        found.lost.append(_lost_bytes(inner[0], scanned))
        found.damaged.append(scanned.path)
    found.notes.append("a previous release's state file: rewritten in this release's form")


def _floors(found: Recovered, scanned: JournalScan, mark: Mark | None) -> None:
    """The next fault id and record number above anything any file names, readable or not."""
    ids = [found.state.next_id if found.state is not None else 1]
    numbers = [found.state.upto if found.state is not None else 0]
    if mark is not None:
        ids.append(mark.next_id)
        numbers.append(mark.n)
    for r in scanned.records:
        ids.extend(i + 1 for i in record_ids(r.record))
        numbers.append(r.n or 0)
    for d in scanned.damage:
        ids.extend(int(i) + 1 for i in ANY_ID.findall(scanned.raw[d.start : d.end]))
    found.next_id = max(ids)
    found.last_n = max(numbers)
    if found.state is not None:
        found.state.next_id = found.next_id


def recover_state(path: Path) -> Recovered:
    """:func:`read_state`, and every damaged file kept aside (a hard link, never overwritten)."""
    found = read_state(path)
    for damaged in dict.fromkeys(found.damaged):
        if damaged.exists():
            suffix = DAMAGED if damaged.name.endswith((JOURNAL, MARK)) else UNREADABLE
            # (the mark is written in place: kept as a copy, not a link to what will change)
            found.notes.append(keep_aside(damaged, suffix, copy=damaged.name.endswith(MARK)))
    return found


def load_state(path: Path) -> ControllerState:
    """The state the files hold; StateFileError if no snapshot copy is readable."""
    found = read_state(path)
    if found.state is None:
        raise StateFileError(f"{path}: no readable snapshot ({'; '.join(found.notes)})"[:300])
    return found.state
