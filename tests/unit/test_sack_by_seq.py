"""The receiver's SACK-per-PSN arrays behave exactly as the dict they replaced."""

from __future__ import annotations

import random

import pytest

from mrc_host.core.ack_echo import SackSent
from mrc_host.core.sack_by_seq import SackBySeq


def same(got: SackSent | None, want: SackSent | None) -> bool:
    """The same record: both None, or the same EV and send time."""
    if got is None or want is None:
        return got is want
    return (got.ev, got.sent_ns) == (want.ev, want.sent_ns)


@pytest.mark.parametrize("seed", range(8))
def test_it_answers_as_a_dict_of_seq_to_record_would(seed: int) -> None:
    """Records set in batches a little out of order, some set twice, popped (held or not,
    below and above what is held), and trimmed below a floor as the receiver does."""
    rng = random.Random(seed)
    table, model = SackBySeq(), dict[int, SackSent]()
    expected = rng.randrange(1 << 24)
    for step in range(3000):
        op = rng.random()
        if op < 0.6:
            sent = SackSent(rng.randrange(1 << 16), step)
            batch = [expected + rng.randrange(-2, 6) for _ in range(rng.randrange(1, 4))]
            for s in batch:
                table.set(s, sent)
                model[s] = sent
            expected += rng.randrange(0, 4)
        elif op < 0.85:
            s = expected + rng.randrange(-300, 20)
            assert same(table.get(s), model.get(s))
            assert same(table.pop(s), model.pop(s, None))
        else:
            floor = expected - rng.randrange(0, 200)
            table.keep_from(floor)
            model = {s: e for s, e in model.items() if s >= floor}
        assert len(table) == len(model)
    assert all(same(table.get(s), e) for s, e in model.items())


@pytest.mark.parametrize("seed", range(8))
def test_set_all_answers_as_setting_each_would(seed: int) -> None:
    """``set_all`` against the dict: runs that follow on, runs with a gap or an overlap, out-of-order and
    repeated PSNs, an empty batch, pops and trims in between."""
    rng = random.Random(seed)
    table, model = SackBySeq(), dict[int, SackSent]()
    top = rng.randrange(1 << 24)  # one past the highest PSN set so far
    for step in range(3000):
        op = rng.random()
        if op < 0.6:
            sent = SackSent(rng.randrange(1 << 32), step * 1_000_003)
            k = rng.randrange(0, 10)
            shape = rng.random()
            if shape < 0.6:  # the run right after the last held (or a gap / overlap before it)
                start = top + (0 if shape < 0.4 else rng.randrange(-3, 4))
                batch = list(range(start, start + k))
            else:  # any order, repeats
                batch = [top + rng.randrange(-5, 8) for _ in range(k)]
            table.set_all(batch, sent)
            for s in batch:
                model[s] = sent
            top = max([top, *(s + 1 for s in batch)])
        elif op < 0.85:
            s = top + rng.randrange(-300, 5)
            assert same(table.get(s), model.get(s))
            assert same(table.pop(s), model.pop(s, None))
        else:
            floor = top - rng.randrange(0, 200)
            table.keep_from(floor)
            model = {s: e for s, e in model.items() if s >= floor}
        assert len(table) == len(model)
    assert all(same(table.get(s), e) for s, e in model.items())


@pytest.mark.parametrize("gap", [1, 2, 4, 5, 40])
def test_a_gap_short_or_long_holds_nothing_until_set(gap: int) -> None:
    """A PSN set ``gap`` past the next (out of order; short gaps are appended a PSN at a time,
    long ones at once): the PSNs skipped hold nothing, count nothing, and are set later."""
    table = SackBySeq()
    table.set(100, SackSent(7, 1))
    table.set(101 + gap, SackSent(8, 2))
    assert len(table) == 2
    assert all(table.get(s) is None for s in range(101, 101 + gap))
    assert same(table.get(101 + gap), SackSent(8, 2))
    for s in range(101, 101 + gap):
        table.set(s, SackSent(9, s))
    assert len(table) == 2 + gap
    assert all(same(table.get(s), SackSent(9, s)) for s in range(101, 101 + gap))
    table.set(103 + gap, SackSent(10, 3))  # (one more gap after the filled one)
    assert table.get(102 + gap) is None and len(table) == 3 + gap


@pytest.mark.parametrize("gap", [0, 1, 15, 16, 17, 200])
def test_records_across_the_spare_tail_answer_as_the_dict(gap: int) -> None:
    """The arrays grow ahead of use and slots are then written in place: PSNs set in order
    (singly and in runs) across several growths, one ``gap`` past the last (inside the spare
    tail or beyond it), a trim of everything held, and a PSN below the floor after it, each
    answer as the dict would; a slot of the spare tail never reads as held."""
    table, model = SackBySeq(), dict[int, SackSent]()
    s = 1000
    while s < 1300:  # (batches of 1 to 7 PSNs: one at a time, or a run at once)
        batch = list(range(s, min(s + 1 + s % 7, 1300)))
        table.set_all(batch, SackSent(s, s * 3))
        model.update((b, SackSent(s, s * 3)) for b in batch)
        s = batch[-1] + 1
    far = 1300 + gap
    table.set(far, SackSent(1, 2))
    model[far] = SackSent(1, 2)
    assert len(table) == len(model)
    assert all(same(table.get(s), model.get(s)) for s in range(990, far + 300))
    table.keep_from(far + 1)  # (everything held goes)
    assert len(table) == 0 and table.get(far) is None
    table.set(far - 5, SackSent(3, 4))  # (the next set, below the old floor, starts afresh)
    table.set(far - 7, SackSent(5, 6))  # (and one below that: room at the front)
    assert len(table) == 2
    assert same(table.get(far - 5), SackSent(3, 4)) and same(table.get(far - 7), SackSent(5, 6))
    assert table.get(far - 6) is None and table.get(far - 4) is None and table.get(far + 40) is None


def test_runs_alone_then_single_psns_answer_as_the_dict() -> None:
    """Runs of 8 alone (appended: no spare room is made), trimmed as the receiver trims, then
    single PSNs (room made ahead) and runs again (stored in that room)."""
    table, model = SackBySeq(), dict[int, SackSent]()
    top = 50
    for step in range(400):
        k = 8 if step < 150 or step >= 300 else 1
        batch = list(range(top, top + k))
        table.set_all(batch, SackSent(step, step * 7))
        model.update((s, SackSent(step, step * 7)) for s in batch)
        top += k
        if len(table) > 256:
            table.keep_from(top - 64)
            model = {s: e for s, e in model.items() if s >= top - 64}
        assert len(table) == len(model)
    assert all(same(table.get(s), model.get(s)) for s in range(top - 400, top + 40))
