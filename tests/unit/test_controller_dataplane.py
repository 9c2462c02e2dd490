# ruff: noqa: F811 (the fabric fixture is imported from test_controller)
"""Health tells the truth about the data plane: a switch whose ports stop receiving while its
neighbours send to it, a cable whose far end counts nothing, a switch that takes frames in and
sends none out -- `health`, `paths` and the event stream say so, with the figures, and stop
saying so once the counters move again.

Before, a BMv2 switch wedged by a port going down and up answered P4Runtime as primary while
receiving nothing, and `health` showed it `primary`, `paths` `ok`. The judge is checked on
counter sequences (pure), then through the controller over gRPC with the shim's service as
the switches, whose port counters the test moves.
"""

from __future__ import annotations

import pytest
from test_controller import fabric  # noqa: F401 (the fixture: the controller over fake switches)

from controller.dataplane_watch import (
    MIN_FRAMES,
    NOT_FORWARDING,
    NOT_RECEIVING,
    DataplaneJudge,
    Direction,
    PortCounts,
)
from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from linux_target.netlink_backend import LinkStats
from mrc_fabric.topology import Topology, build_clos

TOPO = build_clos(2, 2, 2, 2, prefix="dp")
T0, T1 = "dpt0p0n0", "dpt1p0n0"
UP = Direction(T1, 1, T0, 3)  # T1 port 1 -> T0 port 3 (T0's uplink to T1 0)


class Counts:
    """Cumulative counters of every switch port, moved by the test, read by the judge."""

    def __init__(self, topo: Topology = TOPO) -> None:
        self.topo = topo
        self.rx = {s.name: dict.fromkeys((e.port for e in topo.ports_of(s.name)), 0) for s in topo.switches}
        self.tx = {s.name: dict.fromkeys((e.port for e in topo.ports_of(s.name)), 0) for s in topo.switches}
        self.drops = dict.fromkeys(self.rx, 0)

    def carry(self, frames: int, broken: Direction | None = None) -> None:
        """``frames`` over every switch-to-switch cable direction, and into every switch from
        its hosts; ``broken`` delivers nothing."""
        for link in self.topo.links:
            a, b = link.a, link.b
            if not self.topo.has_switch(a.node):  # a host link: frames in at the T0
                self.rx[b.node][b.port] += frames
                self.tx[b.node][b.port] += frames
                continue
            for src, dst in ((a, b), (b, a)):
                self.tx[src.node][src.port] += frames
                if Direction(src.node, src.port, dst.node, dst.port) != broken:
                    self.rx[dst.node][dst.port] += frames

    def snapshot(self, *skip: str) -> dict[str, PortCounts]:
        return {
            n: PortCounts(dict(self.rx[n]), dict(self.tx[n]), self.drops[n]) for n in self.rx if n not in skip
        }


def started(interval_s: float = 2.0) -> tuple[Counts, DataplaneJudge]:
    """A fabric and a judge that has read it once."""
    f, judge = Counts(), DataplaneJudge(TOPO, interval_s)
    judge.update(f.snapshot())
    return f, judge


def judged(counts: Counts, judge: DataplaneJudge, rounds: list[int], broken: Direction | None = None) -> None:
    for frames in rounds:
        counts.carry(frames, broken)
        judge.update(counts.snapshot())


def test_a_healthy_or_idle_fabric_has_no_verdict() -> None:
    f, judge = started()
    judged(f, judge, [50, 0, 0, 3, 50])
    assert judge.links == {} and judge.switches == {}


def test_a_silent_cable_is_named_with_its_figures_and_clears_when_it_delivers() -> None:
    f, judge = started()
    judged(f, judge, [MIN_FRAMES], broken=UP)
    assert judge.links == {}  # one read is not a verdict
    judged(f, judge, [MIN_FRAMES], broken=UP)
    verdict = judge.links[UP]
    assert verdict.state == "silent"
    assert verdict.detail == (
        f"{T1} sent {2 * MIN_FRAMES} frames on port 1 in 4 s, {T0} received none on port 3"
    )
    assert T0 not in judge.switches  # its other ports still receive
    judged(f, judge, [1])
    assert judge.links == {}


def test_too_few_frames_are_no_verdict() -> None:
    f, judge = started()
    judged(f, judge, [2, 2, 2, 2], broken=UP)
    assert judge.links == {}


def test_a_switch_receiving_nothing_on_any_port_is_not_receiving() -> None:
    f, judge = started()
    for _ in range(2):
        f.carry(20)
        f.rx[T0] = {p: v - 20 for p, v in f.rx[T0].items()}  # nothing came in anywhere
        f.tx[T0] = {p: v - 20 for p, v in f.tx[T0].items()}  # nor went out
        judge.update(f.snapshot())
    assert judge.switches[T0].state == NOT_RECEIVING
    assert "its neighbours sent it 80 frames" in judge.switches[T0].detail  # 2 T1s x 20 x 2 reads
    assert {d.receiver for d in judge.links} == {T0}
    f.carry(5)
    judge.update(f.snapshot())
    assert T0 not in judge.switches and judge.links == {}


def test_a_switch_that_takes_frames_in_and_sends_none_is_not_forwarding_unless_it_dropped_them() -> None:
    f, judge = started()
    for _ in range(2):
        f.carry(20)
        f.tx[T1] = {p: v - 20 for p, v in f.tx[T1].items()}
        judge.update(f.snapshot())
    assert judge.switches[T1].state == NOT_FORWARDING
    assert judge.switches[T1].detail.startswith("received 80 frames in ")
    # the same with its drop counters accounting for them (a switch_down fault): no verdict
    f2, judge2 = started()
    for _ in range(3):
        f2.carry(20)
        f2.tx[T1] = {p: v - 20 for p, v in f2.tx[T1].items()}
        f2.drops[T1] += 40
        judge2.update(f2.snapshot())
    assert T1 not in judge2.switches


def test_counters_that_go_back_or_a_switch_unread_give_no_false_verdict() -> None:
    f, judge = started()
    judged(f, judge, [30, 30])
    f.rx[T0] = dict.fromkeys(f.rx[T0], 0)  # it restarted: its counters start over
    f.tx[T0] = dict.fromkeys(f.tx[T0], 0)
    judge.update(f.snapshot())
    f.carry(30)
    judge.update(f.snapshot(T0))  # T0 did not answer this time
    f.carry(30)
    judge.update(f.snapshot())
    assert judge.links == {} and judge.switches == {}


# -- through the controller -------------------------------------------------------------------------
def test_health_paths_and_events_show_a_switch_that_stopped_receiving(  # type: ignore[no-untyped-def]
    fabric, capsys
) -> None:
    from controller.cli import main

    core, stub, t0 = fabric.core, fabric.stub, "cut0p0n0"
    core.dataplane.stop()  # no reads of its own: the test reads (``check``) after moving the counters
    stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=30)
    counts = Counts(fabric.topo)

    def read(frames: int, dead: bool) -> None:
        counts.carry(frames)
        if dead:
            counts.rx[t0] = {p: v - frames for p, v in counts.rx[t0].items()}
            counts.tx[t0] = {p: v - frames for p, v in counts.tx[t0].items()}
        for sw in fabric.switches.values():
            sw.stats = {
                ifname: LinkStats(counts.rx[sw.name][p], 0, counts.tx[sw.name][p], 0)
                for p, ifname in sw.ports.items()
            }
        core.dataplane.check()

    for _ in range(3):
        read(25, dead=True)
    health = stub.GetHealth(pb.GetHealthRequest(), timeout=10)
    got = next(s for s in health.switches if s.switch == t0)
    assert got.reachable and got.primary  # its session is fine, its ports are not:
    assert got.dataplane == NOT_RECEIVING and "none came in on any port" in got.dataplane_detail
    assert {link.receiver for link in health.links} == {t0} and len(health.links) == 2
    paths = stub.ListPaths(pb.ListPathsRequest(src="cuh0", dst="cuh3"), timeout=10).paths
    plane0 = [p for p in paths if p.plane == 0]
    assert plane0 and all(p.status == "silent" and p.silent.startswith(f"{t0} not receiving") for p in plane0)
    assert all(p.status == "ok" for p in paths if p.plane == 1)
    ctl = ["--controller", f"unix:{core.run_dir}/controller.sock"]
    with pytest.raises(SystemExit) as degraded:
        main([*ctl, "health"])
    out = capsys.readouterr().out
    assert degraded.value.code == 3 and "not receiving" in out and "silent" in out
    assert main([*ctl, "paths", "cuh0", "cuh3"]) == 0
    assert "silent" in capsys.readouterr().out
    read(25, dead=False)
    health = stub.GetHealth(pb.GetHealthRequest(), timeout=10)
    assert not any(s.dataplane for s in health.switches) and not health.links
    assert all(p.status == "ok" for p in stub.ListPaths(pb.ListPathsRequest(src="cuh0", dst="cuh3")).paths)
    assert main([*ctl, "health"]) == 0
    said = [(e.kind, e.switch, e.message) for e in core.events.history if e.kind.startswith("dataplane")]
    assert ("dataplane_silent", t0, f"{t0} {NOT_RECEIVING}: {got.dataplane_detail}") in said
    assert ("dataplane_ok", t0, f"{t0} carries frames again") in said
