"""Per-EV counters kept as rows in three open-addressing tables: the same counts as one
record of all nine counters per EV, in less memory.

The core counts into rows (``Counters.sent_on``, ``recv_row``, ``mark``; a sent packet's
record keeps its row for ``delivered``); readers (the agent's EV table, the recording, the
report) see ``EvCounters`` views through ``ev`` and ``per_ev``. These tests drive both against
a plain model, and bound what a transfer's per-EV counters hold.
"""

from __future__ import annotations

import gc
import random
import sys

from mrc_host.core.counters import (
    EV_COUNTER_FIELDS,
    MARK_FIELDS,
    RECV_FIELDS,
    SENT_FIELDS,
    Counters,
    EvRows,
    RecvRow,
    SentRow,
)
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.scenario import SimConfig, Simulation


def _model_add(model: dict[int, dict[str, int]], ev: int, name: str, n: int) -> None:
    row = model.setdefault(ev, dict.fromkeys(EV_COUNTER_FIELDS, 0))
    row[name] += n


def test_slots_and_views_count_as_one_record_per_ev_would() -> None:
    for draw in range(30):
        rng = random.Random(draw)
        evs = [rng.getrandbits(32) for _ in range(rng.randint(1, 40))]
        c = Counters()
        model: dict[int, dict[str, int]] = {}
        held: dict[int, SentRow] = {}  # rows the "sender" kept (as a TxRecord keeps its EV's)
        for _ in range(400):
            ev = rng.choice(evs)
            n = rng.randint(0, 5000)
            op = rng.randrange(7)
            if op == 0:
                held[ev] = c.sent_on(ev, n)
                _model_add(model, ev, "data_packets_sent", 1)
                _model_add(model, ev, "data_bytes_sent", n)
            elif op == 1 and ev in held:
                held[ev].delivered += 1
                _model_add(model, ev, "packets_delivered", 1)
            elif op == 2:
                field = rng.randrange(len(MARK_FIELDS))
                c.mark(ev, field, n)
                _model_add(model, ev, MARK_FIELDS[field], n)
            elif op == 3:
                row = c.recv_row(ev)
                row.packets += 1
                row.bytes += n
                _model_add(model, ev, "data_packets_received", 1)
                _model_add(model, ev, "data_bytes_received", n)
            elif op == 4:  # a reader's write through a view
                name = rng.choice(EV_COUNTER_FIELDS)
                view = c.ev(ev)
                setattr(view, name, getattr(view, name) + n)
                _model_add(model, ev, name, n)
            elif op == 5:  # a reader's look: counted from now on, as ``ev`` always did
                assert {k: getattr(c.ev(ev), k) for k in EV_COUNTER_FIELDS} == model.get(
                    ev, dict.fromkeys(EV_COUNTER_FIELDS, 0)
                )
                _model_add(model, ev, "trims", 0)
            else:  # views taken earlier stay live
                views = c.per_ev
                assert list(views) == sorted(model)
                for k, view in views.items():
                    assert {f: getattr(view, f) for f in EV_COUNTER_FIELDS} == model[k]
        assert c.as_dict()["per_ev"] == {f"{k:08x}": model[k] for k in sorted(model)}
        assert list(c.as_dict())[-1] == "per_ev" and "_tx" not in c.as_dict()


def test_ev_rows_find_what_a_dict_finds() -> None:
    for draw in range(20):
        rng = random.Random(draw)
        rows = EvRows()
        model: dict[int, RecvRow] = {}
        # full-range EVs, and EVs alike but for their high bits (one path's entropy values)
        base = rng.getrandbits(32)
        pool = [rng.getrandbits(32) for _ in range(300)] + [(base & 0xFFFF) | (i << 16) for i in range(300)]
        pool += [0, 0xFFFFFFFF]
        for _ in range(rng.randint(1, 900)):
            ev = rng.choice(pool)
            if rng.random() < 0.5 and ev not in model:
                assert rows.find(ev) is None
                model[ev] = row = RecvRow(ev)
                row.bytes = ev
                rows.add(row)
            assert rows.find(ev) is model.get(ev)
        assert len(rows) == len(model) and sorted(r.ev for r in rows.rows()) == sorted(model)
        assert all(rows.find(ev) is row and rows.get(ev, "bytes") == ev for ev, row in model.items())
        assert all(rows.find(ev) is None and rows.get(ev, "packets") == 0 for ev in pool if ev not in model)


def test_the_tables_hold_every_field_once_and_bytes_past_32_bits() -> None:
    assert sorted(SENT_FIELDS + MARK_FIELDS + RECV_FIELDS) == sorted(EV_COUNTER_FIELDS)
    c = Counters()
    assert not c.per_ev and c.per_ev.get(5) is None
    big = 1 << 40
    c.sent_on(5, big)
    c.sent_on(5, big).delivered += 1
    assert c.ev(5).data_bytes_sent == 2 * big and c.per_ev[5].data_packets_sent == 2
    assert c.per_ev[5].packets_delivered == 1 and c.per_ev[5].data_packets_received == 0
    assert list(c.as_dict()["per_ev"]["00000005"]) == list(EV_COUNTER_FIELDS)  # the report's order


def _deep_size(root: object) -> int:
    """Bytes of ``root`` and everything it reaches (each object once; the interpreter's cached
    small integers are no one's)."""
    seen: set[int] = set()
    todo = [root]
    total = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type) or (type(obj) is int and -5 <= obj <= 256):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        todo.extend(gc.get_referents(obj))
    return total


def test_a_transfers_per_ev_counters_cost_little_a_peer_ev_least() -> None:
    """An object of nine counters an EV, in a dict by EV, cost 140-175 bytes with its key and
    entry at either end. Compiled, a receiver's peer EV is a row of 3 integers (48 bytes: no
    garbage-collector header) and a sender's EV one of 4 (64), each found by a table entry of
    12-24 bytes; 50-56 bytes an EV in the arrays the rows replaced, which cost a generic call
    a counter. Run as Python, a row's integers are objects of their own (~130 bytes an EV)."""
    from mrc_host.core import counters

    compiled = not (counters.__file__ or "").endswith(".py")
    cfg = SimConfig(shape=FabricShape(planes=2, t1=4), size=1 << 20, max_evs=64, payload="virtual")
    sim = Simulation(cfg)
    r = sim.run()
    assert r["completed"]
    empty = _deep_size(Counters())
    bounds = (72, 80) if compiled else (140, 150)
    for side, bound in zip((sim.conn.receiver, sim.conn.sender), bounds, strict=True):
        evs = side.counters.as_dict()["per_ev"]
        assert isinstance(evs, dict) and len(evs) >= 32
        per_ev = (_deep_size(side.counters) - empty) / len(evs)
        assert per_ev <= bound, (per_ev, len(evs))
    received = sim.conn.receiver.counters.as_dict()
    rows = received["per_ev"]
    assert isinstance(rows, dict)
    assert sum(v["data_packets_received"] for v in rows.values()) == received["data_packets_received"]
