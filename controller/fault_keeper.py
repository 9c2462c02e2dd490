"""The active faults: their ids, their entries, their timers -- and every change to them made
durable before it is made.

Why one owner: a fault's life (injected, flapping, expired, cleared, restored after a restart,
adopted from a switch's tables) touches the fault table, the scheduler, the syncer and the
state file, and each of those transitions has to keep the same promise: what the API
acknowledged is on disk, and what the disk refused is on no switch. So an injection is recorded
first and written to the switches only then; a clear is recorded before the fault leaves the
desired state; a refusal (``StateUnavailable``) changes nothing. Timed changes (a flap's toggle,
an expiry) change the desired state at once on the scheduler's thread and leave the writing to
the switches to ``syncer``; their records are kept for the next write that can be made.
"""

from __future__ import annotations

import logging
import threading
import time

from controller.adopt import adopt_entries
from controller.entries import SwitchEntries, TableEntry
from controller.events import EventBus
from controller.fault_table import ActiveFault, FaultTable
from controller.faults import (
    MAX_ACTIVE_FAULTS,
    FaultCapacityError,
    FaultError,
    FaultKind,
    FaultSpec,
    quote,
    resolve,
)
from controller.p4rt_client import SwitchError
from controller.scheduler import Scheduler
from controller.state_keeper import StateKeeper
from controller.state_records import ControllerState, SavedFault, clear_record, fault_record, routes_record
from controller.switch_set import SwitchSet
from controller.syncer import Syncer
from mrc_fabric.topology import Topology

log = logging.getLogger(__name__)


class FaultKeeper:
    def __init__(self, topo: Topology, switches: SwitchSet, state: StateKeeper, events: EventBus) -> None:
        self.topo = topo
        self.switches = switches
        self.state = state
        self.events = events
        self._table = FaultTable()
        self._lock = threading.RLock()
        self._recording = 0  # injections whose record is being written (they count for the cap)
        self._clearing: set[str] = set()  # ids whose clear is being recorded
        self.scheduler = Scheduler()  # every fault's flap and expiry: one thread, not one per fault
        self.syncer = Syncer(lambda names: self.switches.sync(names), self._sync_failed)
        self.adopt_pending: set[str] = set()  # switches whose own tables are taken up at first contact
        self._adopt_faults = True  # cleared by clear_all: nothing read back later comes back as a fault

    def stop(self) -> None:
        self.scheduler.stop()
        self.syncer.stop()

    # -- reading -----------------------------------------------------------------------------------
    def entries_for(self, switch: str) -> list[TableEntry]:
        with self._lock:
            return self._table.entries_for(switch)

    def all_entries(self) -> dict[str, list[TableEntry]]:
        with self._lock:
            return self._table.all_entries()

    def faults(self) -> list[ActiveFault]:
        with self._lock:
            return list(self._table)

    # -- changes an API call asks for --------------------------------------------------------------
    def inject(self, spec: FaultSpec) -> ActiveFault:
        actions = resolve(self.topo, spec)
        switches = {a.switch for a in actions}
        self.switches.require_ready(switches)
        now, mono = time.time(), time.monotonic()
        with self._lock:
            held = len(self._table) + self._recording
            if held >= MAX_ACTIVE_FAULTS:
                raise FaultCapacityError(
                    "spec",
                    f"{held} faults are active, the most the controller keeps "
                    f"(MAX_ACTIVE_FAULTS={MAX_ACTIVE_FAULTS}); clear some first",
                )
            expires = now + spec.duration_s if spec.duration_s else 0.0
            fault = ActiveFault(self._table.new_id(), spec, actions, now, expires)
            self._recording += 1
        try:
            self.state.commit(fault_record(saved_fault(fault)))  # refused: nothing was changed
        except BaseException:
            with self._lock:
                self._recording -= 1
            raise
        with self._lock:
            self._recording -= 1
            self._table.add(fault)
        try:
            self.switches.sync(switches)
        except SwitchError:
            self._roll_back(fault)
            raise
        with self._lock:
            if fault.id in self._table:  # not cleared meanwhile
                self._schedule(fault, mono + spec.duration_s if spec.duration_s else 0.0)
        self.events.publish("fault_injected", fault_id=fault.id, message=describe_spec(spec))
        return fault

    def _roll_back(self, fault: ActiveFault) -> None:
        """A switch refused the fault's entries: it goes again, and its record is undone."""
        with self._lock:
            self._table.remove(fault.id)
        try:
            self.switches.sync(fault.switches)
        except SwitchError as exc:
            log.warning("rollback of %s incomplete: %s", fault.id, exc)
        self.state.keep(clear_record([fault.id]))

    def clear(self, fault_id: str, reason: str = "fault_cleared") -> list[str]:
        with self._lock:
            fault = self._table.get(fault_id)
            if fault is None or fault_id in self._clearing:
                raise KeyError(f"id: no fault {quote(fault_id)}")
            self._clearing.add(fault_id)
        try:
            self.state.commit(clear_record([fault_id]))  # refused: the fault stays, as it was
        finally:
            with self._lock:
                self._clearing.discard(fault_id)
        with self._lock:
            if self._table.get(fault_id) is fault:  # (its expiry may have come meanwhile)
                self._table.remove(fault_id)
                self._cancel_timers(fault)
        try:
            self.switches.sync(fault.switches)
        finally:  # gone from the desired state either way; a down switch drops it on reconnect
            self.events.publish(reason, fault_id=fault.id, message=describe_spec(fault.spec))
        return [fault.id]

    def clear_all(self) -> list[str]:
        """Every fault, whatever the controller knows of it: its own, and any entry a switch
        still holds (each ready switch is made to match, so a fault entry no state file
        remembered goes too; switches not read back yet bring no fault back)."""
        with self._lock:
            ids = [f.id for f in self._table]
        if ids:
            self.state.commit(clear_record(ids))  # refused: every fault stays
        with self._lock:
            self._adopt_faults = False
            faults = [f for i in ids if (f := self._table.remove(i)) is not None]
            for f in faults:
                self._cancel_timers(f)
        switches = {s for f in faults for s in f.switches} | self.switches.ready_names()
        try:
            self.switches.sync(switches)
        finally:
            for f in faults:
                self.events.publish("fault_cleared", fault_id=f.id, message=describe_spec(f.spec))
        return [f.id for f in faults]

    # -- timed changes (the scheduler's thread) ----------------------------------------------------
    def _schedule(self, fault: ActiveFault, expires_at: float) -> None:
        """Its flap and its expiry (``expires_at``: monotonic, 0 for none) on the scheduler."""
        if fault.spec.kind == FaultKind.FLAP:
            due = time.monotonic() + fault.spec.period_s
            fault.timers["flap"] = self.scheduler.call_at(due, lambda: self._flap(fault, due))
        if expires_at:
            fault.timers["expiry"] = self.scheduler.call_at(expires_at, lambda: self._expire(fault))

    def _cancel_timers(self, fault: ActiveFault) -> None:
        for timer in fault.timers.values():
            self.scheduler.cancel(timer)
        fault.timers.clear()

    def _flap(self, fault: ActiveFault, due: float) -> None:
        """Toggle the fault, then schedule the next toggle one period after this one was due
        (a late toggle does not shift the ones after it), until it is cleared; the write is
        the syncer's. Nothing may end the flapping early: a flap that stopped could leave a
        link down for good."""
        with self._lock:
            if self._table.get(fault.id) is not fault:
                return
            self._table.set_active(fault, not fault.active)
            nxt = due + fault.spec.period_s
            if nxt <= time.monotonic():  # more than a period late: skip what was missed
                nxt = time.monotonic() + fault.spec.period_s
            fault.timers["flap"] = self.scheduler.call_at(nxt, lambda: self._flap(fault, nxt))
        self.syncer.mark(fault.switches, fault.id)
        self.events.publish(
            "flap_down" if fault.active else "flap_up", fault_id=fault.id, message=fault.spec.target
        )

    def _expire(self, fault: ActiveFault) -> None:
        """Clear the fault when its duration is up: gone from the desired state at once (so a
        down switch drops it on reconnect), written by the syncer, its record kept for the next
        write (a restart drops an expired fault whatever the file says)."""
        with self._lock:
            if self._table.get(fault.id) is not fault:
                return  # cleared by someone else meanwhile
            self._table.remove(fault.id)
            self._cancel_timers(fault)
        self.state.keep(clear_record([fault.id]))
        self.syncer.mark(fault.switches, fault.id)
        self.events.publish("fault_expired", fault_id=fault.id, message=describe_spec(fault.spec))

    def _sync_failed(self, fault_id: str, exc: Exception) -> None:
        """A write the syncer made for a timed change failed: said as an event."""
        if isinstance(exc, SwitchError):
            self.events.publish("error", switch=exc.switch, fault_id=fault_id, message=str(exc)[:300])
        else:
            log.error("sync for %s failed: %r", fault_id, exc)
            self.events.publish("error", fault_id=fault_id, message=f"sync: {exc!r}"[:200])

    # -- start: the state a controller before this one left ----------------------------------------
    def restore(self, state: ControllerState | None, next_id: int) -> None:
        """Take up where a controller that died left off: its faults are in force again (a fault
        whose time ran out while no controller ran is dropped; the others keep their ids, flap
        again and expire when they would have); ids go on above ``next_id`` whatever happened."""
        self._table.next_id = max(self._table.next_id, next_id)
        if state is None:
            return
        now, mono = time.time(), time.monotonic()
        gone = []
        for saved in state.faults:
            if saved.expires_at and saved.expires_at <= now:
                gone.append(saved.id)
                continue
            try:
                actions = resolve(self.topo, saved.spec)
            except (FaultError, KeyError) as exc:  # a topology that changed under the file
                log.warning("state file: fault %s dropped: %s", saved.id, exc)
                gone.append(saved.id)
                continue
            fault = ActiveFault(saved.id, saved.spec, actions, saved.created_at, saved.expires_at)
            self._table.add(fault)
            self._schedule(fault, mono + saved.expires_at - now if saved.expires_at else 0.0)
            self.events.publish("fault_restored", fault_id=fault.id, message=describe_spec(fault.spec))
        if gone:
            self.state.keep(clear_record(gone))

    def adopt(self, switch: str, held: list[TableEntry], routes: SwitchEntries) -> bool:
        """A session's first read of ``switch`` when the state file held nothing trustworthy: its
        fault entries become faults (adopt.py), so the reconcile that follows keeps them and
        ``clear --all`` can take them away. True if its routes count as installed."""
        with self._lock:
            if switch not in self.adopt_pending:
                return False
            self.adopt_pending.discard(switch)
            found = adopt_entries(self.topo, switch, routes, held)
            adopted = []
            for spec in found.faults if self._adopt_faults else []:
                fault = ActiveFault(self._table.new_id(), spec, resolve(self.topo, spec), time.time())
                self._table.add(fault)
                adopted.append(fault)
        if found.routes_installed:
            self.state.keep(routes_record([switch]))
        for f in adopted:
            self.state.keep(fault_record(saved_fault(f)))
        log.warning("%s: adopted from its tables: routes %s, %d faults%s", switch,
                    "installed" if found.routes_installed else "absent", len(adopted),
                    f"; left out {found.ignored}" if found.ignored else "")  # fmt: skip
        for f in adopted:
            self.events.publish("fault_adopted", switch=switch, fault_id=f.id, message=describe_spec(f.spec))
        return found.routes_installed


def describe_spec(spec: FaultSpec) -> str:
    parts = [spec.kind.value, spec.target]
    if spec.kind in (FaultKind.BLACKHOLE, FaultKind.LOSS, FaultKind.FLAP):
        parts.append(spec.direction.value)
    if spec.kind == FaultKind.LOSS:
        parts.append(f"p={spec.probability:g}")
    if spec.kind == FaultKind.FLAP:
        parts.append(f"period={spec.period_s:g}s")
    if spec.duration_s:
        parts.append(f"for {spec.duration_s:g}s")
    return " ".join(parts)


def saved_fault(f: ActiveFault) -> SavedFault:
    return SavedFault(f.id, f.spec, f.created_at, f.expires_at)
