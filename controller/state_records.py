"""The controller's state as data: what a snapshot holds and what each journal record says.

Why strict: a file read back is untrusted input. A body whose checksum holds can still say
something no controller wrote -- ``"next_id": 1e999``, ``{"journal": null}``, a fault with a
negative duration -- and before, such a value crashed the start (OverflowError, TypeError) or
was programmed into a switch. Here every field is checked for its type and its bounds (a fault's
spec by the same ``faults.check_spec`` the API uses), and anything else is a
:class:`StateFileError` naming the field: the reader then treats it as damage.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.faults import Direction, FaultError, FaultKind, FaultSpec, check_spec

MAX_ID = 10**12  # fault ids f1 ... f999999999999
MAX_SWITCHES = 100_000
MAX_FAULTS = 100_000  # a snapshot holds at most this many (the controller keeps 4096)
MAX_TIME = 1e11  # seconds since the epoch (year 5138)
ID = re.compile(r"f([1-9][0-9]{0,11})")


class StateFileError(ValueError):
    """State that is not one this controller wrote (the message names the file and field)."""


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
    upto: int = 0  # the number of the last journal record this state includes

    def apply(self, record: dict[str, Any]) -> None:
        """One journal record (already checked by :func:`check_record`)."""
        op = record["op"]
        if op == "fault":
            fault = fault_from_doc(record["fault"])
            self.faults = [f for f in self.faults if f.id != fault.id] + [fault]
            self.next_id = max(self.next_id, id_number(fault.id) + 1)
        elif op == "clear":
            gone = set(record["ids"])
            self.faults = [f for f in self.faults if f.id not in gone]
            self.next_id = max([self.next_id, *(id_number(i) + 1 for i in gone)])
        elif op == "routes":
            self.routes_installed = sorted({*self.routes_installed, *record["switches"]})

    def to_doc(self) -> dict[str, Any]:
        return {
            "version": 3,
            "routes_installed": sorted(self.routes_installed),
            "next_id": self.next_id,
            "faults": [fault_doc(f) for f in self.faults],
        }


# -- records --------------------------------------------------------------------------------------
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


def check_record(record: Any) -> dict[str, Any]:
    """``record`` if it is one this controller writes; StateFileError naming the field if not."""
    if not isinstance(record, dict):
        raise StateFileError(f"record: {type(record).__name__}, not an object")
    op = record.get("op")
    if op == "fault":
        fault_from_doc(record.get("fault"))
    elif op == "clear":
        for i, fid in enumerate(_list(record, "ids", MAX_FAULTS)):
            fault_id(fid, f"ids[{i}]")
    elif op == "routes":
        for i, name in enumerate(_list(record, "switches", MAX_SWITCHES)):
            _str(name, f"switches[{i}]")
    else:
        raise StateFileError(f"op: {str(op)[:40]!r} is no record")
    return record


def record_ids(record: dict[str, Any]) -> list[int]:
    """The fault id numbers a (checked) record names."""
    if record["op"] == "fault":
        return [id_number(record["fault"]["id"])]
    if record["op"] == "clear":
        return [id_number(i) for i in record["ids"]]
    return []


# -- snapshots ------------------------------------------------------------------------------------
def state_from_doc(doc: Any) -> ControllerState:
    """A snapshot's state; StateFileError naming the first bad field."""
    if not isinstance(doc, dict):
        raise StateFileError(f"snapshot: {type(doc).__name__}, not an object")
    if doc.get("version") not in (1, 2, 3) or type(doc.get("version")) is not int:
        raise StateFileError(f"version: {str(doc.get('version'))[:40]!r} is not 1, 2 or 3")
    names = _list(doc, "routes_installed", MAX_SWITCHES)
    routes = [_str(s, f"routes_installed[{i}]") for i, s in enumerate(names)]
    faults = [fault_from_doc(f, f"faults[{i}]") for i, f in enumerate(_list(doc, "faults", MAX_FAULTS))]
    state = ControllerState(routes, faults, _int(doc.get("next_id"), "next_id", 1, MAX_ID + 1))
    if len({f.id for f in faults}) != len(faults):
        raise StateFileError("faults: an id appears twice")
    state.next_id = max([state.next_id, *(id_number(f.id) + 1 for f in faults)])
    return state


def fault_from_doc(f: Any, where: str = "fault") -> SavedFault:
    if not isinstance(f, dict) or not isinstance(f.get("spec"), dict):
        raise StateFileError(f"{where}: not a fault object")
    s = f["spec"]
    try:
        spec = FaultSpec(
            FaultKind(_str(s.get("kind"), f"{where}.spec.kind")),
            _str(s.get("target"), f"{where}.spec.target"),
            Direction(_str(s.get("direction"), f"{where}.spec.direction")),
            _float(s.get("probability"), f"{where}.spec.probability"),
            _float(s.get("period_s"), f"{where}.spec.period_s"),
            _float(s.get("duration_s"), f"{where}.spec.duration_s"),
        )
        check_spec(spec)
    except (FaultError, ValueError) as exc:
        raise StateFileError(f"{where}: {exc}"[:300]) from None
    created = _float(f.get("created_at"), f"{where}.created_at")
    expires = _float(f.get("expires_at"), f"{where}.expires_at")
    if not 0 <= created <= MAX_TIME or not 0 <= expires <= MAX_TIME:
        raise StateFileError(f"{where}: created_at/expires_at outside [0, {MAX_TIME:g}]")
    return SavedFault(fault_id(f.get("id"), f"{where}.id"), spec, created, expires)


def fault_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or ID.fullmatch(value) is None:
        raise StateFileError(f"{where}: {str(value)[:40]!r} is no fault id (f1 ... f{MAX_ID - 1})")
    return value


def id_number(fid: str) -> int:
    m = ID.fullmatch(fid)
    return int(m.group(1)) if m else 0


def _list(doc: dict[str, Any], key: str, most: int) -> list[Any]:
    v = doc.get(key)
    if not isinstance(v, list) or len(v) > most:
        raise StateFileError(f"{key}: not a list of at most {most}")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not 0 < len(v) <= 256:
        raise StateFileError(f"{where}: {str(v)[:40]!r} is not a name of 1 to 256 characters")
    return v


def _int(v: Any, where: str, lo: int, hi: int) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise StateFileError(f"{where}: {str(v)[:40]!r} is not an integer in [{lo}, {hi}]")
    return v


def _float(v: Any, where: str) -> float:
    if type(v) not in (int, float) or not math.isfinite(v):
        raise StateFileError(f"{where}: {str(v)[:40]!r} is not a finite number")
    return float(v)
