"""E11: scale: fabric setup time and memory as planes x T0 x T1 grow.

For each shape the full testbed comes up (Mininet namespaces and veths, one switch per
T0/T1 with its P4Runtime server, the controller, every route installed, one agent per
host), one transfer crosses it from the first host to the last and is verified, and it
is measured and torn down. Measured: bring-up and teardown time, each by phase (so the
next bottleneck shows); the proportional set size (PSS, shared pages split fairly) of
every process the run started and their children (switch shells and shims or BMv2, the
shim launcher, controller, agents); the kernel's
own growth (slab, kernel stacks, page tables, per-CPU: namespaces, veths, routes); the
machine's used memory before and after (MemTotal - MemAvailable; other work on the
machine shows up there too).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Context, Result, experiment_entry, step
from .plots import lines

ID = "e11"
TITLE = "scale: fabric setup time and memory up to 16 planes x 8 T0 x 8 T1"
SHAPE = (
    "Two tiers, static tables, no routing protocol: state grows with planes x T0 x T1 and nothing "
    "converges at start-up (the paper's argument for a static SRv6 fabric)."
)
FULL_SHAPES = [(2, 2, 2), (4, 4, 4), (8, 4, 4), (8, 8, 8), (16, 8, 8)]
QUICK_SHAPES = [(1, 2, 2), (2, 2, 2)]
SWITCH_START_TIMEOUT_S = 300.0
KERNEL_FIELDS = ("Slab", "KernelStack", "PageTables", "Percpu")
TRANSFER_BYTES = 64 << 20  # one verified transfer per shape: the fabric that came up forwards


def meminfo() -> dict[str, int]:
    out = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        out[key] = int(rest.split()[0]) * 1024
    return out


def children_of(roots: set[int]) -> set[int]:
    """``roots`` and every descendant (by walking /proc's parent links)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parent[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found = set(r for r in roots if r in parent)
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in found and pid not in found:
                found.add(pid)
                grew = True
    return found


def pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def patient(switch_cls: type) -> type:
    """``switch_cls`` with a start-up timeout for big fabrics: every switch's P4Runtime server
    starts at once, and 128 of them share this machine's 2 cores for a minute or more."""

    class PatientSwitch(switch_cls):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("start_timeout", SWITCH_START_TIMEOUT_S)
            super().__init__(*args, **kwargs)

    PatientSwitch.__name__ = f"Patient{switch_cls.__name__}"
    return PatientSwitch


def stop_net(net: Any, phases: dict[str, float]) -> None:
    """The testbed's own teardown (``topologies.teardown``): every switch process at once,
    then every namespace; ``phases`` gets the seconds of each."""
    from topologies.teardown import end_nodes, stop_switch_processes

    started = time.monotonic()
    try:
        stop_switch_processes(net)
    finally:
        phases["switches"] = round(time.monotonic() - started, 2)
        end_nodes(net)
        phases["namespaces_and_links"] = round(time.monotonic() - started - phases["switches"], 2)


def measure(ctx: Context, planes: int, t0: int, t1: int) -> dict[str, Any]:
    """Bring one shape up (the testbed's own start-up: ``start_clos`` + ``Testbed.adopt``), measure, stop."""
    from mininet.log import setLogLevel

    from topologies.clos import start_clos
    from topologies.rundir import RunDir
    from topologies.target import choose_target
    from topologies.testbed import Testbed, TestbedConfig

    setLogLevel("critical")
    runs = Path(tempfile.mkdtemp(prefix="ex-scale-"))
    cfg = TestbedConfig(
        planes=planes,
        t0=t0,
        t1=t1,
        hosts_per_t0=1,
        target=ctx.target,
        prefix="ex",
        runs_root=runs,
        latest=False,
        agents=False,
        pcap=False,
        fidelity=False,  # setup time and memory, not an MRC result: no monitor threads to count
    )
    row: dict[str, Any] = {"planes": planes, "t0": t0, "t1": t1, "hosts": t0}
    mem0 = meminfo()
    started = time.monotonic()
    choice = choose_target(ctx.target)
    run = RunDir.create(runs, latest=False)
    phases: dict[str, float] = {}
    net, topology = start_clos(
        run.path,
        planes,
        t0,
        t1,
        1,
        node_prefix="ex",
        switch_cls=patient(choice.switch_cls),
        target=choice.target,
        phases=phases,
    )
    tb = Testbed(cfg, say=lambda m: None)
    try:
        adopt_started = time.monotonic()
        tb.adopt(net, topology, run, choice)  # controller up, every route installed
        phases["controller_install"] = round(time.monotonic() - adopt_started, 2)
        agents_started = time.monotonic()
        tb.start_agents()
        phases["agents"] = round(time.monotonic() - agents_started, 2)
        row["setup_s"] = time.monotonic() - started
        row["phases_s"] = phases
        row.update({"switches": len(topology.switches), "links": len(topology.links)})
        pids = children_of({r.pid for r in run.records()})
        row["processes"] = len(pids)
        row["pss_mib"] = sum(pss_bytes(p) for p in pids) / 2**20
        mem1 = meminfo()
        row["kernel_mib"] = sum(mem1.get(k, 0) - mem0.get(k, 0) for k in KERNEL_FIELDS) / 2**20
        row["machine_used_delta_mib"] = (
            (mem1["MemTotal"] - mem1["MemAvailable"]) - (mem0["MemTotal"] - mem0["MemAvailable"])
        ) / 2**20
        src, dst = topology.hosts[0].name, topology.hosts[-1].name
        summary = tb.send(src, dst, TRANSFER_BYTES) if tb.agents else {}
        row["transfer"] = {k: summary.get(k) for k in ("ok", "verified", "goodput_mbit_s", "retransmissions")}
        row["transfer"]["route"] = f"{src} -> {dst}"
    finally:
        down = time.monotonic()
        down_phases: dict[str, float] = {}
        try:
            tb.stop()  # controller (adopted net: the net is ours to stop)
            down_phases["controller"] = round(time.monotonic() - down, 2)
        finally:
            stop_net(net, down_phases)
        row["teardown_s"] = time.monotonic() - down
        row["teardown_phases_s"] = down_phases
        shutil.rmtree(runs, ignore_errors=True)
    return row


def run(ctx: Context, res: Result) -> None:
    shapes = QUICK_SHAPES if ctx.quick else FULL_SHAPES
    rows = []
    for planes, t0, t1 in shapes:
        step(f"E11 {planes} planes x {t0} T0 x {t1} T1 ({planes * (t0 + t1)} switches): bring-up ...")
        row = measure(ctx, planes, t0, t1)
        rows.append(row)
        step(
            f"   up in {row['setup_s']:.1f} s ("
            + ", ".join(f"{k} {v:.1f}" for k, v in row["phases_s"].items())
            + f"), down in {row['teardown_s']:.1f} s ("
            + ", ".join(f"{k} {v:.1f}" for k, v in row["teardown_phases_s"].items())
            + "), "
            f"{row['processes']} processes "
            f"PSS {row['pss_mib']:.0f} MiB, kernel +{row['kernel_mib']:.0f} MiB, "
            f"machine +{row['machine_used_delta_mib']:.0f} MiB"
        )
        res.add(
            f"setup time {planes}x{t0}x{t1} ({row['switches']} switches)",
            row["setup_s"],
            unit="s",
            expect="info",
        )
        res.add(
            f"memory {planes}x{t0}x{t1}: processes PSS + kernel",
            row["pss_mib"] + row["kernel_mib"],
            unit="MiB",
            expect="info",
        )
        t = row["transfer"]
        step(f"   {TRANSFER_BYTES >> 20} MiB {t['route']}: ok={t['ok']} verified={t['verified']} "
             f"{t['goodput_mbit_s'] or 0:.0f} Mbit/s")  # fmt: skip
        res.verified(
            bool(t["ok"] and t["verified"]),
            "mrc",
            "a fabric of any size forwards once its static tables are in",
            metric=f"transfer across {planes}x{t0}x{t1}, bytes verified",
        )
    res.fabric = {"shapes": [list(s) for s in shapes], "hosts_per_t0": 1, "target": ctx.target}
    res.data["rows"] = rows
    labels = [f"{r['planes']}x{r['t0']}x{r['t1']}\n{r['switches']} sw" for r in rows]
    res.plots.append(
        lines(
            ctx.out / "e11.png",
            "E11 fabric bring-up (s) and memory (GiB)",
            labels,
            {
                "setup s": [r["setup_s"] for r in rows],
                "teardown s": [r["teardown_s"] for r in rows],
                "PSS+kernel GiB": [(r["pss_mib"] + r["kernel_mib"]) / 1024 for r in rows],
            },
            "planes x T0 x T1",
            "seconds / GiB",
        ).name
    )
    res.caveats.append("one host per T0 (hosts add namespaces and veths but no switch state)")


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
