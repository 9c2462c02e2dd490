"""EV profiles as the OCP MRC control API defines them: format fields, generation, denial.

Why: the OCP API (``mrc_ctl.h``) describes an EV not as one opaque number but as a list of
fields. A *format profile* gives the fields' widths in wire order (most significant first);
a *generated* (GEN) profile gives, per field, a width, an ``init`` value, the ``min``..``max``
range of a generated counter and a ``mask`` saying which bits of the field that counter
fills (its bits are scattered into the mask's set bits, lowest first, over ``init``); an
*explicit* (EXP) profile has the same fields but lists compact EVs (or a contiguous range
of them) that expand through the fields the same way; deny rules then rule EVs out by
ranges of field values. Operators use this to match EVs to the tiers of
their fabric (one field per hop), and researchers to see what spraying does when only some
bits vary. Here an EV is the contract's 32-bit value (docs/design.md §3: 4 plane bits, 10
T1 bits, 18 entropy bits, carried in the flow label and UDP source port), so the format is
at most 32 bits wide and packed from the top; a generated value that names a plane or T1
the fabric does not have is simply not drawn.

Everything here is pure and validated on construction: a bad profile raises ``ValueError``
with the field named, before any connection exists.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from mrc_fabric.ev import ev_plane, ev_t1

from .config import MAX_PROFILE_EVS

EV_BITS: Final = 32
CONTRACT_FORMAT: Final = (4, 10, 18)  # plane, T1, entropy: the EV layout of docs/design.md §3

__all__ = [
    "CONTRACT_FORMAT",
    "MAX_PROFILE_EVS",
    "EvDeny",
    "ExpProfile",
    "FieldDeny",
    "FieldProfile",
    "GenField",
    "GenProfile",
    "check_format",
    "field_values",
    "profile_values",
    "scatter",
]


def check_format(widths: tuple[int, ...]) -> tuple[int, ...]:
    """A format profile: field widths, most significant first, at most 32 bits in all."""
    if not widths:
        raise ValueError("format: at least one field width")
    for i, w in enumerate(widths):
        if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= EV_BITS:
            raise ValueError(f"format[{i}]: a width in 1..{EV_BITS}, got {w!r}")
    if sum(widths) > EV_BITS:
        raise ValueError(f"format: the widths add up to {sum(widths)} bits, more than an EV's {EV_BITS}")
    return tuple(widths)


def scatter(value: int, mask: int) -> int:
    """Put the low bits of ``value`` into the set bits of ``mask``, lowest first (OCP's
    expansion of a generated counter into a field whose mask need not be contiguous)."""
    out = 0
    bit = 0
    m = mask
    while m:
        low = m & -m
        if value >> bit & 1:
            out |= low
        bit += 1
        m ^= low
    return out


@dataclass(frozen=True, slots=True)
class GenField:
    """One field of an EV profile (OCP's ``mrc_ctl_ev_field``): its value is ``init`` with
    the bits of ``mask`` replaced by a counter -- running ``min``..``max`` in a generated
    profile, the compact EV's bits in an explicit one (mask 0: the field is ``init`` alone,
    OCP's fixed field)."""

    width: int
    init: int = 0
    min: int = 0
    max: int = 0
    mask: int = 0

    def check(self, where: str) -> None:
        full = (1 << self.width) - 1
        if not 1 <= self.width <= EV_BITS:
            raise ValueError(f"{where}.width: 1..{EV_BITS}, got {self.width}")
        if not 0 <= self.init <= full:
            raise ValueError(f"{where}.init: {self.init:#x} is wider than {self.width} bits")
        if self.mask < 0 or self.mask & ~full:
            raise ValueError(f"{where}.mask: {self.mask:#x} has bits outside the field's {self.width}")
        if self.mask == 0:
            return
        top = (1 << self.mask.bit_count()) - 1
        if not 0 <= self.min <= self.max <= top:
            raise ValueError(
                f"{where}: min {self.min:#x} .. max {self.max:#x} must be ordered and fit the mask's "
                f"{self.mask.bit_count()} bits (max {top:#x})"
            )

    @property
    def count(self) -> int:
        return 1 if self.mask == 0 else self.max - self.min + 1

    def values(self) -> list[int]:
        """Every value the field takes, in counter order."""
        if self.mask == 0:
            return [self.init]
        keep = self.init & ~self.mask
        return [keep | scatter(g, self.mask) for g in range(self.min, self.max + 1)]


@dataclass(frozen=True, slots=True)
class FieldDeny:
    """Deny EVs whose format field ``field`` lies in ``lo``..``hi`` (OCP denies by field
    value; a range is what an operator means by "links 180-255 do not exist"). Several
    rules deny the union; ``mask``/``value`` rules over the whole EV are the other kind."""

    field: int
    lo: int
    hi: int


@dataclass(frozen=True, slots=True)
class EvDeny:
    """A deny rule over whole EVs: every given key must match -- plane, T1, one EV value, a
    range of one format field's values (``field``, ``lo``..``hi``), or OCP's ``mask``/``value``.
    A connection's EVs that match are DENIED from the start (``EvProfile.deny``)."""

    plane: int | None = None
    t1: int | None = None
    ev: int | None = None
    field: int | None = None
    lo: int = 0
    hi: int = 0
    mask: int | None = None
    value: int = 0
    format: tuple[int, ...] = CONTRACT_FORMAT

    def matches(self, value: int) -> bool:
        return (
            (self.plane is None or ev_plane(value) == self.plane)
            and (self.t1 is None or ev_t1(value) == self.t1)
            and (self.ev is None or value == self.ev)
            and (self.field is None or self.lo <= field_values(value, self.format)[self.field] <= self.hi)
            and (self.mask is None or value & self.mask == self.value)
        )

    @property
    def field_only(self) -> bool:
        """Only a field range: a generated or explicit profile leaves these EVs out."""
        return (
            self.field is not None
            and self.plane is None
            and self.t1 is None
            and self.ev is None
            and (self.mask is None)
        )


@dataclass(frozen=True, slots=True)
class FieldProfile:
    """What OCP's EV profiles share: a format (field widths), the profile's fields over it
    and deny rules by field range. A field may be narrower than its format field (OCP: the
    extra high bits stay 0); a format may have more fields than the profile (those are 0).

    An OCP EV is *compact*: the bits the fields' masks take, first field first. ``expand``
    turns one into the 32-bit EV, as OCP's EV expansion does: each field pulls as many bits
    as its mask has from the top of the compact value and scatters them into the mask's
    set bits (lowest first) over ``init``; the fields follow each other, first field most
    significant.
    """

    format: tuple[int, ...] = CONTRACT_FORMAT
    fields: tuple[GenField, ...] = ()
    deny: tuple[FieldDeny, ...] = ()

    def _check(self, kind: str) -> None:
        check_format(self.format)
        if not self.fields:
            raise ValueError(f"{kind}: at least one field")
        if len(self.fields) > len(self.format):
            raise ValueError(f"{kind}: {len(self.fields)} fields but the format has {len(self.format)}")
        for i, (f, w) in enumerate(zip(self.fields, self.format, strict=False)):
            f.check(f"{kind}.fields[{i}]")
            if f.width > w:
                raise ValueError(f"{kind}.fields[{i}].width: {f.width}, wider than format[{i}] ({w} bits)")
        for i, d in enumerate(self.deny):
            if not 0 <= d.field < len(self.format):
                raise ValueError(
                    f"deny[{i}].field: {d.field} is not a field of the format (0..{len(self.format) - 1})"
                )
            top = (1 << self.format[d.field]) - 1
            if not 0 <= d.lo <= d.hi <= top:
                raise ValueError(
                    f"deny[{i}]: {d.lo}..{d.hi} is not a range within field {d.field} (0..{top})"
                )

    @property
    def bits(self) -> int:
        """Width of a compact EV: the set bits of every field's mask."""
        return sum(f.mask.bit_count() for f in self.fields)

    def shifts(self) -> list[int]:
        """Bit position of each format field's lowest bit in the 32-bit EV."""
        out = []
        pos = EV_BITS
        for w in self.format:
            pos -= w
            out.append(pos)
        return out

    def expand(self, compact: int) -> int:
        """The 32-bit EV of a compact one (see the class docstring)."""
        out = 0
        left = self.bits
        for f, shift in zip(self.fields, self.shifts(), strict=False):
            n = f.mask.bit_count()
            left -= n
            counter = compact >> left & ((1 << n) - 1)
            out |= ((f.init & ~f.mask) | scatter(counter, f.mask)) << shift
        return out

    def denied(self, value: int) -> bool:
        shifts = self.shifts()
        for d in self.deny:
            v = value >> shifts[d.field] & ((1 << self.format[d.field]) - 1)
            if d.lo <= v <= d.hi:
                return True
        return False


@dataclass(frozen=True, slots=True)
class GenProfile(FieldProfile):
    """A generated (GEN) EV profile: the EVs are every combination of the fields' values
    (each field's counter runs ``min``..``max``), first field outermost (the order the OCP
    example enumerates them), less the denied ones."""

    def __post_init__(self) -> None:
        self._check("generated")
        if self.count > MAX_PROFILE_EVS:
            raise ValueError(f"generated: {self.count} EVs, more than {MAX_PROFILE_EVS}")

    @property
    def count(self) -> int:
        """EVs generated before denial (OCP's ``ev_count``)."""
        n = 1
        for f in self.fields:
            n *= f.count
        return n

    @property
    def ev_count(self) -> int:
        return self.count

    def generate(self) -> Iterator[int]:
        """Every EV the profile generates and does not deny, in generation order."""
        shifts = self.shifts()
        columns = [[v << shifts[i] for v in f.values()] for i, f in enumerate(self.fields)]
        acc = [0]
        for col in columns:  # first field outermost: extend each prefix by every value
            acc = [a | c for a in acc for c in col]
        for v in acc:
            if not self.deny or not self.denied(v):
                yield v


@dataclass(frozen=True, slots=True)
class ExpProfile(FieldProfile):
    """An explicit (EXP) EV profile: the controller gives compact EVs, each expanded through
    the fields (``init`` and ``mask``; ``min``/``max`` are for generation and not used).
    Either a list (``values``) or, as OCP's explicit-range capability has it, the contiguous
    range ``base`` .. ``base + count - 1``. Without fields, every format field is taken
    whole (mask all ones): a compact EV is then the EV itself, right-aligned to the format."""

    values: tuple[int, ...] = ()
    base: int = 0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.fields:
            check_format(self.format)
            full = tuple(GenField(w, 0, 0, 0, (1 << w) - 1) for w in self.format)
            object.__setattr__(self, "fields", full)
        self._check("explicit")
        top = (1 << self.bits) - 1
        if bool(self.values) == bool(self.count):
            raise ValueError("explicit: either values (a list) or count (a range from base), not both")
        if self.values:
            if len(self.values) > MAX_PROFILE_EVS:
                raise ValueError(f"explicit.values: {len(self.values)} EVs, more than {MAX_PROFILE_EVS}")
            for i, v in enumerate(self.values):
                if not 0 <= v <= top:
                    raise ValueError(f"explicit.values[{i}]: {v:#x} is wider than the {self.bits} EV bits")
            if len(set(self.values)) != len(self.values):
                raise ValueError("explicit.values: an EV is listed twice")
            return
        if not 1 <= self.count <= MAX_PROFILE_EVS:
            raise ValueError(f"explicit.count: 1..{MAX_PROFILE_EVS}, got {self.count}")
        if not 0 <= self.base <= top or self.base + self.count - 1 > top:
            raise ValueError(
                f"explicit.base: {self.base:#x} + count {self.count} runs past the profile's "
                f"{self.bits} bits (last compact EV {top:#x})"
            )

    @property
    def ev_count(self) -> int:
        """EVs the profile lists before denial (OCP's ``ev_count``)."""
        return len(self.values) or self.count

    def compact(self) -> Iterator[int]:
        """The compact EVs, in the order given."""
        if self.values:
            yield from self.values
        else:
            yield from range(self.base, self.base + self.count)

    def generate(self) -> Iterator[int]:
        """Every EV of the profile, expanded, less the denied ones, in the order given."""
        for c in self.compact():
            v = self.expand(c)
            if not self.deny or not self.denied(v):
                yield v


_VALUES: dict[GenProfile | ExpProfile, tuple[int, ...]] = {}


def profile_values(profile: GenProfile | ExpProfile) -> tuple[int, ...]:
    """``tuple(profile.generate())``, kept for the next connection with the same profile (a
    fabric's every connection draws from it; 65,536 values take a while to enumerate)."""
    got = _VALUES.get(profile)
    if got is None:
        if len(_VALUES) >= 16:
            _VALUES.clear()
        got = _VALUES[profile] = tuple(profile.generate())
    return got


def field_values(value: int, widths: tuple[int, ...]) -> list[int]:
    """A 32-bit EV split into its format fields (the inverse of generation, for display)."""
    out = []
    pos = EV_BITS
    for w in widths:
        pos -= w
        out.append(value >> pos & ((1 << w) - 1))
    return out
