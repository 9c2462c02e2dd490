"""Mininet topology of the multi-plane two-tier Clos, built from ``mrc_fabric.topology``.

The fabric model is the single source of names, port numbers, interface names and
MACs (``build_clos``); this module only asks Mininet to build exactly that: one
switch node per T0/T1 (``switch_cls``, the Linux SRv6 switch by default), one host node
(``topologies.fabric_host.FabricHost``: quiet on the fabric) per host with one interface per
plane, and one veth per link with both ends' port numbers, names and MACs taken from the model.

:func:`start_clos` starts the network, fills in each switch's P4Runtime address,
checks that every switch numbered its ports as the model says, writes
``<run_dir>/topology.json`` and returns ``(net, topology)``. It stops the network
again if anything fails on the way, so a caller's ``finally: net.stop()`` only has
to cover what happens after it returns.
"""

from __future__ import annotations

import logging
import os
import time
from ipaddress import IPv6Network
from pathlib import Path
from typing import Any

from mininet.net import Mininet
from mininet.topo import Topo

from mrc_fabric.addressing import DEFAULT_BLOCK
from mrc_fabric.frames import FABRIC_MTU
from mrc_fabric.topology import Target, Topology, build_clos
from topologies import preflight
from topologies.fabric_host import FabricHost, configure_host
from topologies.node_cmd import ip_batch
from topologies.shim_groups import SwitchGroup, groups_of, switches_per_shim
from topologies.shim_launcher import ShimLauncher
from topologies.switch_records import write_switch_records

log = logging.getLogger(__name__)

TOPOLOGY_FILE = "topology.json"


def _default_switch_cls() -> type:
    from topologies.linux_switch import LinuxSrv6Switch

    return LinuxSrv6Switch


class ClosTopo(Topo):  # type: ignore[misc]  # Mininet is untyped
    """Mininet Topo for a :class:`Topology` (hosts, switches and links exactly as modelled)."""

    def build(
        self,
        topology: Topology,
        switch_cls: type,
        run_dir: str,
        link_opts: dict[str, Any] | None = None,
        switch_opts: dict[str, Any] | None = None,
        groups: dict[str, SwitchGroup] | None = None,
    ) -> None:
        for sw in topology.switches:
            # The switch class decides where it runs: LinuxSrv6Switch forces its own namespace,
            # Bmv2Switch stays in the root namespace (its gRPC/Thrift ports on 127.0.0.1).
            opts = dict(switch_opts or {})
            if groups and sw.name in groups:
                opts["group"] = groups[sw.name]  # its shim shares a process (topologies.shim_groups)
            self.addSwitch(sw.name, cls=switch_cls, device_id=sw.device_id, run_dir=run_dir, **opts)
        for h in topology.hosts:
            self.addHost(h.name, cls=FabricHost, ip=None)
        for link in topology.links:
            self.addLink(
                link.a.node,
                link.b.node,
                port1=link.a.port,
                port2=link.b.port,
                intfName1=link.a.ifname,
                intfName2=link.b.ifname,
                addr1=link.a.mac,
                addr2=link.b.mac,
                **(link_opts or {}),  # e.g. cls=TCLink, bw=... for a rate limit
            )


def start_clos(
    run_dir: str | os.PathLike[str],
    planes: int = 2,
    t0_per_plane: int = 2,
    t1_per_plane: int = 2,
    hosts_per_t0: int = 2,
    node_prefix: str = "",
    switch_cls: type | None = None,
    target: Target | str = Target.LINUX,
    block: IPv6Network = DEFAULT_BLOCK,
    link_opts: dict[str, Any] | None = None,
    phases: dict[str, float] | None = None,
    switches_per_shim: int | None = None,
) -> tuple[Mininet, Topology]:
    """Build and start the fabric; write ``<run_dir>/topology.json``; return ``(net, topology)``.

    ``link_opts`` go to every ``addLink`` (``{"cls": TCLink, "bw": 100}`` limits each link
    to 100 Mbit/s with an htb qdisc). ``phases``, when given, gets the seconds each step
    took: ``namespaces_and_links`` (nodes, veths, MTUs), ``switches`` (every switch started
    and answering), ``addresses`` (the rest of :func:`finish_start`). ``switches_per_shim``:
    Linux switches served by one shim process (``topologies.shim_groups``; None:
    ``$MRC_SWITCHES_PER_SHIM`` or the default; 1: a process per switch). Raises
    ``topologies.preflight.PreflightError`` before anything starts when the machine lacks
    something (its kernel probes run once per process).
    """
    run = Path(run_dir).resolve()
    run.mkdir(parents=True, exist_ok=True)
    topology = build_clos(
        planes, t0_per_plane, t1_per_plane, hosts_per_t0, block=block, prefix=node_prefix, target=target
    )
    preflight.require(topology.switches[0].target, ifnames=preflight.root_ifnames(topology))
    cls = switch_cls or _default_switch_cls()
    launcher = _shim_launcher(cls, run)
    switch_opts = {"launcher": launcher} if launcher is not None else None
    groups = _shim_groups(launcher, run, topology, switches_per_shim)
    net = FabricNet(
        topo=ClosTopo(topology, cls, str(run), link_opts, switch_opts, groups),
        controller=None,
        build=False,
        autoSetMacs=False,
    )
    net.shim_launcher = launcher
    clock = _PhaseClock(phases)
    try:
        net.build()
        set_link_mtus(net, topology)
        clock.lap("namespaces_and_links")
        net.start()
        clock.lap("switches")
        finish_start(net, topology, run)
        clock.lap("addresses")
    except BaseException as exc:
        net.stop()
        if "File exists" in str(exc):  # Mininet's "RTNETLINK answers: File exists": a name is taken
            said = str(exc).strip().splitlines()[0]
            raise preflight.PreflightError([preflight.Missing(said, preflight.CLEAN)]) from exc
        raise
    return net, topology


class FabricNet(Mininet):  # type: ignore[misc]  # Mininet is untyped
    """A Mininet whose ``stop`` also ends the shim launcher its switches were forked from."""

    shim_launcher: ShimLauncher | None = None

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self.shim_launcher is not None:
                self.shim_launcher.stop()


def _shim_launcher(switch_cls: type, run: Path) -> ShimLauncher | None:
    """One warm process to fork every Linux shim from (``topologies.shim_launcher``); none
    for BMv2, or with ``MRC_SHIM_LAUNCHER=0`` (each shim a fresh interpreter, as before)."""
    from topologies.linux_switch import LinuxSrv6Switch

    if not issubclass(switch_cls, LinuxSrv6Switch) or os.environ.get("MRC_SHIM_LAUNCHER", "1") == "0":
        return None
    return ShimLauncher(run / "shim-launcher.log").start()


def _shim_groups(
    launcher: ShimLauncher | None, run: Path, topology: Topology, size: int | None
) -> dict[str, SwitchGroup]:
    """Switch name -> its shim group: the switches in the model's order (a plane's T0 and T1
    switches together), cut into groups of ``switches_per_shim``."""
    if launcher is None:
        return {}
    out: dict[str, SwitchGroup] = {}
    names = [sw.name for sw in topology.switches]
    for index, members in enumerate(groups_of(names, switches_per_shim(size))):
        group = SwitchGroup(launcher, run, index)
        out.update({name: group for name in members})
    return out


def set_link_mtus(net: Mininet, topology: Topology) -> None:
    """RoCE-sized frames on every link and host port, on both targets (idempotent); every
    switch's ``lo`` up (seg6local routes for its own uSID hang off it, and a fresh namespace
    has it down).

    Called before the switches start: BMv2 sizes its packet capture from a port's MTU when it
    opens the port and drops every longer frame unseen (topologies.bmv2_switch).
    """
    commands: dict[str, list[str]] = {sw.name: ["link set dev lo up"] for sw in topology.switches}
    for link in topology.links:
        for end in (link.a, link.b):
            commands.setdefault(end.node, []).append(f"link set dev {end.ifname} mtu {FABRIC_MTU}")
    for node, lines in commands.items():
        ip_batch(net.get(node), lines)


class _PhaseClock:
    """Seconds per bring-up step into a caller's dict (nothing when it passed none)."""

    def __init__(self, phases: dict[str, float] | None) -> None:
        self.phases, self.lap_start = phases, time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        if self.phases is not None:
            self.phases[name] = round(now - self.lap_start, 2)
        self.lap_start = now


def finish_start(net: Mininet, topology: Topology, run_dir: str | os.PathLike[str]) -> None:
    """After ``net.start()``: P4Runtime addresses, port check, host addresses, topology.json.

    Separate from :func:`start_clos` so a network that ``mn --custom`` built and started
    gets the same treatment.
    """
    run = Path(run_dir).resolve()
    for sw in topology.switches:
        node = net.get(sw.name)
        if node.inNamespace:
            node.cmd("ip link set dev lo up")  # idempotent; mn --custom did not do it before start
        sw.p4rt_address = node.p4rt_address
        port_map = node.port_map() if hasattr(node, "port_map") else {}
        want = {e.port: e.ifname for e in topology.ports_of(sw.name)}
        if port_map and port_map != want:
            raise RuntimeError(f"{sw.name}: Mininet ports {port_map} differ from the model's {want}")
    set_link_mtus(net, topology)  # again: `mn --custom` started its net without start_clos
    for h in topology.hosts:
        configure_host(net.get(h.name), topology)
    topology.save(run / TOPOLOGY_FILE)
    write_switch_records(net, topology, run)  # how simple_switch_CLI and p4runtime-shell reach each switch
