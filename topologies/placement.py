"""Where and how urgently a live fabric's processes run: CPU placement, by named policy.

A software switch, an agent or the controller that waits for a CPU delays packets a
hardware fabric would not (docs/testbed.md, "Fidelity"). What can be set without rebuilding
anything: each process's scheduling class and priority (real-time round robin, or a nice
value under the normal scheduler, for every thread it has) and the CPUs its threads may run
on. BMv2's thread counts are fixed when it is compiled (one ingress thread, four egress
threads, a transmit thread per switch), so they are not a knob here.

:data:`POLICIES` are the placements measured on this machine (``python -m bench.placement``
compares them by the highest link rate each keeps faithful); :data:`DEFAULT` is the one used.
``TestbedConfig.placement`` or ``$MRC_PLACEMENT`` picks another. A policy is applied once the
fabric, controller and agents are up (:func:`apply`); BMv2 starts at real-time priority
already (``topologies.bmv2_switch.REALTIME_PRIORITY``) and a policy may move it back.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "MRC_PLACEMENT"


@dataclass(frozen=True)
class Policy:
    name: str
    about: str
    bmv2_realtime: bool = True  # keep BMv2's threads real-time (SCHED_RR); False: normal scheduler
    bmv2_nice: int = 0  # nice value of BMv2's threads under the normal scheduler
    bmv2_cpus: str = ""  # "": any CPU; "spread": switch i on CPU i mod n; "N": all on CPU N
    host_nice: int = 0  # nice value of every agent, shim and the controller


POLICIES = {
    p.name: p
    for p in (
        Policy("plain", "BMv2 real-time, everything else at normal priority (the placement before)"),
        Policy(
            "emulation-first",
            "BMv2 real-time; agents, shims and the controller at nice -10, ahead of other work",
            host_nice=-10,
        ),
        Policy(
            "spread",
            "as emulation-first, and each BMv2 switch's threads kept on one CPU, switches spread over CPUs",
            bmv2_cpus="spread",
            host_nice=-10,
        ),
        Policy(
            "spread-normal",
            "as spread, but BMv2 under the normal scheduler at nice -10 like the rest",
            bmv2_realtime=False,
            bmv2_nice=-10,
            bmv2_cpus="spread",
            host_nice=-10,
        ),
        Policy(
            "all-normal",
            "BMv2 at the normal scheduler; BMv2, agents, shims and controller all at nice -10",
            bmv2_realtime=False,
            bmv2_nice=-10,
            host_nice=-10,
        ),
    )
}
DEFAULT = "spread"


def chosen(name: str | None = None) -> Policy:
    """The policy ``name``, else ``$MRC_PLACEMENT``, else :data:`DEFAULT`."""
    key = name or os.environ.get(ENV) or DEFAULT
    if key not in POLICIES:
        raise ValueError(f"placement: {key[:40]!r} is not one of {', '.join(POLICIES)}")
    return POLICIES[key]


def threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def set_nice(pid: int, nice: int) -> None:
    """Every thread of ``pid`` at ``nice`` (threads it starts later inherit it), and its
    session's autogroup too: where the kernel groups tasks by session
    (``kernel.sched_autogroup_enabled``), CPU is shared fairly between sessions first, and a
    task's own nice value only counts against the tasks of its session."""
    for tid in threads(pid):
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(nice))


def set_normal(pid: int, nice: int) -> None:
    """Every thread of ``pid`` under the normal scheduler at ``nice``."""
    for tid in threads(pid):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
    set_nice(pid, nice)


def pin(pid: int, cpus: set[int]) -> None:
    for tid in threads(pid):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def apply(tb: Any, policy: Policy) -> list[str]:
    """Apply ``policy`` to a running testbed's processes; what was done, in words."""
    from topologies.fidelity.sampler import testbed_processes

    n = len(os.sched_getaffinity(0)) or 1
    cpus = sorted(os.sched_getaffinity(0))
    done: list[str] = []
    switches = 0
    for key in testbed_processes(tb):
        if key.kind == "bmv2":
            if not policy.bmv2_realtime:
                set_normal(key.pid, policy.bmv2_nice)
            if policy.bmv2_cpus == "spread":
                pin(key.pid, {cpus[switches % n]})
            elif policy.bmv2_cpus:
                pin(key.pid, {int(policy.bmv2_cpus)})
            switches += 1
        elif key.kind in ("agent", "shim", "controller") and policy.host_nice:
            set_nice(key.pid, policy.host_nice)
    done.append(f"placement {policy.name}: {policy.about}")
    return done


def describe(pid: int) -> str:
    """A process's scheduling now: policy, nice and CPUs of its first thread (for the logs)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        nice, policy = int(stat[16]), int(stat[38])
        return f"policy {policy} nice {nice} cpus {sorted(os.sched_getaffinity(pid))}"
    except (OSError, IndexError, ValueError):
        return "gone"
