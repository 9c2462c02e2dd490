"""One switch of the Linux target: its P4Runtime server and all it owns in its namespace.

A :class:`ShimSwitch` is what ``mrc-p4rt-shim`` runs (``shim_main``: one switch per
process) and what a shim group runs several of (``shim_group``: one process, one
``ShimSwitch`` per switch). Each has its own ``P4RuntimeShim`` service (device id,
arbitration, tables, errors), its own ``grpc.server`` on its own listen address, its own
nft table, egress programs and netlink sockets; every kernel operation goes through its
:class:`~linux_target.ns_worker.NamespaceWorker`, the one thread in the switch's namespaces
(the link watcher's thread enters them itself). A job on the worker never takes the
service's lock, so a handler holding the lock can always wait for the worker.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from concurrent import futures
from ipaddress import IPv6Network
from pathlib import Path

import grpc
from finsy.proto import p4r_grpc

from mrc_fabric.p4info import P4INFO_PATH, P4InfoIndex, default_index, load_p4info

from .counters import CounterReader
from .egress import EgressError, PortEgress, PortState, install_ports
from .kernel_programmer import KernelProgrammer, reapply
from .kernel_state import KernelState
from .link_watch import LinkWatcher
from .netlink_backend import KernelError, NetlinkBackend, read_snmp6, write_sysctl
from .nft_backend import NftFaults
from .ns_worker import NamespaceWorker
from .p4rt_service import P4RuntimeShim
from .stale_routes import StaleRouteSweep
from .switch_tables import SwitchTables

log = logging.getLogger("mrc-p4rt-shim")

MIN_KERNEL = (6, 1)


class ShimSetupError(Exception):
    """The shim cannot run here; the message says why and what to do."""


class EgressSetupError(ShimSetupError):
    """The egress model (HTB + eBPF) cannot be put on the ports (``--no-egress-model`` runs
    without it: said only to a user at a terminal, as no testbed command takes it)."""


def in_root_namespace() -> bool:
    """True when the calling thread shares the machine's own network namespace.

    kthreadd (PID 2) always lives in the initial namespace; PID 1 usually does
    but is unreadable in some sandboxes, so it is only the fallback.
    """
    mine = os.stat("/proc/thread-self/ns/net").st_ino
    for pid in (2, 1):
        try:
            return os.stat(f"/proc/{pid}/ns/net").st_ino == mine
        except OSError:
            continue
    log.warning("cannot tell whether this is the machine's own network namespace")
    return False


def kernel_version(release: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", release)
    if not m:
        raise ShimSetupError(f"cannot read the kernel version from {release!r}")
    return int(m.group(1)), int(m.group(2))


def check_kernel() -> None:
    release = os.uname().release
    if kernel_version(release) < MIN_KERNEL:
        raise ShimSetupError(
            f"Linux {release} is too old: the Linux SRv6 target needs kernel ≥ 6.1 for seg6local "
            "'flavors next-csid' (uSID shift). Use a newer kernel or the bmv2 target."
        )


def enable_forwarding(ports: dict[int, str]) -> None:
    """IPv6 forwarding on, seg6 on every interface, IPv6 on every port."""
    write_sysctl(("net", "ipv6", "conf", "all", "forwarding"), "1")
    for conf in ("all", "default", "lo", *ports.values()):
        base = ("net", "ipv6", "conf", conf)
        if not os.path.exists(os.path.join("/proc/sys", *base)):
            raise ShimSetupError(f"interface {conf} does not exist in this network namespace")
        write_sysctl((*base, "seg6_enabled"), "1")
        if conf not in ("all", "default"):
            write_sysctl((*base, "disable_ipv6"), "0")


def nft_table_name(name: str) -> str:
    return "mrc_shim_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def listen_address(listen: str) -> tuple[str, Path | None]:
    """gRPC bind address plus the unix socket path to clean up (if any)."""
    if listen.startswith("unix:"):
        path = Path(listen[len("unix:") :].removeprefix("//"))
        return f"unix:{path}", path
    return listen, None


def checked_ports(args: argparse.Namespace) -> tuple[dict[int, str], dict[int, float]]:
    """The ports and rates asked for, once the kernel, the user and the namespace allow it
    (run in the switch's namespace worker)."""
    ports = dict(args.port)
    if len(ports) != len(args.port):
        raise ShimSetupError("--port: a port number is given twice")
    if len(set(ports.values())) != len(ports):
        raise ShimSetupError("--port: an interface is given twice")
    check_kernel()
    if os.geteuid() != 0:
        raise ShimSetupError("the shim programs routes and nftables: run it as root")
    if in_root_namespace() and not args.allow_root_namespace:
        raise ShimSetupError(
            "refusing to program the machine's own network namespace (forwarding, routes, nftables): "
            "start the shim with 'ip netns exec NS' or from a Mininet node in its own namespace, "
            "or pass --allow-root-namespace"
        )
    rates = dict(args.rate)
    if set(rates) - set(ports):
        raise ShimSetupError(f"--rate: ports {sorted(set(rates) - set(ports))} are not given with --port")
    return ports, rates


def install_egress(
    args: argparse.Namespace, ports: dict[int, str], rates: dict[int, float]
) -> dict[int, PortEgress]:
    """The egress model (HTB + eBPF) on every port, or none with --no-egress-model; all or nothing."""
    if args.no_egress_model:
        return {}
    rates_bps = {ifname: int(rates.get(port, 0) * 1e6) for port, ifname in ports.items()}
    try:
        by_dev = install_ports(rates_bps, args.buffer_bytes)
    except EgressError as exc:
        for ifname in ports.values():  # all or nothing
            PortEgress(ifname).remove()
        raise EgressSetupError(str(exc)) from exc
    return {port: by_dev[ifname] for port, ifname in ports.items()}


def log_serving(
    args: argparse.Namespace, address: str, ports: dict[int, str], rates: dict[int, float], egress: bool
) -> None:
    log.info(
        "switch %s device_id %d serving P4Runtime on %s, ports %s",
        args.name,
        args.device_id,
        address,
        ", ".join(f"{p}={i}" for p, i in sorted(ports.items())),
    )
    if egress:
        log.info(
            "egress model on every port (HTB + eBPF: ECN marking, trimming, tail drop); rates %s, "
            "buffer %d B",
            ", ".join(f"{p}={rates.get(p, 0):g} Mbit/s" for p in sorted(ports)) or "-",
            args.buffer_bytes,
        )
    else:
        log.info(
            "no egress model (--no-egress-model): no ECN marking, no trimming; port_policy is stored only"
        )


def grpc_server(service: P4RuntimeShim, listen: str) -> tuple[grpc.Server, str, Path | None]:
    """The P4Runtime server on ``listen`` (not started yet), its address and its socket file."""
    pool = futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix=f"{service.name}/p4rt")
    server = grpc.server(pool)
    p4r_grpc.add_P4RuntimeServicer_to_server(service, server)
    address, sock = listen_address(listen)
    if sock is not None:
        sock.parent.mkdir(parents=True, exist_ok=True)
        sock.unlink(missing_ok=True)
    if server.add_insecure_port(address) == 0:
        raise ShimSetupError(f"cannot listen on {listen}")
    return server, address, sock


class OnWorker:
    """The kernel programmer as the tables and the stale-route sweep see it: every change
    made by the switch's namespace worker."""

    def __init__(self, programmer: KernelProgrammer, worker: NamespaceWorker) -> None:
        self.programmer = programmer
        self.worker = worker

    def transition(self, old: KernelState, new: KernelState) -> None:
        self.worker.call(self.programmer.transition, old, new)

    def remove_route(self, dst: IPv6Network) -> None:
        self.worker.call(self.programmer.netlink.set_route, dst, None)


class ShimSwitch:
    """One switch's P4Runtime service, started by :meth:`start`, ended by :meth:`stop`."""

    def __init__(self, args: argparse.Namespace, worker: NamespaceWorker) -> None:
        self.args = args
        self.name: str = args.name
        self.worker = worker
        self.address = ""
        self.sock: Path | None = None
        self.server: grpc.Server | None = None
        self.service: P4RuntimeShim | None = None
        self.tables: SwitchTables | None = None
        self.netlink: NetlinkBackend | None = None
        self.nft: NftFaults | None = None
        self.egress: dict[int, PortEgress] = {}
        self.ports: dict[int, str] = {}
        self.sweep: StaleRouteSweep | None = None
        self.watcher: LinkWatcher | None = None

    def _kernel_setup(self, rates: dict[int, float]) -> set[IPv6Network]:
        """In the worker: forwarding, egress, netlink, nft; the routes an earlier shim left."""
        enable_forwarding(self.ports)
        self.egress = install_egress(self.args, self.ports, rates)
        self.netlink = NetlinkBackend()
        self.nft = NftFaults(nft_table_name(self.name))
        self.netlink.create_anchor(fallback=self.ports[min(self.ports)] if self.ports else "lo")
        self.nft.start(self.ports)
        return self.netlink.own_routes()

    def start(self) -> None:
        """Program the namespace and serve; raises ShimSetupError (or OSError) when it cannot."""
        args = self.args
        self.ports, rates = self.worker.call(checked_ports, args)
        # (the committed P4Info's index is cached: a launcher parses it once for all its shims)
        index = default_index() if args.p4info == P4INFO_PATH else P4InfoIndex(load_p4info(args.p4info))
        left = self.worker.call(self._kernel_setup, rates)
        assert self.netlink is not None and self.nft is not None
        programmer = KernelProgrammer(self.netlink, self.nft, self.egress)
        # an earlier shim's routes stay until the controller has re-written the tables (no packet
        # meets a missing route meanwhile); those it does not take up are swept after
        sweep = StaleRouteSweep(
            OnWorker(programmer, self.worker), left, args.stale_grace, self._state, name=self.name
        )
        self.tables = SwitchTables(index, self.ports, sweep, egress_model=bool(self.egress))
        self.service = service = P4RuntimeShim(args.name, args.device_id, index, self.tables, self._snapshot)
        sweep.lock = service.lock
        self.sweep = sweep
        sweep.start()

        def port_up(ifname: str) -> None:
            assert self.tables is not None
            with service.lock:
                restored = self.worker.call(reapply, programmer, self.tables.state, ifname)
            log.info("restored %d routes/neighbours on %s", restored, ifname)

        self.watcher = LinkWatcher(self.ports, port_up, name=self.name, node_pid=self.worker.node_pid)
        self.watcher.start()
        self.server, self.address, self.sock = grpc_server(service, args.listen)
        self.server.start()
        log_serving(args, self.address, self.ports, rates, bool(self.egress))

    def _state(self) -> KernelState:
        assert self.tables is not None
        return self.tables.state

    def _egress_states(self) -> dict[int, PortState]:
        out = {}
        for port, e in self.egress.items():
            try:
                out[port] = e.read_state()
            except EgressError as exc:  # the interface went away (Mininet stopping)
                log.warning("cannot read the egress counters of port %d: %s", port, exc)
        return out

    def _snapshot(self) -> CounterReader:
        def read() -> CounterReader:
            assert self.netlink is not None and self.nft is not None
            links, nft = self.netlink.link_stats(), self.nft.counters()
            egress = self.worker.wrap(self._egress_states)
            return CounterReader(self.ports, links, read_snmp6(), nft, egress)

        return self.worker.call(read)

    def stop(self, namespace_going: bool = False) -> None:
        """Stop serving. ``namespace_going``: the namespace is about to be deleted with all that
        is in it, so only the socket goes; otherwise every route, neighbour, nft table, qdisc
        and BPF program the switch put in is removed (best effort: Mininet may have deleted
        the interfaces already)."""
        if self.sweep is not None:
            self.sweep.stop()
        if self.watcher is not None:
            self.watcher.stop()
        if not namespace_going:
            if self.server is not None:
                self.server.stop(grace=1).wait()
            if self.service is not None and self.tables is not None:
                with self.service.lock:  # (taken here: a worker job never takes it)
                    self.worker.call(self._undo)
            elif self.netlink is not None:
                self.worker.call(self.netlink.close)
        if self.sock is not None:
            self.sock.unlink(missing_ok=True)
        if not namespace_going:
            self.worker.stop()

    def _undo(self) -> None:
        assert self.tables is not None and self.netlink is not None and self.nft is not None
        for nh in self.tables.state.neighbours:
            try:
                self.netlink.set_neighbour(nh, False)
            except KernelError as exc:
                log.warning("leaving neighbour %s: %s", nh, exc)
        self.netlink.flush_own_routes()
        self.netlink.remove_anchor()
        self.nft.remove()
        for e in self.egress.values():
            e.remove()
        self.netlink.close()
