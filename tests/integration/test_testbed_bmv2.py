"""The testbed on BMv2 switches (node prefix ``tbv``): the default fabric comes up with the
controller and agents, a transfer delivers the right bytes across a black-holed T0-T1
link, no pcaps are written unless asked for, Mininet's pingall, ping and iperf work over the
fabric without disturbing the agents, a Mininet command that cannot work says why and leaves
the fabric up, and the teardown leaves no process, namespace or root-namespace link (BMv2
ports live in the root namespace) behind."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from live_fabric import (
    check_hosts_quiet,
    check_mininet_commands,
    check_refused_commands,
    running_testbed,
    skip_without_agent,
)

pytestmark = [pytest.mark.root, pytest.mark.bmv2]

PREFIX = "tbv"


@pytest.fixture(scope="module")
def testbed() -> Iterator[Any]:
    from topologies.target import bmv2_missing

    if missing := bmv2_missing():
        pytest.skip("BMv2 cannot run: " + "; ".join(missing))
    skip_without_agent()
    with running_testbed(PREFIX, "bmv2") as tb:
        yield tb


def test_the_hosts_announce_nothing_onto_the_bmv2_fabric(testbed: Any) -> None:
    check_hosts_quiet(testbed)


def test_bmv2_fabric_carries_a_transfer_around_a_black_hole(testbed: Any) -> None:
    assert testbed.choice.target.value == "bmv2"
    assert {r.kind for r in testbed.run.records()} == {"node", "bmv2", "controller", "agent"}
    f = testbed.controller.inject("blackhole", f"{PREFIX}t0p0n0-{PREFIX}t1p0n0")
    dropped = [p for p in testbed.controller.paths(f"{PREFIX}h0", f"{PREFIX}h3") if p.status == "dropped"]
    assert [(p.plane, p.t1) for p in dropped] == [(0, 0)]
    s = testbed.send(f"{PREFIX}h0", f"{PREFIX}h3", 1 << 20)
    assert s["ok"] and s["verified"] is True and s["bytes_acked"] == 1 << 20, s
    cells, errors = testbed.controller.counters([f"{PREFIX}t0p0n0"])
    assert not errors
    fault_drops = [c.packets for c in cells if c.counter == "drop_reason" and c.label == "fault"]
    assert fault_drops and fault_drops[0] > 0  # the switch did drop what went into the black hole
    testbed.controller.clear(f.id)


def test_bmv2_writes_no_pcaps_by_default(testbed: Any) -> None:
    s = testbed.send(f"{PREFIX}h3", f"{PREFIX}h0", 256 << 10)
    assert s["ok"], s
    assert not (testbed.run.path / "pcap").exists()


def test_mininet_pingall_ping_and_iperf_work_over_bmv2(testbed: Any) -> None:
    check_mininet_commands(testbed, f"{PREFIX}h0", f"{PREFIX}h3")


def test_mininet_commands_that_cannot_work_say_why_and_leave_bmv2_up(testbed: Any) -> None:
    check_refused_commands(testbed, f"{PREFIX}h0", f"{PREFIX}h3")
    assert all(testbed.net.get(s.name).process.running() for s in testbed.topology.switches)
