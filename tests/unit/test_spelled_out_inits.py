"""The per-packet dataclasses that spell out their ``__init__`` (``init=False``, so that
mypyc compiles it) take exactly the fields the generated one would: same names, same
order, same defaults, a ``default_factory`` field as ``None`` -> a fresh default, and
every field set once. Checked on the source, so it holds for the compiled modules too;
and by behaviour, on the classes this process runs (compiled or not)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from mrc_host.core.actions import MessageReceived, MessageSent, SetTimer, Transmit
from mrc_host.core.records import PendingWrite, TxRecord
from mrc_host.sim.fabric import SimPacket
from mrc_host.wire.messages import (
    DataFlag,
    DataPacket,
    Dscp,
    Ecn,
    Nack,
    Opcode,
    PathMeta,
    Probe,
    ProbeAck,
    Sack,
)

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    "mrc_host/wire/messages.py",
    "mrc_host/core/actions.py",
    "mrc_host/sim/fabric.py",
]


def _spelled_out() -> list[tuple[str, ast.ClassDef, str]]:
    found = []
    for rel in FILES:
        src = (ROOT / rel).read_text()
        for node in ast.parse(src).body:
            if not isinstance(node, ast.ClassDef):
                continue
            for dec in node.decorator_list:
                if (
                    isinstance(dec, ast.Call)
                    and ast.unparse(dec.func) == "dataclass"
                    and any(k.arg == "init" and ast.unparse(k.value) == "False" for k in dec.keywords)
                ):
                    found.append((rel, node, src))
    return found


def test_the_hot_classes_spell_out_their_init() -> None:
    names = {node.name for _, node, _ in _spelled_out()}
    assert {"PathMeta", "DataPacket", "Sack", "Transmit", "SetTimer", "SimPacket"} <= names


@pytest.mark.parametrize("rel,node,src", _spelled_out(), ids=lambda v: getattr(v, "name", ""))
def test_spelled_out_init_matches_the_fields(rel: str, node: ast.ClassDef, src: str) -> None:
    fields = [st for st in node.body if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)]
    inits = [st for st in node.body if isinstance(st, ast.FunctionDef) and st.name == "__init__"]
    assert len(inits) == 1, f"{rel}:{node.name} has init=False and no __init__"
    init = inits[0]
    args = init.args.args[1:]  # without self
    assert not init.args.kwonlyargs and init.args.vararg is None and init.args.kwarg is None
    assert [a.arg for a in args] == [f.target.id for f in fields]  # type: ignore[union-attr]
    defaults: list[ast.expr | None] = [None] * (len(args) - len(init.args.defaults)) + list(
        init.args.defaults
    )
    assigned: dict[str, str] = {}
    for st in init.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Attribute):
            target = st.targets[0]
            assert ast.unparse(target.value) == "self"
            assert target.attr not in assigned, f"{node.name}.{target.attr} set twice"
            assigned[target.attr] = ast.unparse(st.value)
    for field, arg, default in zip(fields, args, defaults, strict=True):
        name = arg.arg
        value = field.value
        if value is None:
            assert default is None, f"{node.name}.{name}: the dataclass field has no default"
            assert assigned[name] == name
        elif isinstance(value, ast.Call) and ast.unparse(value.func) == "field":
            factory = {k.arg: ast.unparse(k.value) for k in value.keywords}["default_factory"]
            assert default is not None and ast.unparse(default) == "None"
            assert assigned[name] == f"{factory}() if {name} is None else {name}"
        else:
            assert default is not None and ast.unparse(default) == ast.unparse(value), name
            assert assigned[name] == name
    assert set(assigned) == {a.arg for a in args}


def test_defaults_and_replace_behave_as_generated() -> None:
    p = DataPacket(1, 2, 3, 4, b"xy")
    assert (p.msg_id, p.send_ts, p.flags, p.opcode, p.ack_req, p.trimmed) == (
        0,
        0,
        DataFlag.NONE,
        Opcode.WRITE_ONLY,
        True,
        False,
    )
    assert p.meta == PathMeta() and p.meta is not DataPacket(1, 2, 3, 4, b"").meta  # a fresh one each
    assert (PathMeta().ecn, PathMeta().dscp) == (Ecn.NOT_ECT, Dscp.CONTROL)
    q = dataclasses.replace(p, payload=b"", trimmed=True)
    assert q.trimmed and q.payload == b"" and q.meta is p.meta and q.psn == 2
    assert p == DataPacket(1, 2, 3, 4, b"xy", meta=PathMeta())
    assert repr(SetTimer(5)) == "SetTimer(at_ns=5)"
    s = Sack(1, 2, 3, 4, 5)
    assert (s.ecn_echo, s.echo_ts, s.port_status, s.duplicate, s.meta) == (False, 0, 0, False, PathMeta())
    assert (
        Nack(1, 2, 3, 4).meta == PathMeta()
        and Probe(1, 2, 3).reply_ev == 0
        and ProbeAck(1, 2, 3).port_status == 0
    )
    assert MessageSent(3) == MessageSent(3, True, "") and MessageReceived(4).msg_id == 4
    assert Transmit(p).msg is p
    w = PendingWrite(1, [b"abc"], 10, 20)
    assert (w.offset, w.remaining, w.failed, w.length) == (0, 0, "", 3)
    r = TxRecord(7, w, 10, b"abc", Opcode.WRITE_ONLY)
    assert (r.lost_ev, r.prev_sent_ns, r.sacked, r.transmissions) == (-1, -1, False, 0)
    pkt = SimPacket(p, 0, 1, 0, None, 150, True)
    assert pkt.tx_start == 0 and pkt.t1 is None
