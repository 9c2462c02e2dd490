"""The fault experiments' common ground: one fabric, one sender/receiver pair, clean references.

Fabric (``FAULT_SHAPE``): 4 planes x 2 T0 x 2 T1, 2 hosts per T0, every link limited (htb)
to the rate calibration found this machine keeps faithful (``mrc-testbed calibrate``). The
limit makes the *fabric* the bottleneck instead of the Python agent's CPU (about 200
Mbit/s): a connection that sprays over every plane gets up to planes x the link rate, a
single-path connection one link's worth, as a NIC port's
line rate bounds a single-path RoCE connection. A T0 has two uplinks for the one busy
host below it, so losing one T1 leaves its plane enough capacity (the paper's "a T1
down: no steady loss") while losing a T0 costs a plane (1/planes).

The sender is the first host under T0 0 and the receiver the last host under the last
T0, so every path crosses T0 -> T1 -> T0. :class:`Lab` runs the clean reference transfer
of each mode and finds which uplink each mode's traffic uses (single-path: its one EV's
(plane, T1); ECMP: the busiest uplink by switch port counters), so each mode's fault
can hit a link that mode really uses.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from mrc_fabric.p4names import Counter
from topologies.fidelity.rates import CALIBRATED

from .common import Context, Result, fabric, fabric_info, step
from .plots import timelines
from .transfer import TransferRun, run_transfer

MODES = ("mrc", "single-path", "ecmp")
LINK_RATE = 30.0  # Mbit/s where a run gives none (the fabric runs at its calibrated rate)
WARMUP_BYTES = 1 << 20
# a faulted transfer's deadline is the fault's duration plus this: after the fault ends a
# single-path RTO may have backed off to 10 s
RECOVERY_GRACE_S = 40.0
# links at the rate calibration found this machine keeps faithful for the data plane and shape
# (topologies.fidelity.rates; --link-rate of an experiment overrides it)
FAULT_SHAPE: dict[str, Any] = {"planes": 4, "t0": 2, "t1": 2, "hosts_per_t0": 2, "link_rate": CALIBRATED}


def uplink_name(tb: Any, plane: int, t0: int, t1: int) -> str:
    topo = tb.topology
    return f"{topo.t0(plane, t0).name}-{topo.t1(plane, t1).name}"


def uplink_tx_bytes(tb: Any, t0_index: int) -> dict[str, int]:
    """Bytes each T0 ``t0_index`` sent up to each T1 so far (switch port counters), by link name."""
    topo = tb.topology
    ports: dict[tuple[str, int], str] = {}
    for link in topo.links:
        a, b = link.a, link.b
        sa, sb = topo.has_switch(a.node), topo.has_switch(b.node)
        if sa and sb and topo.switch(a.node).role.value == "t0" and topo.switch(a.node).index == t0_index:
            ports[(a.node, a.port)] = f"{a.node}-{b.node}"
    cells, _errors = tb.controller.counters(sorted({n for n, _ in ports}))
    out = dict.fromkeys(ports.values(), 0)
    for c in cells:
        if c.counter == Counter.PORT_TX and (c.switch, c.index) in ports:
            out[ports[(c.switch, c.index)]] = c.bytes
    return out


def end_hosts(tb: Any) -> tuple[str, str]:
    """(sender, receiver): the first host under T0 0 and the last under the last T0."""
    topo = tb.topology
    src = next(h.name for h in topo.hosts if h.t0_index == 0)
    dst = [h.name for h in topo.hosts if h.t0_index == topo.t0_per_plane - 1][-1]
    return src, dst


def delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items()}


@dataclass
class Lab:
    tb: Any
    ctx: Context
    src: str = ""
    dst: str = ""
    clean: dict[str, TransferRun] = field(default_factory=dict)
    clean_uplinks: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.src, self.dst = end_hosts(self.tb)

    @property
    def planes(self) -> int:
        return int(self.tb.topology.planes)

    def reference(self, size: int, modes: tuple[str, ...] = MODES) -> dict[str, TransferRun]:
        """The clean transfer of each mode: the fastest of ``repeats`` (the CPU is shared, so one
        run can be slowed by something else on the machine); also opens each mode's connection."""
        repeats = 1 if self.ctx.quick else 2
        for mode in modes:
            # a first small transfer opens the connection (EV draw, first RTT samples) so the
            # reference measures the steady state, as every later transfer of the mode will
            run_transfer(self.tb, self.src, self.dst, WARMUP_BYTES, mode)
            for _ in range(repeats):
                before = uplink_tx_bytes(self.tb, 0)
                run = run_transfer(self.tb, self.src, self.dst, size, mode)
                uplinks = delta(uplink_tx_bytes(self.tb, 0), before)
                if not run.ok:
                    raise RuntimeError(f"clean {mode} transfer failed: {run.error or run.summary}")
                if mode not in self.clean or run.seconds < self.clean[mode].seconds:
                    self.clean[mode], self.clean_uplinks[mode] = run, uplinks
            best = self.clean[mode]
            step(
                f"  clean {mode:11}: {size >> 20} MiB in {best.seconds:.2f} s "
                f"({best.summary['goodput_mbit_s']:.0f} Mbit/s, best of {repeats})"
            )
        return self.clean

    def path_of(self, mode: str) -> tuple[int, int]:
        """(plane, T1) of the uplink under the sender's T0 that ``mode``'s traffic uses most."""
        if mode == "single-path":
            rows = list(self.clean[mode].ev_after.values())
            if rows:
                return int(rows[0]["plane"]), int(rows[0]["t1"])
        if mode in ("ecmp", "mrc") and self.clean_uplinks.get(mode):
            busiest = max(self.clean_uplinks[mode].items(), key=lambda kv: kv[1])[0]
            topo = self.tb.topology
            t1 = topo.switch(busiest.split("-", 1)[1])
            return int(t1.plane), int(t1.index)
        return 0, 0

    def uplink(self, mode: str) -> str:
        plane, t1 = self.path_of(mode)
        return uplink_name(self.tb, plane, 0, t1)

    def path_links(self, mode: str) -> list[str]:
        """Both fabric links of ``mode``'s path: sender T0 -> T1 and T1 -> receiver T0."""
        plane, t1 = self.path_of(mode)
        last = self.tb.topology.t0_per_plane - 1
        return [uplink_name(self.tb, plane, 0, t1), uplink_name(self.tb, plane, last, t1)]

    def t1_of(self, mode: str) -> str:
        plane, t1 = self.path_of(mode)
        return str(self.tb.topology.t1(plane, t1).name)

    def t0_of(self, mode: str) -> str:
        plane, _t1 = self.path_of(mode)
        return str(self.tb.topology.t0(plane, 0).name)


@contextlib.contextmanager
def fault_lab(
    ctx: Context, res: Result, name: str, size: int, shape: dict[str, Any] | None = None
) -> Iterator[tuple[Any, Lab]]:
    """(testbed, lab) of a fault experiment, its clean references of every mode already run.

    ``shape``: the fabric (``FAULT_SHAPE`` unless given); ``name`` heads the progress line.
    """
    with fabric(ctx, **(FAULT_SHAPE if shape is None else shape)) as tb:
        res.fabric = fabric_info(tb)
        lab = Lab(tb, ctx)
        step(f"{name} reference transfers {lab.src} -> {lab.dst}")
        lab.reference(size)
        yield tb, lab


@dataclass
class ModeRuns:
    """What a fault experiment keeps of each run (by mode or case) and plots at the end:
    the run's record, its goodput timeline and the fault windows to shade on it."""

    runs: dict[str, Any] = field(default_factory=dict)
    series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    shades: dict[str, list[tuple[float, float | None]]] = field(default_factory=dict)

    def keep(
        self,
        mode: str,
        record: dict[str, Any],
        goodput: list[tuple[float, float]],
        shades: list[tuple[float, float | None]],
    ) -> None:
        self.runs[mode] = record
        self.series[mode] = goodput
        self.shades[mode] = shades

    def report(self, ctx: Context, res: Result, file_stem: str, title: str) -> None:
        """The runs into ``res.data["runs"]`` and their timelines into ``<out>/<file_stem>.png``."""
        res.data["runs"] = self.runs
        res.plots.append(timelines(ctx.out / f"{file_stem}.png", title, self.series, self.shades).name)
