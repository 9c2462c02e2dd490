"""The controller's state and operations, independent of gRPC.

It owns the *desired* entries of every switch — the compiled routes once installed,
plus the fault entries of the active faults — and asks each switch's P4Runtime
session to hold exactly those. Because the desired state lives here, a switch that
restarts gets everything back from its session's replay, and a fault that is cleared
takes its entries with it while other faults on the same port stay.

Every change is recorded in the state file (``state_store``: one writer, journalled) before
the API call answers; timed changes (a flap's toggle, an expiry) change the desired state at
once on the scheduler's thread and leave the writing to the switches to ``syncer``.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from controller.adopt import adopt_entries
from controller.compiler import (
    CompileOptions,
    compile_host_configs,
    compile_routes,
    ecmp_template,
    path_template,
)
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
from controller.health import AgentState, AgentWatch
from controller.northbound import CounterCell
from controller.p4rt_client import Pipeline, SwitchError, SwitchPool, SwitchSession, SwitchUnavailable
from controller.scheduler import Scheduler
from controller.state_file import (
    ControllerState,
    Recovered,
    SavedFault,
    clear_record,
    fault_record,
    recover_state,
    routes_record,
)
from controller.state_store import StateStore
from controller.syncer import Syncer
from controller.tablewalk import Walk, build_views, walk
from mrc_fabric.addressing import carrier
from mrc_fabric.drop_reasons import DROP_REASON_LABELS, drop_reason_label
from mrc_fabric.ev import EV
from mrc_fabric.hostconfig import write_host_configs
from mrc_fabric.p4_contract import contract_table_names
from mrc_fabric.p4info import P4InfoIndex, default_index
from mrc_fabric.p4names import Counter
from mrc_fabric.topology import Target, Topology
from mrc_p4rt.channel import CONTROLLER_ELECTION_ID

__all__ = ["ActiveFault", "ControllerCore", "PathInfo", "SwitchHealth", "describe_spec"]

log = logging.getLogger(__name__)

BMV2_JSON = Path(__file__).resolve().parent.parent / "p4src" / "build" / "mrc_switch.json"
COUNTERS = (Counter.PORT_RX, Counter.PORT_TX, Counter.DROP_REASON, Counter.ECN_MARKED)
SYNC_PARALLEL = 16  # switches written at once by install_routes and fault changes
HEALTH_INTERVAL_S = 1.0  # how often the agents' control sockets are probed


@dataclass(frozen=True)
class PathInfo:
    ev: int
    plane: int
    t1: int  # -1: none
    carrier: str
    walk: Walk
    unreachable: tuple[str, ...] = ()  # switches on the path without a live P4Runtime session

    @property
    def status(self) -> str:
        if not self.walk.ok:
            return "dropped"
        if self.unreachable:
            return "unreachable"
        return "lossy" if self.walk.survival < 1.0 else "ok"


@dataclass(frozen=True)
class SwitchHealth:
    name: str
    address: str
    reachable: bool
    primary: bool
    last_error: str
    reconciles: int
    pipeline_pushes: int


class ControllerCore:
    def __init__(
        self,
        topo: Topology,
        run_dir: Path | None = None,
        options: CompileOptions | None = None,
        election_id: int = CONTROLLER_ELECTION_ID,
        index: P4InfoIndex | None = None,
        bmv2_json: Path = BMV2_JSON,
        state_file: Path | None = None,
    ) -> None:
        self.topo = topo
        self.state_file = state_file  # routes and faults kept for a restart (state_file.py)
        self.run_dir = run_dir
        self.index = index or default_index()
        self.events = EventBus()
        self.routes: dict[str, SwitchEntries] = compile_routes(topo, options or CompileOptions())
        self._routes_installed: set[str] = set()
        self._faults = FaultTable()
        self._lock = threading.RLock()
        self._pool = futures.ThreadPoolExecutor(max_workers=SYNC_PARALLEL, thread_name_prefix="sync")
        self.scheduler = Scheduler()  # every fault's flap and expiry: one thread, not one per fault
        self.syncer = Syncer(lambda names: self._sync(names), self._sync_failed)
        self.pool = SwitchPool(self._session(sw.name, election_id, bmv2_json) for sw in topo.switches)
        self.agent_watch = (
            AgentWatch([h.name for h in topo.hosts], run_dir / "agents") if run_dir is not None else None
        )
        self._health_stop = threading.Event()
        self._health_thread: threading.Thread | None = None
        self.store: StateStore | None = None
        self.recovery = Recovered(None, "none")  # how the state was found at start
        self._adopt_pending: set[str] = set()  # switches whose own tables are taken up at first contact
        self._adopt_faults = True  # cleared by clear_all: nothing read back later comes back as a fault
        if state_file is not None:
            self._open_state(state_file)

    def _session(self, name: str, election_id: int, bmv2_json: Path) -> SwitchSession:
        sw = self.topo.switch(name)
        config = b""
        if sw.target == Target.BMV2:
            if not bmv2_json.exists():
                raise FileNotFoundError(f"{name} is a bmv2 switch but {bmv2_json} is missing: run `make p4`")
            config = bmv2_json.read_bytes()
        return SwitchSession(
            name=name,
            address=sw.p4rt_address,
            device_id=sw.device_id,
            pipeline=Pipeline(self.index.p4info, config),
            index=self.index,
            desired=partial(self.desired, name),
            on_event=self._switch_event,
            election_id=election_id,
            on_read=partial(self._adopt, name),
            owned_tables=frozenset(self.index.table(t).id for t in contract_table_names()),
        )

    def _switch_event(self, kind: str, switch: str, message: str) -> None:
        self.events.publish(kind, switch=switch, message=message)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        for sw in self.topo.switches:
            if not sw.p4rt_address:
                raise ValueError(f"switches[{sw.name}].p4rt_address: empty; the topology script fills it in")
        self.pool.start()
        if self.agent_watch is not None:
            self._health_thread = threading.Thread(target=self._watch_agents, name="agent-watch", daemon=True)
            self._health_thread.start()

    def stop(self) -> None:
        self.scheduler.stop()
        self.syncer.stop()
        self._health_stop.set()
        if self._health_thread is not None:
            self._health_thread.join(timeout=5)
        self.pool.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.store is not None:
            self.store.stop()
        self.events.close()

    def wait_ready(self, timeout: float) -> list[str]:
        return self.pool.wait_ready(timeout)

    # -- health ----------------------------------------------------------------------------------
    def _watch_agents(self) -> None:
        """Probe the agents' control sockets every HEALTH_INTERVAL_S; publish what changed."""
        assert self.agent_watch is not None
        while True:
            try:
                for a in self.agent_watch.check():
                    if a.state == "dead":
                        self.events.publish("agent_dead", message=f"{a.host}: {a.detail} at {a.socket}")
                    elif a.state == "alive":
                        self.events.publish("agent_alive", message=f"{a.host}: control socket answers")
            except Exception:  # the watch must outlive any surprise
                log.exception("agent watch")
            if self._health_stop.wait(HEALTH_INTERVAL_S):
                return

    def switch_health(self) -> list[SwitchHealth]:
        return [
            SwitchHealth(s.name, s.address, s.reachable, s.ready, s.last_error, s.connects, s.pipeline_pushes)
            for s in self.pool.sessions.values()
        ]

    def agent_health(self) -> list[AgentState]:
        return list(self.agent_watch.agents.values()) if self.agent_watch is not None else []

    # -- desired state ---------------------------------------------------------------------------
    def desired(self, switch: str) -> list[TableEntry]:
        with self._lock:
            out = list(self.routes[switch].entries) if switch in self._routes_installed else []
            out.extend(self._faults.entries_for(switch))
            return out

    def _sync(self, switches: set[str] | list[str]) -> dict[str, int]:
        """Push the desired state to each switch; raises the first failure (by switch name)
        after trying all. Switches are written in parallel: each one's kernel takes its time to
        program, and 128 of them one after another left the machine idle half the time."""
        names = sorted(switches)
        outcome: dict[str, int | SwitchError] = {}

        def one(name: str) -> None:
            try:
                outcome[name] = self.pool[name].sync()
            except SwitchError as exc:
                outcome[name] = exc

        if len(names) == 1:
            one(names[0])
        else:
            list(self._pool.map(one, names))
        errors = [r for n in names if isinstance(r := outcome[n], SwitchError)]
        if errors:
            raise errors[0]
        return {n: r for n in names if isinstance(r := outcome[n], int)}

    def _sync_failed(self, fault_id: str, exc: Exception) -> None:
        """A write the syncer made for a timed change failed: said as an event."""
        if isinstance(exc, SwitchError):
            self.events.publish("error", switch=exc.switch, fault_id=fault_id, message=str(exc)[:300])
        else:
            log.error("sync for %s failed: %r", fault_id, exc)
            self.events.publish("error", fault_id=fault_id, message=f"sync: {exc!r}"[:200])

    def _require_ready(self, switches: set[str] | list[str]) -> None:
        down = sorted(n for n in switches if not self.pool[n].ready)
        if down:
            s = self.pool[down[0]]
            reason = f" ({s.last_error})" if s.last_error else ""
            raise SwitchUnavailable(down[0], f"switch {', '.join(down)} unreachable at {s.address}{reason}")

    def _switch_names(self, switches: list[str] | None) -> list[str]:
        """The named switches (default: all); KeyError quotes (a bounded prefix of) an unknown one."""
        if not switches:
            return [sw.name for sw in self.topo.switches]
        for i, n in enumerate(switches):
            if not self.topo.has_switch(n):
                raise KeyError(f"switches[{i}]: no switch {quote(n)}")
        return list(dict.fromkeys(switches))

    # -- routes ----------------------------------------------------------------------------------
    def install_routes(self, switches: list[str] | None = None) -> dict[str, int]:
        """Install the compiled routes; returns the number of entries each switch holds."""
        names = self._switch_names(switches)
        self._require_ready(names)
        with self._lock:
            self._routes_installed.update(names)
        self._record(routes_record(names))
        self._sync(names)
        self.write_host_configs()
        counts = {n: len(self.desired(n)) for n in names}
        self.events.publish(
            "routes_installed", message=f"{sum(counts.values())} entries on {len(names)} switches"
        )
        return counts

    def host_config_dir(self) -> Path | None:
        return self.run_dir / "hosts" if self.run_dir else None

    def write_host_configs(self) -> None:
        directory = self.host_config_dir()
        if directory is not None:
            write_host_configs(directory, compile_host_configs(self.topo))

    # -- state kept for a restart ------------------------------------------------------------------
    def _open_state(self, path: Path) -> None:
        """Take up the state a controller before this one kept, whatever became of its file:
        the file; else the last good state; else the switches' own tables (read back when each
        session first connects). Never refuses to start; says what happened."""
        for stale in path.parent.glob(f".{path.name}*.tmp"):  # a write a crash interrupted
            stale.unlink(missing_ok=True)
        found = recover_state(path)
        self.recovery = found
        if found.source == "unreadable":
            self._adopt_pending = {sw.name for sw in self.topo.switches}
            found.notes.append("reading the switches' own tables back instead")
        for note in found.notes:
            log.warning("state file: %s", note)
            self.events.publish("state_recovered", message=note[:300])
        state = found.state or ControllerState()
        try:
            self.store = StateStore(path, state, fresh=found.source != "file" or bool(found.notes))
        except OSError as exc:  # a directory gone or full: serve anyway, and say what is at stake
            note = f"cannot write {path} ({exc}): changes will not survive a restart"
            log.error("state file: %s", note)
            self.events.publish("state_recovered", message=note[:300])
        if found.state is not None:
            self._restore(found.state)

    def _restore(self, state: ControllerState) -> None:
        """Take up where a controller that died left off: its routes count as installed, so
        reconnecting to a switch keeps them, and its faults are in force again (a fault whose
        time ran out while no controller ran is dropped; the others keep their ids, flap
        again and expire when they would have)."""
        now, mono = time.time(), time.monotonic()
        self._routes_installed.update(n for n in state.routes_installed if self.topo.has_switch(n))
        self._faults.next_id = max(self._faults.next_id, state.next_id)
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
            self._faults.add(fault)
            self._schedule(fault, mono + saved.expires_at - now if saved.expires_at else 0.0)
            self.events.publish("fault_restored", fault_id=fault.id, message=describe_spec(fault.spec))
        if gone:
            self._record(clear_record(gone), wait=False)

    def _adopt(self, switch: str, held: list[TableEntry]) -> None:
        """A session's first read of ``switch`` when the state file was unreadable: its routes
        count as installed and its fault entries become faults (adopt.py), so the reconcile
        that follows keeps them and ``clear --all`` can take them away."""
        with self._lock:
            if switch not in self._adopt_pending:
                return
            self._adopt_pending.discard(switch)
            found = adopt_entries(self.topo, switch, self.routes[switch], held)
            records, adopted = [], []
            if found.routes_installed:
                self._routes_installed.add(switch)
                records.append(routes_record([switch]))
            for spec in found.faults if self._adopt_faults else []:
                fault = ActiveFault(self._faults.new_id(), spec, resolve(self.topo, spec), time.time())
                self._faults.add(fault)
                adopted.append(fault)
                records.append(fault_record(saved_fault(fault)))
        for rec in records:
            self._record(rec, wait=False)
        log.warning("%s: adopted from its tables: routes %s, %d faults%s", switch,
                    "installed" if found.routes_installed else "absent", len(adopted),
                    f"; left out {found.ignored}" if found.ignored else "")  # fmt: skip
        for f in adopted:
            self.events.publish("fault_adopted", switch=switch, fault_id=f.id, message=describe_spec(f.spec))

    def _record(self, record: dict[str, Any], wait: bool = True) -> int:
        """Hand a change to the state file's writer (its ticket; 0 without a state file); with
        ``wait``, return once it is on disk."""
        if self.store is None:
            return 0
        ticket = self.store.submit(record)
        if wait:
            self._durable(ticket)
        return ticket

    def _durable(self, ticket: int) -> None:
        """Wait for a record to be on disk; a failure is logged and said as an event (the
        controller goes on: only a restart would lose the change)."""
        if self.store is None or not ticket:
            return
        try:
            self.store.wait(ticket)
        except (OSError, TimeoutError) as exc:
            log.warning("cannot save the controller state to %s: %s", self.state_file, exc)
            self.events.publish("error", message=f"state file: {exc}"[:300])

    def _schedule(self, fault: ActiveFault, expires_at: float) -> None:
        """Its flap and its expiry (``expires_at``: monotonic, 0 for none) on the scheduler."""
        if fault.spec.kind == FaultKind.FLAP:
            due = time.monotonic() + fault.spec.period_s
            fault.timers["flap"] = self.scheduler.call_at(due, lambda: self._flap(fault, due))
        if expires_at:
            fault.timers["expiry"] = self.scheduler.call_at(expires_at, lambda: self._expire(fault))

    # -- faults ----------------------------------------------------------------------------------
    def inject_fault(self, spec: FaultSpec) -> ActiveFault:
        actions = resolve(self.topo, spec)
        switches = {a.switch for a in actions}
        self._require_ready(switches)
        now, mono = time.time(), time.monotonic()
        with self._lock:
            if len(self._faults) >= MAX_ACTIVE_FAULTS:
                raise FaultCapacityError(
                    "spec",
                    f"{len(self._faults)} faults are active, the most the controller keeps "
                    f"(MAX_ACTIVE_FAULTS={MAX_ACTIVE_FAULTS}); clear some first",
                )
            expires = now + spec.duration_s if spec.duration_s else 0.0
            fault = ActiveFault(self._faults.new_id(), spec, actions, now, expires)
            self._faults.add(fault)
        try:
            self._sync(switches)
        except SwitchError:
            with self._lock:
                self._faults.remove(fault.id)
            try:
                self._sync(switches)
            except SwitchError as exc:
                log.warning("rollback of %s incomplete: %s", fault.id, exc)
            raise
        ticket = 0
        with self._lock:
            if fault.id in self._faults:  # not cleared meanwhile; recorded before its expiry can be
                ticket = self._record(fault_record(saved_fault(fault)), wait=False)
                self._schedule(fault, mono + spec.duration_s if spec.duration_s else 0.0)
        self._durable(ticket)
        self.events.publish("fault_injected", fault_id=fault.id, message=describe_spec(spec))
        return fault

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
            if self._faults.get(fault.id) is not fault:
                return
            self._faults.set_active(fault, not fault.active)
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
        down switch drops it on reconnect), written by the syncer, recorded without waiting."""
        with self._lock:
            if self._faults.get(fault.id) is not fault:
                return  # cleared by someone else meanwhile
            self._faults.remove(fault.id)
            self._cancel_timers(fault)
            self._record(clear_record([fault.id]), wait=False)
        self.syncer.mark(fault.switches, fault.id)
        self.events.publish("fault_expired", fault_id=fault.id, message=describe_spec(fault.spec))

    def clear_fault(self, fault_id: str, reason: str = "fault_cleared") -> list[str]:
        with self._lock:
            fault = self._faults.remove(fault_id)
            if fault is not None:
                self._cancel_timers(fault)
        if fault is None:
            raise KeyError(f"id: no fault {quote(fault_id)}")
        self._record(clear_record([fault.id]))
        try:
            self._sync(fault.switches)
        finally:  # gone from the desired state either way; a down switch drops it on reconnect
            self.events.publish(reason, fault_id=fault.id, message=describe_spec(fault.spec))
        return [fault.id]

    def clear_all(self) -> list[str]:
        """Every fault, whatever the controller knows of it: its own, and any entry a switch
        still holds (each ready switch is made to match, so a fault entry no state file
        remembered goes too; switches not read back yet bring no fault back)."""
        with self._lock:
            faults = self._faults.remove_all()
            self._adopt_faults = False
            for f in faults:
                self._cancel_timers(f)
        self._record(clear_record(f.id for f in faults))
        switches = {s for f in faults for s in f.switches}
        switches |= {n for n, s in self.pool.sessions.items() if s.ready}
        try:
            self._sync(switches)
        finally:
            for f in faults:
                self.events.publish("fault_cleared", fault_id=f.id, message=describe_spec(f.spec))
        return [f.id for f in faults]

    def faults(self) -> list[ActiveFault]:
        with self._lock:
            return list(self._faults)

    def fault_entry_descriptions(self, fault: ActiveFault) -> list[str]:
        return [a.describe() for a in fault.actions]

    # -- paths -----------------------------------------------------------------------------------
    def paths(self, src: str, dst: str, ecmp: bool = False) -> list[PathInfo]:
        """Every carrier from ``src`` to ``dst`` walked through the compiled routes and live faults."""
        s, d = self.topo.host(src), self.topo.host(dst)
        if s.name == d.name:
            raise ValueError("dst: source and destination are the same host")
        with self._lock:
            faults = self._faults.all_entries()
        views = build_views({n: [*self.routes[n].entries, *faults.get(n, [])] for n in self.routes})
        same_t0 = s.t0_index == d.t0_index
        choices = [-1] if same_t0 else list(range(self.topo.t1_per_plane))
        if ecmp:
            template = ecmp_template(s.t0_index, d.t0_index, d.index)
        else:
            template = path_template(self.topo, s.t0_index, d.t0_index, d.index)
        out = []
        for plane in range(self.topo.planes):
            for t1 in choices:
                # ECMP: the entropy picks the uplink (the walker hashes entropy mod size)
                ev = EV(plane, 0, max(t1, 0)) if ecmp else EV(plane, max(t1, 0))
                addr = carrier(template.usids_for(ev), self.topo.block)
                w = walk(self.topo, views, src, plane, addr, ev.value)
                down = tuple(
                    dict.fromkeys(
                        h.node
                        for h in w.hops
                        if h.node in self.pool.sessions and not self.pool[h.node].reachable
                    )
                )
                out.append(PathInfo(ev.value, plane, -1 if ecmp else t1, str(addr), w, down))
        return out

    # -- counters --------------------------------------------------------------------------------
    def counters(self, switches: list[str] | None = None) -> tuple[list[CounterCell], list[str]]:
        """Every counter cell of the named switches (default: all), and what could not be read."""
        names = self._switch_names(switches)
        return read_counters(self.topo, [self.pool[n] for n in names])


def read_counters(topo: Topology, sessions: list[SwitchSession]) -> tuple[list[CounterCell], list[str]]:
    cells: list[CounterCell] = []
    errors: list[str] = []
    for session in sessions:
        n = session.name
        if not session.ready:
            errors.append(f"{n}: unreachable at {session.address}")
            continue
        ports = {e.port: e.ifname for e in topo.ports_of(n)}
        for counter in COUNTERS:
            try:
                values = session.read_counter(counter)
            except SwitchError as exc:
                errors.append(str(exc))
                continue
            for i, packets, nbytes in values:
                if counter == Counter.DROP_REASON:
                    label = drop_reason_label(i)
                    if i not in DROP_REASON_LABELS and not packets:
                        continue
                else:
                    label = ports.get(i, "")
                    if not label and not packets:
                        continue
                cells.append(CounterCell(n, counter, i, label, packets, nbytes))
    return cells, errors


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
