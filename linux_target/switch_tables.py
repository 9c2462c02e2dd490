"""The shim's view of the switch tables, kept equal to the kernel state.

``apply`` takes one validated update, computes the kernel state the new tables
need, and commits the new tables only once the kernel has accepted the change
(the programmer rolls the kernel back when it refuses). Reads are served from
this view.
"""

from __future__ import annotations

import logging
from ipaddress import IPv6Network
from typing import Protocol

import grpc
from finsy.proto import p4r

from mrc_fabric.fault_tables import FAULT_KEY, FAULT_TABLES, Hook
from mrc_fabric.p4info import P4InfoIndex
from mrc_fabric.p4names import Action, Field, Table

from .default_actions import initial_default_actions
from .errors import P4RuntimeError, invalid
from .kernel_state import KernelState, Tables, ecmp_routes, route_prefix, updated_state
from .netlink_backend import KernelError
from .table_codec import TableRow, decode_entry, decode_match

log = logging.getLogger(__name__)

# Actions whose ``port`` parameter must name a port of this switch (the kernel
# needs an interface to route to).
PORT_PARAM_ACTIONS = {Action.SET_NEXT_HOP}
# Tables whose key is a port of this switch (the kernel needs its interface).
PORT_KEY_TABLES = {*FAULT_TABLES, Table.PORT_POLICY}


class Transitioner(Protocol):
    def transition(self, old: KernelState, new: KernelState) -> None: ...


class SwitchTables:
    def __init__(
        self, index: P4InfoIndex, ports: dict[int, str], kernel: Transitioner, egress_model: bool = True
    ) -> None:
        self.index = index
        self.egress_model = egress_model  # port_policy entries reach the egress program
        self.ports = ports
        self.kernel = kernel
        self.tables: Tables = {alias: {} for alias in index.tables}
        self.defaults: dict[str, TableRow] = {}
        self.state = KernelState()
        self._policy_warned = False

    # -- writes -------------------------------------------------------------------
    def _check_ports(self, row: TableRow) -> None:
        if row.table in PORT_KEY_TABLES and row.key:
            port = row.field(Field.PORT, self.index)[0]  # type: ignore[index]
            if port not in self.ports:
                raise invalid(
                    f"match field port ({row.table}): port {port} is not a port of this switch "
                    f"(ports {sorted(self.ports)})"
                )
        if row.action.name in PORT_PARAM_ACTIONS:
            port = row.action.params[Field.PORT]
            if port not in self.ports:
                raise invalid(
                    f"action {row.action.name} param port: port {port} is not a port of this "
                    f"switch (ports {sorted(self.ports)})"
                )

    def apply(self, update_type: int, entry: p4r.TableEntry) -> None:
        """Apply one INSERT/MODIFY/DELETE of a table entry, or raise P4RuntimeError."""
        if update_type not in (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE):
            raise invalid(f"type: update type {update_type} is not INSERT, MODIFY or DELETE")
        row = decode_entry(self.index, entry, with_action=update_type != p4r.Update.DELETE)
        if entry.is_default_action:
            self._apply_default(update_type, row)
            return
        table = self.tables[row.table]
        exists = row.key in table
        if update_type == p4r.Update.INSERT and exists:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"table {row.table}: entry already exists")
        if update_type != p4r.Update.INSERT and not exists:
            raise P4RuntimeError(grpc.StatusCode.NOT_FOUND, f"table {row.table}: no such entry")
        if update_type == p4r.Update.INSERT and len(table) >= self.index.table(row.table).size:
            raise P4RuntimeError(grpc.StatusCode.RESOURCE_EXHAUSTED, f"table {row.table} is full")
        new_table = dict(table)
        if update_type == p4r.Update.DELETE:
            del new_table[row.key]
        else:
            self._check_ports(row)
            new_table[row.key] = row
        new_tables = {**self.tables, row.table: new_table}
        new_state = updated_state(
            self.state, new_tables, self.ports, self.index, *self._affected(row, new_tables)
        )
        try:
            self.kernel.transition(self.state, new_state)
        except KernelError as exc:
            raise P4RuntimeError(
                grpc.StatusCode.INTERNAL,
                f"table {row.table}: the kernel refused the entry, nothing changed: {exc}",
            ) from exc
        self.tables = new_tables
        self.state = new_state
        stored_only = row.table == Table.PORT_POLICY and update_type != p4r.Update.DELETE
        if stored_only and not self.egress_model and not self._policy_warned:
            self._policy_warned = True
            log.warning(
                "port_policy stored only: this shim runs without its egress program "
                "(--no-egress-model), so it neither marks ECN nor trims"
            )

    def _affected(
        self, row: TableRow, new_tables: Tables
    ) -> tuple[set[IPv6Network], set[tuple[Hook, int]], set[int]]:
        """The route prefixes, fault keys and policy ports an update of ``row`` can change."""
        if row.table in (Table.MY_USID, Table.USID_ROUTE):
            return {route_prefix(row, self.index)}, set(), set()
        if row.table == Table.ECMP_MEMBER:
            group = row.field(Field.GROUP_ID, self.index)[0]  # type: ignore[index]
            return set(ecmp_routes(new_tables, group)), set(), set()
        if row.table in FAULT_TABLES:
            return set(), {(FAULT_TABLES[row.table], row.field(FAULT_KEY, self.index)[0])}, set()  # type: ignore[index]
        if row.table == Table.PORT_POLICY and self.egress_model:
            return set(), set(), {row.field(Field.PORT, self.index)[0]}  # type: ignore[index]
        return set(), set(), set()

    def _apply_default(self, update_type: int, row: TableRow) -> None:
        if update_type != p4r.Update.MODIFY:
            raise invalid(f"type: the default entry of {row.table} can only be modified")
        if row.action.params:
            raise invalid(
                f"action {row.action.name}: the Linux target only supports parameterless default "
                f"actions (the miss behaviour of {row.table} is fixed)"
            )
        self.defaults[row.table] = row

    def clear(self) -> None:
        """Remove every entry (a new pipeline was committed)."""
        empty = KernelState()
        self.kernel.transition(self.state, empty)
        self.tables = {alias: {} for alias in self.index.tables}
        self.defaults = {}
        self.state = empty

    # -- reads ------------------------------------------------------------------
    def default_entry(self, alias: str) -> p4r.TableEntry:
        """The table's default entry: as last modified, else the program's initial default
        (P4Runtime: the default entry always exists and can be read)."""
        if alias in self.defaults:
            return self.defaults[alias].proto
        info = self.index.table(alias)
        entry = p4r.TableEntry(table_id=info.id, is_default_action=True)
        entry.action.action.action_id = self.index.action(
            initial_default_actions()[info.name.split(".")[-1]]
        ).id
        return entry

    def read(self, query: p4r.TableEntry) -> list[p4r.TableEntry]:
        """Entries matching a read request's TableEntry (wildcards: table 0, no match)."""
        if query.table_id == 0:
            if query.match:
                raise invalid("match: a read of all tables (table_id 0) cannot carry match fields")
            aliases = list(self.tables)
        else:
            try:
                aliases = [self.index.table(query.table_id).alias]
            except KeyError as exc:
                raise invalid(f"table_id: {exc}") from exc
        out: list[p4r.TableEntry] = []
        for alias in aliases:
            if query.is_default_action:
                out.append(self.default_entry(alias))
                continue
            rows = self.tables[alias]
            if query.match:
                key = decode_match(self.index, self.index.table(alias), list(query.match))
                if key in rows:
                    out.append(rows[key].proto)
            else:
                out.extend(row.proto for row in rows.values())
        return out
