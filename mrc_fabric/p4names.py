"""The P4 names of the switch contract, once: every table, action, field and counter Python names.

``p4src/mrc_switch.p4`` and its P4Info (docs/design.md §5) are the contract between the
controller and both targets. Python never spells one of its names as a string: it writes
``Table.PORT_FAULT``, ``Action.FAULT_LOSS``, ``Field.PROB``. Why: a table renamed in the program
and missed in one use must fail a test, not a run. ``tests/unit/test_p4_names.py`` checks that
every constant here names an object of the committed P4Info and every object there has a
constant, and that no product module spells one of these names as a literal.

The values are the P4Info aliases; ``mrc_fabric.p4info`` resolves them to ids (and to the full
names, ``MrcIngress.port_fault``, for tools such as ``simple_switch_CLI``).
:func:`missing_contract_names` tells whether another program (a researcher's own P4) still keeps
every name the controller and the targets rely on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from finsy.proto import p4i

from mrc_fabric.p4info import MatchFieldInfo, P4InfoError, P4InfoIndex, load_p4info


class Table:
    """Match-action tables (docs/p4-pipeline.md lists what each does)."""

    MY_USID: Final = "my_usid"  # exact dst_top48 -> usid_shift
    USID_ROUTE: Final = "usid_route"  # lpm dst_addr -> set_next_hop | set_ecmp; default drop_no_route
    ECMP_MEMBER: Final = "ecmp_member"  # exact group_id, member -> set_next_hop
    PORT_FAULT: Final = "port_fault"  # exact port (egress) -> fault_drop | fault_loss
    INGRESS_FAULT: Final = "ingress_fault"  # exact port (ingress) -> fault_drop | fault_loss
    PORT_POLICY: Final = "port_policy"  # exact port -> set_port_policy


class Action:
    """Actions (``NoAction``, P4's own, is left out: nothing here writes it)."""

    USID_SHIFT: Final = "usid_shift"
    SET_NEXT_HOP: Final = "set_next_hop"  # (port, dmac)
    SET_ECMP: Final = "set_ecmp"  # (group_id, size)
    DROP_NO_ROUTE: Final = "drop_no_route"
    FAULT_DROP: Final = "fault_drop"
    FAULT_LOSS: Final = "fault_loss"  # (prob)
    SET_PORT_POLICY: Final = "set_port_policy"  # (ecn_threshold, trim_threshold, last_hop)


class Field:
    """Match fields and action parameters (P4Runtime names both by the table or action)."""

    DST_TOP48: Final = "dst_top48"  # my_usid
    DST_ADDR: Final = "dst_addr"  # usid_route
    GROUP_ID: Final = "group_id"  # ecmp_member; set_ecmp
    MEMBER: Final = "member"  # ecmp_member
    PORT: Final = "port"  # port_fault, ingress_fault, port_policy; set_next_hop
    DMAC: Final = "dmac"  # set_next_hop
    SIZE: Final = "size"  # set_ecmp
    PROB: Final = "prob"  # fault_loss
    ECN_THRESHOLD: Final = "ecn_threshold"  # set_port_policy
    TRIM_THRESHOLD: Final = "trim_threshold"  # set_port_policy
    LAST_HOP: Final = "last_hop"  # set_port_policy


class Counter:
    """Indexed counters (packets and bytes)."""

    PORT_RX: Final = "port_rx"  # by ingress port
    PORT_TX: Final = "port_tx"  # by egress port
    DROP_REASON: Final = "drop_reason"  # by mrc_fabric.drop_reasons.DropReason.cell
    ECN_MARKED: Final = "ecn_marked"  # by egress port


class Register:
    """Registers (read over BMv2's Thrift API; the Linux target has none)."""

    EGRESS_QDEPTH: Final = "egress_qdepth"  # by egress port: the data queue's depth at dequeue


def names(kind: type) -> dict[str, str]:
    """Constant name -> P4 name of one of the classes above."""
    return {k: v for k, v in vars(kind).items() if k.isupper() and isinstance(v, str)}


def missing_contract_names(p4info: p4i.P4Info, contract: p4i.P4Info | None = None) -> list[str]:
    """What ``p4info`` lacks of the contract (default: the committed P4Info), one message each.

    Every table, action, counter and register named above must be there (by alias or full
    name, as clients resolve them); each counter with at least the contract's cells; each table
    with the contract's match fields, of the same match type and at least as wide, and with
    every action the contract lets it take; each action with its parameters, at least as wide.
    Empty: the controller and both targets' code can drive a switch running that program.
    """
    want = P4InfoIndex(contract if contract is not None else load_p4info())
    have = P4InfoIndex(p4info)
    missing: list[str] = []
    for name in names(Table).values():
        missing += _table_gaps(name, want, have)
    for name in names(Action).values():
        missing += _action_gaps(name, want, have)
    for name in names(Counter).values():
        if not _has(have.counter, name):
            missing.append(f"counter {name}: missing")
        elif (cells := have.counter(name).size) < (needed := want.counter(name).size):
            missing.append(f"counter {name}: {cells} cells, needs {needed}")
    registers = {n for r in p4info.registers for n in (r.preamble.name, r.preamble.alias)}
    missing += [f"register {name}: missing" for name in names(Register).values() if name not in registers]
    return missing


def _has(find: Callable[[str], object], name: str) -> bool:
    try:
        find(name)
    except P4InfoError:
        return False
    return True


def _field_text(field: MatchFieldInfo) -> str:
    """``exact, 9 bits``."""
    return f"{p4i.MatchField.MatchType.Name(field.match_type).lower()}, {field.bitwidth} bits"


def _table_gaps(name: str, want: P4InfoIndex, have: P4InfoIndex) -> list[str]:
    if not _has(have.table, name):
        return [f"table {name}: missing"]
    got, spec = have.table(name), want.table(name)
    out = []
    for field in spec.match_fields.values():
        mf = got.match_fields.get(field.name)
        if mf is None:
            out.append(f"table {name}: match field {field.name} missing ({_field_text(field)})")
        elif mf.match_type != field.match_type or mf.bitwidth < field.bitwidth:
            out.append(
                f"table {name}: match field {field.name} is {_field_text(mf)}, not {_field_text(field)}"
            )
    for action_id in sorted(spec.action_ids):
        action = want.action(action_id).alias
        takes = action in names(Action).values() and _has(have.action, action)
        if takes and have.action(action).id not in got.action_ids:
            out.append(f"table {name}: action {action} is not one it takes")
    return out


def _action_gaps(name: str, want: P4InfoIndex, have: P4InfoIndex) -> list[str]:
    if not _has(have.action, name):
        return [f"action {name}: missing"]
    got = have.action(name).params
    out = []
    for param, (_pid, width) in want.action(name).params.items():
        if param not in got:
            out.append(f"action {name}: parameter {param} missing ({width} bits)")
        elif got[param][1] < width:
            out.append(f"action {name}: parameter {param} has {got[param][1]} bits, needs {width}")
    return out
