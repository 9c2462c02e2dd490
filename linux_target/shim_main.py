"""``mrc-p4rt-shim``: one P4Runtime server for one Linux SRv6 switch.

    mrc-p4rt-shim --name NAME --device-id N --listen unix:/path/to.sock|127.0.0.1:PORT
                  --port 1=IFNAME [--port 2=IFNAME ...] [--rate 1=MBIT ...]
                  [--buffer-bytes N] [--no-egress-model] [--log FILE] [--p4info PATH]

It programs the network namespace it runs in (start it with ``ip netns exec NS``
or from a Mininet node). On start it enables IPv6 forwarding and seg6 on every
interface, removes what an earlier shim of the same name left, then serves
until SIGTERM/SIGINT, when it removes its routes, neighbours, nft tables,
qdiscs, BPF programs and socket. SIGUSR1 says the namespace itself is about to be deleted
(the whole fabric going down): the shim then only closes its server and socket, as all
the rest goes with the namespace. On every port it installs the egress model
(``egress.py``: HTB at the port's ``--rate`` with a high-priority class, and the
eBPF program that marks ECN, trims and tail-drops as ``port_policy`` says).
Needs root, Linux ≥ 6.1 (seg6local ``flavors next-csid``) and clang, libbpf-dev
and bpftool for the egress program (``--no-egress-model`` runs without it).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc
from finsy.proto import p4r_grpc

from mrc_fabric.p4info import P4INFO_PATH, P4InfoIndex, default_index, load_p4info
from mrc_fabric.thread_errors import install as install_thread_errors

from .counters import CounterReader
from .egress import DEFAULT_BUFFER_BYTES, EgressError, PortEgress, PortState, install_ports
from .kernel_programmer import KernelProgrammer, reapply
from .link_watch import LinkWatcher
from .netlink_backend import KernelError, NetlinkBackend, read_snmp6, write_sysctl
from .nft_backend import NftFaults
from .p4rt_service import P4RuntimeShim
from .stale_routes import StaleRouteSweep
from .switch_tables import SwitchTables

log = logging.getLogger("mrc-p4rt-shim")

MIN_KERNEL = (6, 1)
MAX_PORT = 511  # port fields are 9 bits wide
STALE_GRACE_S = 3.0  # quiet after the controller's last write before an earlier shim's routes go


class ShimSetupError(Exception):
    """The shim cannot run here; the message says why and what to do."""


def parse_port(text: str) -> tuple[int, str]:
    m = re.fullmatch(r"(\d+)=([^\s=/]{1,15})", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"--port {text!r}: expected N=IFNAME (N 0..{MAX_PORT}, IFNAME ≤ 15 chars)"
        )
    port = int(m.group(1))
    if port > MAX_PORT:
        raise argparse.ArgumentTypeError(f"--port {text!r}: port number above {MAX_PORT}")
    return port, m.group(2)


def parse_rate(text: str) -> tuple[int, float]:
    m = re.fullmatch(r"(\d+)=(\d+(?:\.\d+)?)", text)
    if not m or float(m.group(2)) <= 0:
        raise argparse.ArgumentTypeError(f"--rate {text!r}: expected PORT=MBIT with MBIT > 0")
    return int(m.group(1)), float(m.group(2))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mrc-p4rt-shim", description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="switch name (logs, nft table name)")
    p.add_argument("--device-id", type=int, required=True, help="P4Runtime device id")
    p.add_argument("--listen", required=True, help="unix:/path/to.sock or HOST:PORT")
    p.add_argument(
        "--port",
        type=parse_port,
        action="append",
        default=[],
        metavar="N=IFNAME",
        help="P4 port number = interface name (repeat)",
    )
    p.add_argument(
        "--rate",
        type=parse_rate,
        action="append",
        default=[],
        metavar="N=MBIT",
        help="link rate of port N in Mbit/s (HTB); ports without one are not rate limited",
    )
    p.add_argument(
        "--buffer-bytes",
        type=int,
        default=DEFAULT_BUFFER_BYTES,
        help=f"data queue size per port before tail drop (default {DEFAULT_BUFFER_BYTES})",
    )
    p.add_argument(
        "--no-egress-model",
        action="store_true",
        help="no HTB/eBPF egress model: port_policy is stored only (no ECN, no trimming)",
    )
    p.add_argument(
        "--stale-grace",
        type=float,
        default=STALE_GRACE_S,
        metavar="SECONDS",
        help="routes an earlier shim of this namespace left are kept (the kernel forwards on them) "
        "until the controller has written nothing for this long, then those it did not take up "
        f"are removed (default {STALE_GRACE_S:g})",
    )
    p.add_argument("--log", help="log file (default: stderr)")
    p.add_argument(
        "--p4info", type=Path, default=P4INFO_PATH, help="P4Info text file (default: the committed one)"
    )
    p.add_argument(
        "--allow-root-namespace",
        action="store_true",
        help="program the machine's own (PID 1) network namespace; refused without this flag",
    )
    return p


def in_root_namespace() -> bool:
    """True when this process shares the machine's own network namespace.

    kthreadd (PID 2) always lives in the initial namespace; PID 1 usually does
    but is unreadable in some sandboxes, so it is only the fallback.
    """
    mine = os.stat("/proc/self/ns/net").st_ino
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


def _checked_ports(args: argparse.Namespace) -> tuple[dict[int, str], dict[int, float]]:
    """The ports and rates asked for, once the kernel, the user and the namespace allow it."""
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


def _install_egress(
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
        raise ShimSetupError(f"{exc} (or run the shim with --no-egress-model)") from exc
    return {port: by_dev[ifname] for port, ifname in ports.items()}


def _log_serving(
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


def _grpc_server(service: P4RuntimeShim, listen: str) -> tuple[grpc.Server, str, Path | None]:
    """The P4Runtime server on ``listen`` (not started yet), its address and its socket file."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="p4rt"))
    p4r_grpc.add_P4RuntimeServicer_to_server(service, server)
    address, sock = listen_address(listen)
    if sock is not None:
        sock.parent.mkdir(parents=True, exist_ok=True)
        sock.unlink(missing_ok=True)
    if server.add_insecure_port(address) == 0:
        raise ShimSetupError(f"cannot listen on {listen}")
    return server, address, sock


def run(args: argparse.Namespace) -> int:
    ports, rates = _checked_ports(args)
    # (the committed P4Info's index is cached: a launcher parses it once for all its shims)
    index = default_index() if args.p4info == P4INFO_PATH else P4InfoIndex(load_p4info(args.p4info))
    enable_forwarding(ports)
    egress = _install_egress(args, ports, rates)

    netlink = NetlinkBackend()
    nft = NftFaults(nft_table_name(args.name))
    netlink.create_anchor(fallback=ports[min(ports)] if ports else "lo")
    nft.start(ports)
    programmer = KernelProgrammer(netlink, nft, egress)
    # an earlier shim's routes stay until the controller has re-written the tables (no packet
    # meets a missing route meanwhile); those it does not take up are swept after
    sweep = StaleRouteSweep(programmer, netlink.own_routes(), args.stale_grace, lambda: tables.state)
    tables = SwitchTables(index, ports, sweep, egress_model=bool(egress))

    def egress_states() -> dict[int, PortState]:
        out = {}
        for port, e in egress.items():
            try:
                out[port] = e.read_state()
            except EgressError as exc:  # the interface went away (Mininet stopping)
                log.warning("cannot read the egress counters of port %d: %s", port, exc)
        return out

    def snapshot() -> CounterReader:
        return CounterReader(ports, netlink.link_stats(), read_snmp6(), nft.counters(), egress_states)

    service = P4RuntimeShim(args.name, args.device_id, index, tables, snapshot)
    sweep.lock = service.lock
    sweep.start()

    def port_up(ifname: str) -> None:
        with service.lock:
            restored = reapply(programmer, tables.state, ifname)
        log.info("restored %d routes/neighbours on %s", restored, ifname)

    watcher = LinkWatcher(ports, port_up)
    watcher.start()
    server, address, sock = _grpc_server(service, args.listen)
    stop = threading.Event()
    going = threading.Event()  # SIGUSR1: the namespace is being deleted, with all that is in it
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def namespace_going(*_: object) -> None:
        going.set()
        stop.set()

    signal.signal(signal.SIGUSR1, namespace_going)
    server.start()
    _log_serving(args, address, ports, rates, bool(egress))
    try:
        stop.wait()
    finally:
        sweep.stop()
        watcher.stop()
        if going.is_set():
            # routes, neighbours, nft tables, qdiscs and BPF programs all go with the namespace;
            # a whole fabric's shims exit at once, so not even the interpreter's own teardown
            log.info("stopping; the namespace goes with its routes, tables and programs")
            if sock is not None:
                sock.unlink(missing_ok=True)
            logging.shutdown()
            os._exit(0)
        else:
            log.info("stopping")
            server.stop(grace=1).wait()
            _undo(service, tables, netlink, nft, egress)
        netlink.close()
        if sock is not None:
            sock.unlink(missing_ok=True)
    return 0


def _undo(
    service: P4RuntimeShim,
    tables: SwitchTables,
    netlink: NetlinkBackend,
    nft: NftFaults,
    egress: dict[int, PortEgress],
) -> None:
    """Remove what the shim put into its namespace (Mininet may have deleted the interfaces
    already: best effort)."""
    with service.lock:
        for nh in tables.state.neighbours:
            try:
                netlink.set_neighbour(nh, False)
            except KernelError as exc:
                log.warning("leaving neighbour %s: %s", nh, exc)
    netlink.flush_own_routes()
    netlink.remove_anchor()
    nft.remove()
    for e in egress.values():
        e.remove()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        filename=args.log,
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s",
    )
    install_thread_errors(lambda line: log.error("%s", line))
    try:
        return run(args)
    except ShimSetupError as exc:
        log.error("%s", exc)
        print(f"mrc-p4rt-shim: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
