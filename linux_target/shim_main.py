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
from pathlib import Path

from mrc_fabric.p4info import P4INFO_PATH
from mrc_fabric.stop_wait import wait_for_stop
from mrc_fabric.thread_errors import install as install_thread_errors
from mrc_fabric.time_scale import ENV as TIME_SCALE_ENV
from mrc_fabric.time_scale import scaled

from .egress import DEFAULT_BUFFER_BYTES
from .ns_worker import NamespaceWorker
from .shim_switch import EgressSetupError, ShimSetupError, ShimSwitch, kernel_version, listen_address

__all__ = ["build_parser", "kernel_version", "listen_address", "main", "parse_port", "parse_rate", "run"]

log = logging.getLogger("mrc-p4rt-shim")

MAX_PORT = 511  # port fields are 9 bits wide
# quiet after the controller's last write before an earlier shim's routes go, on the reference
# machine: a slow one (MRC_TIME_SCALE) gives its controller as much longer to write them again
STALE_GRACE_S = 3.0


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
        default=scaled(STALE_GRACE_S),
        metavar="SECONDS",
        help="routes an earlier shim of this namespace left are kept (the kernel forwards on them) "
        "until the controller has written nothing for this long, then those it did not take up "
        f"are removed (default {STALE_GRACE_S:g}, times ${TIME_SCALE_ENV} on a slow machine)",
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


def run(args: argparse.Namespace) -> int:
    """Serve one switch in this process's namespaces until SIGTERM/SIGINT (or SIGUSR1)."""
    worker = NamespaceWorker(args.name).start()
    switch = ShimSwitch(args, worker)
    switch.start()
    stop = threading.Event()
    going = threading.Event()  # SIGUSR1: the namespace is being deleted, with all that is in it
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    def namespace_going(*_: object) -> None:
        going.set()
        stop.set()

    signal.signal(signal.SIGUSR1, namespace_going)
    wait_for_stop(stop)  # (not ``stop.wait()``: a signal another thread takes would not wake it)
    if going.is_set():
        # routes, neighbours, nft tables, qdiscs and BPF programs all go with the namespace;
        # a whole fabric's shims exit at once, so not even the interpreter's own teardown
        log.info("stopping; the namespace goes with its routes, tables and programs")
        switch.stop(namespace_going=True)
        logging.shutdown()
        os._exit(0)
    log.info("stopping")
    switch.stop()
    return 0


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
        if isinstance(exc, EgressSetupError) and sys.stderr.isatty():
            print("mrc-p4rt-shim: --no-egress-model runs without it (no ECN, trims, queues)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
