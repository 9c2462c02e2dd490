"""Every P4 name Python uses exists in the committed P4Info, and has one home: mrc_fabric.p4names.

A table renamed in ``p4src/mrc_switch.p4`` (and its P4Info) fails here until the constant
follows it, and a use that spells the old name as a string, or a misspelt constant, fails here
too, instead of at the first write on a live fabric.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mrc_fabric import p4names
from mrc_fabric.p4info import load_p4info
from mrc_fabric.p4names import Action, Counter, Field, Register, Table, missing_contract_names, names

ROOT = Path(__file__).resolve().parents[2]
# Every package that speaks P4Runtime or reads switch counters (mrc_host never does: its
# "ecn_marked" is the simulator's own statistic).
SPEAKERS = ("mrc_fabric", "mrc_p4rt", "controller", "linux_target", "topologies", "mrc_view", "bench")
HOME = ROOT / "mrc_fabric" / "p4names.py"
KINDS = {"Table": Table, "Action": Action, "Field": Field, "Counter": Counter, "Register": Register}
# A drop reason's label that happens to equal a table name: it names the side, like "egress_fault".
LABELS = {("mrc_fabric/drop_reasons.py", "ingress_fault")}
ENTRY_BUILDERS = {"TableEntry", "build_entry", "port_entry"}
FIELD_READERS = {"field", "param"}  # TableEntry.field("port"), .param("prob"), TableRow.field(...)
FIELD_MAPS = {"match_fields", "params"}  # TableInfo.match_fields["port"], ActionCall.params["port"]


def _objects() -> dict[str, set[str]]:
    info = load_p4info()
    return {
        "Table": {t.preamble.alias for t in info.tables},
        "Action": {a.preamble.alias for a in info.actions} - {"NoAction"},  # P4's own
        "Field": {m.name for t in info.tables for m in t.match_fields}
        | {p.name for a in info.actions for p in a.params},
        "Counter": {c.preamble.alias for c in info.counters},
        "Register": {r.preamble.alias for r in info.registers},
    }


def test_the_names_are_exactly_the_p4info_objects() -> None:
    for kind, objects in _objects().items():
        declared = names(KINDS[kind])
        assert set(declared.values()) == objects, f"{kind}: the P4Info has {sorted(objects)}"
        assert all(k == v.upper() for k, v in declared.items()), f"{kind}: a constant unlike its value"


def _full_names() -> set[str]:
    info = load_p4info()
    return {o.preamble.name for o in (*info.tables, *info.actions, *info.counters, *info.registers)}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _p4_imports(tree: ast.AST) -> dict[str, type]:
    """Local name -> p4names class, for the classes this module imports from mrc_fabric.p4names."""
    return {
        alias.asname or alias.name: KINDS[alias.name]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "mrc_fabric.p4names"
        for alias in node.names
        if alias.name in KINDS
    }


def _str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _field(node: ast.AST) -> str | None:
    text = _str(node)
    return text if text in names(Field).values() else None


def _call_names(node: ast.Call) -> list[str]:
    """A table entry built from strings, or a field read by its string name."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in ENTRY_BUILDERS:
        return [f"{text!r} in {name}()" for a in node.args for n in ast.walk(a) if (text := _str(n))]
    if (
        name in FIELD_READERS
        and isinstance(func, ast.Attribute)
        and node.args
        and (text := _field(node.args[0]))
    ):
        return [f".{name}({text!r})"]
    return []


def _unknown_constant(node: ast.Attribute, imported: dict[str, type]) -> list[str]:
    kind = imported.get(node.value.id) if isinstance(node.value, ast.Name) else None
    if kind is None or node.attr in names(kind):
        return []
    return [f"{kind.__name__}.{node.attr} is not in mrc_fabric.p4names"]


def spelt_names(source: str, where: str) -> list[str]:
    """Where ``source`` spells a P4 name as a string, or uses a constant p4names does not have."""
    tree = ast.parse(source)
    aliases = {v for kind in ("Table", "Action", "Counter", "Register") for v in names(KINDS[kind]).values()}
    full = _full_names() - aliases  # "egress_qdepth" is both
    docs = _docstrings(tree)
    imported = _p4_imports(tree)
    bad: list[str] = []
    for node in ast.walk(tree):
        found: list[str] = []
        text = _str(node)
        if text is not None and id(node) not in docs and (text in aliases or any(f in text for f in full)):
            found = [repr(text)]
        elif isinstance(node, ast.Call):
            found = _call_names(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute):
            if node.value.attr in FIELD_MAPS and (text := _field(node.slice)):
                found = [f".{node.value.attr}[{text!r}]"]
        elif isinstance(node, ast.Attribute):
            found = _unknown_constant(node, imported)
        bad += [f"{where}:{getattr(node, 'lineno', '?')} {f}" for f in found]
    return bad


def test_no_product_module_spells_a_p4_name() -> None:
    files = [f for p in SPEAKERS for f in (ROOT / p).rglob("*.py") if "_pb2" not in f.name and f != HOME]
    assert len(files) > 100
    bad = []
    for f in files:
        rel = f.relative_to(ROOT).as_posix()
        bad += [
            b for b in spelt_names(f.read_text(), rel) if (rel, b.split(" ", 1)[1].strip("'")) not in LABELS
        ]
    assert bad == [], "use mrc_fabric.p4names:\n" + "\n".join(bad)


def test_the_checker_catches_a_literal_a_field_and_a_misspelt_constant() -> None:
    source = '''
"""Docstrings may name port_fault."""
from mrc_fabric.p4names import Table
x = "port_fault"
y = f"counter_read MrcEgress.ecn_marked {1}"
e.field("port"); row.action.params["prob"]; TableEntry(Table.MY_USID, (("dst_top48", 1),), "usid_shift")
z = Table.PORT_FALT
ok = Table.PORT_FAULT; log("port_fault stored only"); d["port"]
'''
    bad = spelt_names(source, "m")
    assert [b.split(" ", 1)[0] for b in bad].count("m:4") == 1
    assert any("MrcEgress.ecn_marked" in b for b in bad)
    assert any(".field('port')" in b for b in bad) and any(".params['prob']" in b for b in bad)
    assert any("'dst_top48' in TableEntry()" in b for b in bad) and any("'usid_shift'" in b for b in bad)
    assert any("Table.PORT_FALT is not in" in b for b in bad)
    assert len(bad) == 8, bad


def test_the_committed_p4info_keeps_the_contract() -> None:
    assert missing_contract_names(load_p4info()) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda i: i.tables.pop(3), "table port_fault: missing"),
        (lambda i: i.actions.pop(6), "action fault_loss: missing"),
        (lambda i: i.counters.pop(1), "counter drop_reason: missing"),
        (lambda i: i.registers.pop(0), "register egress_qdepth: missing"),
        (
            lambda i: setattr(i.tables[1].match_fields[0], "name", "dst"),
            "table usid_route: match field dst_addr missing (lpm, 128 bits)",
        ),
        (
            lambda i: setattr(i.tables[1].match_fields[0], "match_type", 2),
            "table usid_route: match field dst_addr is exact, 128 bits, not lpm, 128 bits",
        ),
        (
            lambda i: setattr(i.tables[0].match_fields[0], "bitwidth", 32),
            "table my_usid: match field dst_top48 is exact, 32 bits, not exact, 48 bits",
        ),
        (lambda i: i.tables[3].action_refs.pop(1), "table port_fault: action fault_loss is not one it takes"),
        (
            lambda i: setattr(i.actions[2].params[1], "name", "mac"),
            "action set_next_hop: parameter dmac missing (48 bits)",
        ),
        (
            lambda i: setattr(i.actions[6].params[0], "bitwidth", 8),
            "action fault_loss: parameter prob has 8 bits, needs 16",
        ),
    ],
)
def test_a_p4info_that_breaks_the_contract_says_where(change: object, message: str) -> None:
    info = load_p4info()
    change(info)  # type: ignore[operator]
    assert missing_contract_names(info) == [message]


def test_a_wider_field_and_a_renamed_control_keep_the_contract() -> None:
    info = load_p4info()
    info.tables[3].match_fields[0].bitwidth = 16  # a wider port
    for t in info.tables:
        t.preamble.name = t.preamble.name.replace("MrcIngress", "MyIngress")
    assert missing_contract_names(info) == []
    assert p4names.names(Field)["PORT"] == "port"
