"""ECMP groups that cannot forward are refused, not stored.

``set_ecmp(group_id, size)`` hashes a packet onto member ``0 .. size-1`` of its group
(``p4src/mrc_switch.p4``); ``ecmp_member(group_id, member)`` says where each member goes. So a
size of 0 (nothing to hash onto: every packet dropped), a size beyond what ``ecmp_member``
can hold, and a member at or beyond the largest size any route gives its group (no hash ever
picks it) are mistakes a controller should hear about. Each is INVALID_ARGUMENT naming the
field. Deletes are never refused: taking entries away must always work.
"""

from __future__ import annotations

from mrc_fabric.p4info import P4InfoIndex
from mrc_fabric.p4names import Action, Field, Table

from .errors import invalid
from .kernel_state import Tables
from .table_codec import TableRow


def group_size(tables: Tables, group: int) -> int | None:
    """The largest size a ``set_ecmp`` route gives ``group``; None when no route uses it."""
    sizes = [
        row.action.params[Field.SIZE]
        for row in tables.get(Table.USID_ROUTE, {}).values()
        if row.action.name == Action.SET_ECMP and row.action.params[Field.GROUP_ID] == group
    ]
    return max(sizes) if sizes else None


def _member(row: TableRow, index: P4InfoIndex) -> tuple[int, int]:
    group = row.field(Field.GROUP_ID, index)[0]  # type: ignore[index]  # exact fields are always present
    member = row.field(Field.MEMBER, index)[0]  # type: ignore[index]
    return group, member


def check_ecmp(row: TableRow, new_tables: Tables, index: P4InfoIndex) -> None:
    """Refuse an INSERT/MODIFY of ``row`` that leaves an ECMP group unable to use a member."""
    if row.table == Table.USID_ROUTE and row.action.name == Action.SET_ECMP:
        group, size = row.action.params[Field.GROUP_ID], row.action.params[Field.SIZE]
        if size == 0:
            raise invalid(
                f"action set_ecmp param size: 0: group {group} would have no member to hash onto "
                "(a route that drops is no entry)"
            )
        most = index.table(Table.ECMP_MEMBER).size
        if size > most:
            raise invalid(
                f"action set_ecmp param size: {size} is more members than ecmp_member holds ({most})"
            )
        largest = group_size(new_tables, group) or size
        beyond = sorted(
            m
            for g, m in (_member(r, index) for r in new_tables.get(Table.ECMP_MEMBER, {}).values())
            if g == group and m >= largest
        )
        if beyond:
            raise invalid(
                f"action set_ecmp param size: {size} leaves member(s) {', '.join(map(str, beyond[:8]))} of "
                f"group {group} beyond the group's size; delete them first"
            )
    elif row.table == Table.ECMP_MEMBER:
        group, member = _member(row, index)
        known = group_size(new_tables, group)
        if known is not None and member >= known:
            raise invalid(
                f"match field member (ecmp_member): member {member} is beyond the size {known} of group "
                f"{group} (members 0-{known - 1}): no hash picks it"
            )
