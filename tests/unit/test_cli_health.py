"""The Mininet CLI's `health` and `paths` tell what the tables cannot: a path whose EVs the
sending agent has all retired is "dead to the agent" (the tables still say ok), and a link the
CLI's `link A B down` holds down is listed with why -- over a stand-in testbed (no root)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from controller.proto.mrc.controller.v1 import controller_pb2 as pb
from mrc_fabric.topology import build_clos
from topologies.cli import MrcCommands

TOPO = build_clos(2, 2, 2, 2, prefix="ch")


def ev_rows(dead: tuple[int, int]) -> list[dict[str, Any]]:
    """chh0's mrc connection to chh3: 4 EVs per path, those of ``dead`` all ASSUMED_BAD, one
    EV of another path ASSUMED_BAD too (a path with one bad EV is not dead)."""
    rows = []
    for plane in range(2):
        for t1 in range(2):
            for k in range(4):
                bad = (plane, t1) == dead or (plane, t1, k) == (1, 1, 0)
                state = "ASSUMED_BAD" if bad else "GOOD"
                row = {"peer": "chh3", "conn": "send", "mode": "mrc", "plane": plane, "t1": t1}
                rows.append(row | {"ev": f"{plane}{t1}{k:06x}", "state": state})
    return rows


class Agent:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.client = self
        self.rows = rows

    def evs(self) -> dict[str, Any]:
        return {"evs": self.rows}


class Controller:
    def health(self) -> pb.GetHealthResponse:
        return pb.GetHealthResponse(switches=[pb.SwitchHealth(switch=s.name, reachable=True, primary=True)
                                              for s in TOPO.switches])  # fmt: skip

    def paths(self, src: str, dst: str) -> list[pb.Path]:
        out = []
        for plane in range(2):
            for t1 in range(2):
                hops = [pb.Hop(node=f"cht0p{plane}n0"), pb.Hop(node=f"cht1p{plane}n{t1}")]
                out.append(pb.Path(plane=plane, t1=t1, status="ok", hops=hops, delivered_to=f"{dst}:{plane}"))
        return out


class FakeTestbed:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.controller = Controller()
        self.topology = TOPO
        self.link_faults = {"cht0p0n0-cht1p0n0": "f7"}
        self.agents = {"chh0": Agent(rows)}

    def host_names(self) -> list[str]:
        return [h.name for h in TOPO.hosts]

    def agent(self, host: str) -> Agent:
        return self.agents[host]  # KeyError: no agent there


def commands(dead: tuple[int, int]) -> tuple[MrcCommands, io.StringIO]:
    out = io.StringIO()
    return MrcCommands(FakeTestbed(ev_rows(dead)), Console(file=out, width=300, color_system=None)), out


def test_paths_marks_a_path_the_agent_retired_whole() -> None:
    cli, out = commands(dead=(0, 1))
    cli.paths("chh0 chh3")
    lines = {
        tuple(c.strip() for c in ln.split("│")[1:3]): ln for ln in out.getvalue().splitlines() if "│" in ln
    }
    assert "dead to chh0's agent: all 4 EVs ASSUMED_BAD (tables: ok" in lines[("0", "1")]
    assert "dead" not in lines[("1", "1")] and "ok" in lines[("1", "1")]  # one bad EV of four


def test_health_lists_dead_paths_and_the_links_the_cli_holds_down() -> None:
    cli, out = commands(dead=(1, 0))
    cli.health()
    text = out.getvalue()
    assert "chh0 → chh3 plane 1 T1 0" in text and "dead to the agent" in text
    assert text.count("dead to the agent") == 1
    assert "Mininet `link cht0p0n0 cht1p0n0 down` (fault f7)" in text
