"""A fault's state and the checks the fabric makes of it per packet (compiled: ``setup.py``).

``faults.py`` parses fault specs into these (its error type subclasses ``ValueError``, which
mypyc refuses, so the parsing stays interpreted); the fabric asks ``Fault.active`` on every
packet queued on a faulted port, which interpreted was a fifth of a lossy run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


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
