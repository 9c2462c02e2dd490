"""mrc_fabric.drop_reasons is the one list of drop reasons: it must match what the P4 program
counts (p4src/include/constants.p4), the P4Info's counter size, the Linux target's cells,
the controller's labels and the manual."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mrc_fabric.drop_reasons import (
    COUNTED,
    DROP_REASON_CELLS,
    DROP_REASON_LABELS,
    DropReason,
    drop_reason_label,
)
from mrc_fabric.p4info import default_index

REPO = Path(__file__).resolve().parents[2]
CONSTANTS_P4 = REPO / "p4src" / "include" / "constants.p4"
DROP_CONST = re.compile(r"^\s*const\s+bit<\d+>\s+DROP_([A-Z_]+)\s*=\s*(\d+)\s*;", re.MULTILINE)


def p4_drop_constants() -> dict[str, int]:
    found = {name: int(value) for name, value in DROP_CONST.findall(CONSTANTS_P4.read_text())}
    assert found, f"no DROP_* constants found in {CONSTANTS_P4}"
    return found


def test_indices_match_the_p4_program() -> None:
    consts = p4_drop_constants()
    cells = consts.pop("REASONS")  # the counter's size, not a reason
    assert cells == DROP_REASON_CELLS
    assert consts == {r.name: r.cell for r in COUNTED}


def test_every_index_the_p4_program_counts_is_a_known_reason() -> None:
    program = "\n".join(
        p.read_text() for p in [REPO / "p4src" / "mrc_switch.p4", *REPO.glob("p4src/include/*.p4")]
    )
    counted = set(re.findall(r"drop_reason\.count\(DROP_([A-Z_]+)\)", program))
    assert counted, "the P4 program counts no drop reason?"
    assert counted <= {r.name for r in COUNTED}


def test_counter_size_matches_the_p4info() -> None:
    assert default_index().counter("drop_reason").size == DROP_REASON_CELLS
    assert all(0 <= r.cell < DROP_REASON_CELLS for r in COUNTED)
    assert len({r.cell for r in COUNTED}) == len(COUNTED)  # one cell each


def test_labels() -> None:
    assert DROP_REASON_LABELS == {
        0: "no_route",
        1: "hop_limit",
        2: "fault",
        3: "trimmed",
        4: "malformed",
        5: "queue_full",
    }
    assert drop_reason_label(4) == "malformed"
    assert drop_reason_label(7) == "unused7"


def test_one_drop_reason_for_switches_and_the_table_walk() -> None:
    """The walk's reasons print as ListPaths always printed them; a switch counts none of them."""
    walk_only = {r.value for r in DropReason if not r.counted}
    assert walk_only == {"ingress_fault", "egress_fault", "not_cabled", "wrong_mac", "loop", "not_a_switch"}
    assert DropReason.NO_ROUTE.label == "no_route" and f"{DropReason.HOP_LIMIT}" == "hop_limit"
    assert DropReason.of_cell(2) is DropReason.FAULT
    with pytest.raises(ValueError, match="no switch counts it"):
        _ = DropReason.LOOP.cell
    with pytest.raises(ValueError, match="cell 6"):
        DropReason.of_cell(6)


def test_the_manual_lists_every_reason_by_index_and_label() -> None:
    row = next(
        line
        for line in (REPO / "docs" / "p4-pipeline.md").read_text().splitlines()
        if line.startswith("| `drop_reason`")
    )
    listed = dict((int(i), name) for i, name in re.findall(r"(\d+) `([a-z_]+)`", row))
    assert listed == DROP_REASON_LABELS, row


def test_the_linux_target_serves_the_same_cells() -> None:
    from linux_target import counters

    reader = counters.CounterReader(
        ports={},
        links={},
        snmp6={"Ip6InNoRoutes": 7, "Ip6InHdrErrors": 3},
        fault_counters={"a": (5, 500), "b": (1, 100)},
    )
    assert reader.value("drop_reason", DropReason.NO_ROUTE.cell) == (7, 0)
    assert reader.value("drop_reason", DropReason.HOP_LIMIT.cell) == (3, 0)
    assert reader.value("drop_reason", DropReason.FAULT.cell) == (6, 600)
    # no egress program state given: what only the egress programs count reads 0
    for unsupported in (DropReason.TRIMMED, DropReason.MALFORMED, DropReason.QUEUE_FULL):
        assert reader.value("drop_reason", unsupported.cell) == (0, 0)
