"""The shim's initial default entries come from the P4 program and fit the P4Info."""

from __future__ import annotations

from finsy.proto import p4r

from linux_target.default_actions import initial_default_actions
from linux_target.switch_tables import SwitchTables
from mrc_fabric.p4info import default_index


class NoKernel:
    def transition(self, old: object, new: object) -> None:
        pass


def test_every_table_has_an_initial_default_it_may_use() -> None:
    ix = default_index()
    defaults = initial_default_actions()
    assert set(defaults) == set(ix.tables)
    for alias, action in defaults.items():
        assert ix.action(action).id in ix.table(alias).action_ids
    assert defaults["usid_route"] == "drop_no_route" and defaults["port_fault"] == "NoAction"


def test_default_entry_reads_initial_then_modified() -> None:
    ix = default_index()
    tables = SwitchTables(ix, {1: "p1"}, NoKernel())
    query = p4r.TableEntry(table_id=ix.table("port_fault").id, is_default_action=True)
    (initial,) = tables.read(query)
    assert initial.is_default_action and initial.action.action.action_id == ix.action("NoAction").id
    modified = p4r.TableEntry(table_id=query.table_id, is_default_action=True)
    modified.action.action.action_id = ix.action("fault_drop").id
    tables.apply(p4r.Update.MODIFY, modified)
    assert tables.read(query) == [modified]
    assert len(tables.read(p4r.TableEntry(is_default_action=True))) == len(ix.tables)
    assert tables.read(p4r.TableEntry()) == []  # a wildcard read has no default entries
