"""Fault specifications: ``kind[=value]:target@start[-end]``.

kinds (value in brackets):
  blackhole            the link silently drops everything, both directions
  down                 the link is down (same effect: no routing protocol reacts)
  loss=P               each packet is dropped with probability P (0..1), both directions
  flap=PERIOD          the link alternates down/up every PERIOD (down first)
  ecn                  every ECN-capable packet leaving on the link is marked CE
  trim[=P]             data packets are cut to their headers (probability P, default 1)
  switch-down          every port of a switch drops everything (silent failure)
  nic-down             a host NIC port goes down; the host sees it (port-status bitmap)
  rate=GBPS            the link (or every port of a switch or plane) runs at GBPS Gb/s
  jitter=TIME          each packet on the link waits a random 0..TIME more (reorders, like BMv2)
  stall                the link (switch, plane) holds what it sends until the window ends,
                       then delivers it: a software switch descheduled (needs an end time)
A failure (blackhole, down, flap, switch-down, nic-down) also takes the packets queued
for the link when it fails and those on the wire while it is down.
targets:
  links     p<plane>-t0_<i>-t1_<j>   (a T0-T1 link)   or  h<host>-p<plane>  (a NIC link)
  switches  p<plane>-t0_<i>  or  p<plane>-t1_<j>
  planes    p<plane>  (rate and stall only: every link of the plane, NIC links included)
  all       every fabric link (T0-T1 and NIC links), e.g. loss=0.01:all
times: a number with unit ns, us, ms or s, or a percentage of the ideal transfer time
(size / (planes x link rate)), e.g. @30%, @50us-200us, @10%-60%. No end: until the run stops.
"""

from __future__ import annotations

import re

from .fault_state import Fault, extra_delay, ns_per_byte

__all__ = [
    "KILLING_KINDS",
    "KINDS",
    "PASSIVE",
    "Fault",
    "FaultSpecError",
    "extra_delay",
    "ns_per_byte",
    "parse_fault",
    "parse_time",
    "rate_hits",
]

KINDS = (
    "blackhole",
    "down",
    "loss",
    "flap",
    "ecn",
    "trim",
    "switch-down",
    "nic-down",
    "rate",
    "jitter",
    "stall",
)
KILLING_KINDS = frozenset({"blackhole", "down", "flap", "switch-down", "nic-down"})
PASSIVE = frozenset({"rate", "jitter", "stall"})  # act when the port sends, not when a packet is queued
_PLANE = re.compile(r"^p(?P<plane>[0-9]+)$")
_SPEC = re.compile(
    r"^(?P<kind>[a-z-]+)(?:=(?P<value>[0-9.eE+-]+(?:ns|us|ms|s)?))?:(?P<target>[a-z0-9_-]+)"
    r"(?:@(?P<start>0|[0-9.]+(?:%|ns|us|ms|s))(?:-(?P<end>[0-9.]+(?:%|ns|us|ms|s)))?)?$"
)
_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


class FaultSpecError(ValueError):
    pass


def parse_time(text: str, ideal_ns: int) -> int:
    if text == "0":
        return 0
    if text.endswith("%"):
        return int(float(text[:-1]) / 100 * ideal_ns)
    for unit in ("ns", "us", "ms", "s"):
        if text.endswith(unit):
            return int(float(text[: -len(unit)]) * _UNITS[unit])
    raise FaultSpecError(f"time {text!r} needs a unit (ns, us, ms, s) or %")


def parse_fault(spec: str, ideal_ns: int, default_start_ns: int = 0) -> Fault:
    m = _SPEC.match(spec.strip())
    if not m:
        raise FaultSpecError(f"fault {spec!r} does not match kind[=value]:target@start[-end]")
    kind = m["kind"]
    if kind not in KINDS:
        raise FaultSpecError(f"fault kind {kind!r} unknown; kinds: {', '.join(KINDS)}")
    raw = m["value"]
    value: float | None = None
    if raw is not None:
        value = float(parse_time(raw, ideal_ns)) if kind in ("flap", "jitter") else float(raw)
    if kind == "loss" and (value is None or not 0 <= value <= 1):
        raise FaultSpecError(f"loss needs a probability 0..1, got {raw!r}")
    if kind == "flap" and not value:
        raise FaultSpecError("flap needs a period, e.g. flap=20us")
    if kind == "rate" and (value is None or value <= 0):
        raise FaultSpecError(f"rate needs a positive Gb/s value, e.g. rate=50:p0, got {raw!r}")
    if kind == "jitter" and not value:
        raise FaultSpecError("jitter needs a time, e.g. jitter=2us:all")
    if kind == "trim" and value is not None and not 0 <= value <= 1:
        raise FaultSpecError(f"trim probability must be 0..1, got {raw!r}")
    start = parse_time(m["start"], ideal_ns) if m["start"] else default_start_ns
    end = parse_time(m["end"], ideal_ns) if m["end"] else None
    if end is not None and end <= start:
        raise FaultSpecError(f"fault {spec!r} ends before it starts")
    if kind == "stall" and end is None:
        raise FaultSpecError(f"stall needs an end time, e.g. stall:p1@10%-15%, got {spec!r}")
    return Fault(spec, kind, m["target"], value, start, end)


def rate_hits(fault: Fault, link: str, src: str, dst: str) -> bool:
    """Whether a ``rate`` or ``stall`` fault applies to the port ``src>dst`` of ``link``: the link itself,
    every port of a named switch, or every link of a plane (``p<plane>``)."""
    target = fault.target
    if target in (link, src, dst):
        return True
    m = _PLANE.match(target)
    if m is None:
        return False
    plane = f"p{m['plane']}"
    return link.startswith(plane + "-") or link.endswith("-" + plane)
