"""The bytes a simulated connection writes (interpreted on purpose: ``bytes.translate`` as
compiled by mypyc runs several times slower than CPython's own)."""

from __future__ import annotations

import io
import random
from typing import Final


def payload_pattern(seed: int, index: int, size: int) -> bytes:
    """``size`` deterministic bytes in which every aligned 8-byte word differs from every
    other (a misplaced packet shows).

    Blocks of ``_BLOCK_WORDS`` words: word i of block j is i in its two low bytes (base 128)
    and a seeded 48-bit start plus j in its six high bytes. A block is one ``translate`` of a
    template whose high bytes hold the placeholders 128..133, so the pattern costs one pass
    in C over fresh memory and needs no numpy (whose import was a fifth of a short run).
    """
    start = random.Random(f"mrc-sim {seed} {index}").getrandbits(48)  # (hashlib would load OpenSSL)
    template = _template()
    out = io.BytesIO()
    done = j = 0
    while done < size:
        high = ((start + j) & 0xFFFF_FFFF_FFFF).to_bytes(6, "little")
        block = template.translate(_LOW_BYTES + high + _REST)
        out.write(block if size - done >= len(block) else block[: size - done])
        done += len(block)
        j += 1
    return out.getvalue()


_BLOCK_WORDS: Final = 1 << 12  # 32 KiB blocks (the two low bytes count to 2**14 in base 128)
_LOW_BYTES: Final = bytes(range(128))  # the translation keeps bytes 0..127
_REST: Final = bytes(122)  # 134..255 never occur in the template
_TEMPLATES: list[bytes] = []


def _template() -> bytes:
    if not _TEMPLATES:
        high = bytes(range(128, 134))
        _TEMPLATES.append(b"".join(bytes((i & 0x7F, i >> 7)) + high for i in range(_BLOCK_WORDS)))
    return _TEMPLATES[0]
