"""A user's P4 program keeps the MRC contract, or every gap is named (mrc_fabric.p4names)."""

from __future__ import annotations

import copy

from finsy.proto import p4i

from mrc_fabric.p4_contract import contract_table_names
from mrc_fabric.p4info import load_p4info
from mrc_fabric.p4names import missing_contract_names


def _info() -> p4i.P4Info:
    return copy.deepcopy(load_p4info())


def _table(info: p4i.P4Info, alias: str) -> p4i.Table:
    return next(t for t in info.tables if t.preamble.alias == alias)


def _action(info: p4i.P4Info, alias: str) -> p4i.Action:
    return next(a for a in info.actions if a.preamble.alias == alias)


def test_the_committed_program_and_one_with_extra_tables_keep_it() -> None:
    info = _info()
    assert missing_contract_names(info) == []
    extra = info.tables.add()
    extra.preamble.id, extra.preamble.name, extra.preamble.alias = 0x02FFFFFF, "MrcIngress.mine", "mine"
    act = info.actions.add()
    act.preamble.id, act.preamble.name, act.preamble.alias = 0x01FFFFFF, "MrcIngress.count_me", "count_me"
    assert missing_contract_names(info) == []


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
    assert missing_contract_names(info) == []


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
    next(p for p in hop.params if p.name == "port").bitwidth = 8
    del hop.params[[p.name for p in hop.params].index("dmac")]
    counters = list(info.counters)
    drop = next(c for c in counters if c.preamble.alias == "drop_reason")
    drop.size = 2
    del info.counters[counters.index(next(c for c in counters if c.preamble.alias == "ecn_marked"))]
    gaps = missing_contract_names(info)
    assert gaps == [
        "table my_usid: missing",
        "table usid_route: match field dst_addr is lpm, 64 bits, not lpm, 128 bits",
        "table port_fault: action fault_loss is not one it takes",
        "table port_policy: match field port missing (exact, 9 bits)",
        "action set_next_hop: parameter port has 8 bits, needs 9",
        "action set_next_hop: parameter dmac missing (48 bits)",
        "counter drop_reason: 2 cells, needs 8",
        "counter ecn_marked: missing",
    ]


def test_a_missing_action_and_a_match_kind_changed() -> None:
    info = _info()
    usid = _table(info, "my_usid")
    usid.match_fields[0].match_type = p4i.MatchField.TERNARY
    actions = list(info.actions)
    del info.actions[actions.index(_action(info, "usid_shift"))]
    gaps = missing_contract_names(info)
    assert gaps == [
        "table my_usid: match field dst_top48 is ternary, 48 bits, not exact, 48 bits",
        "action usid_shift: missing",
    ]


def test_the_controller_owns_only_the_contract_tables() -> None:
    assert contract_table_names() == {
        "MrcIngress.my_usid",
        "MrcIngress.usid_route",
        "MrcIngress.ecmp_member",
        "MrcIngress.port_fault",
        "MrcIngress.ingress_fault",
        "MrcIngress.port_policy",
    }
