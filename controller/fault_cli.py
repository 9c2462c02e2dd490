"""The ``fault`` verb's arguments and the faults table, shared by ``mrcctl`` and the Mininet CLI.

Why one module: each front end had its own copy, and they drifted (one showed ``active`` and an
expiry time, the other a ``state`` and the duration; one printed ``a_to_b``, the other ``a2b``).
Both now take the same arguments and print the same table.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from controller.faults import MAX_DURATION_S, MAX_FLAP_PERIOD_S, MIN_FLAP_PERIOD_S
from controller.northbound import DIRECTIONS, KINDS, direction_name, kind_name
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from mrc_fabric.fault_tables import LOSS_SCALE


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    """KIND TARGET [--prob P] [--period S] [--duration S] [--direction D]."""
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("target", help="link a-b or node:port; switch; host NIC port host:plane or ifname")
    parser.add_argument(
        "--prob", type=float, default=0.0, help=f"loss: drop probability in [1/{LOSS_SCALE}, 1]"
    )
    parser.add_argument(
        "--period",
        type=float,
        default=0.0,
        help=f"flap: seconds down, then as many up ({MIN_FLAP_PERIOD_S:g} to {MAX_FLAP_PERIOD_S:g})",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help=f"clear by itself after this many seconds (up to {MAX_DURATION_S / 86400:g} days)",
    )
    parser.add_argument("--direction", choices=sorted(DIRECTIONS), default="both")


def inject(controller: Any, args: argparse.Namespace) -> pb.Fault:
    """The fault ``args`` (parsed by :func:`add_fault_arguments`) asks for, injected."""
    fault: pb.Fault = controller.inject(
        args.kind, args.target, args.direction, args.prob, args.period, args.duration
    )
    return fault


def clock_time(t: float) -> str:
    """A wall-clock time as ``HH:MM:SS.mmm`` UTC; ``-`` for none."""
    if not t:
        return "-"
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]
    except (OverflowError, ValueError, OSError):  # a time no clock can show: say so, don't crash
        return f"{t:.6g}"


def faults_table(faults: Iterable[pb.Fault], title: str) -> Table | str:
    """One row per fault: what it is, whether it drops now, when it ends, the entries it holds."""
    faults = list(faults)
    if not faults:
        return "no active faults"
    t = Table("id", "kind", "target", "direction", "detail", "state", "expires", "entries", title=title)
    for f in faults:
        s = f.spec
        detail = [f"p={s.probability:g}"] if s.probability else []
        detail += [f"period={s.period_s:g}s"] if s.period_s else []
        detail += [f"for {s.duration_s:g}s"] if s.duration_s else []
        t.add_row(
            f.id,
            kind_name(s.kind),
            s.target,
            direction_name(s.direction),
            " ".join(detail),
            "down" if f.active else "up (flap)",
            clock_time(f.expires_at),
            "\n".join(f.entries),
        )
    return t
