"""Drop reasons: the cells of the switches' ``drop_reason`` counter, by index and name.

This is the one list every part reads: the P4 program counts into these indices
(``DROP_*`` in ``p4src/include/constants.p4``; ``tests/unit/test_drop_reasons.py`` checks
that the two agree), the Linux target serves the same cells from kernel counters
(``linux_target/counters.py``), the controller labels ``GetCounters`` cells with
:attr:`DropReason.label`, and docs/p4-pipeline.md lists them. A new reason is added here
and in ``constants.p4`` together, inside :data:`DROP_REASON_CELLS`.
"""

from __future__ import annotations

import enum

DROP_REASON_CELLS = 8
"""Size of the ``drop_reason`` counter (``DROP_REASONS`` in constants.p4; the P4Info says so too)."""


class DropReason(enum.IntEnum):
    """Index of a cell of the ``drop_reason`` counter."""

    NO_ROUTE = 0  # no table entry for the (shifted) destination, or an empty ECMP group
    HOP_LIMIT = 1  # hop limit was <= 1 on arrival
    FAULT = 2  # an injected fault (port_fault / ingress_fault) dropped it
    TRIMMED = 3  # the payload was dropped and the headers forwarded (BMv2, and the Linux eBPF egress)
    MALFORMED = 4  # not an IPv6 frame the switch can forward (e.g. ARP, a runt)
    QUEUE_FULL = 5  # tail drop at a full egress queue: the Linux target counts it; BMv2 cannot

    @property
    def label(self) -> str:
        """The name shown by ``GetCounters``, ``mrcctl counters`` and the CLI (``no_route``...)."""
        return self.name.lower()


def drop_reason_label(index: int) -> str:
    """The label of counter cell ``index``: a reason's name, or ``unused<i>`` for a spare cell."""
    try:
        return DropReason(index).label
    except ValueError:
        return f"unused{index}"


DROP_REASON_LABELS: dict[int, str] = {r.value: r.label for r in DropReason}
"""Index -> label of every defined reason."""


# -- hosts ---------------------------------------------------------------------------------------
# A frame an agent's decoder refuses is counted under ``malformed`` in ``mrc stats`` by the
# reason ``mrc_host.wire.codec.REASONS`` names; the reasons about fields this contract fixes
# are spelled here, beside the switches'.
BAD_BTH = "bad_bth"
"""A BTH field the protocol fixes differs: SE, MigReq and PadCnt are 0, the partition key is
``frames.BTH_PKEY``, the FECN/BECN/reserved byte and the 7 bits after AckReq are 0."""
