"""Routes a killed shim left behind: kept while the controller re-writes the tables, then swept.

Why: a shim that dies (``kill -9``, a crash) leaves its routes in the namespace's kernel, and
the kernel goes on forwarding with them. Removing them when the next shim starts, before the
controller has written anything, would make every packet meet no route until it has; keeping
them costs nothing, because the controller's writes replace each one it still wants
(``RTM_NEWROUTE`` with ``NLM_F_REPLACE``). What it no longer wants is removed once the
controller has been quiet for ``grace_s`` (or ``grace_s`` after start when nobody writes): a
route left over from the old tables then disappears, as the P4 switch's would have.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from ipaddress import IPv6Network
from typing import Protocol

from linux_target.kernel_state import KernelState

log = logging.getLogger(__name__)

__all__ = ["StaleRouteSweep"]


class Programmer(Protocol):
    """What the sweep passes transitions to and removes routes through (the switch's kernel
    programmer, run by its namespace worker: ``shim_switch.OnWorker``)."""

    def transition(self, old: KernelState, new: KernelState) -> None: ...

    def remove_route(self, dst: IPv6Network) -> None: ...


class StaleRouteSweep:
    """Stands in for the kernel programmer of ``SwitchTables``: passes every transition on,
    and sweeps the routes found at start that the tables have not taken up, once writes stop."""

    def __init__(
        self,
        programmer: Programmer,
        left: set[IPv6Network],
        grace_s: float,
        current: Callable[[], KernelState],
        name: str = "",
    ) -> None:
        self.programmer = programmer
        self.name = name  # the switch's (its timer thread is named after it, for its log)
        self.left = set(left)  # the earlier shim's routes not yet swept
        self.grace_s = grace_s
        self.current = current  # the tables' kernel state now (read under ``lock``)
        self.lock: threading.Lock | threading.RLock = threading.RLock()  # the P4Runtime service's
        self.swept = 0
        self._timer: threading.Timer | None = None
        self._mutex = threading.Lock()

    def start(self) -> None:
        if self.left:
            log.info("%d routes of an earlier shim kept until the tables are written", len(self.left))
            self._arm()

    def stop(self) -> None:
        with self._mutex:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def transition(self, old: KernelState, new: KernelState) -> None:
        self.programmer.transition(old, new)
        if self.left:
            self._arm()

    def _arm(self) -> None:
        with self._mutex:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.grace_s, self.sweep)
            self._timer.name = f"{self.name}/sweep"
            self._timer.daemon = True
            self._timer.start()

    def sweep(self) -> int:
        """Remove the left-over routes the tables do not hold; returns how many went."""
        with self.lock:
            wanted = set(self.current().routes)
            gone = sorted(self.left - wanted)
            for dst in gone:
                try:
                    self.programmer.remove_route(dst)
                except Exception as exc:  # a route the kernel already dropped: log, go on
                    log.warning("could not sweep the left-over route %s: %s", dst, exc)
            self.left.clear()
            self.swept += len(gone)
        if gone:
            log.info("swept %d routes of an earlier shim the controller no longer wants", len(gone))
        return len(gone)
