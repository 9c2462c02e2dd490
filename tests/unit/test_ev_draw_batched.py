"""The EV draw reads the generator in batches (``ev_draw._deal``): it must give the values, and
leave the generator in the state, that drawing one EV at a time with ``randint`` would."""

from __future__ import annotations

import random

import pytest

from mrc_fabric.ev import ENTROPY_MASK, PLANE_SHIFT, T1_SHIFT
from mrc_host.core.config import EvProfile, Mode, TransportConfig
from mrc_host.core.ev_draw import EvDraw, PathSpace, draw


class _Subclass(random.Random):
    """A generator ``_words`` may not read in one call: asked once an output."""


class _Counting(random.Random):
    """Counts the bits it is asked for (a subclass: the draw must ask as ``randint`` would)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.asked: list[int] = []

    def getrandbits(self, k: int) -> int:
        self.asked.append(k)
        return super().getrandbits(k)


def _one_at_a_time(cfg: TransportConfig, paths: PathSpace, rng: random.Random) -> EvDraw:
    """The draw as it was written first: an EV at a time, ``randint`` for its entropy."""
    out = EvDraw([[] for _ in range(paths.planes)], [[] for _ in range(paths.planes)])
    per_plane = max(1, cfg.max_evs // paths.planes)
    profile = cfg.ev_profile
    seen: set[int] = set()

    def fresh(plane: int, t1: int) -> int:
        while True:
            v = (plane << PLANE_SHIFT) | (t1 << T1_SHIFT) | profile.entropy(rng.randint(0, ENTROPY_MASK))
            if v not in seen:
                seen.add(v)
                return v

    for plane in range(paths.planes):
        if cfg.mode is Mode.ECMP:
            out.active[plane] = [fresh(plane, 0) for _ in range(per_plane)]
            continue
        t1s = list(range(paths.t1_count))
        rng.shuffle(t1s)
        n = len(t1s)
        out.active[plane] = [fresh(plane, t1s[i % n]) for i in range(per_plane)]
        spare = range(per_plane, per_plane + cfg.backup_evs_per_plane)
        out.backup[plane] = [fresh(plane, t1s[i % n]) for i in spare]
    return out


def _shapes(seed: int) -> tuple[TransportConfig, PathSpace]:
    r = random.Random(seed)
    mask = r.choice([ENTROPY_MASK, ENTROPY_MASK, 0xFF, 0x3F])  # small masks: many repeats drawn again
    cfg = TransportConfig(
        mode=r.choice([Mode.MRC, Mode.MRC, Mode.ECMP]),
        max_evs=r.choice([1, 8, 64, 128, 256]),
        backup_evs_per_plane=r.choice([0, 4, 8]),
        ev_profile=EvProfile(entropy_mask=mask),
    )
    return cfg, PathSpace(r.choice([1, 2, 4]), r.choice([1, 3, 16, 64]))


@pytest.mark.parametrize("cls", [random.Random, _Subclass])
@pytest.mark.parametrize("seed", range(40))
def test_the_batched_draw_is_the_draw_one_ev_at_a_time(cls: type[random.Random], seed: int) -> None:
    cfg, paths = _shapes(seed)
    a, b = cls(seed), cls(seed)
    try:
        got = draw(cfg, paths, a)
    except ValueError as e:  # (too few entropy values for a path: refused before any draw)
        assert "distinct EVs a path needs" in str(e)
        return
    want = _one_at_a_time(cfg, paths, b)
    assert (got.active, got.backup) == (want.active, want.backup)
    assert a.getstate() == b.getstate()  # (what is drawn next from the stream is the same too)


def test_a_subclass_is_asked_as_randint_would_ask_it() -> None:
    cfg = TransportConfig(max_evs=128)
    a, b = _Counting(5), _Counting(5)
    draw(cfg, PathSpace(2, 16), a)
    _one_at_a_time(cfg, PathSpace(2, 16), b)
    assert a.asked == b.asked and a.asked.count(19) >= 136
