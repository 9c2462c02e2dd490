"""Per-EV counters kept as slots in arrays: the same counts as one object per EV, less memory.

The core counts by slot (``Counters.sent_on``, ``tx_add``, ``rx_add``, ``ev_add``); readers
(the agent's EV table, the recording, the report) see ``EvCounters`` views through ``ev`` and
``per_ev``. These tests drive both against a plain model, and bound what a transfer's per-EV
counters hold.
"""

from __future__ import annotations

import gc
import random
import sys

from mrc_host.core.counters import (
    EV_COUNTER_FIELDS,
    MARK_FIELDS,
    RECV_BYTES,
    RECV_FIELDS,
    RECV_PACKETS,
    SENT_FIELDS,
    Counters,
    EvSlots,
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
        held: dict[int, int] = {}  # slots the "sender" kept (as a TxRecord keeps its EV's)
        for _ in range(400):
            ev = rng.choice(evs)
            n = rng.randint(0, 5000)
            op = rng.randrange(7)
            if op == 0:
                held[ev] = c.sent_on(ev, n)
                _model_add(model, ev, "data_packets_sent", 1)
                _model_add(model, ev, "data_bytes_sent", n)
            elif op == 1 and ev in held:
                c.delivered(held[ev])
                _model_add(model, ev, "packets_delivered", 1)
            elif op == 2:
                field = rng.randrange(len(MARK_FIELDS))
                c.mark(ev, field, n)
                _model_add(model, ev, MARK_FIELDS[field], n)
            elif op == 3:
                slot = c.recv_slot(ev)
                c.recv_add(slot, RECV_PACKETS, 1)
                c.recv_add(slot, RECV_BYTES, n)
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


def test_ev_slots_find_what_a_dict_finds() -> None:
    for draw in range(20):
        rng = random.Random(draw)
        slots = EvSlots(2)
        model: dict[int, int] = {}
        # full-range EVs, and EVs alike but for their high bits (one path's entropy values)
        base = rng.getrandbits(32)
        pool = [rng.getrandbits(32) for _ in range(300)] + [(base & 0xFFFF) | (i << 16) for i in range(300)]
        pool += [0, 0xFFFFFFFF]
        for _ in range(rng.randint(1, 900)):
            ev = rng.choice(pool)
            if rng.random() < 0.5:
                slot = slots.slot(ev)
                assert slot == model.setdefault(ev, len(model))
                slots.values[2 * slot + 1] = ev
            assert slots.find(ev) == model.get(ev, -1)
        assert len(slots) == len(model) and list(slots.evs) == list(model)
        assert len(slots.values) == 2 * len(model)
        assert all(slots.find(ev) == s and slots.get(ev, 1) == ev for ev, s in model.items())
        assert all(slots.find(ev) == -1 and slots.get(ev, 0) == 0 for ev in pool if ev not in model)


def test_the_tables_hold_every_field_once_and_bytes_past_32_bits() -> None:
    assert sorted(SENT_FIELDS + MARK_FIELDS + RECV_FIELDS) == sorted(EV_COUNTER_FIELDS)
    c = Counters()
    assert not c.per_ev and c.per_ev.get(5) is None
    big = 1 << 40
    c.sent_on(5, big)
    c.delivered(c.sent_on(5, big))
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
    entry at either end (compiled or not); a sender's EV now moves a slot of 3 counters (24
    bytes), a receiver's peer EV one of 2 (16), each found by an index entry of 12-20 bytes."""
    cfg = SimConfig(shape=FabricShape(planes=2, t1=4), size=1 << 20, max_evs=64, payload="virtual")
    sim = Simulation(cfg)
    r = sim.run()
    assert r["completed"]
    empty = _deep_size(Counters())
    for side, bound in ((sim.conn.receiver, 60), (sim.conn.sender, 70)):
        evs = side.counters.as_dict()["per_ev"]
        assert isinstance(evs, dict) and len(evs) >= 32
        per_ev = (_deep_size(side.counters) - empty) / len(evs)
        assert per_ev <= bound, (per_ev, len(evs))
    received = sim.conn.receiver.counters.as_dict()
    rows = received["per_ev"]
    assert isinstance(rows, dict)
    assert sum(v["data_packets_received"] for v in rows.values()) == received["data_packets_received"]


def test_ev_slots_add_after_a_miss_is_slot() -> None:
    """``add`` (the counting methods' path after ``find`` missed) makes the slot ``slot``
    would, across every growth of the table: each EV found at its own slot afterwards, its
    counters zero, none found twice."""
    for draw in range(10):
        rng = random.Random(draw)
        by_add, by_slot = EvSlots(3), EvSlots(3)
        evs = list(dict.fromkeys(rng.getrandbits(32) for _ in range(rng.randint(1, 600))))
        for i, ev in enumerate(evs):
            assert by_add.find(ev) == -1
            assert by_add.add(ev) == by_slot.slot(ev) == i
            by_add.values[3 * i + 2] = i + 1
        assert list(by_add.evs) == list(by_slot.evs) == evs
        assert by_add._table == by_slot._table  # the same placement, growth by growth
        assert all(by_add.find(ev) == i and by_add.get(ev, 0) == 0 for i, ev in enumerate(evs))
        assert all(by_add.get(ev, 2) == i + 1 for i, ev in enumerate(evs))
