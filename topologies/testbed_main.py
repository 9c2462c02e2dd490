"""``mrc-testbed``: the live MRC testbed from the command line.

::

    sudo .venv/bin/mrc-testbed --cli                      # default fabric, Mininet CLI with MRC verbs
    sudo .venv/bin/mrc-testbed --planes 4 --t1 4 --link-rate 100 --target linux
    sudo .venv/bin/mrc-testbed calibrate --target bmv2     # the highest faithful link rate here
    sudo .venv/bin/mrc-testbed --cli --p4 examples/p4/ev_telemetry.p4   # your own P4 program
    sudo .venv/bin/mrc-testbed switches                   # Thrift ports, P4Runtime sockets of runs/latest

Without ``--cli`` the fabric stays up until Ctrl-C (or SIGTERM/SIGHUP), then is torn down.
The testbed itself is :class:`topologies.testbed.Testbed`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

from topologies.live_errors import run_explained
from topologies.testbed import Testbed, add_fabric_arguments, announce, config_from_args, summary

TOOLS = ("switches", "p4", "p4rt-shell")
SUBCOMMANDS = """subcommands (each has --help):
  calibrate                 the highest link rate this machine keeps faithful, per data plane and shape
  switches                  the switches of a running fabric: device ids, P4Runtime sockets, Thrift ports
  p4 SWITCH [COMMAND]       simple_switch_CLI (BMv2's Thrift runtime) on one switch of a running fabric
  p4rt-shell SWITCH         p4runtime-shell on one switch as a backup client: never disturbs the controller
Without a subcommand: bring a fabric up (the options above). docs/testbed.md, docs/mininet-p4.md"""


def _quiet(_line: str) -> None:
    """Bring-up steps that summary() repeats once the fabric is up."""


@contextlib.contextmanager
def _view(tb: Testbed, args: argparse.Namespace) -> Iterator[Any]:
    """With ``--view``: the web view of the run (mrc_view), stopped before the fabric goes."""
    if not args.view:
        yield None
        return
    from mrc_view.cli import start_live

    assert tb.run is not None
    server: Any = start_live(tb.run.path, port=args.view_port)
    print(f"*** web view: {server.url}", flush=True)
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["calibrate"]:  # mrc-testbed calibrate: the highest faithful link rate here
        from topologies.fidelity.calibrate import main as calibrate

        return calibrate(argv[1:])
    if argv[:1] and argv[0] in TOOLS:  # the P4 tools on a running fabric's switches
        from topologies.switch_tools import main as tools

        return tools(argv)
    ap = argparse.ArgumentParser(
        prog="mrc-testbed",
        description=__doc__.splitlines()[0],
        epilog=SUBCOMMANDS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_fabric_arguments(ap)
    ap.add_argument("--cli", action="store_true", help="open the Mininet CLI with the MRC verbs")
    ap.add_argument("--no-agents", action="store_true", help="do not start the host agents")
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="every bring-up step, and Mininet's own (info) log of it"
    )
    ap.add_argument(
        "--view", action="store_true", help="serve the web view (mrc view) of this run; prints its URL"
    )
    ap.add_argument(
        "--view-port", type=int, default=0, help="the web view's port on 127.0.0.1 (default: free)"
    )
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("mrc-testbed: needs root (network namespaces, veths, raw sockets)", file=sys.stderr)
        return 2
    from mininet.log import setLogLevel

    # Mininet's own steps of the bring-up only with -v; its command output (pingall, h0 ping h3,
    # net ...) at its normal level in the CLI, as under mn
    setLogLevel("info" if args.verbose else "output")
    progress = announce if args.verbose else _quiet
    if not args.verbose:
        print(
            "*** starting the fabric, controller and agents (-v: every step) ...", file=sys.stderr, flush=True
        )
    tb = Testbed(config_from_args(args, agents=not args.no_agents), progress=progress)

    def live() -> int:
        try:
            with tb, _view(tb, args) as view:
                print(summary(tb), flush=True)
                if args.cli:
                    from topologies.cli import MrcCLI

                    setLogLevel("info")
                    MrcCLI(tb.net, testbed=tb, view=view)
                else:
                    print("fabric up; Ctrl-C tears it down", flush=True)
                    while True:
                        signal.pause()
        except KeyboardInterrupt:
            print("\ninterrupted: fabric torn down", file=sys.stderr)
        return 0

    try:
        return run_explained("mrc-testbed", live)
    finally:
        _say_fidelity(tb)


def _say_fidelity(tb: Testbed | None) -> None:
    """The run's fidelity verdict, once it is over (topologies.fidelity)."""
    if tb is None or tb.fidelity_verdict is None:
        return
    from topologies.fidelity.report import summary_lines

    for line in summary_lines(tb.fidelity_verdict.as_dict()):
        print(line, flush=True)


if __name__ == "__main__":
    sys.exit(main())
