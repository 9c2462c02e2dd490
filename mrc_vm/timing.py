"""Time limits that follow the machine: a short CPU calibration run on the host and in the guest.

Each step has the time it takes on this project's reference machine (2 cores, native, unloaded);
its limit is that time, scaled by how much slower this machine and this guest are (the same
Python loop timed on the host before the boot and in the guest after it: TCG is typically 5-20x
slower, KVM about 1x), times a safety margin. Before the guest answers, only the host's speed
is known, so the boot's own limit assumes TCG's worst case.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

# The same loop on both sides: pure interpreter work, like most of what the tests do.
CALIBRATION = (
    "import time\nt=time.perf_counter()\ns=0\nfor i in range(2_000_000): s+=i*i\nprint(time.perf_counter()-t)"
)
# This loop's time on the reference machine (2 cores of an EPYC, idle), in seconds.
REFERENCE_HOST_S = 0.15
# A Debian 12 boot to SSH, native on the reference machine; TCG's worst slowdown for a boot.
REFERENCE_BOOT_S = 8.0
TCG_WORST = 20.0
MARGIN = 3.0


@dataclass(frozen=True)
class Speeds:
    """Seconds the calibration loop took on the host and (once booted) in the guest."""

    host_s: float
    guest_s: float | None = None

    @property
    def host_factor(self) -> float:
        """How much slower this host is than the reference machine (at least 1)."""
        return max(1.0, self.host_s / REFERENCE_HOST_S)

    @property
    def guest_factor(self) -> float:
        """How much slower the guest is than the reference machine (at least 1)."""
        if self.guest_s is None:
            return self.host_factor * TCG_WORST
        return max(1.0, self.guest_s / REFERENCE_HOST_S)

    @property
    def guest_vs_host(self) -> float | None:
        return None if self.guest_s is None else self.guest_s / self.host_s


def boot_limit_s(speeds: Speeds, accel: str) -> float:
    """Until SSH answers: TCG's worst slowdown (or KVM's 1x) on this host's speed, with the margin."""
    slowdown = TCG_WORST if accel == "tcg" else 2.0
    return max(120.0, REFERENCE_BOOT_S * slowdown * speeds.host_factor * MARGIN)


def step_limit_s(reference_s: float, speeds: Speeds, floor_s: float = 120.0) -> float:
    """A step that takes `reference_s` natively on the reference machine, in this guest."""
    return max(floor_s, reference_s * speeds.guest_factor * MARGIN)


def parse_seconds(text: str) -> float:
    """The calibration's output: one number (the last line that is one)."""
    for line in reversed(text.strip().splitlines()):
        try:
            value = float(line.strip())
        except ValueError:
            continue
        if value > 0:
            return value
    raise ValueError(f"no calibration time in {text[-200:]!r}")


def host_calibration(runs: int = 3) -> float:
    """The median of a few runs of the loop on this host."""
    times = []
    for _ in range(runs):
        res = subprocess.run([sys.executable, "-c", CALIBRATION], capture_output=True, text=True, timeout=300)
        times.append(parse_seconds(res.stdout))
    return sorted(times)[len(times) // 2]


def guest_calibration_command(runs: int = 3) -> str:
    """The loop in the guest's python3, `runs` times (the check takes the median)."""
    one = "python3 -c " + "'" + CALIBRATION.replace("'", "") + "'"
    return "; ".join([one] * runs)


def median_seconds(text: str) -> float:
    values = []
    for line in text.splitlines():
        try:
            values.append(float(line.strip()))
        except ValueError:
            continue
    if not values:
        raise ValueError(f"no calibration time in {text[-200:]!r}")
    return sorted(values)[len(values) // 2]
