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
    check_link_down_then_up,
    check_mininet_commands,
    check_refused_commands,
    check_silent_switch_is_flagged,
    run_cli,
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


def test_mininet_link_down_then_up_leaves_bmv2_whole(testbed: Any) -> None:
    """Issue 64: `link t0p0n0 t1p0n0 down` then `up` broke the T0 for good (pingall 58 % dropped,
    port_rx frozen, health all well). Its ports now leave the switch while down."""
    check_link_down_then_up(testbed, f"{PREFIX}t0p0n0", f"{PREFIX}t1p0n0", f"{PREFIX}h0", f"{PREFIX}h3")
    cells, _errors = testbed.controller.counters([f"{PREFIX}t0p0n0"])
    assert all(c.packets > 0 for c in cells if c.counter == "port_rx" and c.label)


def test_a_bmv2_switch_wedged_behind_mininets_back_is_flagged_by_health(testbed: Any) -> None:
    """The same down/up done with `ip link` (not through Mininet) still hangs simple_switch's packet
    thread -- on both ends of the link, at once. The controller's counters see a neighbour send
    and nothing come in: health says `not receiving` for the one the pings cross; killing both
    (the supervisor starts them again) heals it."""
    import os
    import signal
    import subprocess

    ends = (f"{PREFIX}t0p0n0", f"{PREFIX}t1p0n0")
    link = testbed.topology.find_link("-".join(ends))

    def wedge() -> None:  # both ends, in Mininet's order
        for state in ("down", "up"):
            for end in (link.a, link.b):
                subprocess.run(["ip", "link", "set", "dev", end.ifname, state], check=True)

    def restart() -> None:
        for name in ends:
            os.kill(testbed.net.get(name).process.proc.pid, signal.SIGKILL)

    # frames for both: the hosts under the other T0 ping those under this one, over either T1
    traffic = [(f"{PREFIX}h2", f"{PREFIX}h0", 0), (f"{PREFIX}h3", f"{PREFIX}h1", 0)]
    check_silent_switch_is_flagged(
        testbed, set(ends), "not receiving", f"{PREFIX}h3", f"{PREFIX}h0", wedge, restart, traffic
    )
    n = len(testbed.host_names())
    out = run_cli(testbed, ["pingall"])
    assert f"*** Results: 0% dropped ({n * (n - 1)}/{n * (n - 1)} received)" in out, out
