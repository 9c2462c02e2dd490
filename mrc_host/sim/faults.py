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

import random
import re
from dataclasses import dataclass

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


@dataclass(slots=True)
class Fault:
    spec: str
    kind: str
    target: str
    value: float | None
    start_ns: int
    end_ns: int | None
    data_dropped: int = 0
    control_dropped: int = 0
    acks_dropped: int = 0  # of those, SACKs and NACKs
    marked: int = 0
    trimmed: int = 0
    in_flight_dropped: int = 0  # on the wire when the link died
    queued_dropped: int = 0  # waiting in the port's queue when the link died

    def down_between(self, t0_ns: int, t1_ns: int) -> bool:
        """Whether the fault was active at any time in [t0_ns, t1_ns]."""
        if self.active(t0_ns) or self.active(t1_ns):
            return True
        start = self.start_ns
        if t1_ns < start or (self.end_ns is not None and t0_ns >= self.end_ns):
            return False
        if self.kind != "flap":
            return t0_ns <= start <= t1_ns
        period = int(self.value or 1)
        # the next down phase after t0 starts at start + 2kP
        k = max(0, -(-(t0_ns - start) // (2 * period)))
        nxt = start + 2 * k * period
        return nxt <= t1_ns and (self.end_ns is None or nxt < self.end_ns)

    def active(self, now_ns: int) -> bool:
        if now_ns < self.start_ns or (self.end_ns is not None and now_ns >= self.end_ns):
            return False
        if self.kind == "flap":
            period = int(self.value or 1)
            return (now_ns - self.start_ns) // period % 2 == 0
        return True

    def as_dict(self) -> dict[str, object]:
        return {
            "spec": self.spec,
            "kind": self.kind,
            "target": self.target,
            "start_us": self.start_ns / 1e3,
            "end_us": None if self.end_ns is None else self.end_ns / 1e3,
            "data_packets_lost": self.data_dropped,
            "control_packets_lost": self.control_dropped,
            "acks_lost": self.acks_dropped,
            "ecn_marked": self.marked,
            "trimmed": self.trimmed,
            "in_flight_dropped": self.in_flight_dropped,
            "queued_dropped": self.queued_dropped,
            "rate_gbps": self.value if self.kind == "rate" else None,
        }


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


def ns_per_byte(faults: list[Fault], now_ns: int, nominal: float) -> float:
    """Serialisation time of a port with the ``rate`` faults active on it (the slowest wins)."""
    ns = nominal
    for f in faults:
        if f.kind == "rate" and f.value and f.active(now_ns):
            ns = max(ns, 8 / f.value)
    return ns


def extra_delay(faults: list[Fault], now_ns: int, rng: random.Random) -> int:
    """Extra propagation delay of one packet from the faults active on a port: a random one
    for ``jitter``, until the window ends for ``stall``."""
    extra = 0
    for f in faults:
        if f.kind == "jitter" and f.value and f.active(now_ns):
            extra += int(rng.random() * f.value)
        elif f.kind == "stall" and f.end_ns is not None and f.active(now_ns):
            extra += f.end_ns - now_ns
    return extra
