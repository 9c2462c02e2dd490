"""Which EVs a connection draws: the path space the fabric offers and the draw itself.

An EV names a path: plane (NIC port) + T1 (T0 uplink) + entropy (only hashed in the
ECMP baseline). Each connection draws its EVs once (``draw``): ``max_evs`` (default 128)
split equally across planes, whatever the number of paths -- several EVs per (plane, T1)
path when paths are fewer, differing in their entropy bits -- plus a backup set per plane.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mrc_fabric.ev import ENTROPY_BITS, ENTROPY_MASK, EV, PLANE_SHIFT, T1_SHIFT

from .config import Mode, TransportConfig

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


def _entropy(rng: random.Random) -> int:
    """``rng.randint(0, ENTROPY_MASK)``, the same draw from the same stream, without its four
    Python calls (a 64-host all-to-all draws a million EVs)."""
    r = rng.getrandbits(ENTROPY_BITS + 1)
    while r > ENTROPY_MASK:
        r = rng.getrandbits(ENTROPY_BITS + 1)
    return r


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

    def fresh(plane: int, t1: int) -> int:
        # (plane and T1 are in range: PathSpace checked them; entropy() keeps its 18 bits)
        while True:
            # mrc_fabric.ev's ev_compose, inline: a big simulation draws a million EVs
            v = (plane << PLANE_SHIFT) | (t1 << T1_SHIFT) | profile.entropy(_entropy(rng))
            if v not in seen:
                seen.add(v)
                return v

    for plane in range(paths.planes):
        if cfg.mode is Mode.ECMP:
            # same number of EVs as MRC would use, but the T1 is left to the switches' hash
            out.active[plane] = [fresh(plane, 0) for _ in range(per_plane)]
            continue
        t1s = list(range(paths.t1_count))
        rng.shuffle(t1s)
        n = len(t1s)
        out.active[plane] = [fresh(plane, t1s[i % n]) for i in range(per_plane)]
        spare = range(per_plane, per_plane + cfg.backup_evs_per_plane)
        out.backup[plane] = [fresh(plane, t1s[i % n]) for i in spare]
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
