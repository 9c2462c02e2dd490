"""A user's P4 program keeps the MRC contract, or every gap is named (mrc_fabric.p4_contract)."""

from __future__ import annotations

import copy

from finsy.proto import p4i

from mrc_fabric.p4_contract import contract_gaps, contract_table_names
from mrc_fabric.p4info import load_p4info


def _info() -> p4i.P4Info:
    return copy.deepcopy(load_p4info())


def _table(info: p4i.P4Info, alias: str) -> p4i.Table:
    return next(t for t in info.tables if t.preamble.alias == alias)


def _action(info: p4i.P4Info, alias: str) -> p4i.Action:
    return next(a for a in info.actions if a.preamble.alias == alias)


def test_the_committed_program_and_one_with_extra_tables_keep_it() -> None:
    info = _info()
    assert contract_gaps(info) == []
    extra = info.tables.add()
    extra.preamble.id, extra.preamble.name, extra.preamble.alias = 0x02FFFFFF, "MrcIngress.mine", "mine"
    act = info.actions.add()
    act.preamble.id, act.preamble.name, act.preamble.alias = 0x01FFFFFF, "MrcIngress.count_me", "count_me"
    assert contract_gaps(info) == []


def test_renumbered_ids_keep_it_names_are_the_contract() -> None:
    info = _info()
    old = {a.preamble.id: a.preamble.id + 0x100 for a in info.actions}
    for a in info.actions:
        a.preamble.id = old[a.preamble.id]
    for t in info.tables:
        t.preamble.id += 0x100
        for ref in t.action_refs:
            ref.id = old[ref.id]
    for c in info.counters:
        c.preamble.id += 0x100
    assert contract_gaps(info) == []


def test_each_gap_is_named_precisely_and_all_at_once() -> None:
    info = _info()
    route = _table(info, "usid_route")
    del info.tables[list(info.tables).index(_table(info, "my_usid"))]
    route.match_fields[0].bitwidth = 64
    policy = _table(info, "port_policy")
    del policy.match_fields[0]
    fault = _table(info, "port_fault")
    loss_id = _action(info, "fault_loss").preamble.id
    kept = [r for r in fault.action_refs if r.id != loss_id]
    del fault.action_refs[:]
    fault.action_refs.extend(kept)
    hop = _action(info, "set_next_hop")
    next(p for p in hop.params if p.name == "port").bitwidth = 16
    del hop.params[[p.name for p in hop.params].index("dmac")]
    counters = list(info.counters)
    drop = next(c for c in counters if c.preamble.alias == "drop_reason")
    drop.size = 2
    del info.counters[counters.index(next(c for c in counters if c.preamble.alias == "ecn_marked"))]
    gaps = contract_gaps(info)
    assert gaps == [
        "action MrcIngress.set_next_hop: parameter port is bit<16>, the contract's bit<9>",
        "action MrcIngress.set_next_hop: parameter dmac (bit<48>) missing",
        "table MrcIngress.my_usid: missing",
        "table MrcIngress.usid_route: match field dst_addr is lpm bit<64>, the contract's lpm bit<128>",
        "table MrcIngress.port_fault: action MrcIngress.fault_loss not among its actions",
        "table MrcIngress.port_policy: match field port (exact bit<9>) missing",
        "counter MrcIngress.drop_reason: 2 cells, the contract needs 8",
        "counter MrcEgress.ecn_marked: missing",
    ]


def test_a_missing_action_and_a_match_kind_changed() -> None:
    info = _info()
    usid = _table(info, "my_usid")
    usid.match_fields[0].match_type = p4i.MatchField.TERNARY
    actions = list(info.actions)
    del info.actions[actions.index(_action(info, "usid_shift"))]
    gaps = contract_gaps(info)
    assert "action MrcIngress.usid_shift: missing" in gaps
    kind = "table MrcIngress.my_usid: match field dst_top48 is ternary bit<48>, the contract's exact bit<48>"
    assert kind in gaps
    assert "table MrcIngress.my_usid: action MrcIngress.usid_shift not among its actions" in gaps


def test_the_controller_owns_only_the_contract_tables() -> None:
    assert contract_table_names() == {
        "MrcIngress.my_usid",
        "MrcIngress.usid_route",
        "MrcIngress.ecmp_member",
        "MrcIngress.port_fault",
        "MrcIngress.ingress_fault",
        "MrcIngress.port_policy",
    }
