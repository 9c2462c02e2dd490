"""``mrcctl`` and the Mininet CLI parse ``fault`` alike and print the same faults table
(``controller.fault_cli``): the two copies they had drifted apart."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from controller.cli import Cli
from controller.fault_cli import faults_table
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from topologies.cli import MrcCommands

FAULTS = [
    pb.Fault(
        id="f1",
        spec=pb.FaultSpec(
            kind=pb.LOSS, target="t0p0n0-t1p0n0", direction=pb.A_TO_B, probability=0.2, duration_s=5
        ),
        active=True,
        expires_at=3600.5,
        entries=["t0p0n0:port_fault:3 loss 0.2"],
    ),
    pb.Fault(
        id="f2",
        spec=pb.FaultSpec(kind=pb.FLAP, target="t0p1n0-t1p1n1", period_s=0.5),
        active=False,
        entries=["t0p1n0:port_fault:4 drop", "t1p1n1:port_fault:1 drop"],
    ),
]


class FakeController:
    def __init__(self) -> None:
        self.injected: list[tuple[Any, ...]] = []

    def inject(self, *args: Any) -> pb.Fault:
        self.injected.append(args)
        return FAULTS[0]

    def faults(self) -> list[pb.Fault]:
        return list(FAULTS)


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def _mrcctl(argv: list[str], controller: FakeController) -> str:
    from controller.cli import build_parser

    console, out = _console()
    cli = Cli(build_parser().parse_args(argv), console)
    cli._client = controller  # type: ignore[assignment]
    getattr(cli, argv[0])()
    return out.getvalue()


def _mininet(verb: str, line: str, controller: FakeController) -> str:
    console, out = _console()
    getattr(MrcCommands(SimpleNamespace(controller=controller), console), verb)(line)
    return out.getvalue()


def test_both_front_ends_print_the_same_faults_table() -> None:
    ctl = FakeController()
    listed = _mrcctl(["faults"], ctl)
    assert listed == _mininet("faults", "", ctl)
    for cell in ("state", "expires", "a2b", "p=0.2 for 5s", "01:00:00.500", "up (flap)", "period=0.5s"):
        assert cell in listed, cell
    assert "a_to_b" not in listed and "active" not in listed.split("\n", 2)[1]


def test_both_front_ends_parse_a_fault_alike() -> None:
    args = ["loss", "t0p0n0-t1p0n0", "--prob", "0.2", "--direction", "a2b", "--duration", "5"]
    ctl, mn = FakeController(), FakeController()
    assert _mrcctl(["fault", *args], ctl) == _mininet("fault", " ".join(args), mn)
    assert ctl.injected == mn.injected == [("loss", "t0p0n0-t1p0n0", "a2b", 0.2, 0.0, 5.0)]


def test_no_faults_reads_so_in_both() -> None:
    class Empty(FakeController):
        def faults(self) -> list[pb.Fault]:
            return []

    assert faults_table([], "active faults") == "no active faults"
    assert _mrcctl(["faults"], Empty()) == _mininet("faults", "", Empty()) == "no active faults\n"
