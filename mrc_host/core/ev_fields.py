"""EV profiles as the OCP MRC control API defines them: format fields, generation, denial.

Why: the OCP API (``mrc_ctl.h``) describes an EV not as one opaque number but as a list of
fields. A *format profile* gives the fields' widths in wire order (most significant first);
a *generated* (GEN) profile gives, per field, a width, an ``init`` value, the ``min``..``max``
range of a generated counter and a ``mask`` saying which bits of the field that counter
fills (its bits are scattered into the mask's set bits, lowest first, over ``init``); deny
rules then rule EVs out by field values. Operators use this to match EVs to the tiers of
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

EV_BITS: Final = 32
MAX_PROFILE_EVS: Final = 65_536  # the most EVs a profile may generate (OCP's example: 256 x 16 x 16)
CONTRACT_FORMAT: Final = (4, 10, 18)  # plane, T1, entropy: the EV layout of docs/design.md §3

__all__ = [
    "CONTRACT_FORMAT",
    "MAX_PROFILE_EVS",
    "FieldDeny",
    "GenField",
    "GenProfile",
    "check_format",
    "field_values",
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
    """One field of a generated profile: its value is ``init`` with the bits of ``mask``
    replaced by a counter running ``min``..``max`` (mask 0: the field is ``init`` alone)."""

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
class GenProfile:
    """A generated EV profile over a format: the EVs are every combination of the fields'
    values, first field outermost (the order the OCP example enumerates them), less the
    denied ones. The format may have more fields than the profile gives: those are 0."""

    format: tuple[int, ...] = CONTRACT_FORMAT
    fields: tuple[GenField, ...] = ()
    deny: tuple[FieldDeny, ...] = ()

    def __post_init__(self) -> None:
        check_format(self.format)
        if not self.fields:
            raise ValueError("generated: at least one field")
        if len(self.fields) > len(self.format):
            raise ValueError(f"generated: {len(self.fields)} fields but the format has {len(self.format)}")
        for i, (f, w) in enumerate(zip(self.fields, self.format, strict=False)):
            f.check(f"generated.fields[{i}]")
            if f.width != w:
                raise ValueError(f"generated.fields[{i}].width: {f.width}, but format[{i}] is {w} bits")
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
        if self.count > MAX_PROFILE_EVS:
            raise ValueError(f"generated: {self.count} EVs, more than {MAX_PROFILE_EVS}")

    @property
    def count(self) -> int:
        """EVs generated before denial (OCP's ``ev_count``)."""
        n = 1
        for f in self.fields:
            n *= f.count
        return n

    def shifts(self) -> list[int]:
        """Bit position of each format field's lowest bit in the 32-bit EV."""
        out = []
        pos = EV_BITS
        for w in self.format:
            pos -= w
            out.append(pos)
        return out

    def denied(self, value: int) -> bool:
        shifts = self.shifts()
        for d in self.deny:
            v = value >> shifts[d.field] & ((1 << self.format[d.field]) - 1)
            if d.lo <= v <= d.hi:
                return True
        return False

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


def field_values(value: int, widths: tuple[int, ...]) -> list[int]:
    """A 32-bit EV split into its format fields (the inverse of generation, for display)."""
    out = []
    pos = EV_BITS
    for w in widths:
        pos -= w
        out.append(value >> pos & ((1 << w) - 1))
    return out
