"""Per-host agent configuration: NIC ports and, per destination, the carrier template.

Like a production MRC NIC, a host agent never asks the switches for paths: it reads
``<run_dir>/hosts/<host>.json`` written by the controller and builds every outer
destination from a per-destination template (docs/mrc-facts.md: "no 128-bit address is stored
per path"). A template lists the path's uSIDs with the plane bits zero; the EV's plane
goes into every uSID and the EV's t1 index into the uSID at ``t1_slot``.

The format is part of the shared contract (mrc_fabric): the controller's route compiler
writes it, the agents read it, and neither imports the other.

File format (JSON, ``format`` 1)::

    {"format": 1, "host": "h0", "index": 0, "block": "fcbb:bb00::/32",
     "planes": 2, "t1_per_plane": 2,
     "ports": [{"plane": 0, "ifname": "h0-eth0", "mac": "02:00:c0:00:00:00",
                "address": "fcbb:bb00:c000::1", "t0": "t0p0n0", "t0_mac": "02:00:40:00:00:01"}, ...],
     "destinations": {"h2": {"index": 2,
                             "addresses": ["fcbb:bb00:c002::1", "fcbb:bb00:c402::1"],
                             "template": {"usids": ["4000", "8000", "4001", "c002"],
                                          "t1_slot": 1, "t1_count": 2},
                             "ecmp_template": {"usids": ["4000", "4001", "c002"],
                                               "t1_slot": null, "t1_count": 0}}}}

``addresses[p]`` is the destination's NIC address in plane ``p`` (the inner destination).
``ecmp_template`` is the ECMP baseline's carrier: the source T0 hashes over its uplinks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from ipaddress import IPv6Address, IPv6Network
from pathlib import Path
from typing import Any

from mrc_fabric.addressing import USID_PLANE_SHIFT, AddressingError, carrier, parse_block
from mrc_fabric.ev import EV

FORMAT_VERSION = 1


@dataclass(frozen=True)
class CarrierTemplate:
    """A path's uSIDs with plane bits 0; the EV fills in the plane and (at ``t1_slot``) the T1."""

    usids: tuple[int, ...]
    t1_slot: int | None = None
    t1_count: int = 0

    def usids_for(self, ev: EV | int) -> list[int]:
        ev = ev if isinstance(ev, EV) else EV.decode(ev)
        if self.t1_slot is not None and ev.t1 >= self.t1_count:
            raise AddressingError(f"EV t1 index {ev.t1} outside 0..{self.t1_count - 1}")
        out = [u | (ev.plane << USID_PLANE_SHIFT) for u in self.usids]
        if self.t1_slot is not None:
            out[self.t1_slot] |= ev.t1
        return out

    def carrier(self, ev: EV | int, block: IPv6Network) -> IPv6Address:
        return carrier(self.usids_for(ev), block)

    def to_dict(self) -> dict[str, Any]:
        return {"usids": [f"{u:04x}" for u in self.usids], "t1_slot": self.t1_slot, "t1_count": self.t1_count}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CarrierTemplate:
        return cls(tuple(int(u, 16) for u in d["usids"]), d.get("t1_slot"), int(d.get("t1_count", 0)))


@dataclass(frozen=True)
class HostPort:
    plane: int
    ifname: str
    mac: str
    address: str
    t0: str
    t0_mac: str


@dataclass(frozen=True)
class Destination:
    name: str
    index: int
    addresses: tuple[str, ...]  # NIC address per plane
    template: CarrierTemplate
    ecmp_template: CarrierTemplate


@dataclass
class HostConfig:
    host: str
    index: int
    block: IPv6Network
    planes: int
    t1_per_plane: int
    ports: list[HostPort] = field(default_factory=list)
    destinations: dict[str, Destination] = field(default_factory=dict)

    def carrier(self, dst: str, ev: EV | int, ecmp: bool = False) -> IPv6Address:
        d = self.destinations[dst]
        return (d.ecmp_template if ecmp else d.template).carrier(ev, self.block)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "host": self.host,
            "index": self.index,
            "block": str(self.block),
            "planes": self.planes,
            "t1_per_plane": self.t1_per_plane,
            "ports": [p.__dict__ for p in self.ports],
            "destinations": {
                name: {
                    "index": d.index,
                    "addresses": list(d.addresses),
                    "template": d.template.to_dict(),
                    "ecmp_template": d.ecmp_template.to_dict(),
                }
                for name, d in self.destinations.items()
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HostConfig:
        if d.get("format") != FORMAT_VERSION:
            raise ValueError(
                f"format: version {d.get('format')!r} is not supported (expected {FORMAT_VERSION})"
            )
        return cls(
            host=d["host"],
            index=d["index"],
            block=parse_block(d["block"]),
            planes=d["planes"],
            t1_per_plane=d["t1_per_plane"],
            ports=[HostPort(**p) for p in d["ports"]],
            destinations={
                name: Destination(
                    name,
                    v["index"],
                    tuple(v["addresses"]),
                    CarrierTemplate.from_dict(v["template"]),
                    CarrierTemplate.from_dict(v["ecmp_template"]),
                )
                for name, v in d["destinations"].items()
            },
        )

    @classmethod
    def load(cls, path: Path | str) -> HostConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))


def write_host_configs(directory: Path | str, configs: dict[str, HostConfig]) -> list[Path]:
    """Write one ``<host>.json`` per host into ``directory`` (created if missing)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, cfg in configs.items():
        path = out / f"{name}.json"
        path.write_text(cfg.to_json())
        paths.append(path)
    return paths
