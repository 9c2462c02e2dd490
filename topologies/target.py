"""Which data plane a run uses: ``--target auto|bmv2|linux``, and why.

``auto`` picks BMv2 only when both ``simple_switch_grpc`` and the compiled program
(``p4src/build/mrc_switch.json``, ``make p4``) are there; otherwise the Linux SRv6
target, which needs nothing but the kernel. The reason is always returned so the
caller can say it out loud: a user must never wonder which switches they are on.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from mrc_fabric.topology import Target

PIPELINE_JSON = Path(__file__).resolve().parent.parent / "p4src" / "build" / "mrc_switch.json"
BMV2_BINARY = "simple_switch_grpc"
CHOICES = ("auto", "bmv2", "linux")
# The agents' base RTT, from which every transport timer derives (RTO floor 4x, plane guard 2x,
# reorder window floor /4, probe interval 10x; mrc_host TransportConfig.for_rtt). The agents'
# own default, 10 ms, fits the Linux target (kernel forwarding: RTTs of 0.2-2 ms plus the Python
# agents' own delays). BMv2 forwards each packet through four threads per hop in software: with
# its threads at real-time priority (topologies.bmv2_switch) a path's RTT measured 2-46 ms,
# median 14, on the 2-core development VM, so a plane's packets could trail the other plane's by
# more than the 20 ms plane guard and a healthy plane was declared failed. 25 ms puts the guard
# (50 ms) and the RTO floor (100 ms) above that spread.
BMV2_BASE_RTT_US = 25_000
LINUX_LIMITS = (
    "ECN marking, trimming and priority queues in an eBPF program per switch port (HTB at the link rate); "
    "no propagation delay (no netem)"
)


class TargetError(RuntimeError):
    """The requested target cannot run here; the message says what is missing."""


@dataclass(frozen=True)
class TargetChoice:
    target: Target
    reason: str

    @property
    def switch_cls(self) -> type:
        from topologies.fast_start import ParallelBmv2Switch, ParallelLinuxSrv6Switch

        return ParallelBmv2Switch if self.target == Target.BMV2 else ParallelLinuxSrv6Switch

    def agent_args(self) -> list[str]:
        """Agent options this data plane needs (before the user's own, which override them)."""
        return ["--base-rtt-us", str(BMV2_BASE_RTT_US)] if self.target == Target.BMV2 else []

    def banner(self) -> str:
        extra = f"; {LINUX_LIMITS}" if self.target == Target.LINUX else ""
        return f"data plane: {self.target.value.upper()} switches ({self.reason}{extra})"


def bmv2_missing(pipeline_json: Path = PIPELINE_JSON) -> list[str]:
    """What BMv2 lacks on this machine (empty: it can run)."""
    missing = []
    if shutil.which(BMV2_BINARY) is None:
        missing.append(f"{BMV2_BINARY} not found (make setup BMV2=1)")
    if not pipeline_json.exists():
        missing.append(f"{pipeline_json} missing (make p4)")
    return missing


def choose_target(requested: str = "auto", pipeline_json: Path = PIPELINE_JSON) -> TargetChoice:
    if requested not in CHOICES:
        raise TargetError(f"--target: {requested!r} is not one of {', '.join(CHOICES)}")
    missing = bmv2_missing(pipeline_json)
    if requested == "linux":
        return TargetChoice(Target.LINUX, "asked for with --target linux")
    if requested == "bmv2":
        if missing:
            raise TargetError("--target bmv2: " + "; ".join(missing))
        return TargetChoice(Target.BMV2, "asked for with --target bmv2")
    if missing:
        return TargetChoice(Target.LINUX, "auto: BMv2 unavailable: " + "; ".join(missing))
    return TargetChoice(Target.BMV2, f"auto: {BMV2_BINARY} and {PIPELINE_JSON.name} found")
