"""A fault's state and the checks the fabric makes of it per packet (compiled: ``setup.py``).

``faults.py`` parses fault specs into these (its error type subclasses ``ValueError``, which
mypyc refuses, so the parsing stays interpreted); the fabric asks ``Fault.active`` on every
packet queued on a faulted port, which interpreted was a fifth of a lossy run.
"""

from __future__ import annotations

import random


class Drop:
    """One packet a fault dropped, for read-only reporting (the fuzzer's invariants, the
    oracle, ``bench.sim_knowledge``): a record with names, so a field more touches only
    the readers that want it."""

    __slots__ = ("at_ns", "data", "plane", "qp", "sent_ns", "t1")

    def __init__(self, at_ns: int, qp: int, data: bool, plane: int, t1: int, sent_ns: int) -> None:
        self.at_ns = at_ns  # when it was dropped
        self.qp = qp  # its destination QP
        self.data = data  # a DATA packet (else control)
        self.plane = plane
        self.t1 = t1  # -1: ECMP (no T1 chosen by the sender)
        # when its sender sent it (DATA; -1 for control): a packet can wait in its NIC's queue
        # past what the sender learnt
        self.sent_ns = sent_ns


class Fault:
    """One fault: what, where, when, and what it has done so far (a plain class: a dataclass
    costs every ``mrc-sim`` start a fraction of a millisecond to build, and this needs none
    of its methods)."""

    __slots__ = (
        "acks_dropped",
        "control_dropped",
        "data_dropped",
        "drops",
        "end_ns",
        "entered",
        "in_flight_dropped",
        "kind",
        "marked",
        "queued_dropped",
        "spec",
        "start_ns",
        "target",
        "trimmed",
        "value",
    )

    def __init__(
        self, spec: str, kind: str, target: str, value: float | None, start_ns: int, end_ns: int | None
    ) -> None:
        self.spec = spec
        self.kind = kind
        self.target = target
        self.value = value
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.data_dropped = 0
        self.control_dropped = 0
        self.acks_dropped = 0  # of those, SACKs and NACKs
        self.marked = 0
        self.trimmed = 0
        self.in_flight_dropped = 0  # on the wire when the link died
        self.queued_dropped = 0  # waiting in the port's queue when the link died
        # read-only observations (the fuzzer's invariants, ``fuzz_observe.py``): every packet
        # this fault dropped, and per destination QP the DATA packets that entered its element
        # (a link's two ports, the ports into a switch) before or between its down phases
        self.drops: list[Drop] = []
        self.entered: dict[int, int] = {}

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
