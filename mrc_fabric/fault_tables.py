"""The two fault tables, described once: which table holds a port's faults on which side, and
what one of their entries does.

Four parts read them: the controller writes them (``controller/faults.py``), reads them back to
adopt the faults a switch holds (``controller/adopt.py``) and walks packets through them
(``controller/tablewalk.py``); the Linux target turns them into nftables rules
(``linux_target/kernel_state.py``). Each goes through :class:`PortFault`, so a change to what a
fault entry holds is made here and in ``p4src/mrc_switch.p4`` together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from mrc_fabric.p4names import Action, Field, Table

LOSS_SCALE = 65536
"""``fault_loss(prob)`` drops each packet with probability ``prob / LOSS_SCALE``."""
LOSS_MAX = LOSS_SCALE - 1
"""The largest ``prob`` (16 bits): a loss fault drops at most 65535 in 65536."""

Hook = Literal["ingress", "egress"]
FAULT_TABLES: dict[str, Hook] = {Table.PORT_FAULT: "egress", Table.INGRESS_FAULT: "ingress"}
"""Fault table -> the side of the port it acts on; both match the port exactly (:data:`FAULT_KEY`)."""
FAULT_TABLE: dict[Hook, str] = {hook: table for table, hook in FAULT_TABLES.items()}
"""The fault table of each side."""
FAULT_KEY = Field.PORT


@dataclass(frozen=True)
class PortFault:
    """What one fault entry does to the packets through its port: drop them all (``fault_drop``),
    or each with probability ``prob / LOSS_SCALE`` (``fault_loss(prob)``)."""

    drop: bool
    prob: int = 0

    @classmethod
    def combined(cls, drop: bool, survive: float) -> PortFault | None:
        """The entry of a port whose faults drop (any of them) or let ``survive`` of the packets
        through; None for a loss too small to write (0 %: no entry at all)."""
        if drop:
            return cls(True)
        prob = loss_param(1.0 - survive)
        return cls(False, prob) if prob else None

    @classmethod
    def of_action(cls, action: str, params: Mapping[str, int]) -> PortFault | None:
        """What an entry with ``action(params)`` does; None for an action no fault writes."""
        if action == Action.FAULT_DROP:
            return cls(True)
        if action == Action.FAULT_LOSS and Field.PROB in params:
            return cls(False, params[Field.PROB])
        return None

    @property
    def action(self) -> str:
        return Action.FAULT_DROP if self.drop else Action.FAULT_LOSS

    @property
    def params(self) -> tuple[tuple[str, int], ...]:
        return () if self.drop else ((Field.PROB, self.prob),)

    @property
    def loss(self) -> float:
        """The probability that a packet through the port is dropped."""
        return 1.0 if self.drop else min(self.prob, LOSS_SCALE) / LOSS_SCALE


def loss_param(probability: float) -> int:
    """``fault_loss``'s ``prob`` for a drop probability: round(p·65536), capped at 65535."""
    return min(round(probability * LOSS_SCALE), LOSS_MAX)
