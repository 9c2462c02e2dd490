"""Fabric planner: switch, link and optics counts of multi-plane vs single-plane Clos designs.

Counting assumptions (chosen because they reproduce the public MRC figures, docs/mrc-facts.md):

- Full bisection, every tier counted by bandwidth: a non-top tier switch has half its
  ports down and half up; the top tier uses all its ports down. A tier needs
  ``ports facing down / ports down per switch`` switches (rounded up).
- A plane is one independent Clos; a NIC of ``nic_gbps`` split into ``planes`` ports
  of ``nic_gbps / planes`` attaches one port to each plane. The single-plane design has
  one port of ``nic_gbps``.
- A switch of ``switch_tbps`` runs its ports at the plane's port speed
  (51.2 Tb/s = 512 x 100G or 64 x 800G).
- Optics: every link, host links included, is optical with one transceiver per end;
  transceivers are counted in 800G-module equivalents (an 800G module breaks out into
  8 x 100G, so a 100G link end counts 1/8). Counting host links as copper would give 1/2
  instead of the paper's 2/3.
- ``max_gpus_strict`` is the textbook fat-tree limit ``R · (R/2)^(tiers-1)`` per plane;
  the paper's three-tier 800G comparison at 131,072 GPUs exceeds it with 64-port switches
  (limit 65,536) and is counted by bandwidth as above, as the paper's ratios are.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

MODULE_GBPS = 800  # optics are counted in 800G-module equivalents


@dataclass(frozen=True)
class TierCount:
    name: str  # "T0", "T1", "T2", ...
    switches: int  # across all planes
    ports_down: int  # per switch
    ports_up: int  # per switch


@dataclass(frozen=True)
class FabricPlan:
    gpus: int
    planes: int
    tiers: int
    port_gbps: float
    switch_ports: int
    tier_counts: list[TierCount] = field(default_factory=list)
    host_links: int = 0
    switch_links: int = 0  # switch-to-switch links, all tiers and planes
    optics_modules: float = 0.0  # 800G-equivalent transceivers
    max_gpus_strict: int = 0
    longest_path_switches: int = 0
    link_loss_fraction: float = 0.0  # capacity a node loses when one T0 uplink fails
    nic_port_loss_fraction: float = 0.0  # capacity a node loses when one NIC port fails

    @property
    def switches(self) -> int:
        return sum(t.switches for t in self.tier_counts)

    @property
    def fits_strict(self) -> bool:
        return self.gpus <= self.max_gpus_strict

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["switches"] = self.switches
        d["fits_strict"] = self.fits_strict
        return d


class PlanError(ValueError):
    pass


def plan_fabric(gpus: int, nic_gbps: float, planes: int, switch_tbps: float, tiers: int) -> FabricPlan:
    """Counts for ``gpus`` NICs of ``nic_gbps`` split over ``planes`` planes of ``tiers``-tier Clos."""
    if gpus < 1:
        raise PlanError(f"gpus: must be at least 1, got {gpus}")
    if planes < 1:
        raise PlanError(f"planes: must be at least 1, got {planes}")
    if tiers < 1:
        raise PlanError(f"tiers: must be at least 1, got {tiers}")
    port_gbps = nic_gbps / planes
    radix_f = switch_tbps * 1000 / port_gbps
    radix = int(radix_f)
    if radix < 2 or radix != radix_f or radix % 2:
        raise PlanError(
            f"switch_tbps: {switch_tbps} Tb/s does not split into an even number of {port_gbps}G ports"
        )
    counts: list[TierCount] = []
    facing_down = gpus  # ports needed towards the tier below, per plane
    switch_links = 0
    for t in range(tiers):
        top = t == tiers - 1
        down = radix if top else radix // 2
        up = 0 if top else radix // 2
        n = math.ceil(facing_down / down)
        counts.append(TierCount(f"T{t}", n * planes, down, up))
        if not top:
            facing_down = n * up
            switch_links += facing_down * planes
    host_links = gpus * planes
    optics = 2 * (host_links + switch_links) * port_gbps / MODULE_GBPS
    return FabricPlan(
        gpus=gpus,
        planes=planes,
        tiers=tiers,
        port_gbps=port_gbps,
        switch_ports=radix,
        tier_counts=counts,
        host_links=host_links,
        switch_links=switch_links,
        optics_modules=optics,
        max_gpus_strict=radix * (radix // 2) ** (tiers - 1),
        longest_path_switches=2 * tiers - 1,
        link_loss_fraction=(1 / (radix // 2)) if tiers > 1 else 0.0,
        nic_port_loss_fraction=1 / planes,
    )


@dataclass(frozen=True)
class Comparison:
    multi_plane: FabricPlan
    single_plane: FabricPlan

    @property
    def optics_ratio(self) -> float:
        return self.multi_plane.optics_modules / self.single_plane.optics_modules

    @property
    def switch_ratio(self) -> float:
        return self.multi_plane.switches / self.single_plane.switches

    def to_dict(self) -> dict[str, Any]:
        return {
            "multi_plane": self.multi_plane.to_dict(),
            "single_plane": self.single_plane.to_dict(),
            "optics_ratio": self.optics_ratio,
            "switch_ratio": self.switch_ratio,
        }


def compare(
    gpus: int = 131072,
    nic_gbps: float = 800,
    planes: int = 8,
    switch_tbps: float = 51.2,
    multi_tiers: int = 2,
    single_tiers: int = 3,
) -> Comparison:
    """The paper's comparison: two-tier multi-plane vs three-tier single-plane."""
    return Comparison(
        plan_fabric(gpus, nic_gbps, planes, switch_tbps, multi_tiers),
        plan_fabric(gpus, nic_gbps, 1, switch_tbps, single_tiers),
    )
