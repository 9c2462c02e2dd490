"""Moves the namespace from one :class:`KernelState` to the next, all or nothing.

A change is a list of steps, each with its undo. If the kernel refuses a step,
the steps already done are undone in reverse order and the refusal is raised,
so the shim's tables and the kernel never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from ipaddress import IPv6Network
from typing import TypeVar

from .egress import Policy, PortEgress
from .kernel_state import KernelState, PolicySpec
from .netlink_backend import KernelError, NetlinkBackend
from .nft_backend import NftFaults

log = logging.getLogger(__name__)
K = TypeVar("K")
V = TypeVar("V")


@dataclass
class Step:
    what: str
    do: Callable[[], None]
    undo: Callable[[], None]


def _setting(what: str, setter: Callable[[K, V], None], key: K, value: V, before: V) -> Step:
    """The step that sets ``key`` to ``value`` through ``setter``, undone by setting ``before`` back."""
    return Step(what, partial(setter, key, value), partial(setter, key, before))


def _bytes_policy(spec: PolicySpec | None) -> Policy | None:
    if spec is None:
        return None
    return Policy.from_packets(spec.ecn_threshold, spec.trim_threshold, spec.last_hop)


class KernelProgrammer:
    def __init__(
        self, netlink: NetlinkBackend, nft: NftFaults, egress: dict[int, PortEgress] | None = None
    ) -> None:
        self.netlink = netlink
        self.nft = nft
        self.egress = egress or {}  # port -> its egress program (none: policies are stored only)

    def steps(self, old: KernelState, new: KernelState) -> list[Step]:
        nl = self.netlink
        out: list[Step] = []
        for nh in sorted(new.neighbours - old.neighbours):
            out.append(_setting(f"add neighbour {nh}", nl.set_neighbour, nh, True, False))
        for dst, spec in new.routes.items():
            before = old.routes.get(dst)
            if before != spec:
                out.append(_setting(f"set route {dst}", nl.set_route, dst, spec, before))
        for dst, before in old.routes.items():
            if dst not in new.routes:
                out.append(_setting(f"delete route {dst}", nl.set_route, dst, None, before))
        for nh in sorted(old.neighbours - new.neighbours):
            out.append(_setting(f"delete neighbour {nh}", nl.set_neighbour, nh, False, True))
        keys = sorted(set(old.faults) | set(new.faults))
        forward = [
            (k, old.faults.get(k), new.faults.get(k)) for k in keys if old.faults.get(k) != new.faults.get(k)
        ]
        if forward:
            backward = [(k, b, a) for k, a, b in forward]
            out.append(
                Step("fault rules", lambda: self.nft.change(forward), lambda: self.nft.change(backward))
            )
        for port in sorted(set(old.policies) | set(new.policies)):
            was, will = old.policies.get(port), new.policies.get(port)
            egress = self.egress.get(port)
            if was != will and egress is not None:
                out.append(
                    Step(
                        f"port policy {port}",
                        partial(egress.write_policy, _bytes_policy(will)),
                        partial(egress.write_policy, _bytes_policy(was)),
                    )
                )
        return out

    def remove_route(self, dst: IPv6Network) -> None:
        self.netlink.set_route(dst, None)

    def transition(self, old: KernelState, new: KernelState) -> None:
        """Apply old → new; on a refusal undo what was done and raise KernelError."""
        done: list[Step] = []
        try:
            for step in self.steps(old, new):
                step.do()
                done.append(step)
        except KernelError:
            for step in reversed(done):
                try:
                    step.undo()
                except KernelError as exc:  # pragma: no cover - would need a second kernel refusal
                    log.error("rollback of %s failed: %s", step.what, exc)
            raise


def reapply(programmer: KernelProgrammer, state: KernelState, ifname: str) -> int:
    """Put back the routes and neighbours that use ``ifname`` (the kernel drops them on admin down).

    Returns how many objects were re-installed; failures are logged, not raised:
    the interface may flap again while we work, and the next "up" brings us back.
    """
    nl = programmer.netlink
    count = 0
    for nh in sorted(state.neighbours):
        if nh.ifname == ifname:
            try:
                nl.set_neighbour(nh, True)
                count += 1
            except KernelError as exc:
                log.warning("could not restore neighbour %s: %s", nh, exc)
    for dst, spec in state.routes.items():
        uses = any(nh.ifname == ifname for nh, _w in spec.nexthops) or (
            spec.kind == "csid" and nl.anchor == ifname
        )
        if uses:
            try:
                nl.set_route(dst, spec)
                count += 1
            except KernelError as exc:
                log.warning("could not restore route %s: %s", dst, exc)
    return count
