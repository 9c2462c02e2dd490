"""The bytes a simulated connection writes (interpreted on purpose: ``bytes.translate`` as
compiled by mypyc runs several times slower than CPython's own)."""

from __future__ import annotations

import random
from typing import Final


def payload_pattern(seed: int, index: int, size: int) -> bytes:
    """``size`` deterministic bytes in which every aligned 8-byte word differs from every
    other (a misplaced packet shows): ``pattern_segments`` joined."""
    return b"".join(pattern_segments(seed, index, size))


def pattern_segments(seed: int, index: int, size: int) -> list[memoryview]:
    """The pattern of ``size`` bytes as the gather list a simulated connection posts: up to
    eight read-only views of one source, in order, none of them empty.

    Why it is built this way: the pattern is as large as the write, and in CPython work per
    byte (``translate``) costs several instructions a byte where a copy costs a fraction of
    one. So only an eighth of the bytes are made one by one: a *source* of L + 7 bytes in which the
    8-byte windows at every offset differ (``_source``), and the pattern is eight copies of
    it, the c-th starting at offset c. The aligned words of copy c are the source's windows
    at offsets c, c + 8, c + 16, ..., so over the eight copies each window appears once.
    Posted as views of the source (``PendingWrite``), the copies are never made: joined, a
    64 MiB pattern was 64 MiB of fresh pages for the kernel to clear and fill, 45-50 ms of a
    0.3 s run on a VM (now 11-16 ms for the source).
    """
    length = -(-size // 64) * 8  # L: the eight copies of L bytes cover size
    source = memoryview(_source(seed, index, length + 7)).toreadonly()
    counts = [min(length, max(size - c * length, 0)) for c in range(8)]
    return [source[c : c + n] for c, n in enumerate(counts) if n]


# The source is a run of 4-byte units, unit k = (first byte 0x80 | k's 7 low bits, then k's
# next 6 bits, then two 7-bit bytes of the rest). Only a unit's first byte has its top bit
# set, so where those bytes sit in a window says its offset modulo 4, and the whole unit the
# window holds then says which unit it is: windows at different offsets differ while the
# units do (2**27 of them, a 4 GiB pattern). Units come in blocks of 8,192 sharing their
# last two bytes: a template of the first two bytes of each (its last two zero) is copied
# per block, then every fourth byte from the third and from the fourth is set to the
# block's (two strided slice assignments: a C loop a byte, a third cheaper than translating
# the whole block through a table).
_BLOCK_UNITS: Final = 1 << 13
_UNIT_BITS: Final = 27
_TEMPLATES: list[bytes] = []


def _source(seed: int, index: int, size: int) -> bytearray:
    """``size`` bytes (at most 2**29) whose 8-byte windows at every offset differ."""
    units = -(-size // 4)
    if units > 1 << _UNIT_BITS:
        raise ValueError(f"a payload pattern of {size} source bytes is more than 2**27 units")
    rng = random.Random(f"mrc-sim {seed} {index}")  # (hashlib would load OpenSSL)
    first = rng.getrandbits(_UNIT_BITS - 13)  # the first block's number: connections differ
    template = _template()
    out = bytearray(4 * units)
    for j in range(-(-units // _BLOCK_UNITS)):
        block = (first + j) & ((1 << (_UNIT_BITS - 13)) - 1)
        at = j * len(template)
        end = min(len(out), at + len(template))
        out[at:end] = template if end - at == len(template) else template[: end - at]
        count = (end - at) // 4  # the block's units (whole: out is 4 * units long)
        out[at + 2 : end : 4] = bytes((block & 0x7F,)) * count
        out[at + 3 : end : 4] = bytes((block >> 7,)) * count
    del out[size:]
    return out


def _template() -> bytes:
    if not _TEMPLATES:
        _TEMPLATES.append(b"".join(bytes((0x80 | (m & 0x7F), m >> 7, 0, 0)) for m in range(_BLOCK_UNITS)))
    return _TEMPLATES[0]
