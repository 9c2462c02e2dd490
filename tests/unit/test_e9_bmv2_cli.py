"""E9 reads and rewrites BMv2's port_policy entries and CE counters through simple_switch_CLI.

The texts below are what simple_switch_CLI (the p4bench build) printed for a T0 of the E9
fabric. The parser once expected the key as ``port`` and found no entry in this dump, so
"trimming off" changed nothing on BMv2 without a word.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.experiments import e9_congestion as e9

DUMP = """RuntimeCmd: ==========
TABLE ENTRIES
**********
Dumping entry 0x0
Match key:
* scalars.metadata_t.out_port: EXACT     0001
Action entry: MrcIngress.set_port_policy - 14, 40, 01
**********
Dumping entry 0x1
Match key:
* scalars.metadata_t.out_port: EXACT     0002
Action entry: MrcIngress.set_port_policy - 14, 40, 00
**********
Dumping entry 0x2
Match key:
* scalars.metadata_t.out_port: EXACT     0004
Action entry: MrcIngress.set_port_policy - 14, 40, 00
==========
Dumping default entry
Action entry: NoAction -
==========
RuntimeCmd:
"""


class FakeSwitch:
    name = "t0p0n0"

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.sent: list[str] = []


def fake_cli(sw: FakeSwitch, *commands: str) -> str:
    sw.sent.extend(commands)
    return "".join(v for k, v in sw.answers.items() if commands[0].startswith(k))


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(e9, "switch_cli", fake_cli)


def test_policies_reads_every_entry_of_the_dump(cli: Any) -> None:
    sw = FakeSwitch({"table_dump": DUMP})
    assert e9.policies(sw) == [("0x0", 1, 20, 64, 1), ("0x1", 2, 20, 64, 0), ("0x2", 4, 20, 64, 0)]


def test_a_dump_without_entries_is_an_error_not_a_silent_no_op(cli: Any) -> None:
    with pytest.raises(RuntimeError, match="no port_policy entry understood"):
        e9.policies(FakeSwitch({"table_dump": "RuntimeCmd: ==========\nTABLE ENTRIES\n=========="}))


def test_port_thresholds_rewrite_that_port_entry_keeping_last_hop(cli: Any) -> None:
    sw = FakeSwitch({"table_dump": DUMP, "table_modify": ""})
    e9.set_port_thresholds(sw, 4, 1, 2)
    assert sw.sent[-1] == f"table_modify {e9.POLICY_TABLE} {e9.POLICY_ACTION} 2 1 2 0"


def test_ce_marks_are_read_from_the_counter_line(cli: Any) -> None:
    sw = FakeSwitch({"counter_read": "RuntimeCmd: MrcEgress.ecn_marked[4]= (8240 bytes, 2 packets)\n"})
    assert e9.ecn_marks(sw, 4) == 2
