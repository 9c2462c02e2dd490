"""A lossless in-memory wire between two core endpoints: message-level tests and the core benchmark."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from mrc_host.core import (
    Action,
    Endpoint,
    MessageReceived,
    MessageSent,
    PathSpace,
    SetTimer,
    Transmit,
    TransportConfig,
)
from mrc_host.wire.messages import Message

BASE = 0x10_0000
RKEY = 0x77


@dataclass
class Pair:
    a: Endpoint  # data sender
    b: Endpoint  # data receiver (owns the region)
    now: int = 1_000
    in_flight: list[tuple[Endpoint, Message]] = field(default_factory=list)
    sent_log: list[Message] = field(default_factory=list)
    events: list[Action] = field(default_factory=list)
    timers: dict[int, int | None] = field(default_factory=dict)

    def absorb(self, src: Endpoint, actions: list[Action]) -> None:
        dst = self.b if src is self.a else self.a
        for act in actions:
            if isinstance(act, Transmit):
                self.sent_log.append(act.msg)
                self.in_flight.append((dst, act.msg))
            elif isinstance(act, SetTimer):
                self.timers[id(src)] = act.at_ns
            else:
                self.events.append(act)

    def deliver(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 10_000) -> None:
        """Deliver everything in flight (and what that triggers), dropping what ``keep`` rejects."""
        for _ in range(rounds):
            if not self.in_flight:
                return
            batch, self.in_flight = self.in_flight, []
            self.now += 100
            for dst, msg in batch:
                if keep(msg):
                    self.absorb(dst, dst.receive(msg, self.now))
        raise AssertionError("traffic did not settle")

    def settle(self, keep: Callable[[Message], bool] = lambda m: True, rounds: int = 20) -> None:
        """Deliver what ``keep`` lets through, firing the timers between rounds, until the
        sender has completed a write or ``rounds`` have passed: loss recovery by timer too."""
        for _ in range(rounds):
            self.deliver(keep)
            if self.sent_done():
                return
            self.fire_timers()

    def fire_timers(self) -> None:
        for ep in (self.a, self.b):
            at = self.timers.get(id(ep))
            if at is not None:
                self.now = max(self.now, at)
                self.absorb(ep, ep.on_timer(self.now))

    def sent_done(self) -> list[MessageSent]:
        return [e for e in self.events if isinstance(e, MessageSent)]

    def received_done(self) -> list[MessageReceived]:
        return [e for e in self.events if isinstance(e, MessageReceived)]


def make_pair(size: int = 1 << 16, planes: int = 2, t1: int = 4, seed: int = 3, **cfg_kw: object) -> Pair:
    cfg = TransportConfig(**{"mtu": 1024, "rto_min_ns": 50_000, "rto_initial_ns": 50_000, **cfg_kw})  # type: ignore[arg-type]
    rng = random.Random(seed)
    paths = PathSpace(planes, t1)
    a = Endpoint(local_qp=11, peer_qp=22, config=cfg, paths=paths, rng=rng)
    b = Endpoint(local_qp=22, peer_qp=11, config=cfg, paths=paths, rng=rng)
    b.register_region(BASE, size, RKEY)
    return Pair(a, b)
