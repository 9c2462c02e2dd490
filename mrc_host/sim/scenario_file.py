"""Scenario files: a whole experiment (fabric, traffic, faults, CC/EV parameters, seed) in TOML.

Read with the standard library (``tomllib``); every key is checked and a bad file fails
with ``ScenarioError`` naming the file, the key and the reason. docs/simulator.md
describes the format; the shipped scenarios live in ``mrc_host/sim/scenarios/``.

A scenario runs once per entry of ``runs`` (default: one per entry of ``modes``), each
in a fresh network with the same seed, so MRC and its baselines meet the same traffic
and faults in one invocation. A run's ``mode`` applies to every traffic item that does
not name its own; ``--mode`` on the command line replaces the runs by one and applies
its mode to every connection.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mrc_host.core import DEFAULT_MAX_EVS, CcParams, Mode, NsccParams, TransportConfig
from mrc_host.core.config import EXPERIMENTAL_KEYS, Experimental
from mrc_host.core.ev_fields import MAX_PROFILE_EVS

from .fabric import CONTROL_BYTES, PROBE_BYTES_MAX, FabricShape
from .faults import FaultSpecError, parse_fault, parse_time
from .gc_pause import collector_paused
from .network import PAYLOADS, FlowSpec, Network, choose_payload
from .report import summarise_network
from .traffic import (
    ALL_TO_ALL_ORDERS,
    PATTERNS,
    Job,
    all_to_all_pairs,
    background,
    permutation_pairs,
    point_to_point,
    ring,
)

SCENARIO_DIR = Path(__file__).parent / "scenarios"
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*([KMG]i?B?|B)?$", re.IGNORECASE)
_MULT = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9}
_MULT.update({"ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20, "gi": 1 << 30, "gib": 1 << 30})


# bounds that keep a hostile or mistaken file from exhausting memory
MAX_HOSTS = 4096
MAX_PORTS = 200_000
MAX_WRITE = 1 << 30
MAX_CONNECTIONS = 65_536


class ScenarioError(ValueError):
    """A scenario file that cannot be run: which file, which key, why."""

    def __init__(self, file: str, key: str, reason: str) -> None:
        super().__init__(f"{file}: {key}: {reason}")
        self.file, self.key, self.reason = file, key, reason


def parse_size(text: str | int) -> int:
    """Bytes from an int or a string such as 64KiB, 8MiB, 1MB (ValueError if not)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    m = _SIZE.match(str(text).strip())
    if not m:
        raise ValueError(f"size {text!r}: use bytes or a unit such as 64KiB, 8MiB, 1MB")
    return int(float(m[1]) * _MULT[(m[2] or "").lower()])


FABRIC_KEYS = {
    "planes": int,
    "t0": int,
    "t1": int,
    "hosts_per_t0": int,
    "link_gbps": float,
    "link_delay": "time",
    "buffer": "size",
    "ecn": "size",
    "trim": "size",
    "nic_buffer": "size",
    "pfc": bool,
    "pfc_xoff": "size",
    "pfc_xon": "size",
    "pfc_headroom": "size",
    "probe_bytes": int,
}
TRANSPORT_KEYS = {"mtu", "evs", "backups", "config", "cc", "nscc", "ev_profile"}
ITEM_KEYS = {
    "pattern",
    "name",
    "size",
    "start",
    "stagger",
    "writes",
    "src",
    "dst",
    "senders",
    "hosts",
    "pairs",
    "qps_per_pair",
    "mode",
    "pin_path",
    "share_ev_with",
    "share_ev_modes",
    "window_scale",
    "evs",
    "cc",
    "nscc",
    "config",
    "ev_profile",
    "order",
}
RUN_KEYS = {"name", "mode", "qps_per_pair", "evs", "config"}
TOP_KEYS = {
    "name",
    "description",
    "reproduces",
    "seed",
    "time_limit",
    "modes",
    "lossless",
    "runs",
    "fabric",
    "transport",
    "traffic",
    "faults",
    "payload",
}


@dataclass
class TrafficItem:
    pattern: str
    name: str
    size: int
    start_ns: int = 0
    stagger_ns: int = 0  # pair k of the item starts k x this later (flow, incast, permutation, all-to-all)
    writes: int = 1
    src: int | None = None
    dst: int | None = None
    senders: list[int] = field(default_factory=list)
    hosts: list[int] = field(default_factory=list)
    pairs: list[tuple[int, int]] = field(default_factory=list)
    qps_per_pair: int = 1
    mode: Mode | None = None
    pin_path: tuple[int, int] | None = None
    share_ev_with: str | None = None  # an earlier item: pin onto the path of its first EV
    share_ev_modes: list[str] | None = None  # the run modes share_ev_with applies in (None: all)
    window_scale: float = 1.0  # window cap in BDPs, whatever the CC
    evs: int | None = None
    cc: dict[str, object] = field(default_factory=dict)
    nscc: dict[str, object] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)
    ev_profile: dict[str, Any] = field(default_factory=dict)  # replaces [transport] ev_profile
    order: str = "shifted"  # all-to-all: each host's peers from the next one on, or "ascending" (lockstep)

    def connections(self) -> int:
        """How many queue pairs this item opens."""
        n = len(self.hosts)
        return {
            "flow": 1,
            "incast": len(self.senders) * self.qps_per_pair,
            "permutation": n,
            "all-to-all": n * (n - 1),
            "ring-allreduce": n * self.qps_per_pair,
            "all-gather": n * self.qps_per_pair,
            "background": len(self.pairs),
        }[self.pattern]

    def nominal_bytes(self) -> int:
        """Bytes the busiest host of this item moves (sets the % time base)."""
        n = max(len(self.hosts), 2)
        return {
            "flow": self.size * self.writes,
            "incast": self.size * max(len(self.senders), 1),
            "all-to-all": self.size * (n - 1),
            "ring-allreduce": 2 * self.size * (n - 1) // n,
            "all-gather": self.size * (n - 1) // n,
        }.get(self.pattern, self.size)


@dataclass
class RunSpec:
    name: str
    mode: Mode
    qps_per_pair: int | None = None
    evs: int | None = None
    config: dict[str, object] = field(default_factory=dict)  # TransportConfig fields for this run


@dataclass
class Scenario:
    file: str = field(compare=False)
    name: str
    description: str
    reproduces: str
    seed: int
    shape: FabricShape
    mtu: int
    evs: int
    backups: int
    config: dict[str, object]
    cc: dict[str, object]
    nscc: dict[str, object]
    traffic: list[TrafficItem]
    faults: list[str]
    runs: list[RunSpec]
    time_limit_ns: int
    nominal_ns: int
    raw: dict[str, Any] = field(compare=False)
    lossless: tuple[str, ...] = ()  # modes run over a PFC fabric (the RoCE baseline)
    # the agent's EV-profile keys (docs/agent.md, "EV profiles"): format, explicit, entropy,
    # generated fields, deny rules, min_active; evs, backups and cc have their own keys here
    ev_profile: dict[str, Any] = field(default_factory=dict)
    payload: str = "auto"  # what writes carry: real, virtual or auto (network.choose_payload)

    def region_bytes(self) -> int:
        """Receive-region bytes a run registers (at most): a write's size per connection."""
        return sum(t.connections() * t.size for t in self.traffic)

    def with_mode(self, mode: Mode) -> Scenario:
        """One run, ``mode`` on every connection (the ``--mode`` override)."""
        same = next((r for r in self.runs if r.mode is mode), None)
        run = (
            RunSpec(mode.value, mode, same.qps_per_pair, None, same.config)
            if same
            else RunSpec(mode.value, mode)
        )
        traffic = [replace(t, mode=mode) for t in self.traffic]
        return replace(self, runs=[run], traffic=traffic)


class _Reader:
    """Typed access to one table of the file, with the key path for error messages."""

    def __init__(self, file: str, table: dict[str, Any], path: str, allowed: set[str]) -> None:
        self.file, self.table, self.path = file, table, path
        for key in table:
            if key not in allowed:
                self.fail(key, f"unknown key (expected one of: {', '.join(sorted(allowed))})")

    def key(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, reason: str) -> None:
        raise ScenarioError(self.file, self.key(key), reason)

    def get(self, key: str, kind: Any, default: Any = None, required: bool = False) -> Any:
        if key not in self.table:
            if required:
                self.fail(key, "missing (required)")
            return default
        value = self.table[key]
        try:
            if kind == "size":
                out: Any = parse_size(value)
                if not 1 <= out <= MAX_WRITE:
                    raise ValueError(f"must be 1 B .. 1 GiB, got {out}")
                return out
            if kind == "time":
                if isinstance(value, int | float) and not isinstance(value, bool):
                    raise ValueError("needs a unit (ns, us, ms, s)")
                return parse_time(str(value), 0)
            if kind == "mode":
                return Mode(value)
            if kind == "modes":
                if not isinstance(value, list):
                    raise ValueError(f"must be a list of modes ({', '.join(m.value for m in Mode)})")
                return [Mode(v).value for v in value]
            if kind is int:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError(f"must be an integer, got {value!r}")
                return value
            if kind is float:
                if isinstance(value, bool) or not isinstance(value, int | float):
                    raise ValueError(f"must be a number, got {value!r}")
                return float(value)
            if kind is bool:
                if not isinstance(value, bool):
                    raise ValueError(f"must be true or false, got {value!r}")
                return value
            if kind is str:
                if not isinstance(value, str):
                    raise ValueError(f"must be a string, got {value!r}")
                return value
            if kind is dict:
                if not isinstance(value, dict):
                    raise ValueError("must be a table")
                return value
            if kind == "hosts":
                if not isinstance(value, list) or not all(
                    isinstance(h, int) and not isinstance(h, bool) for h in value
                ):
                    raise ValueError("must be a list of host numbers")
                return list(value)
        except (ValueError, FaultSpecError) as exc:
            self.fail(key, str(exc))
        raise AssertionError(kind)


def load(path: str | Path) -> Scenario:
    """Read and check a scenario file (ScenarioError on any problem)."""
    p = Path(path)
    raw = read_toml(p, lambda why: ScenarioError(str(p), "-", why))
    return parse(raw, str(p), p.stem)


def read_toml(path: Path, fail: Callable[[str], Exception]) -> dict[str, Any]:
    """The table of the TOML file ``path``; ``fail(why)`` is raised where it cannot be read or parsed,
    so each kind of file reports in its own error type."""
    try:
        return tomllib.loads(path.read_text())
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise fail(f"not valid TOML: {exc}") from exc


def load_text(text: str, file: str = "<text>") -> Scenario:
    """``load`` for a string (ScenarioError on any problem)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(file, "-", f"not valid TOML: {exc}") from exc
    return parse(raw, file)


def parse(raw: dict[str, Any], file: str = "<scenario>", default_name: str = "scenario") -> Scenario:
    """A scenario from its TOML table, each section read and checked by its own reader."""
    top = _Reader(file, raw, "", TOP_KEYS)
    shape = _fabric(file, top)
    transport = _transport(file, top)
    runs = _runs(file, raw, top)
    lossless = raw.get("lossless", [])
    if not isinstance(lossless, list) or any(m not in {x.value for x in Mode} for m in lossless):
        top.fail("lossless", f"must be a list of modes ({', '.join(x.value for x in Mode)})")
    traffic = _traffic(file, raw, top, shape)
    for i, t in enumerate(traffic):  # checked now: a bad profile fails at load, not mid-run
        for r in runs:
            where = f"traffic[{i}].ev_profile" if t.ev_profile else "transport.ev_profile"
            n = t.evs or r.evs or transport["evs"]
            _ev_profile_overrides(file, t.ev_profile or transport["ev_profile"], n, where)
    nominal = max(int(t.nominal_bytes() * 8 / (shape.link_gbps * shape.planes)) + 1 for t in traffic)
    faults = _faults(raw, top, shape, nominal)
    limit = top.get("time_limit", "time", 200 * nominal + 10_000_000)
    if limit <= 0:
        top.fail("time_limit", "must be above 0")
    payload = top.get("payload", str, "auto")
    if payload not in ("auto", *PAYLOADS):
        top.fail("payload", f"{payload!r}: use auto, real or virtual")
    return Scenario(
        file=file,
        name=top.get("name", str, default_name),
        description=top.get("description", str, ""),
        reproduces=top.get("reproduces", str, ""),
        seed=top.get("seed", int, 1),
        shape=shape,
        **transport,
        traffic=traffic,
        faults=faults,
        runs=runs,
        time_limit_ns=limit,
        nominal_ns=nominal,
        raw=raw,
        lossless=tuple(lossless),
        payload=payload,
    )


_SHAPE_FIELDS = {
    "link_delay": "link_delay_ns",
    "buffer": "buffer_bytes",
    "ecn": "ecn_bytes",
    "trim": "trim_bytes",
    "nic_buffer": "nic_buffer_bytes",
    "pfc_xoff": "pfc_xoff_bytes",
    "pfc_xon": "pfc_xon_bytes",
    "pfc_headroom": "pfc_headroom_bytes",
}


def _fabric(file: str, top: _Reader) -> FabricShape:
    """``[fabric]``: the shape, within the simulator's bounds."""
    fab = _Reader(file, top.get("fabric", dict, {}), "fabric", set(FABRIC_KEYS))
    shape_kw: dict[str, Any] = {}
    for key, kind in FABRIC_KEYS.items():
        value = fab.get(key, kind)
        if value is not None:
            shape_kw[_SHAPE_FIELDS.get(key, key)] = value
    shape = replace(FabricShape(), **shape_kw)
    for key, lo, hi in (("planes", 1, 16), ("t0", 1, 1024), ("t1", 1, 1024), ("hosts_per_t0", 1, 1024)):
        if not lo <= getattr(shape, key) <= hi:
            fab.fail(key, f"must be {lo}..{hi}, got {getattr(shape, key)}")
    if shape.link_gbps <= 0:
        fab.fail("link_gbps", "must be above 0")
    if not 0 <= shape.probe_bytes <= PROBE_BYTES_MAX:
        fab.fail("probe_bytes", f"must be 0..{PROBE_BYTES_MAX}, got {shape.probe_bytes}")
    if not 0 < shape.pfc_xon_bytes <= shape.pfc_xoff_bytes:
        fab.fail("pfc_xon", "must be above 0 and at most pfc_xoff")
    if shape.hosts > MAX_HOSTS:
        fab.fail("hosts_per_t0", f"t0 x hosts_per_t0 = {shape.hosts} hosts, at most {MAX_HOSTS}")
    ports = shape.planes * 2 * (shape.hosts + shape.t0 * shape.t1)
    if ports > MAX_PORTS:
        fab.fail("t1", f"{ports} ports (planes x 2 x (hosts + t0 x t1)), at most {MAX_PORTS}")
    return shape


def _transport(file: str, top: _Reader) -> dict[str, Any]:
    """``[transport]``: the Scenario fields it sets (MTU, EV counts, overrides, EV profile)."""
    tr = _Reader(file, top.get("transport", dict, {}), "transport", TRANSPORT_KEYS)
    mtu = tr.get("mtu", int, 4096)
    if not 256 <= mtu <= 9000:
        tr.fail("mtu", f"must be 256..9000, got {mtu}")
    evs = tr.get("evs", int, DEFAULT_MAX_EVS)
    if not 1 <= evs <= MAX_PROFILE_EVS:
        tr.fail("evs", f"must be 1..{MAX_PROFILE_EVS}, got {evs}")
    return {
        "mtu": mtu,
        "evs": evs,
        "backups": tr.get("backups", int, 4),
        "config": _checked_fields(file, tr.get("config", dict, {}), "transport.config", TransportConfig),
        "cc": _checked_fields(file, tr.get("cc", dict, {}), "transport.cc", CcParams),
        "nscc": _checked_fields(file, tr.get("nscc", dict, {}), "transport.nscc", NsccParams),
        "ev_profile": tr.get("ev_profile", dict, {}),
    }


def _runs(file: str, raw: dict[str, Any], top: _Reader) -> list[RunSpec]:
    """``modes`` (one run each) or ``[[runs]]`` (named runs with their own QP and EV counts)."""
    modes_raw = raw.get("modes", ["mrc"])
    if not isinstance(modes_raw, list) or not modes_raw:
        top.fail("modes", "must be a non-empty list of modes")
    runs: list[RunSpec] = []
    if "runs" in raw:
        if not isinstance(raw["runs"], list) or not raw["runs"]:
            top.fail("runs", "must be a non-empty array of tables")
        for i, entry in enumerate(raw["runs"]):
            if not isinstance(entry, dict):
                top.fail(f"runs[{i}]", "must be a table")
            rr = _Reader(file, entry, f"runs[{i}]", RUN_KEYS)
            mode = rr.get("mode", "mode", required=True)
            if not 1 <= rr.get("evs", int, 1) <= MAX_PROFILE_EVS:
                rr.fail("evs", f"must be 1..{MAX_PROFILE_EVS}")
            runs.append(
                RunSpec(
                    rr.get("name", str, mode.value),
                    mode,
                    rr.get("qps_per_pair", int),
                    rr.get("evs", int),
                    _checked_fields(file, rr.get("config", dict, {}), f"runs[{i}].config", TransportConfig),
                )
            )
    else:
        for i, m in enumerate(modes_raw):
            try:
                runs.append(RunSpec(str(m), Mode(m)))
            except ValueError:
                top.fail(f"modes[{i}]", f"unknown mode {m!r}; modes: {', '.join(x.value for x in Mode)}")
    if len({r.name for r in runs}) != len(runs):
        top.fail("runs", "run names must differ")
    return runs


def _traffic(file: str, raw: dict[str, Any], top: _Reader, shape: FabricShape) -> list[TrafficItem]:
    """``[[traffic]]``: the items, their connection count and their EV-sharing references."""
    traffic_raw = raw.get("traffic")
    if not isinstance(traffic_raw, list) or not traffic_raw:
        top.fail("traffic", "missing: at least one [[traffic]] item is needed")
    assert isinstance(traffic_raw, list)
    traffic = [_item(file, entry, i, shape) for i, entry in enumerate(traffic_raw)]
    if len({t.name for t in traffic}) != len(traffic):
        top.fail("traffic", "item names must differ")
    conns = sum(t.connections() for t in traffic)
    if conns > MAX_CONNECTIONS:
        top.fail("traffic", f"{conns} connections in all, at most {MAX_CONNECTIONS}")
    for i, t in enumerate(traffic):
        if t.share_ev_with is not None:
            earlier = {u.name: u for u in traffic[:i]}
            if t.share_ev_with not in earlier:
                top.fail(f"traffic[{i}].share_ev_with", f"{t.share_ev_with!r} names no earlier traffic item")
            if t.pattern not in ("flow", "background") or t.pin_path is not None:
                top.fail(f"traffic[{i}].share_ev_with", "only for a flow or background item without pin_path")
        if t.share_ev_modes is not None and t.share_ev_with is None:
            top.fail(f"traffic[{i}].share_ev_modes", "only with share_ev_with")
    return traffic


def _faults(raw: dict[str, Any], top: _Reader, shape: FabricShape, nominal: int) -> list[str]:
    """``faults``: each spec parsed, and its target looked up in a fabric of this shape."""
    faults_raw = raw.get("faults", [])
    if not isinstance(faults_raw, list) or not all(isinstance(f, str) for f in faults_raw):
        top.fail("faults", "must be a list of fault specs (kind[=value]:target@start[-end])")
    check = Network(shape).fabric if faults_raw else None  # does each target exist?
    for i, spec in enumerate(faults_raw):
        try:
            fault = parse_fault(spec, nominal)
            if check is not None:
                check.attach(fault)
        except (FaultSpecError, ValueError) as exc:
            top.fail(f"faults[{i}]", str(exc))
    return list(faults_raw)


def _ev_profile_overrides(
    file: str, table: dict[str, Any], evs: int, where: str = "transport.ev_profile"
) -> dict[str, object]:
    """An ``ev_profile`` table (``[transport]``'s or a traffic item's), read by the parser
    of the agent's EV-profile files (``mrc_host.ev_profile``), as ``TransportConfig`` overrides
    (its values, deny rules, ``min_active``); ``evs`` is the EV count of the connections it is for."""
    if not table:
        return {}
    from mrc_host.ev_profile import ProfileError, parse

    for key in ("evs", "backups_per_plane", "cc"):
        if key in table:
            raise ScenarioError(file, f"{where}.{key}", "set it with transport.evs/backups/cc")
    try:
        prof = parse(table, "ev_profile", evs)
    except ProfileError as exc:
        raise ScenarioError(file, where, str(exc)) from exc
    out: dict[str, object] = {"ev_profile": prof.values}
    if prof.min_active is not None:
        out["ev_min_active"] = prof.min_active
    return out


def _checked_fields(file: str, table: dict[str, Any], path: str, cls: type) -> dict[str, object]:
    """``table``'s parameters of ``cls`` by name, checked; in the transport's and NSCC's
    tables a researcher's switch (``Experimental``) is known by its own name too."""
    known = {f.name for f in dataclasses.fields(cls)} - {"cc", "mode", "mtu", "experimental"}
    switches = EXPERIMENTAL_KEYS if cls in (TransportConfig, NsccParams) else frozenset()
    for key, value in table.items():
        owner = Experimental if key in switches else cls
        if key not in known and owner is cls:
            names = ", ".join(sorted(known | switches))
            raise ScenarioError(file, f"{path}.{key}", f"unknown parameter (known: {names})")
        if not isinstance(value, int | float | str | bool):
            raise ScenarioError(file, f"{path}.{key}", f"must be a number, string or boolean, got {value!r}")
        default = next(f.default for f in dataclasses.fields(owner) if f.name == key)
        widened = isinstance(default, float) and type(value) is int  # 1 for 1.0 is fine
        if default is not dataclasses.MISSING and type(default) is not type(value) and not widened:
            raise ScenarioError(
                file, f"{path}.{key}", f"must be {type(default).__name__} like its default {default!r}"
            )
        try:
            dataclasses.replace(owner(), **{key: value})  # the class's own checks, if it has any
        except (TypeError, ValueError) as exc:
            raise ScenarioError(file, f"{path}.{key}", str(exc)) from exc
    return dict(table)


def _order(r: _Reader, pattern: str) -> str:
    """An all-to-all's posting order (``traffic.ALL_TO_ALL_ORDERS``); no other pattern takes one."""
    order: str = r.get("order", str, "shifted")
    if order not in ALL_TO_ALL_ORDERS:
        r.fail("order", f"must be one of {', '.join(ALL_TO_ALL_ORDERS)}, got {order!r}")
    if order != "shifted" and pattern != "all-to-all":
        r.fail("order", "only for all-to-all")
    return order


def _item(file: str, entry: Any, i: int, shape: FabricShape) -> TrafficItem:
    path = f"traffic[{i}]"
    if not isinstance(entry, dict):
        raise ScenarioError(file, path, "must be a table")
    r = _Reader(file, entry, path, ITEM_KEYS)
    pattern = r.get("pattern", str, required=True)
    if pattern not in PATTERNS:
        r.fail("pattern", f"unknown pattern {pattern!r}; patterns: {', '.join(PATTERNS)}")
    item = TrafficItem(
        pattern=pattern,
        name=r.get("name", str, f"{pattern}{i}"),
        size=r.get("size", "size", required=True),
        start_ns=r.get("start", "time", 0),
        stagger_ns=r.get("stagger", "time", 0),
        writes=r.get("writes", int, 1),
        qps_per_pair=r.get("qps_per_pair", int, 1),
        mode=r.get("mode", "mode"),
        share_ev_with=r.get("share_ev_with", str),
        share_ev_modes=r.get("share_ev_modes", "modes"),
        window_scale=r.get("window_scale", float, 1.0),
        evs=r.get("evs", int),
        ev_profile=r.get("ev_profile", dict, {}),
        cc=_checked_fields(file, r.get("cc", dict, {}), f"{path}.cc", CcParams),
        nscc=_checked_fields(file, r.get("nscc", dict, {}), f"{path}.nscc", NsccParams),
        config=_checked_fields(file, r.get("config", dict, {}), f"{path}.config", TransportConfig),
        order=_order(r, pattern),
    )
    if not 1 <= item.writes <= 1 << 20:
        r.fail("writes", "must be 1..1048576")
    if item.stagger_ns and pattern not in ("flow", "incast", "permutation", "all-to-all"):
        r.fail("stagger", "only for flow, incast, permutation and all-to-all (their pairs start in turn)")
    if item.evs is not None and not 1 <= item.evs <= MAX_PROFILE_EVS:
        r.fail("evs", f"must be 1..{MAX_PROFILE_EVS}, got {item.evs}")
    if not 0 < item.window_scale <= 1000:
        r.fail("window_scale", f"must be above 0 and at most 1000, got {item.window_scale}")
    if not 1 <= item.qps_per_pair <= 256:
        r.fail("qps_per_pair", "must be 1..256")
    n = shape.hosts

    def host(key: str, value: int) -> int:
        if not 0 <= value < n:
            r.fail(key, f"host {value} is not one of 0..{n - 1}")
        return value

    if pattern in ("flow", "incast"):
        item.dst = host("dst", r.get("dst", int, required=True))
    if pattern == "flow":
        item.src = host("src", r.get("src", int, required=True))
        if item.src == item.dst:
            r.fail("dst", "must differ from src")
    if pattern == "incast":
        item.senders = [host("senders", h) for h in r.get("senders", "hosts", required=True)]
        if not item.senders or item.dst in item.senders:
            r.fail("senders", "must be a non-empty list of hosts other than dst")
    if pattern in ("permutation", "all-to-all", "ring-allreduce", "all-gather"):
        raw_hosts = entry.get("hosts", "all")
        hosts = list(range(n)) if raw_hosts == "all" else [host("hosts", h) for h in r.get("hosts", "hosts")]
        if len(hosts) < 2 or len(set(hosts)) != len(hosts):
            r.fail("hosts", 'must name at least two distinct hosts (or "all")')
        item.hosts = hosts
    if pattern == "background":
        pairs = entry.get("pairs")
        if not isinstance(pairs, list) or not pairs:
            r.fail("pairs", "must be a non-empty list of [src, dst] pairs")
        assert isinstance(pairs, list)
        for pair in pairs:
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(h, int) for h in pair)):
                r.fail("pairs", f"each pair is [src, dst], got {pair!r}")
            if pair[0] == pair[1]:
                r.fail("pairs", f"pair {pair!r} sends to itself")
            item.pairs.append((host("pairs", pair[0]), host("pairs", pair[1])))
    pin = entry.get("pin_path")
    if pin is not None:
        if not (isinstance(pin, list) and len(pin) == 2 and all(isinstance(v, int) for v in pin)):
            r.fail("pin_path", "must be [plane, t1]")
        if not (0 <= pin[0] < shape.planes and 0 <= pin[1] < shape.t1):
            r.fail("pin_path", f"path {pin!r} is not in this fabric (planes {shape.planes}, t1 {shape.t1})")
        item.pin_path = (pin[0], pin[1])
    return item


# ---- writing ----------------------------------------------------------------------------
def key_values(items: list[str]) -> dict[str, object]:
    """``key=value`` arguments, each value JSON (``lasthop_queue_share=1.0``, ``ev_min_active=0``):
    the settings a command line gives a scenario's tables. ValueError on a value not JSON."""
    out: dict[str, object] = {}
    for kv in items:
        k, _, v = kv.partition("=")
        out[k] = json.loads(v)
    return out


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {v!r} as TOML")


def _traffic_toml(t: TrafficItem) -> list[str]:
    """One ``[[traffic]]`` table of ``to_toml``."""
    out: list[str] = [
        "",
        "[[traffic]]",
        f"pattern = {_toml_value(t.pattern)}",
        f"name = {_toml_value(t.name)}",
    ]
    out += [f"size = {t.size}", f'start = "{t.start_ns}ns"', f'stagger = "{t.stagger_ns}ns"']
    out += [f"writes = {t.writes}", f"qps_per_pair = {t.qps_per_pair}"]
    for key in ("src", "dst"):
        if getattr(t, key) is not None:
            out.append(f"{key} = {getattr(t, key)}")
    for key in ("senders", "hosts", "pairs"):
        values = [list(x) if isinstance(x, tuple) else x for x in getattr(t, key)]
        if values:
            out.append(f"{key} = {_toml_value(values)}")
    if t.mode is not None:
        out.append(f"mode = {_toml_value(t.mode.value)}")
    if t.pin_path is not None:
        out.append(f"pin_path = {_toml_value(list(t.pin_path))}")
    if t.share_ev_with is not None:
        out.append(f"share_ev_with = {_toml_value(t.share_ev_with)}")
    if t.share_ev_modes is not None:
        out.append(f"share_ev_modes = {_toml_value(t.share_ev_modes)}")
    if t.order != "shifted":
        out.append(f"order = {_toml_value(t.order)}")
    if t.window_scale != 1.0:
        out.append(f"window_scale = {t.window_scale!r}")
    if t.evs is not None:
        out.append(f"evs = {t.evs}")
    if t.cc:
        out.append(f"cc = {_toml_value(t.cc)}")
    if t.nscc:
        out.append(f"nscc = {_toml_value(t.nscc)}")
    if t.config:
        out.append(f"config = {_toml_value(t.config)}")
    if t.ev_profile:
        out.append(f"ev_profile = {_toml_value(t.ev_profile)}")
    return out


def to_toml(sc: Scenario) -> str:
    """The scenario as a TOML file that ``load`` reads back to an equal ``Scenario``."""
    shape = sc.shape
    lines = [
        f"name = {_toml_value(sc.name)}",
        f"description = {_toml_value(sc.description)}",
        f"reproduces = {_toml_value(sc.reproduces)}",
        f'seed = {sc.seed}\ntime_limit = "{sc.time_limit_ns}ns"',
        f"faults = {_toml_value(sc.faults)}",
        f"lossless = {_toml_value(list(sc.lossless))}",
        f"payload = {_toml_value(sc.payload)}",
        "runs = "
        + _toml_value(
            [
                {"name": r.name, "mode": r.mode.value}
                | ({"qps_per_pair": r.qps_per_pair} if r.qps_per_pair else {})
                | ({"evs": r.evs} if r.evs else {})
                | ({"config": r.config} if r.config else {})
                for r in sc.runs
            ]
        ),
        "",
        "[fabric]",
        f"planes = {shape.planes}",
        f"t0 = {shape.t0}",
        f"t1 = {shape.t1}",
        f"hosts_per_t0 = {shape.hosts_per_t0}",
        f"link_gbps = {float(shape.link_gbps)!r}",
        f'link_delay = "{shape.link_delay_ns}ns"',
        f"buffer = {shape.buffer_bytes}",
        f"ecn = {shape.ecn_bytes}",
        f"trim = {shape.trim_bytes}",
        f"nic_buffer = {shape.nic_buffer_bytes}",
        f"pfc = {_toml_value(shape.pfc)}",
        f"pfc_xoff = {shape.pfc_xoff_bytes}",
        f"pfc_xon = {shape.pfc_xon_bytes}",
        f"pfc_headroom = {shape.pfc_headroom_bytes}",
        *([f"probe_bytes = {shape.probe_bytes}"] if shape.probe_bytes != CONTROL_BYTES else []),
        "",
        "[transport]",
        f"mtu = {sc.mtu}",
        f"evs = {sc.evs}",
        f"backups = {sc.backups}",
        f"config = {_toml_value(sc.config)}",
        f"cc = {_toml_value(sc.cc)}",
        f"nscc = {_toml_value(sc.nscc)}",
    ]
    if sc.ev_profile:
        lines.append(f"ev_profile = {_toml_value(sc.ev_profile)}")
    for t in sc.traffic:
        lines += _traffic_toml(t)
    return "\n".join(lines) + "\n"


# ---- running ----------------------------------------------------------------------------
def build(sc: Scenario, run: RunSpec) -> tuple[Network, list[Job]]:
    """A fresh network with every traffic item and fault of ``sc`` for one run."""
    lossless = sc.shape.pfc or (run.mode.value in sc.lossless)
    net = Network(replace(sc.shape, pfc=lossless), sc.seed, choose_payload(sc.payload, sc.region_bytes()))
    # the faults first: traffic that starts with the run sends its first packets as it is
    # posted, and a fault attached after them missed them (a plane at 10 Gb/s from the start
    # sent its first window at full rate, and its NIC said so)
    for spec_text in sc.faults:
        net.add_fault(parse_fault(spec_text, sc.nominal_ns))
    jobs: list[Job] = []
    for item in sc.traffic:
        cc = {**sc.cc, **item.cc}
        evs = item.evs or run.evs or sc.evs
        profile = _ev_profile_overrides(sc.file, item.ev_profile or sc.ev_profile, evs)
        spec = FlowSpec(
            item.name,
            0,
            0,
            mode=item.mode or run.mode,
            mtu=sc.mtu,
            max_evs=evs,
            backup_evs_per_plane=sc.backups,
            pin_path=item.pin_path,
            window_scale=item.window_scale,
            transport={**profile, **sc.config, **run.config, **item.config},
            cc=cc,
            nscc={**sc.nscc, **item.nscc},
        )
        if item.share_ev_with is not None and (
            item.share_ev_modes is None or spec.mode.value in item.share_ev_modes
        ):
            other = next(j for j in jobs if j.name == item.share_ev_with).connections[0]
            path = other.spec.pin_path or net.path_of(sorted(other.sender.evset.active_evs())[0])
            spec = replace(spec, pin_path=path)
        job = Job(item.name, item.pattern, item.start_ns)
        qps = run.qps_per_pair or item.qps_per_pair
        p = item.pattern
        if p == "flow":
            assert item.src is not None and item.dst is not None
            point_to_point(net, job, spec, [(item.src, item.dst)], item.size, item.writes)
        elif p == "incast":
            assert item.dst is not None
            pairs = [(s, item.dst) for s in item.senders]
            point_to_point(net, job, spec, pairs, item.size, item.writes, qps, item.stagger_ns)
        elif p == "permutation":
            import random

            pairs = permutation_pairs(item.hosts, random.Random(sc.seed * 31 + len(jobs)))
            point_to_point(net, job, spec, pairs, item.size, item.writes, stagger_ns=item.stagger_ns)
        elif p == "all-to-all":
            pairs = all_to_all_pairs(item.hosts, ascending=item.order == "ascending")
            point_to_point(net, job, spec, pairs, item.size, item.writes, stagger_ns=item.stagger_ns)
        elif p in ("ring-allreduce", "all-gather"):
            ring(net, job, spec, item.hosts, item.size, qps, allreduce=p == "ring-allreduce")
        else:
            background(net, job, spec, item.pairs, item.size)
        jobs.append(job)
    return net, jobs


def run_scenario(
    sc: Scenario, progress: bool | None = False, record: Path | None = None, record_max_bytes: int = 512 << 20
) -> dict[str, Any]:
    """Every run of ``sc``, side by side: the JSON-able result.

    ``progress``: True shows a bar, None shows one on a terminal for long runs, False never.
    ``record``: a directory to write each run's recording into (``mrc view`` replays it), each
    at most ``record_max_bytes`` long.
    """
    out: dict[str, Any] = {
        "scenario": sc.name,
        "file": sc.file,
        "reproduces": sc.reproduces,
        "description": sc.description,
        "seed": sc.seed,
        "nominal_time_us": sc.nominal_ns / 1e3,
        "fabric": {k: getattr(sc.shape, k) for k in sc.shape.__dataclass_fields__},
        "runs": {},
    }
    for run in sc.runs:
        with collector_paused():
            net, jobs = build(sc, run)
        recorder = None
        if record is not None:
            from .recording import SAMPLES, SimRecorder

            label = f"{sc.name} [{run.name}]"
            recorder = SimRecorder(net, sc.nominal_ns * 2 // SAMPLES, label, record_max_bytes)
            recorder.start()
        if progress is False:
            net.run(sc.time_limit_ns)
        else:
            from .progress import run_with_progress

            run_with_progress(net, sc.time_limit_ns, f"{sc.name} [{run.name}]", show=progress)
        out["runs"][run.name] = summarise_network(net, jobs, run.name)
        if recorder is not None and record is not None:
            recorder.write(record / f"{sc.name}.{run.name}.recording.jsonl")
    return out


def shipped() -> list[Path]:
    """The scenario files that ship with mrc-sim."""
    return sorted(SCENARIO_DIR.glob("*.toml"))
