"""The controller's operations, independent of gRPC: one object that puts its owners together.

It holds the *desired* entries of every switch -- the compiled routes once installed
(``switch_set.SwitchSet``), plus the fault entries of the active faults
(``fault_keeper.FaultKeeper``) -- and asks each switch's P4Runtime session to hold exactly
those. Because the desired state lives here, a switch that restarts gets everything back from
its session's replay, and a fault that is cleared takes its entries with it while other faults
on the same port stay.

Every change is durable before it is made (``state_keeper.StateKeeper``): the API answers once
it is on disk, or refuses it (``StateUnavailable``) and changes nothing. At start the state a
controller before this one kept is taken up -- the file, else its second copy, else the
switches' own tables -- and whatever damage cost is said.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from controller.compiler import CompileOptions, compile_host_configs, compile_routes
from controller.entries import SwitchEntries, TableEntry
from controller.events import EventBus
from controller.fault_keeper import FaultKeeper, describe_spec, saved_fault
from controller.fault_table import ActiveFault
from controller.faults import FaultSpec
from controller.health import AgentState, AgentWatch
from controller.northbound import CounterCell
from controller.path_view import PathInfo, list_paths
from controller.state_file import Recovered
from controller.state_keeper import StateKeeper, StateUnavailable
from controller.state_records import routes_record
from controller.state_store import StateStore
from controller.switch_set import SwitchSet, read_counters
from mrc_fabric.hostconfig import write_host_configs
from mrc_fabric.p4info import P4InfoIndex, default_index
from mrc_fabric.topology import Topology
from mrc_p4rt.channel import CONTROLLER_ELECTION_ID

__all__ = [
    "ActiveFault",
    "ControllerCore",
    "PathInfo",
    "StateUnavailable",
    "SwitchHealth",
    "describe_spec",
    "read_counters",
    "saved_fault",
]

log = logging.getLogger(__name__)

BMV2_JSON = Path(__file__).resolve().parent.parent / "p4src" / "build" / "mrc_switch.json"
HEALTH_INTERVAL_S = 1.0  # how often the agents' control sockets are probed


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
        hooks = (self.desired, self._switch_event, self._adopt)
        self.switches = SwitchSet(topo, self.routes, self.index, election_id, bmv2_json, hooks)
        self.pool = self.switches.pool
        self.state = StateKeeper(state_file, self.events)
        self.fault_keeper = FaultKeeper(topo, self.switches, self.state, self.events)
        self.scheduler = self.fault_keeper.scheduler
        self.syncer = self.fault_keeper.syncer
        self.agent_watch = (
            AgentWatch([h.name for h in topo.hosts], run_dir / "agents") if run_dir is not None else None
        )
        self._health_stop = threading.Event()
        self._health_thread: threading.Thread | None = None
        if state_file is not None:
            self._open_state()

    @property
    def store(self) -> StateStore | None:
        return self.state.store

    @property
    def recovery(self) -> Recovered:
        """How the state was found at start."""
        return self.state.recovery

    def _switch_event(self, kind: str, switch: str, message: str) -> None:
        self.events.publish(kind, switch=switch, message=message)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self.switches.start()
        if self.agent_watch is not None:
            self._health_thread = threading.Thread(target=self._watch_agents, name="agent-watch", daemon=True)
            self._health_thread.start()

    def stop(self) -> None:
        self.fault_keeper.stop()
        self._health_stop.set()
        if self._health_thread is not None:
            self._health_thread.join(timeout=5)
        self.switches.stop()
        self.state.stop()
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
        return [*self.switches.route_entries(switch), *self.fault_keeper.entries_for(switch)]

    # -- routes ----------------------------------------------------------------------------------
    def install_routes(self, switches: list[str] | None = None) -> dict[str, int]:
        """Install the compiled routes (recorded first: refused, nothing is written); returns
        the number of entries each switch holds."""
        names = self.switches.names(switches)
        self.switches.require_ready(names)
        self.state.commit(routes_record(names))
        self.switches.mark_installed(names)
        self.switches.sync(names)
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
    def _open_state(self) -> None:
        """Take up the state a controller before this one kept, whatever became of its file:
        the file; else its second copy; else the switches' own tables (read back when each
        session first connects). Never refuses to start; says what happened."""
        found = self.state.open()
        if found.source == "unreadable":
            self.fault_keeper.adopt_pending = {sw.name for sw in self.topo.switches}
        if found.state is not None:
            self.switches.mark_installed(n for n in found.state.routes_installed if self.topo.has_switch(n))
        self.fault_keeper.restore(found.state, found.next_id)

    def _adopt(self, switch: str, held: list[TableEntry]) -> None:
        if self.fault_keeper.adopt(switch, held, self.routes[switch]):
            self.switches.mark_installed([switch])

    # -- faults ----------------------------------------------------------------------------------
    def inject_fault(self, spec: FaultSpec) -> ActiveFault:
        return self.fault_keeper.inject(spec)

    def clear_fault(self, fault_id: str, reason: str = "fault_cleared") -> list[str]:
        return self.fault_keeper.clear(fault_id, reason)

    def clear_all(self) -> list[str]:
        return self.fault_keeper.clear_all()

    def faults(self) -> list[ActiveFault]:
        return self.fault_keeper.faults()

    def fault_entry_descriptions(self, fault: ActiveFault) -> list[str]:
        return [a.describe() for a in fault.actions]

    # -- paths and counters ------------------------------------------------------------------------
    def paths(self, src: str, dst: str, ecmp: bool = False) -> list[PathInfo]:
        """Every carrier from ``src`` to ``dst`` walked through the compiled routes and live faults."""
        faults = self.fault_keeper.all_entries()
        return list_paths(self.topo, self.routes, faults, self.switches.unreachable, (src, dst), ecmp)

    def counters(self, switches: list[str] | None = None) -> tuple[list[CounterCell], list[str]]:
        """Every counter cell of the named switches (default: all), and what could not be read."""
        return self.switches.counters(switches)
