"""The link rate a run uses: explicit, calibrated for this machine, or a stated default.

``mrc-testbed calibrate`` (``topologies.fidelity.calibrate``) writes what it found into
``<runs>/calibration.json`` (the parent of the run directories), one entry per data plane
and fabric shape, with the machine it was found on. A testbed asked for the calibrated rate
(``TestbedConfig.link_rate = "calibrated"``: the default of ``mrc-testbed``, the demo and
the experiments) takes the entry for its data plane and shape, else one for the same data
plane and number of planes (the load of one sender grows with the planes, not with the T1s),
else :data:`UNCALIBRATED` and says so. An explicit ``--link-rate`` always wins (the monitor
then judges it), and ``--link-rate 0`` means unlimited.

The default suits a machine as fast as the reference one (``mrc_fabric.time_scale``). An
agent's CPU per byte grows with the machine's slowdown, so on a machine measured markedly
slower (a VM without KVM runs 10-20x slower) the default is divided by that slowdown: the
run stays faithful, only slower, instead of starving its agents at the reference rate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mrc_fabric.time_scale import NOTE_ABOVE

CACHE_FILE = "calibration.json"
SCHEMA = "mrc-calibration/1"
CALIBRATED = "calibrated"
# Per-link Mbit/s where nothing was calibrated on this machine: what the default fabric kept
# faithful on the 2-core development VM (docs/testbed.md, "Fidelity"), on the low side.
UNCALIBRATED = {"linux": 20.0, "bmv2": 5.0}


def shape_key(target: str, planes: int, t0: int, t1: int, hosts_per_t0: int) -> str:
    return f"{target}/{planes}x{t0}x{t1}x{hosts_per_t0}"


def machine() -> dict[str, Any]:
    """What a calibration holds for: a rate found on another machine says nothing here."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpus": os.cpu_count() or 1, "cpu": model, "kernel": platform.release()}


@dataclass(frozen=True)
class LinkRate:
    """The rate a testbed runs at (None: unlimited) and where it came from, in words."""

    mbit_s: float | None
    source: str
    calibrated: bool = False


def read_cache(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"schema": SCHEMA, "entries": {}}
    if data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
        return {"schema": SCHEMA, "entries": {}}
    return data


def write_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """Add or replace one entry of the cache (atomically: readers never see half a file)."""
    data = read_cache(path)
    data["entries"][key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def lookup(
    path: Path, target: str, planes: int, t0: int, t1: int, hosts_per_t0: int
) -> tuple[str, dict[str, Any]] | None:
    """(key, entry) calibrated for this data plane and shape on this machine, else for the same
    data plane and number of planes; None when there is neither."""
    entries = read_cache(path)["entries"]
    here = machine()
    usable = {k: e for k, e in entries.items() if e.get("machine") == here and e.get("rate_mbit_s")}
    exact = shape_key(target, planes, t0, t1, hosts_per_t0)
    if exact in usable:
        return exact, usable[exact]
    near = sorted(k for k, e in usable.items() if k.startswith(f"{target}/{planes}x"))
    return (near[0], usable[near[0]]) if near else None


def uncalibrated(target: str, slowdown: float = 1.0) -> tuple[float, str]:
    """The default rate for ``target`` on a machine ``slowdown`` times slower than the reference,
    and how it was found: divided by the slowdown once that is beyond this machine's noise."""
    base = UNCALIBRATED.get(target, min(UNCALIBRATED.values()))
    if slowdown < NOTE_ABOVE:
        return base, f"the default for {target}"
    rate = float(f"{base / slowdown:.2g}")
    return rate, f"the default for {target}, {base:g} Mbit/s, / {slowdown:g}: this machine's slowdown"


def resolve(
    asked: float | str | None,
    cache: Path,
    target: str,
    shape: tuple[int, int, int, int],
    slowdown: float = 1.0,
) -> LinkRate:
    """The rate for a run that asked for ``asked`` (a number, ``"calibrated"`` or None) on a
    machine ``slowdown`` times slower than the reference (``mrc_fabric.time_scale``)."""
    if asked is None or asked == 0:
        return LinkRate(None, "asked for with --link-rate 0")
    if asked != CALIBRATED:
        return LinkRate(float(asked), "asked for with --link-rate")
    found = lookup(cache, target, *shape)
    if found is None:
        rate, how = uncalibrated(target, slowdown)
        return LinkRate(
            rate, f"not calibrated here for {shape_key(target, *shape)} (mrc-testbed calibrate); {how}"
        )
    key, entry = found
    when = str(entry.get("when", "?"))
    return LinkRate(float(entry["rate_mbit_s"]), f"calibrated ({key}, {when}, {cache})", calibrated=True)


def link_rate_arg(text: str) -> float | str:
    """``--link-rate``: a number of Mbit/s (0: unlimited) or ``calibrated``."""
    if text.strip().lower() == CALIBRATED:
        return CALIBRATED
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is neither Mbit/s nor 'calibrated'") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 Mbit/s, got {value:g}")
    return value
