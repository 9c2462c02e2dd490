"""What a testbed run is started with: :class:`TestbedConfig` and the command-line options
that spell it.

Every command that starts a testbed (``mrc-testbed``, the demo, the benches) spells the fabric
with the same options (:func:`add_fabric_arguments`, :func:`config_from_args`); the config is
saved as the run's ``run.json``.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topologies.fidelity.rates import link_rate_arg
from topologies.prune import keep_runs_from_env, runs_max_bytes_from_env


def nic_pacing_from_env() -> bool:
    """$MRC_NIC_PACING=off runs the agents without their pacer (to compare; docs/testbed.md)."""
    return os.environ.get("MRC_NIC_PACING", "on").strip().lower() not in ("off", "0", "no")


def nic_args(config: TestbedConfig) -> list[str]:
    """The agents' departure clock: their pacer at the host link's rate (a set rate only)."""
    rate = config.link_rate
    if not config.nic_pacing or not isinstance(rate, (int, float)) or rate <= 0:
        return []
    return ["--nic-rate", f"{rate:g}"]


@dataclass
class TestbedConfig:
    """Everything a run is started with (saved as ``run.json``)."""

    __test__ = False  # not a pytest class

    planes: int = 2
    t0: int = 2  # T0 switches per plane
    t1: int = 2  # T1 switches per plane
    hosts_per_t0: int = 2
    # Mbit/s per link (htb); None: as fast as the CPU goes; "calibrated": what calibration found
    # this machine keeps faithful (topologies.fidelity.rates), replaced by the number at start
    link_rate: float | str | None = None
    calibration: Path | None = None  # the calibration cache; None: <runs_root>/calibration.json
    target: str = "auto"  # auto | bmv2 | linux
    prefix: str = ""  # node name prefix (tests use their own)
    runs_root: Path = Path("runs")
    latest: bool = True  # point <runs_root>/latest at this run
    # after start, delete all but the newest N run directories under runs_root (never one in
    # use); None keeps every run. Default: $MRC_KEEP_RUNS, else 10 (topologies.prune)
    keep_runs: int | None = field(default_factory=keep_runs_from_env)
    # ... and then the oldest while all hold more than this (None: no cap). $MRC_RUNS_MAX_MB or 1 GB
    runs_max_bytes: int | None = field(default_factory=runs_max_bytes_from_env)
    controller: bool = True
    agents: bool = True  # start `mrc serve` in every host (when mrc_host.agent is installed)
    agent_args: list[str] = field(default_factory=list)
    # with a link rate, the agents pace their DATA at it and report departures to their cores
    # (mrc_host/agent/pacer.py; docs/testbed.md). Default: on, unless $MRC_NIC_PACING is "off"
    nic_pacing: bool = field(default_factory=nic_pacing_from_env)
    supervise: bool = True  # restart dead switch processes, report dead agents (topologies.supervisor)
    # pcaps of every link under pcap/ (topologies.captures), at most pcap_limit_mb in all; off by
    # default: a full-rate transfer fills hundreds of MB in seconds. The CLI's `capture` takes one.
    pcap: bool = False
    pcap_limit_mb: float = 200.0
    capture_limit_mb: float = 20.0  # each `capture` (Testbed.capture) by default
    # kernel routes for plain IPv6/IPv4 between the hosts (ping, iperf: topologies.kernel_routes)
    kernel_routes: bool = True
    # Linux target: switches served by one shim process (topologies.shim_groups); None:
    # $MRC_SWITCHES_PER_SHIM, else 16; 1: a process per switch
    switches_per_shim: int | None = None
    fidelity: bool = True  # watch the run and judge it (topologies.fidelity; <run>/fidelity.json)
    placement: str | None = (
        None  # CPU placement policy (topologies.placement); None: $MRC_PLACEMENT or default
    )
    # a P4 program of your own for every BMv2 switch, compiled into <run>/p4/ (topologies.user_p4)
    p4: Path | None = None


def add_fabric_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--planes", type=int, default=2, help="planes = NIC ports per host (default 2)")
    ap.add_argument("--t0", type=int, default=2, help="T0 switches per plane (default 2)")
    ap.add_argument("--t1", type=int, default=2, help="T1 switches per plane (default 2)")
    ap.add_argument("--hosts-per-t0", type=int, default=2, help="hosts under each T0 (default 2)")
    ap.add_argument(
        "--link-rate",
        type=link_rate_arg,
        default="calibrated",
        metavar="MBIT|calibrated|0",
        help="Mbit/s per link (htb); default: what `mrc-testbed calibrate` found this machine keeps "
        "faithful for this data plane and shape; 0: unlimited (the CPU decides)",
    )
    ap.add_argument(
        "--nic-pacing",
        choices=("on", "off"),
        default="off" if not nic_pacing_from_env() else "on",
        help="with a link rate, the agents send DATA at it and time it from when it left, as a NIC "
        "does (default on; $MRC_NIC_PACING=off); off: the host link's qdisc queues it",
    )
    ap.add_argument(
        "--calibration",
        type=Path,
        default=None,
        help="the calibration cache (default <runs>/calibration.json)",
    )
    ap.add_argument(
        "--target",
        choices=("auto", "bmv2", "linux"),
        default="auto",
        help="auto = BMv2 when simple_switch_grpc and p4src/build/mrc_switch.json exist, else Linux",
    )
    ap.add_argument("--runs", type=Path, default=Path("runs"), help="parent of the run directories")
    ap.add_argument(
        "--pcap",
        nargs="?",
        type=float,
        const=200.0,
        default=None,
        metavar="MB",
        help="capture every link into <run>/pcap/ (off by default; at most MB in all, default 200)",
    )
    ap.add_argument("--prefix", default="", help="node name prefix (keeps parallel runs apart)")
    ap.add_argument(
        "--p4",
        type=Path,
        default=None,
        metavar="PROGRAM.p4",
        help="run your own P4 program on every BMv2 switch (compiled with p4c; it must keep the MRC "
        "tables: docs/mininet-p4.md)",
    )
    ap.add_argument(
        "--switches-per-shim",
        type=int,
        default=None,
        metavar="N",
        help="Linux target: switches served by one shim process (default $MRC_SWITCHES_PER_SHIM, "
        "else 16; 1: a process per switch)",
    )


def config_from_args(args: argparse.Namespace, **extra: Any) -> TestbedConfig:
    return TestbedConfig(
        planes=args.planes,
        t0=args.t0,
        t1=args.t1,
        hosts_per_t0=args.hosts_per_t0,
        link_rate=args.link_rate,
        target=args.target,
        runs_root=args.runs,
        prefix=args.prefix,
        switches_per_shim=args.switches_per_shim,
        pcap=args.pcap is not None,
        pcap_limit_mb=args.pcap if args.pcap is not None else TestbedConfig.pcap_limit_mb,
        calibration=args.calibration,
        nic_pacing=getattr(args, "nic_pacing", "on") == "on",
        p4=getattr(args, "p4", None),
        **extra,
    )
