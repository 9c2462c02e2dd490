"""A sent packet's life has one owner and one table (issue 65, item 1).

``packet_state.TRANSITIONS`` says which events each state allows and where they lead;
``SentPackets`` (sent.py) is the only code that changes a ``TxRecord``'s state, and every
change goes through the table. Checked three ways: the table's own function against the
table, every method of ``SentPackets`` driven from every state against it (allowed: the new
state and the containers that go with it; refused: ``PacketTransitionError``, nothing
changed), and the sources (no other module writes a packet's state or reaches into another
class's private fields). On main, the flags ``lost``, ``gap_lost`` and ``sacked`` were
written in acks.py, recovery.py and sender.py, and ``rto_dead_planes`` read
``recovery._plane_evidence``: the source checks fail there.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest

from mrc_host.core import TransportConfig
from mrc_host.core import packet_state as ps
from mrc_host.core.records import TxRecord
from mrc_host.core.sent import SentPackets
from mrc_host.core.writes import WriteQueue
from mrc_host.wire.messages import Opcode

CORE = Path(__file__).resolve().parents[2] / "mrc_host" / "core"
STATES = list(ps.STATE_NAMES)
EVENTS = list(ps.EVENT_NAMES)
PLANE1 = 1 << 28


def test_next_state_is_the_table_and_refuses_everything_else() -> None:
    for state in STATES:
        for event in EVENTS:
            new = ps.TRANSITIONS[state].get(event)
            assert ps.allowed(state, event) is (new is not None)
            if new is None:
                with pytest.raises(ps.PacketTransitionError, match=ps.EVENT_NAMES[event]):
                    ps.next_state(state, event)
            else:
                assert ps.next_state(state, event) == new
    for bogus in (3, 7, 9, 15):  # not a state: every event refused
        assert all(not ps.allowed(bogus, e) for e in EVENTS)
        with pytest.raises(ps.PacketTransitionError):
            ps.next_state(bogus, ps.SEND)


def test_the_table_reads_as_the_life_cycle_says() -> None:
    """in flight -> guessed lost -> resent -> acked; a guess withdrawn by a trim; done."""
    t = ps.TRANSITIONS
    assert t[ps.UNSENT][ps.SEND] == ps.IN_FLIGHT
    assert t[ps.IN_FLIGHT][ps.GUESS] == ps.GUESSED and t[ps.GUESSED][ps.SEND] == ps.RESENT
    assert t[ps.RESENT][ps.ACK] == ps.ACKED and t[ps.ACKED][ps.CUMULATIVE] == ps.DONE
    assert t[ps.IN_FLIGHT][ps.KNOWN_LOSS] == ps.LOST and t[ps.LOST][ps.SEND] == ps.IN_FLIGHT
    assert t[ps.RESENT][ps.GUESS_TRIMMED] == ps.IN_FLIGHT and t[ps.GUESSED][ps.GUESS_TRIMMED] == ps.LOST
    assert t[ps.DONE] == {}  # nothing moves a packet that is done
    assert all(ps.CUMULATIVE not in t[s] for s in STATES if s != ps.ACKED)  # only what a SACK acked
    assert all(ps.SEND not in t[s] for s in STATES if not s & ps.QUEUED_BIT and s != ps.UNSENT)
    # the bits the loss rules read
    for state in STATES:
        rec = _record()
        rec.state = state
        assert rec.lost is (state in (ps.LOST, ps.GUESSED))
        assert rec.gap_lost is (state in (ps.RESENT, ps.GUESSED))
        assert rec.sacked is (state == ps.ACKED)


def _record(seq: int = 0) -> TxRecord:
    from mrc_host.core.records import PendingWrite

    return TxRecord(seq, PendingWrite(1, [], 0, 0), 0, b"x" * 100, Opcode.WRITE_MIDDLE)


def _packets() -> SentPackets:
    return SentPackets(TransportConfig(), [0, 0])


# how to bring a fresh packet (seq 0 of its own SentPackets) into each state, by the owner's
# own methods: (packets, record)
def _in(state: int) -> tuple[SentPackets, TxRecord]:
    packets = _packets()
    writes = WriteQueue()
    writes.post(writes.new_id(), b"y" * 100, 0, 1, 100)
    rec = writes.cut(writes.head(), 100, packets)
    steps: dict[int, list[Callable[[], object]]] = {
        ps.UNSENT: [],
        ps.IN_FLIGHT: [lambda: packets.sent(rec, 5, 10)],
        ps.GUESSED: [lambda: packets.sent(rec, 5, 10), lambda: packets.guessed_lost(rec)],
        ps.RESENT: [
            lambda: packets.sent(rec, 5, 10),
            lambda: packets.guessed_lost(rec),
            lambda: packets.sent(rec, PLANE1 | 5, 20),
        ],
        ps.LOST: [lambda: packets.sent(rec, 5, 10), lambda: packets.known_lost(rec)],
        ps.ACKED: [lambda: packets.sent(rec, 5, 10), lambda: packets.acked(rec)],
        ps.DONE: [lambda: packets.sent(rec, 5, 10), lambda: packets.acked(rec), lambda: packets.passed(1)],
    }
    for step in steps[state]:
        step()
    assert rec.state == state
    return packets, rec


# each event, as the owner's method that makes it
EVENT_METHODS: dict[int, Callable[[SentPackets, TxRecord], object]] = {
    ps.SEND: lambda p, r: p.sent(r, PLANE1 | 7, 30),
    ps.GUESS: lambda p, r: p.guessed_lost(r),
    ps.KNOWN_LOSS: lambda p, r: p.known_lost(r),
    ps.ACK: lambda p, r: p.acked(r),
    ps.GUESS_TRIMMED: lambda p, r: p.guess_trimmed(r),
    ps.REFUSE: lambda p, r: p.refused(r),
    ps.CUMULATIVE: lambda p, r: p.passed(r.seq + 1),
    ps.FAIL: lambda p, r: p.failed(),
}


@pytest.mark.parametrize("state", STATES, ids=[ps.STATE_NAMES[s] for s in STATES])
@pytest.mark.parametrize("event", EVENTS, ids=[ps.EVENT_NAMES[e] for e in EVENTS])
def test_every_transition_of_the_owner_is_allowed_or_refused_as_the_table_says(
    state: int, event: int
) -> None:
    packets, rec = _in(state)
    new = ps.TRANSITIONS[state].get(event)
    before = (rec.state, dict(packets.in_flight), packets.inflight_bytes, list(packets.retx))
    if new is None:
        if state == ps.DONE and event in (ps.CUMULATIVE, ps.FAIL):
            EVENT_METHODS[event](packets, rec)  # (forgotten: the owner no longer holds it)
            assert rec.state == ps.DONE
            return
        with pytest.raises(ps.PacketTransitionError):
            EVENT_METHODS[event](packets, rec)
        assert (rec.state, dict(packets.in_flight), packets.inflight_bytes, list(packets.retx)) == before
        return
    EVENT_METHODS[event](packets, rec)
    assert rec.state == new
    # the containers follow the state: in flight (with its bytes, on its plane), queued to be
    # resent, held until the cumulative ACK passes it
    flying = bool(new & ps.IN_FLIGHT_BIT)
    assert (rec.seq in packets.in_flight) is flying
    assert packets.inflight_bytes == (100 if flying else 0) == sum(packets.plane_load)
    if flying:
        assert packets.plane_load[rec.ev >> 28] == 100
    # queued to be resent (a stale entry of a packet resent or acked since is dropped)
    assert (packets.next_resend() is rec) is bool(new & ps.QUEUED_BIT)
    assert (rec.seq in packets.records) is (new != ps.DONE)


def test_a_guess_sets_the_blamed_ev_and_a_resend_keeps_the_copy_history() -> None:
    packets, rec = _in(ps.IN_FLIGHT)
    packets.guessed_lost(rec)
    assert rec.lost_ev == 5 and packets.retx[0] == rec.seq
    packets.sent(rec, PLANE1 | 9, 40)
    assert (rec.transmissions, rec.ev, rec.prev_sent_ns, rec.sent_ns) == (2, PLANE1 | 9, 10, 40)
    assert rec.is_copy(10, 5) and rec.is_copy(40, PLANE1 | 9)


def test_a_guess_resent_once_and_acked_is_remembered_until_a_dsack_names_a_copy() -> None:
    packets, rec = _in(ps.RESENT)  # guessed on EV 5 at 10, resent on PLANE1 | 5 at 20
    packets.acked(rec)
    assert packets.duplicate(10, 5) == (5, 10) and packets.duplicate(20, PLANE1 | 5) is None
    shown, rec2 = _in(ps.RESENT)
    shown.acked(rec2, spurious=True)  # its delivery showed the guess wrong already
    assert shown.duplicate(10, 5) is None


def test_go_back_n_queues_every_packet_not_acked_in_order() -> None:
    packets = _packets()
    writes = WriteQueue()
    writes.post(writes.new_id(), b"y" * 400, 0, 1, 100)
    recs = [writes.cut(writes.head(), 100, packets) for _ in range(4)]
    for i, r in enumerate(recs):
        packets.sent(r, 5, i)
    packets.acked(recs[2])
    packets.guessed_lost(recs[3])
    packets.rewind(0)
    assert [r.state for r in recs] == [ps.LOST, ps.LOST, ps.ACKED, ps.GUESSED]
    assert list(packets.retx) == [0, 1, 3] and not packets.in_flight


def _assigned_attrs(tree: ast.AST) -> list[tuple[str, str]]:
    """(attribute, the expression it is assigned on) for every assignment to an attribute or
    to an item of one (``x.a = ...``, ``x.a[k] += ...``)."""
    out = []
    for node in ast.walk(tree):
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, (ast.AugAssign, ast.AnnAssign))
            else []
        )
        for t in targets:
            for x in t.elts if isinstance(t, ast.Tuple) else [t]:
                while isinstance(x, ast.Subscript):
                    x = x.value
                if isinstance(x, ast.Attribute):
                    out.append((x.attr, ast.unparse(x.value)))
    return out


def test_only_the_owner_writes_a_packet_s_state() -> None:
    """No module of the core but sent.py assigns a packet's ``state`` (ev_table.py assigns an
    EV entry's, through its own table), and none assigns the flags read from it."""
    writers = {}
    for f in sorted(CORE.glob("*.py")):
        for attr, on in _assigned_attrs(ast.parse(f.read_text())):
            if attr == "state" and on != "self":
                writers.setdefault(f.name, set()).add(on)
            # (counters.py's rows count packets lost: a field of their own)
            flag = attr in ("lost", "gap_lost", "sacked") and f.name != "counters.py"
            assert not flag, f"{f.name} assigns {on}.{attr}"
    assert writers == {"sent.py": {"rec"}, "ev_table.py": {"e"}}
    src = (CORE / "sent.py").read_text()
    assert src.count("rec.state = next_state(") == src.count("rec.state =")  # every one by the table


def test_no_core_function_reaches_into_another_object_s_private_state() -> None:
    """``x._name`` only on ``self`` (or the class): on main ``_blame_suspects(s)`` read
    ``s._retire`` and ``rto_dead_planes`` ``recovery._plane_evidence``."""
    reached = []
    for f in sorted(CORE.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                reached.append(f"{f.name}:{node.lineno} {ast.unparse(node)}")
    assert reached == []


def test_the_book_changes_no_other_owner() -> None:
    """acks.py proves and returns: the packets it reads are asked for one transition (the
    guess a D-SACK names), the EV set only for an EV's state; it holds no ``Recovery``."""
    tree = ast.parse((CORE / "acks.py").read_text())
    calls = {
        ast.unparse(n.func)
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and ast.unparse(n.func.value) in ("self.packets", "self.evset", "self.recovery")
    }
    assert calls == {"self.packets.duplicate", "self.evset.state"}
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "Recovery" not in names
    written = {on for _attr, on in _assigned_attrs(tree)}
    assert written <= {"self", "proof", "self.counters", "counters"}, written  # (counters: self.counters)
