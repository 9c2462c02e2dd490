"""Start every switch of a fabric at once instead of one after the other.

Mininet calls ``switch.start()`` for each switch in turn and then, once per switch
class, ``batchStartup(switches)``. Our switches' ``start`` waits until the switch answers
P4Runtime (a Python shim's start-up, or simple_switch_grpc's), so a fabric spends most
of its bring-up waiting on one switch after another. :class:`ParallelStart` runs the
switch class's own ``start`` in a thread and joins them all in ``batchStartup``,
re-raising the first failure; the switch classes themselves are unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from topologies.bmv2_switch import Bmv2Switch
from topologies.linux_switch import LinuxSrv6Switch


class ParallelStart:
    """Mixin for a Mininet switch class whose ``start`` blocks until the switch is up."""

    def start(self, controllers: Any = None) -> None:
        self._start_error: BaseException | None = None
        base_start = super().start  # type: ignore[misc]

        def run() -> None:
            try:
                base_start(controllers)
            except BaseException as exc:  # handed to batchStartup, which re-raises it
                self._start_error = exc

        self._start_thread = threading.Thread(target=run, name=f"start-{self.name}", daemon=True)  # type: ignore[attr-defined]
        self._start_thread.start()

    @classmethod
    def batchStartup(cls, switches: Sequence[Any], run: Any = None) -> Sequence[Any]:
        for sw in switches:
            thread = getattr(sw, "_start_thread", None)
            if thread is not None:
                thread.join()
        for sw in switches:
            error = getattr(sw, "_start_error", None)
            if error is not None:
                raise error
        return switches


class ParallelLinuxSrv6Switch(ParallelStart, LinuxSrv6Switch):
    pass


class ParallelBmv2Switch(ParallelStart, Bmv2Switch):
    pass


class ParallelBmv2SwitchNoPcap(ParallelBmv2Switch):
    """BMv2 without per-port pcaps (they cost disk and CPU on long runs)."""

    def __init__(self, *args: Any, **params: Any) -> None:
        params.setdefault("pcap", False)
        super().__init__(*args, **params)
