"""Every carrier between two hosts, walked through the compiled routes and the live faults.

Why apart from the core: a path listing owns no state; it reads the routes, the faults' entries
and which switches are reachable, and says what a packet would meet (``tablewalk.walk``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from controller.compiler import ecmp_template, path_template
from controller.entries import SwitchEntries, TableEntry
from controller.tablewalk import Walk, build_views, walk
from mrc_fabric.addressing import carrier
from mrc_fabric.ev import EV
from mrc_fabric.topology import Topology


@dataclass(frozen=True)
class PathInfo:
    ev: int
    plane: int
    t1: int  # -1: none
    carrier: str
    walk: Walk
    unreachable: tuple[str, ...] = ()  # switches on the path without a live P4Runtime session

    @property
    def status(self) -> str:
        if not self.walk.ok:
            return "dropped"
        if self.unreachable:
            return "unreachable"
        return "lossy" if self.walk.survival < 1.0 else "ok"


def list_paths(
    topo: Topology,
    routes: dict[str, SwitchEntries],
    faults: dict[str, list[TableEntry]],
    unreachable: Callable[[Iterable[str]], tuple[str, ...]],
    hosts: tuple[str, str],
    ecmp: bool = False,
) -> list[PathInfo]:
    """Every carrier from ``hosts[0]`` to ``hosts[1]``; ``faults``: the fault entries by switch."""
    s, d = topo.host(hosts[0]), topo.host(hosts[1])
    if s.name == d.name:
        raise ValueError("dst: source and destination are the same host")
    views = build_views({n: [*routes[n].entries, *faults.get(n, [])] for n in routes})
    same_t0 = s.t0_index == d.t0_index
    choices = [-1] if same_t0 else list(range(topo.t1_per_plane))
    if ecmp:
        template = ecmp_template(s.t0_index, d.t0_index, d.index)
    else:
        template = path_template(topo, s.t0_index, d.t0_index, d.index)
    out = []
    for plane in range(topo.planes):
        for t1 in choices:
            # ECMP: the entropy picks the uplink (the walker hashes entropy mod size)
            ev = EV(plane, 0, max(t1, 0)) if ecmp else EV(plane, max(t1, 0))
            addr = carrier(template.usids_for(ev), topo.block)
            w = walk(topo, views, s.name, plane, addr, ev.value)
            down = unreachable(h.node for h in w.hops)
            out.append(PathInfo(ev.value, plane, -1 if ecmp else t1, str(addr), w, down))
    return out
