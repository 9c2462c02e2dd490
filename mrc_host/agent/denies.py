"""The operator's denies on one agent (``mrc deny`` / ``mrc allow``): EVs, and rules over EV
fields, that no connection may use -- those open now, and those opened later (``Peers.add``
denies the EVs, ``Peers.transport`` adds the rules to a new connection's EV profile).

The EV profile's own deny rules are the core's: a connection's EV set starts with them DENIED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from mrc_host.core import EvState
from mrc_host.core.ev_fields import EvDeny

if TYPE_CHECKING:
    from .peers import Peers

DENIED: Final = EvState.DENIED


class OperatorDenies:
    """The EVs and EV rules the operator denied, applied to every connection of ``peers``."""

    def __init__(self, peers: Peers) -> None:
        self.peers = peers
        self.evs: set[int] = set()
        self.rules: list[EvDeny] = []  # over EV fields (mrc deny --field ...)

    def deny(self, ev: int, now: int) -> int:
        """DENY ``ev`` on every connection, and on connections made later; how many now."""
        self.evs.add(ev)
        conns = list(self.peers)
        for conn in conns:
            self.peers.run(conn, conn.endpoint.deny(ev, now), now)
        return len(conns)

    def allow(self, ev: int, now: int) -> int:
        """Lift a DENY; how many connections use ``ev`` (ValueError: not denied and unused)."""
        was_denied = ev in self.evs
        self.evs.discard(ev)
        n = 0
        for conn in self.peers:
            try:
                acts = conn.endpoint.allow(ev, now)
            except KeyError:
                continue
            self.peers.run(conn, acts, now)
            n += 1
        if not was_denied and n == 0:
            raise ValueError(f"ev: {ev:08x} is not denied and no connection uses it")
        return n

    def deny_rule(self, rule: EvDeny, now: int) -> tuple[int, int]:
        """DENY every EV ``rule`` matches, on every connection and on connections made later:
        (connections, EVs) denied now."""
        if rule not in self.rules:
            self.rules.append(rule)
        conns = evs = 0
        for conn in self.peers:
            hit = [
                v for v, e in conn.endpoint.evset.entries.items() if e.state is not DENIED and rule.matches(v)
            ]
            for v in hit:
                self.peers.run(conn, conn.endpoint.deny(v, now), now)
            conns, evs = conns + bool(hit), evs + len(hit)
        return conns, evs

    def allow_rule(self, rule: EvDeny, now: int) -> tuple[int, int]:
        """Lift a deny rule: its EVs that no other deny holds are GOOD again; (connections, EVs)
        (ValueError: no such rule)."""
        if rule not in self.rules:
            raise ValueError("rule: not one of the agent's deny rules (mrc stats lists them)")
        self.rules.remove(rule)
        held = [*self.peers.opts.ev_profile.values.deny, *self.rules]
        conns = evs = 0
        for conn in self.peers:
            hit = [
                v
                for v, e in conn.endpoint.evset.entries.items()
                if e.state is DENIED and rule.matches(v) and v not in self.evs
                and not any(r.matches(v) for r in held)
            ]  # fmt: skip
            for v in hit:
                self.peers.run(conn, conn.endpoint.allow(v, now), now)
            conns, evs = conns + bool(hit), evs + len(hit)
        return conns, evs
