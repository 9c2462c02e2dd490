"""Which EVs a connection draws: the path space the fabric offers and the draw itself.

An EV names a path: plane (NIC port) + T1 (T0 uplink) + entropy (only hashed in the
ECMP baseline). Each connection draws its EVs once (``draw``): ``max_evs`` (default 128)
split equally across planes, whatever the number of paths -- several EVs per (plane, T1)
path when paths are fewer, differing in their entropy bits -- plus a backup set per plane.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from mrc_fabric.ev import ENTROPY_BITS, ENTROPY_MASK, EV, PLANE_SHIFT, T1_SHIFT

from .config import EvProfile, Mode, TransportConfig

if TYPE_CHECKING:  # imported by _generated: a connection without a profile never loads it
    from .ev_fields import ExpProfile, GenProfile

__all__ = ["EvDraw", "PathSpace", "draw"]


@dataclass(frozen=True, slots=True)
class PathSpace:
    """What the fabric offers between two NIC sets: planes, and T1 choices per plane.

    ``t1_count`` is 1 when both hosts hang off the same T0 (one path per plane).
    """

    planes: int
    t1_count: int

    def __post_init__(self) -> None:
        if not 1 <= self.planes <= 16 or not 1 <= self.t1_count <= 1024:
            raise ValueError(f"path space planes={self.planes} t1_count={self.t1_count} out of range")


class EvDraw:
    """The EVs drawn, per plane: those in the rotation and the backups."""

    def __init__(self, active: list[list[int]], backup: list[list[int]]) -> None:
        self.active = active
        self.backup = backup
        self.distinct = False  # every value known distinct (drawn so): no need to check again


_DRAW_BITS: Final = ENTROPY_BITS + 1  # bits of one entropy draw (``randint``'s, see ``_deal``)
# one 32-bit output of the generator per getrandbits(k <= 32) call, as a big draw's 32-bit words
_WORDS_AT_ONCE: Final = sys.byteorder == "little"


def _deal(
    rng: random.Random, plane: int, t1s: list[int], count: int, profile: EvProfile, seen: set[int]
) -> list[int]:
    """``count`` distinct EVs of ``plane``, the i-th on T1 ``t1s[i % len(t1s)]``, each with
    ``profile.entropy(rng.randint(0, ENTROPY_MASK))`` as its entropy, drawn again while the EV
    is in ``seen`` (and added to it). The same values from the same stream as those calls one
    EV at a time, for less: ``randint`` takes ``getrandbits(ENTROPY_BITS + 1)`` until one is at
    most the mask (about two draws an EV), each one 32-bit output of the generator shifted;
    ``_words`` takes as many outputs in one call as EVs are still wanted (each takes at least
    one, so the stream is never read past where the calls one at a time would stop). Drawn
    one by one, through a closure and two Python calls, the 136 EVs of an endpoint cost about
    320 k instructions compiled (5.5 % of the 128-host permutation)."""
    out: list[int] = []
    n = len(t1s)
    base = plane << PLANE_SHIFT
    words = b""
    w = 0
    while len(out) < count:
        if w == len(words):
            words = _words(rng, count - len(out))
            w = 0
        r = (words[w] | words[w + 1] << 8 | words[w + 2] << 16 | words[w + 3] << 24) >> (32 - _DRAW_BITS)
        w += 4
        if r > ENTROPY_MASK:
            continue  # (randint's rejection: the next output)
        # mrc_fabric.ev's ev_compose, inline: a big simulation draws a million EVs
        v = base | (t1s[len(out) % n] << T1_SHIFT) | profile.entropy(r)
        if v not in seen:
            seen.add(v)
            out.append(v)
    return out


def _words(rng: random.Random, m: int) -> bytes:
    """The generator's next ``m`` 32-bit outputs, little-endian, as ``m`` calls of
    ``getrandbits(k)`` for any k up to 32 would read them (each such call is one output shifted
    right by 32 - k). A ``random.Random`` itself gives them in one ``getrandbits(32 * m)``, least
    significant word first; any other generator (a subclass may draw otherwise) is asked for
    ``randint``'s bits once an output. Bytes, not a list: compiled, reading a byte is native
    where a list of the words made an integer object of each."""
    if _WORDS_AT_ONCE and type(rng) is random.Random:
        big = rng.getrandbits(32 * m)
    else:
        getrandbits = rng.getrandbits
        big = 0
        for i in range(m):
            big |= getrandbits(_DRAW_BITS) << (32 * i + 32 - _DRAW_BITS)
    return big.to_bytes(4 * m, "little")


def draw(cfg: TransportConfig, paths: PathSpace, rng: random.Random) -> EvDraw:
    """Draw a connection's EVs (see module docstring); deterministic for a seeded ``rng``.

    Within a plane the T1s are shuffled and dealt round-robin, so the EVs cover every path
    as evenly as their number allows; backups continue the deal (so they start on paths
    the actives cover least). Every EV value is distinct.
    """
    out = EvDraw([[] for _ in range(paths.planes)], [[] for _ in range(paths.planes)])
    if cfg.mode is Mode.SINGLE_PATH:
        plane = rng.randrange(paths.planes)
        out.active[plane].append(EV(plane, rng.randrange(paths.t1_count), rng.randint(0, ENTROPY_MASK)).value)
        return out
    per_plane = max(1, cfg.max_evs // paths.planes)
    profile = cfg.ev_profile
    if profile.explicit:
        return _explicit(profile.explicit, per_plane, cfg.backup_evs_per_plane, paths)
    if profile.generated is not None:
        return _generated(profile.generated, cfg, per_plane, paths, rng)
    if profile.fielded is not None:
        return _generated(profile.fielded, cfg, per_plane, paths, rng)
    seen: set[int] = set()
    wanted = -(-(per_plane + cfg.backup_evs_per_plane) // (1 if cfg.mode is Mode.ECMP else paths.t1_count))
    if wanted > 1 << profile.entropy_mask.bit_count():
        raise ValueError(
            f"entropy_mask {profile.entropy_mask:#x} gives {1 << profile.entropy_mask.bit_count()} "
            f"values per path, fewer than the {wanted} distinct EVs a path needs"
        )

    for plane in range(paths.planes):
        if cfg.mode is Mode.ECMP:
            # same number of EVs as MRC would use, but the T1 is left to the switches' hash
            out.active[plane] = _deal(rng, plane, [0], per_plane, profile, seen)
            continue
        t1s = list(range(paths.t1_count))
        rng.shuffle(t1s)
        dealt = _deal(rng, plane, t1s, per_plane + cfg.backup_evs_per_plane, profile, seen)
        out.active[plane] = dealt[:per_plane]
        out.backup[plane] = dealt[per_plane:]
    out.distinct = True  # (``seen``)
    return out


def _explicit(values: tuple[int, ...], per_plane: int, backups: int, paths: PathSpace) -> EvDraw:
    """An explicit EV list: per plane, in the order given, actives first, then backups."""
    out = EvDraw([[] for _ in range(paths.planes)], [[] for _ in range(paths.planes)])
    for v in values:
        ev = EV.decode(v)
        if ev.plane >= paths.planes or ev.t1 >= paths.t1_count:
            raise ValueError(f"explicit EV {v:08x}: plane {ev.plane} T1 {ev.t1} is outside {paths}")
        if len(out.active[ev.plane]) < per_plane:
            out.active[ev.plane].append(v)
        elif len(out.backup[ev.plane]) < backups:
            out.backup[ev.plane].append(v)
    for plane, evs in enumerate(out.active):
        if not evs:
            raise ValueError(f"explicit: no EV on plane {plane} (deny a plane's EVs to leave it unused)")
    return out


def _generated(
    gen: GenProfile | ExpProfile, cfg: TransportConfig, per_plane: int, paths: PathSpace, rng: random.Random
) -> EvDraw:
    """EVs from an OCP generated or explicit profile: of the values it has (less its denials)
    those that name a plane and T1 this fabric has, dealt per plane over the T1s as evenly
    as they allow (shuffled T1 order, a random value of each path in turn), actives first.
    In ECMP mode the T1 bits are the switches' business: every value of the plane counts."""
    from .ev_fields import GenProfile, profile_values

    by_path: dict[tuple[int, int], list[int]] = {}
    for v in profile_values(gen):
        ev = EV.decode(v)
        if ev.plane < paths.planes and (cfg.mode is Mode.ECMP or ev.t1 < paths.t1_count):
            by_path.setdefault((ev.plane, 0 if cfg.mode is Mode.ECMP else ev.t1), []).append(v)
    out = EvDraw([[] for _ in range(paths.planes)], [[] for _ in range(paths.planes)])
    for plane in range(paths.planes):
        pools = [by_path[k] for k in sorted(by_path) if k[0] == plane]
        if not pools:
            raise ValueError(
                f"{'generated' if isinstance(gen, GenProfile) else 'explicit'}: no EV of the profile names "
                f"plane {plane} with a T1 below {paths.t1_count} (of {gen.ev_count})"
            )
        rng.shuffle(pools)
        for pool in pools:
            rng.shuffle(pool)
        dealt: list[int] = []
        want = per_plane + cfg.backup_evs_per_plane
        while len(dealt) < want and any(pools):
            for pool in pools:
                if pool and len(dealt) < want:
                    dealt.append(pool.pop())
        out.active[plane] = dealt[:per_plane]
        out.backup[plane] = dealt[per_plane:]
    return out
