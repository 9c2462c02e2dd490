"""The switches as the controller holds them: one P4Runtime session each, the compiled routes,
which switches have them installed, and the writes that make every switch hold its desired state.

Why its own owner: the routes installed and the sessions are state of their own (a restart
takes them up from the state file; a session reconnects by itself), and the faults only need to
ask "are these switches up?" and "write them now". What a switch should hold is not decided
here: ``desired`` (given by the core) adds the faults' entries to the routes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from concurrent import futures
from pathlib import Path

from controller.entries import SwitchEntries, TableEntry
from controller.faults import quote
from controller.northbound import CounterCell
from controller.p4rt_client import Pipeline, SwitchError, SwitchPool, SwitchSession, SwitchUnavailable
from mrc_fabric.drop_reasons import DROP_REASON_LABELS, drop_reason_label
from mrc_fabric.p4_contract import contract_table_names
from mrc_fabric.p4info import P4InfoIndex
from mrc_fabric.p4names import Counter
from mrc_fabric.topology import Target, Topology

COUNTERS = (Counter.PORT_RX, Counter.PORT_TX, Counter.DROP_REASON, Counter.ECN_MARKED)
SYNC_PARALLEL = 16  # switches written at once by route installs and fault changes

Desired = Callable[[str], list[TableEntry]]
OnEvent = Callable[[str, str, str], None]  # (kind, switch, message)
OnRead = Callable[[str, list[TableEntry]], None]  # a session's first read of its switch


class SwitchSet:
    def __init__(
        self,
        topo: Topology,
        routes: dict[str, SwitchEntries],
        index: P4InfoIndex,
        election_id: int,
        bmv2_json: Path,
        hooks: tuple[Desired, OnEvent, OnRead],
    ) -> None:
        self.topo = topo
        self.routes = routes
        self._installed: set[str] = set()  # switches whose compiled routes are desired
        self._lock = threading.Lock()
        self._pool = futures.ThreadPoolExecutor(max_workers=SYNC_PARALLEL, thread_name_prefix="sync")
        desired, on_event, on_read = hooks
        self.pool = SwitchPool(
            self._session(sw.name, index, election_id, bmv2_json, desired, on_event, on_read)
            for sw in topo.switches
        )

    def _session(
        self, name: str, index: P4InfoIndex, election_id: int, bmv2_json: Path,
        desired: Desired, on_event: OnEvent, on_read: OnRead,
    ) -> SwitchSession:  # fmt: skip
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
            pipeline=Pipeline(index.p4info, config),
            index=index,
            desired=lambda: desired(name),
            on_event=on_event,
            election_id=election_id,
            on_read=lambda held: on_read(name, held),
            owned_tables=frozenset(index.table(t).id for t in contract_table_names()),
        )

    def start(self) -> None:
        for sw in self.topo.switches:
            if not sw.p4rt_address:
                raise ValueError(f"switches[{sw.name}].p4rt_address: empty; the topology script fills it in")
        self.pool.start()

    def stop(self) -> None:
        self.pool.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- routes ------------------------------------------------------------------------------------
    def route_entries(self, switch: str) -> list[TableEntry]:
        """The compiled routes ``switch`` should hold now (none before they are installed)."""
        with self._lock:
            return list(self.routes[switch].entries) if switch in self._installed else []

    def mark_installed(self, names: Iterable[str]) -> None:
        with self._lock:
            self._installed.update(n for n in names if n in self.routes)

    # -- sessions ----------------------------------------------------------------------------------
    def names(self, switches: list[str] | None) -> list[str]:
        """The named switches (default: all); KeyError quotes (a bounded prefix of) an unknown one."""
        if not switches:
            return [sw.name for sw in self.topo.switches]
        for i, n in enumerate(switches):
            if not self.topo.has_switch(n):
                raise KeyError(f"switches[{i}]: no switch {quote(n)}")
        return list(dict.fromkeys(switches))

    def require_ready(self, switches: Iterable[str]) -> None:
        down = sorted(n for n in switches if not self.pool[n].ready)
        if down:
            s = self.pool[down[0]]
            reason = f" ({s.last_error})" if s.last_error else ""
            raise SwitchUnavailable(down[0], f"switch {', '.join(down)} unreachable at {s.address}{reason}")

    def ready_names(self) -> set[str]:
        return {n for n, s in self.pool.sessions.items() if s.ready}

    def unreachable(self, nodes: Iterable[str]) -> tuple[str, ...]:
        """Those of ``nodes`` that are switches without a live session, once each, in order."""
        return tuple(
            dict.fromkeys(n for n in nodes if n in self.pool.sessions and not self.pool[n].reachable)
        )

    def sync(self, switches: set[str] | list[str]) -> dict[str, int]:
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

    def counters(self, switches: list[str] | None) -> tuple[list[CounterCell], list[str]]:
        """Every counter cell of the named switches (default: all), and what could not be read."""
        return read_counters(self.topo, [self.pool[n] for n in self.names(switches)])


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
