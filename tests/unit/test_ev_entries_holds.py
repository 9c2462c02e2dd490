"""``ev_entries.holds`` and ``made_in_order``: EVs drawn but not yet made are found by a search
of the drawn values' bytes, which must answer exactly as ``in`` on the array (and a lookup
of each value, in order) would."""

from __future__ import annotations

import random
import sys
from array import array

import pytest

from mrc_host.core.ev_entries import EvEntry, holds, made_in_order


def test_a_match_across_two_items_is_no_hit() -> None:
    """Fails where the byte search takes any match: the bytes of two neighbours hold, off
    their boundaries, the bytes of a value that is not drawn."""
    values = array("I", [0x11223344, 0x55667788, 0x99AABBCC])
    data = values.tobytes()
    for off in range(1, len(data) - 4):
        if off % 4:
            straddling = int.from_bytes(data[off : off + 4], sys.byteorder)
            assert straddling not in values and not holds(values, straddling)
    assert all(holds(values, v) for v in values)
    assert not holds(array("I"), 0) and holds(array("I", [0]), 0)


@pytest.mark.parametrize("seed", range(5))
def test_holds_answers_as_in(seed: int) -> None:
    """Values whose bytes repeat (so that matches off the item boundaries are common), the
    first, last and middle items, misses, 0 and 2**32 - 1."""
    rng = random.Random(seed)
    for _ in range(2_000):
        values = [
            rng.choice((rng.randrange(1 << 32), rng.randrange(256) * 0x01010101, rng.randrange(1 << 16) << 8))
            for _ in range(rng.randrange(40))
        ]
        arr = array("I", values)
        probes = values[:1] + values[-1:] + values[len(values) // 2 :][:1]
        probes += [rng.randrange(1 << 32), rng.randrange(256) * 0x01010101, rng.randrange(1 << 24) << 4]
        probes += [0, (1 << 32) - 1]
        for v in probes:
            assert holds(arr, v) == (v in arr)


@pytest.mark.parametrize("seed", range(5))
def test_made_in_order_is_each_value_looked_up_in_turn(seed: int) -> None:
    """Few made (the byte search) and many (the lookups), with made EVs that are not among
    the values, over 32 bits or negative; the entries come back in the values' order."""
    rng = random.Random(seed)
    for _ in range(300):
        values = array("I", rng.sample(range(1 << 32), rng.randrange(1, 130)))
        keys = rng.sample(list(values), rng.randrange(min(len(values), 40) + 1))
        keys += [rng.randrange(1 << 32) for _ in range(rng.randrange(3))] + [1 << 32, -1][: rng.randrange(3)]
        rng.shuffle(keys)
        made = {k: EvEntry(k & 0xFFFF_FFFF, 0, 0) for k in keys}
        assert made_in_order(made, values) == [made[v] for v in values if v in made]
