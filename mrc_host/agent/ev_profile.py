"""The agent's EV profile: a TOML file saying which EVs its connections draw and deny.

Why: the OCP MRC profile lets an operator shape the entropy values a NIC uses (how many,
which bits vary, an explicit list) and rule some out (DENIED), and researchers want the
same knobs to see how spraying, retirement and ECMP hashing depend on them. The EV format
itself is fixed by the contract (docs/design.md §3): the only format is ``flowlabel+udp_sport``.
Every key is optional; the ``mrc-agent`` flags ``--evs``, ``--backup-evs``,
``--ev-min-active`` and ``--cc`` override the file::

    format = "flowlabel+udp_sport"
    evs = 64                 # EVs per connection, split over the planes (core: max_evs)
    backups_per_plane = 2
    min_active = 16          # loss retires no EV below this many usable (0: 3/4 of evs)
    cc = "nscc"              # a name in mrc_host.core.cc_base.REGISTRY
    entropy_mask = 0x000ff   # entropy bits drawn at random ...
    entropy_base = 0x2a000   # ... the others fixed to these
    explicit = ["00000001", "10040002"]   # or: use exactly these EVs (hex, as `mrc evs` prints)

    [[deny]]                 # DENIED from the start on every connection: all keys must match
    plane = 1
    t1 = 0
    [[deny]]
    ev = "00000001"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrc_fabric.addressing import AddressingError
from mrc_fabric.ev import EV
from mrc_host.core import EvProfile
from mrc_host.core.cc_base import cc_names

EV_FORMAT = "flowlabel+udp_sport"
_COUNTS = {"evs": (1, 4096), "backups_per_plane": (0, 256), "min_active": (0, 4096)}
_KEYS = {"format", "cc", "entropy_mask", "entropy_base", "explicit", "deny", *_COUNTS}
_DENY_KEYS = {"plane", "t1", "ev"}


class ProfileError(ValueError):
    """A bad profile: the message names the file, the key and the reason."""


@dataclass(frozen=True)
class DenyRule:
    """EVs to deny: every given field must match (plane, T1, or one EV value)."""

    plane: int | None = None
    t1: int | None = None
    ev: int | None = None

    def matches(self, value: int) -> bool:
        e = EV.decode(value)
        return (
            (self.plane is None or e.plane == self.plane)
            and (self.t1 is None or e.t1 == self.t1)
            and (self.ev is None or value == self.ev)
        )


@dataclass(frozen=True)
class AgentEvProfile:
    evs: int | None = None
    backups_per_plane: int | None = None
    min_active: int | None = None
    cc: str | None = None
    values: EvProfile = field(default_factory=EvProfile)
    deny: tuple[DenyRule, ...] = ()

    def transport_overrides(self) -> dict[str, Any]:
        """Keyword arguments for ``TransportConfig`` (only what the profile sets)."""
        out: dict[str, Any] = {"ev_profile": self.values}
        if self.evs is not None:
            out["max_evs"] = self.evs
        if self.backups_per_plane is not None:
            out["backup_evs_per_plane"] = self.backups_per_plane
        if self.min_active is not None:
            out["ev_min_active"] = self.min_active
        if self.cc is not None:
            out["cc_algorithm"] = self.cc
        return out

    def as_dict(self) -> dict[str, Any]:
        """The profile in the file's own keys (``parse(p.as_dict()) == p``)."""
        out: dict[str, Any] = {
            "format": EV_FORMAT,
            "entropy_mask": self.values.entropy_mask,
            "entropy_base": self.values.entropy_base,
            "explicit": [f"{v:08x}" for v in self.values.explicit],
            "deny": [
                {k: v for k, v in (("plane", r.plane), ("t1", r.t1), ("ev", r.ev)) if v is not None}
                for r in self.deny
            ],
        }
        for key, value in (
            ("evs", self.evs),
            ("backups_per_plane", self.backups_per_plane),
            ("min_active", self.min_active),
            ("cc", self.cc),
        ):
            if value is not None:
                out[key] = value
        return out

    def denied(self, values: list[int]) -> list[int]:
        return [v for v in values if any(r.matches(v) for r in self.deny)]


def _int(where: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ProfileError(f"{where}: must be an integer in {lo}..{hi}, got {value!r}")
    return value


def _ev(where: str, value: object) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 16)
        except ValueError:
            raise ProfileError(f"{where}: {value!r} is not an EV in hex") from None
    v = _int(where, value, 0, 0xFFFFFFFF)
    try:
        EV.decode(v)
    except AddressingError as exc:
        raise ProfileError(f"{where}: {exc}") from None
    return v


def parse(obj: dict[str, Any], source: str = "profile") -> AgentEvProfile:
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise ProfileError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    fmt = obj.get("format", EV_FORMAT)
    if fmt != EV_FORMAT:
        raise ProfileError(f"{source}: format: only {EV_FORMAT!r} is defined (design §3), got {fmt!r}")
    cc = obj.get("cc")
    if cc is not None and cc not in cc_names():
        raise ProfileError(f"{source}: cc: {cc!r} is not one of {', '.join(cc_names())}")
    explicit = obj.get("explicit", [])
    if not isinstance(explicit, list):
        raise ProfileError(f"{source}: explicit: must be a list of EVs")
    rules = []
    deny = obj.get("deny", [])
    if not isinstance(deny, list):
        raise ProfileError(f"{source}: deny: must be an array of tables ([[deny]])")
    for i, rule in enumerate(deny):
        where = f"{source}: deny[{i}]"
        if not isinstance(rule, dict) or not rule or set(rule) - _DENY_KEYS:
            raise ProfileError(f"{where}: a table with some of {', '.join(sorted(_DENY_KEYS))}")
        rules.append(
            DenyRule(
                plane=None if "plane" not in rule else _int(f"{where}.plane", rule["plane"], 0, 15),
                t1=None if "t1" not in rule else _int(f"{where}.t1", rule["t1"], 0, 1023),
                ev=None if "ev" not in rule else _ev(f"{where}.ev", rule["ev"]),
            )
        )
    try:
        values = EvProfile(
            explicit=tuple(_ev(f"{source}: explicit[{i}]", v) for i, v in enumerate(explicit)),
            entropy_mask=_int(f"{source}: entropy_mask", obj.get("entropy_mask", 0x3FFFF), 0, 0x3FFFF),
            entropy_base=_int(f"{source}: entropy_base", obj.get("entropy_base", 0), 0, 0x3FFFF),
        )
    except ProfileError:
        raise
    except ValueError as exc:
        raise ProfileError(f"{source}: {exc}") from None
    counts = {k: None if k not in obj else _int(f"{source}: {k}", obj[k], *lim) for k, lim in _COUNTS.items()}
    return AgentEvProfile(
        evs=counts["evs"],
        backups_per_plane=counts["backups_per_plane"],
        min_active=counts["min_active"],
        cc=cc,
        values=values,
        deny=tuple(rules),
    )


def load(path: Path) -> AgentEvProfile:
    try:
        obj = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ProfileError(f"{path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: {exc}") from None
    return parse(obj, str(path))
