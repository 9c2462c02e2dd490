"""An EV profile: a TOML table saying which EVs connections draw and deny.

The agent reads it from a file (``mrc serve --ev-profile``) and mrc-sim from a scenario's
``ev_profile`` table; it lives below both, so that neither imports the other.

Why: the OCP MRC profile lets an operator shape the entropy values a NIC uses (how many,
which bits vary, an explicit list, a generated set over per-field masks) and rule some out
(DENIED), and researchers want the same knobs to see how spraying, retirement and ECMP
hashing depend on them. docs/agent.md ("EV profiles") describes every key. Every key is
optional; the ``mrc-agent`` flags ``--evs``, ``--backup-evs``, ``--ev-min-active`` and
``--cc`` override the file::

    format = "flowlabel+udp_sport"   # the contract's fields: [4, 10, 18] (plane, T1, entropy)
    evs = 64                 # EVs per connection, split over the planes (core: max_evs)
    backups_per_plane = 2
    min_active = 16          # loss retires no EV below this many usable (0: 3/4 of evs)
    cc = "nscc"              # a name in mrc_host.core.cc_base.REGISTRY
    entropy_mask = 0x000ff   # entropy bits drawn at random ...
    entropy_base = 0x2a000   # ... the others fixed to these
    explicit = ["00000001", "10040002"]   # or: use exactly these EVs (hex, as `mrc evs` prints)

    [generated]              # or: the OCP generated profile, one table per format field
    fields = [{width = 4, max = 7, mask = 0xf}, {width = 10, max = 15, mask = 0x3ff},
              {width = 18, init = 0x100, max = 255, mask = 0xff}]

    [explicit]               # or: the OCP explicit profile: compact EVs expanded through
    fields = [{width = 4, mask = 0x1}, {width = 10, mask = 0xf},   # the fields' init/mask
              {width = 18, init = 0x2a000, mask = 0xff}]
    base = 0                 # the range base .. base + count - 1 (or values = ["1a3", ...])
    count = 8192

    [[deny]]                 # DENIED from the start on every connection: all keys must match
    plane = 1
    t1 = 0
    [[deny]]
    ev = "00000001"
    [[deny]]                 # a range of one format field's values
    field = 1
    min = 12
    max = 15
    [[deny]]                 # a mask / value over the whole EV
    mask = 0xf0000000
    value = 0x30000000
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrc_fabric.addressing import AddressingError
from mrc_fabric.ev import EV
from mrc_host.core import DEFAULT_MAX_EVS, EvProfile
from mrc_host.core.cc_base import cc_names
from mrc_host.core.ev_fields import (
    CONTRACT_FORMAT,
    MAX_PROFILE_EVS,
    EvDeny,
    ExpProfile,
    FieldDeny,
    GenField,
    GenProfile,
    check_format,
)

EV_FORMAT = "flowlabel+udp_sport"  # the contract's carrier; its fields are CONTRACT_FORMAT
_COUNTS = {"evs": (1, MAX_PROFILE_EVS), "backups_per_plane": (0, 256), "min_active": (0, MAX_PROFILE_EVS)}
_KEYS = {"format", "cc", "entropy_mask", "entropy_base", "explicit", "generated", "deny", *_COUNTS}
_DENY_KEYS = {"plane", "t1", "ev", "field", "min", "max", "mask", "value"}
_GEN_FIELD_KEYS = {"width", "init", "min", "max", "mask"}
_EXP_KEYS = {"fields", "values", "base", "count"}


class ProfileError(ValueError):
    """A bad profile: the message names the file, the key and the reason."""


DenyRule = EvDeny  # the core's rule; the file's [[deny]] tables become these


def deny_dict(r: EvDeny) -> dict[str, Any]:
    out: dict[str, Any] = {k: v for k, v in (("plane", r.plane), ("t1", r.t1), ("ev", r.ev)) if v is not None}
    if r.field is not None:
        out |= {"field": r.field, "min": r.lo, "max": r.hi}
    if r.mask is not None:
        out |= {"mask": r.mask, "value": r.value}
    return out


def field_dicts(fields: tuple[GenField, ...]) -> list[dict[str, int]]:
    return [{"width": f.width, "init": f.init, "min": f.min, "max": f.max, "mask": f.mask} for f in fields]


@dataclass(frozen=True)
class AgentEvProfile:
    evs: int | None = None
    backups_per_plane: int | None = None
    min_active: int | None = None
    cc: str | None = None
    values: EvProfile = field(default_factory=EvProfile)
    deny: tuple[DenyRule, ...] = ()
    format: tuple[int, ...] = CONTRACT_FORMAT  # the format profile's field widths, wire order

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
        gen, exp = self.values.generated, self.values.fielded
        out: dict[str, Any] = {
            "format": EV_FORMAT if self.format == CONTRACT_FORMAT else list(self.format),
            "entropy_mask": self.values.entropy_mask,
            "entropy_base": self.values.entropy_base,
            "explicit": [f"{v:08x}" for v in self.values.explicit],
            "deny": [deny_dict(r) for r in self.deny],
        }
        if gen is not None:
            out["generated"] = {"fields": field_dicts(gen.fields)}
        if exp is not None:
            listed = {"values": [f"{v:x}" for v in exp.values]}
            out["explicit"] = {"fields": field_dicts(exp.fields)} | (
                listed if exp.values else {"base": exp.base, "count": exp.count}
            )
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


def _format(source: str, raw: object) -> tuple[int, ...]:
    if raw == EV_FORMAT:
        return CONTRACT_FORMAT
    if not isinstance(raw, list):
        raise ProfileError(f"{source}: format: {EV_FORMAT!r} or a list of field widths, got {raw!r}")
    try:
        return check_format(tuple(raw))
    except ValueError as exc:
        raise ProfileError(f"{source}: {exc}") from None


def deny_rule(where: str, rule: object, fmt: tuple[int, ...]) -> EvDeny:
    if not isinstance(rule, dict) or not rule or set(rule) - _DENY_KEYS:
        raise ProfileError(f"{where}: a table with some of {', '.join(sorted(_DENY_KEYS))}")
    if ("min" in rule or "max" in rule) and "field" not in rule:
        raise ProfileError(f"{where}: min/max need a field")
    if "value" in rule and "mask" not in rule:
        raise ProfileError(f"{where}.value: needs a mask")
    fld = None if "field" not in rule else _int(f"{where}.field", rule["field"], 0, len(fmt) - 1)
    top = 0 if fld is None else (1 << fmt[fld]) - 1
    lo = 0 if fld is None else _int(f"{where}.min", rule.get("min", 0), 0, top)
    hi = 0 if fld is None else _int(f"{where}.max", rule.get("max", top), lo, top)
    return EvDeny(
        plane=None if "plane" not in rule else _int(f"{where}.plane", rule["plane"], 0, 15),
        t1=None if "t1" not in rule else _int(f"{where}.t1", rule["t1"], 0, 1023),
        ev=None if "ev" not in rule else _ev(f"{where}.ev", rule["ev"]),
        field=fld,
        lo=lo,
        hi=hi,
        mask=None if "mask" not in rule else _int(f"{where}.mask", rule["mask"], 1, 0xFFFFFFFF),
        value=_int(f"{where}.value", rule.get("value", 0), 0, 0xFFFFFFFF),
        format=fmt,
    )


def _fields(where: str, raw: object) -> tuple[GenField, ...]:
    if not isinstance(raw, list):
        raise ProfileError(f"{where}: a list of tables [{{width, init, min, max, mask}}, ...]")
    fields = []
    for i, f in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(f, dict) or "width" not in f or set(f) - _GEN_FIELD_KEYS:
            raise ProfileError(f"{at}: a table with width and some of init, min, max, mask")
        fields.append(GenField(**{k: _int(f"{at}.{k}", v, 0, 0xFFFFFFFF) for k, v in f.items()}))
    return tuple(fields)


def _field_denies(rules: list[EvDeny]) -> tuple[FieldDeny, ...]:
    """Deny rules by a field range alone: a generated or explicit profile leaves them out."""
    return tuple(FieldDeny(r.field, r.lo, r.hi) for r in rules if r.field is not None and r.field_only)


def _generated(source: str, raw: object, fmt: tuple[int, ...], rules: list[EvDeny]) -> GenProfile:
    """The [generated] table; deny rules by field range go into it so denied EVs are never drawn."""
    where = f"{source}: generated"
    if not isinstance(raw, dict) or set(raw) - {"fields"} or "fields" not in raw:
        raise ProfileError(f"{where}: a table with fields = [{{width, init, min, max, mask}}, ...]")
    fields = _fields(f"{where}.fields", raw["fields"])
    try:
        return GenProfile(format=fmt, fields=fields, deny=_field_denies(rules))
    except ValueError as exc:
        raise ProfileError(f"{source}: {exc}") from None


def _compact(where: str, value: object) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 16)
        except ValueError:
            raise ProfileError(f"{where}: {value!r} is not a compact EV in hex") from None
    return _int(where, value, 0, 0xFFFFFFFF)


def _explicit_table(
    source: str, raw: dict[str, Any], fmt: tuple[int, ...], rules: list[EvDeny]
) -> ExpProfile:
    """The [explicit] table: OCP's explicit profile, fields and compact EVs (a list or a range)."""
    where = f"{source}: explicit"
    unknown = sorted(set(raw) - _EXP_KEYS)
    if unknown:
        raise ProfileError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(sorted(_EXP_KEYS))})")
    if ("values" in raw) == ("count" in raw):
        raise ProfileError(f"{where}: values = [compact EVs] or a range, base and count, not both")
    if "base" in raw and "count" not in raw:
        raise ProfileError(f"{where}.base: needs a count")
    fields = _fields(f"{where}.fields", raw["fields"]) if "fields" in raw else ()
    values = raw.get("values", [])
    if not isinstance(values, list) or ("values" in raw and not values):
        raise ProfileError(f"{where}.values: a non-empty list of compact EVs (hex strings or integers)")
    try:
        return ExpProfile(
            format=fmt,
            fields=fields,
            values=tuple(_compact(f"{where}.values[{i}]", v) for i, v in enumerate(values)),
            base=_compact(f"{where}.base", raw.get("base", 0)),
            count=_int(f"{where}.count", raw.get("count", 0), 0 if "values" in raw else 1, MAX_PROFILE_EVS),
            deny=_field_denies(rules),
        )
    except ValueError as exc:
        if isinstance(exc, ProfileError):
            raise
        raise ProfileError(f"{source}: {exc}") from None


def parse(obj: dict[str, Any], source: str = "profile", evs: int = DEFAULT_MAX_EVS) -> AgentEvProfile:
    """A profile from the file's keys; ``evs`` is the EV count when the profile sets none."""
    unknown = sorted(set(obj) - _KEYS)
    if unknown:
        raise ProfileError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    fmt = _format(source, obj.get("format", EV_FORMAT))
    cc = obj.get("cc")
    if cc is not None and cc not in cc_names():
        raise ProfileError(f"{source}: cc: {cc!r} is not one of {', '.join(cc_names())}")
    explicit = obj.get("explicit", [])
    if not isinstance(explicit, list | dict):
        raise ProfileError(f"{source}: explicit: a list of EVs or a table (fields, values or base and count)")
    deny = obj.get("deny", [])
    if not isinstance(deny, list):
        raise ProfileError(f"{source}: deny: must be an array of tables ([[deny]])")
    rules = [deny_rule(f"{source}: deny[{i}]", rule, fmt) for i, rule in enumerate(deny)]
    generated = None if "generated" not in obj else _generated(source, obj["generated"], fmt, rules)
    fielded = _explicit_table(source, explicit, fmt, rules) if isinstance(explicit, dict) else None
    folded = generated is not None or fielded is not None  # field-range rules are in the profile
    try:
        values = EvProfile(
            explicit=tuple(
                _ev(f"{source}: explicit[{i}]", v) for i, v in enumerate(explicit if not fielded else [])
            ),
            entropy_mask=_int(f"{source}: entropy_mask", obj.get("entropy_mask", 0x3FFFF), 0, 0x3FFFF),
            entropy_base=_int(f"{source}: entropy_base", obj.get("entropy_base", 0), 0, 0x3FFFF),
            generated=generated,
            fielded=fielded,
            deny=tuple(r for r in rules if not (folded and r.field_only)),
        )
    except ProfileError:
        raise
    except ValueError as exc:
        raise ProfileError(f"{source}: {exc}") from None
    counts = {k: None if k not in obj else _int(f"{source}: {k}", obj[k], *lim) for k, lim in _COUNTS.items()}
    n = counts["evs"] or evs
    if (counts["min_active"] or 0) > n:  # OCP: ev_min_active cannot be greater than ev_count
        raise ProfileError(f"{source}: min_active: {counts['min_active']} is more than the {n} EVs (evs)")
    return AgentEvProfile(
        evs=counts["evs"],
        backups_per_plane=counts["backups_per_plane"],
        min_active=counts["min_active"],
        cc=cc,
        values=values,
        deny=tuple(rules),
        format=fmt,
    )


def load(path: Path) -> AgentEvProfile:
    try:
        obj = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ProfileError(f"{path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: {exc}") from None
    return parse(obj, str(path))
