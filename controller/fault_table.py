"""The active faults, by id and by the switches they touch.

Why an index by port: a switch's desired fault entries come from the faults on it, and with
thousands of faults active, combining every fault's actions for each write (what the core did
once) made each injection cost as much as all the faults before it. Here each (switch, table,
port) keeps its active actions and the entry they combine into; a change recombines only the
ports it touches (an added action multiplies in, exactly as a full combination would in the
same order). Not thread-safe: its owner (``core.ControllerCore``) holds its lock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from controller.entries import TableEntry
from controller.faults import FaultSpec, PortAction, port_entry
from controller.scheduler import Timer


@dataclass
class ActiveFault:
    id: str
    spec: FaultSpec
    actions: list[PortAction]
    created_at: float
    expires_at: float = 0.0
    active: bool = True  # a FLAP toggles this
    timers: dict[str, Timer] = field(default_factory=dict)  # its flap and expiry, on the scheduler

    @property
    def switches(self) -> set[str]:
        return {a.switch for a in self.actions}


PortKey = tuple[str, int]  # (table, port)


@dataclass
class PortFaults:
    """The active actions on one port of one switch, and what they combine into."""

    actions: dict[tuple[str, int], PortAction] = field(default_factory=dict)  # (fault id, n) -> action
    drops: int = 0
    survive: float = 1.0
    entry: TableEntry | None = None

    def add(self, key: tuple[str, int], a: PortAction, table: str, port: int) -> None:
        self.actions[key] = a
        self.drops += a.drop
        self.survive *= 1.0 - a.loss
        self.entry = port_entry(table, port, self.drops > 0, self.survive)

    def remove(self, key: tuple[str, int], table: str, port: int) -> None:
        if self.actions.pop(key, None) is None:
            return
        self.drops = sum(a.drop for a in self.actions.values())
        self.survive = 1.0
        for a in self.actions.values():
            self.survive *= 1.0 - a.loss
        self.entry = port_entry(table, port, self.drops > 0, self.survive)


class FaultTable:
    def __init__(self) -> None:
        self._by_id: dict[str, ActiveFault] = {}
        self._ports: dict[str, dict[PortKey, PortFaults]] = {}  # switch -> its faulted ports
        self.next_id = 1  # of the next fault (f1, f2, ...)

    def new_id(self) -> str:
        fid = f"f{self.next_id}"
        self.next_id += 1
        return fid

    def add(self, fault: ActiveFault) -> None:
        self._by_id[fault.id] = fault
        if fault.active:
            self._apply(fault, True)

    def remove(self, fault_id: str) -> ActiveFault | None:
        fault = self._by_id.pop(fault_id, None)
        if fault is not None and fault.active:
            self._apply(fault, False)
        return fault

    def set_active(self, fault: ActiveFault, active: bool) -> None:
        """A FLAP's toggle: its entries go in or out."""
        if fault.active != active and self._by_id.get(fault.id) is fault:
            self._apply(fault, active)
        fault.active = active

    def _apply(self, fault: ActiveFault, on: bool) -> None:
        for n, a in enumerate(fault.actions):
            ports = self._ports.setdefault(a.switch, {})
            pf = ports.setdefault((a.table, a.port), PortFaults())
            if on:
                pf.add((fault.id, n), a, a.table, a.port)
            else:
                pf.remove((fault.id, n), a.table, a.port)
                if not pf.actions:
                    del ports[(a.table, a.port)]
                    if not ports:
                        del self._ports[a.switch]

    def remove_all(self) -> list[ActiveFault]:
        faults = list(self._by_id.values())
        self._by_id.clear()
        self._ports.clear()
        return faults

    def get(self, fault_id: str) -> ActiveFault | None:
        return self._by_id.get(fault_id)

    def entries_for(self, switch: str) -> list[TableEntry]:
        """The fault entries ``switch`` should hold now (active faults only, one per port)."""
        ports = self._ports.get(switch, {})
        return [e for _k, pf in sorted(ports.items()) if (e := pf.entry) is not None]

    def all_entries(self) -> dict[str, list[TableEntry]]:
        return {s: es for s in sorted(self._ports) if (es := self.entries_for(s))}

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, fault_id: object) -> bool:
        return fault_id in self._by_id

    def __iter__(self) -> Iterator[ActiveFault]:
        return iter(list(self._by_id.values()))
