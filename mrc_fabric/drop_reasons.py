"""Drop reasons: why a switch dropped a packet, by the cell of its ``drop_reason`` counter,
and why the controller's table walk ends a packet's way.

This is the one list every part reads: the P4 program counts into the cells
(``DROP_*`` in ``p4src/include/constants.p4``; ``tests/unit/test_drop_reasons.py`` checks
that the two agree), the Linux target serves the same cells from kernel counters
(``linux_target/counters.py``), the controller labels ``GetCounters`` cells with
:attr:`DropReason.label` and its ``ListPaths`` says where and why a walked path drops
(``controller/tablewalk.py``), and docs/p4-pipeline.md lists them. A new reason a switch counts
is added here and in ``constants.p4`` together, inside :data:`DROP_REASON_CELLS`.
"""

from __future__ import annotations

import enum

DROP_REASON_CELLS = 8
"""Size of the ``drop_reason`` counter (``DROP_REASONS`` in constants.p4; the P4Info says so too)."""


class DropReason(enum.StrEnum):
    """A drop reason; its value is the label every tool prints (``no_route``...).

    The first six are what a switch counts, each in its own cell (:attr:`cell`); the rest only
    the controller's table walk finds, since the tables it walks name a fault's side, or lead
    where no switch would notice (:attr:`counted` is False).
    """

    _cell: int | None

    def __new__(cls, label: str, cell: int | None = None) -> DropReason:
        reason = str.__new__(cls, label)
        reason._value_ = label
        reason._cell = cell
        return reason

    NO_ROUTE = "no_route", 0  # no table entry for the (shifted) destination, or an empty ECMP group
    HOP_LIMIT = "hop_limit", 1  # hop limit was <= 1 on arrival
    FAULT = "fault", 2  # an injected fault (port_fault / ingress_fault) dropped it
    TRIMMED = (
        "trimmed",
        3,
    )  # the payload was dropped and the headers forwarded (BMv2, and the Linux eBPF egress)
    MALFORMED = "malformed", 4  # not an IPv6 frame the switch can forward (e.g. ARP, a runt)
    QUEUE_FULL = "queue_full", 5  # tail drop at a full egress queue: the Linux target counts it; BMv2 cannot
    INGRESS_FAULT = "ingress_fault"  # walk: a fault on the port it came in by (a switch counts FAULT)
    EGRESS_FAULT = "egress_fault"  # walk: a fault on the port it would leave by (a switch counts FAULT)
    NOT_CABLED = "not_cabled"  # walk: routed out of a port with no link
    WRONG_MAC = "wrong_mac"  # walk: routed to a MAC the neighbour does not have
    LOOP = "loop"  # walk: back at a switch and port it passed with the same destination
    NOT_A_SWITCH = "not_a_switch"  # walk: arrived at a node that is neither a switch nor a host

    @property
    def counted(self) -> bool:
        """Does a switch count it (in a cell of ``drop_reason``)?"""
        return self._cell is not None

    @property
    def cell(self) -> int:
        """The ``drop_reason`` counter cell a switch counts it in."""
        if self._cell is None:
            raise ValueError(f"{self.value}: only the controller's table walk finds it, no switch counts it")
        return self._cell

    @property
    def label(self) -> str:
        """The name ``GetCounters``, ``ListPaths``, ``mrcctl`` and the CLI print (``no_route``...)."""
        return self.value

    @classmethod
    def of_cell(cls, index: int) -> DropReason:
        """The reason counted in cell ``index``; ValueError for a spare cell."""
        for reason in cls:
            if reason._cell == index:
                return reason
        raise ValueError(f"drop_reason cell {index} counts no reason")


COUNTED: tuple[DropReason, ...] = tuple(r for r in DropReason if r.counted)
"""The reasons a switch counts, in cell order."""


def drop_reason_label(index: int) -> str:
    """The label of counter cell ``index``: a reason's name, or ``unused<i>`` for a spare cell."""
    try:
        return DropReason.of_cell(index).label
    except ValueError:
        return f"unused{index}"


DROP_REASON_LABELS: dict[int, str] = {r.cell: r.label for r in COUNTED}
"""Cell -> label of every reason a switch counts."""


# -- hosts ---------------------------------------------------------------------------------------
# A frame an agent's decoder refuses is counted under ``malformed`` in ``mrc stats`` by the
# reason ``mrc_host.wire.codec.REASONS`` names; the reasons about fields this contract fixes
# are spelled here, beside the switches'.
BAD_BTH = "bad_bth"
"""A BTH field the protocol fixes differs: SE, MigReq and PadCnt are 0, the partition key is
``frames.BTH_PKEY``, the FECN/BECN/reserved byte and the 7 bits after AckReq are 0."""
