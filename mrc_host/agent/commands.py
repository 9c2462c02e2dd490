"""The control requests (protocol.py), one handler each, looked up in one table.

A handler takes the parsed request and the client that sent it and returns the final reply,
or None when the reply comes later (``send``: when the transfer ends). A bad request raises
``protocol.ProtocolError`` naming the field; the control server turns it into
``{"ok": false, "error": ...}``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from mrc_host.agent import protocol
from mrc_host.core.ev_fields import EvDeny
from mrc_host.ev_profile import ProfileError, deny_dict, deny_rule

from .control import ControlClient
from .netio import KernelQuiet
from .pacer import hand_over_clock
from .paths import HostPaths
from .peers import Peers
from .ports import LoopCounters, Ports
from .transfer import Transfers

Handler = Callable[[protocol.Request, ControlClient | None], "dict[str, Any] | None"]

# the core counters ``mrc stats`` sums over every connection
TOTALS = (
    "data_packets_sent", "data_bytes_sent", "retransmissions", "data_packets_received", "data_bytes_placed",
    "sacks_sent", "sacks_received", "probes_sent", "probe_acks_received", "ev_retired", "ev_restored",
    "ecn_echoes_received", "losses_gap", "losses_rto", "messages_abandoned", "recv_ev_overflow",
)  # fmt: skip


class AgentParts(Protocol):
    """What the handlers read of the agent."""

    paths: HostPaths
    ports: Ports
    peers: Peers
    transfers: Transfers
    counters: LoopCounters
    quiet: KernelQuiet
    mtu: int
    started: float
    verify_icrc: bool
    deadline_s: float


class Commands:
    def __init__(self, agent: AgentParts) -> None:
        self.agent = agent
        self.table: dict[str, Handler] = {
            "ping": self.ping,
            "send": self.send,
            "cancel": self.cancel,
            "stats": self.stats,
            "evs": self.evs,
            "deny": self.deny,
            "allow": self.allow,
        }

    def handle(self, req: protocol.Request, client: ControlClient | None = None) -> dict[str, Any] | None:
        handler = self.table.get(req.cmd)
        if handler is None:
            raise protocol.ProtocolError("cmd", f"{req.cmd!r} is not handled")
        return handler(req, client)

    def ping(self, req: protocol.Request, client: ControlClient | None) -> dict[str, Any]:
        return {"ok": True, "host": self.agent.paths.name, "pid": os.getpid()}

    def send(self, req: protocol.Request, client: ControlClient | None) -> None:
        a = self.agent
        if req.peer == a.paths.name:
            raise protocol.ProtocolError("peer", "cannot send to this host itself")
        if req.peer not in a.paths.cfg.destinations:
            known = ", ".join(sorted(a.paths.cfg.destinations))
            raise protocol.ProtocolError("peer", f"{req.peer!r} is not a destination (known: {known})")
        deadline = req.deadline_s or a.deadline_s
        a.transfers.start(req.peer, req.mode, req.size, time.monotonic_ns(), deadline, client, req.progress)

    def cancel(self, req: protocol.Request, client: ControlClient | None) -> dict[str, Any]:
        t = self.agent.transfers.cancel_id(req.transfer_id, time.monotonic_ns())
        if t is None:
            raise protocol.ProtocolError(
                "transfer_id", f"{req.transfer_id:016x} is not a transfer in progress"
            )
        return {"ok": True, "transfer_id": f"{t.transfer_id:016x}", "error": t.error}

    def stats(self, req: protocol.Request, client: ControlClient | None) -> dict[str, Any]:
        a = self.agent
        conns = list(a.peers)
        totals: Counter[str] = Counter()
        for c in conns:
            k = c.endpoint.counters
            for name in TOTALS:
                totals[name] += getattr(k, name)
            for reason, n in k.malformed.items():
                totals[f"core_malformed_{reason}"] += n
            # the core's refusals of SACKs/NACKs for PSNs not sent or already acknowledged
            for reason, n in k.acks_dropped.items():
                totals[f"acks_dropped_{reason}"] += n
            totals["stray_acks"] += k.stray_acks
        return {
            "ok": True,
            "host": a.paths.name,
            "pid": os.getpid(),
            "uptime_s": round(time.monotonic() - a.started, 3),
            "mtu": a.mtu,
            "ports": a.ports.describe(),
            # when frames leave: the pacer's clock at the link's rate, or the hand-over
            "departures": hand_over_clock() if a.peers.pacer is None else a.peers.pacer.describe(),
            "malformed": dict(a.counters.malformed),
            "refused": dict(a.peers.refused),
            "handshake": dict(a.peers.handshakes.counts),
            "verify_icrc": a.verify_icrc,
            "internal_errors": a.counters.internal_errors,
            "kernel_drops": a.quiet.counters(),
            "denied": [f"{ev:08x}" for ev in sorted(a.peers.denies.evs)],
            "deny_rules": [deny_dict(r) for r in a.peers.denies.rules],
            "totals": dict(totals),
            "connections": [c.describe() for c in conns],
            "evs": [row for c in conns for row in c.ev_table()],
            "transfers": a.transfers.describe(time.monotonic_ns()),
        }

    def evs(self, req: protocol.Request, client: ControlClient | None) -> dict[str, Any]:
        rows = [row for c in self.agent.peers for row in c.ev_table()]
        return {"ok": True, "host": self.agent.paths.name, "evs": rows}

    def _rule(self, req: protocol.Request) -> EvDeny:
        assert req.rule is not None
        try:
            return deny_rule("rule", req.rule, self.agent.peers.opts.ev_profile.format)
        except ProfileError as exc:  # "rule.field: why" or "rule: why"
            key, _, why = str(exc).partition(": ")
            raise protocol.ProtocolError(key, why) from None

    def deny(self, req: protocol.Request, client: ControlClient | None) -> dict[str, Any]:
        if req.rule is not None:
            conns, evs = self.agent.peers.denies.deny_rule(self._rule(req), time.monotonic_ns())
            return {"ok": True, "rule": req.rule, "connections": conns, "evs": evs}
        n = self.agent.peers.denies.deny(req.ev, time.monotonic_ns())
        return {"ok": True, "ev": f"{req.ev:08x}", "connections": n}

    def allow(self, req: protocol.Request, client: ControlClient | None) -> dict[str, Any]:
        if req.rule is not None:
            try:
                conns, evs = self.agent.peers.denies.allow_rule(self._rule(req), time.monotonic_ns())
            except ValueError as exc:
                raise protocol.ProtocolError("rule", str(exc).removeprefix("rule: ")) from None
            return {"ok": True, "rule": req.rule, "connections": conns, "evs": evs}
        try:
            n = self.agent.peers.denies.allow(req.ev, time.monotonic_ns())
        except ValueError:
            raise protocol.ProtocolError(
                "ev", f"{req.ev:08x} is not denied and no connection uses it"
            ) from None
        return {"ok": True, "ev": f"{req.ev:08x}", "connections": n}
