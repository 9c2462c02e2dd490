"""The controller on a real emulated fabric: Mininet, Linux SRv6 switches with their P4Runtime
shims, and packets sent from host namespaces with AF_PACKET sockets.

Default fabric (P=2, L=2, S=2, 2 hosts per T0) under the prefix ``ci``. Every fault kind
is injected through the controller's gRPC API and its effect observed on traffic; then
cleared and the traffic observed again. A "none arrived" check sends its packets, then
a sentinel burst on a path known to work to the same host, and counts once the sentinel
is in: no sleeping and hoping.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from live_fabric import clearing_faults, clos_with_controller, fabric_leftovers, wait_until

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root

PREFIX = "ci"
BURST = 20
DEADLINE_S = 15.0

# Runs inside a Mininet host: sends frames on request and counts tagged frames per interface.
HOST_AGENT = r"""
import collections, json, socket, sys, threading
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

MAGIC = b"CTLTAG"
counts = collections.Counter()
lock = threading.Lock()
rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))

def receive():
    while True:
        data, addr = rx.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        i = data.find(MAGIC)
        if i >= 0:
            with lock:
                counts[(data[i + 6:i + 14].decode(errors="replace"), addr[0])] += 1

threading.Thread(target=receive, daemon=True).start()
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "send":
        ev = cmd["ev"]
        frame = bytes(
            Ether(src=cmd["src_mac"], dst=cmd["dst_mac"])
            / IPv6(src=cmd["inner_src"], dst=cmd["outer_dst"], nh=41, hlim=64, fl=(ev >> 14) & 0x3FFFF)
            / IPv6(src=cmd["inner_src"], dst=cmd["inner_dst"], nh=17)
            / UDP(sport=0xC000 | (ev & 0x3FFF), dport=4791)
            / Raw(MAGIC + cmd["tag"].encode())
        )
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((cmd["ifname"], 0))
        for _ in range(cmd["count"]):
            tx.send(frame)
        tx.close()
        print(json.dumps({"sent": cmd["count"]}), flush=True)
    elif cmd["op"] == "count":
        with lock:
            got = {ifname: n for (tag, ifname), n in counts.items() if tag == cmd["tag"]}
        print(json.dumps({"counts": got}), flush=True)
"""


class HostAgent:
    """The helper above, running in one Mininet host."""

    def __init__(self, node) -> None:
        self.name = node.name
        self.proc = node.popen(
            [sys.executable, "-u", "-c", HOST_AGENT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._reply().get("ready"), f"host agent of {self.name} did not start"

    def _reply(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"host agent of {self.name} died: {self.proc.stderr.read()}")
        return json.loads(line)

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=scaled(10))


@dataclass
class Testbed:
    __test__ = False  # not a test class

    net: object
    topo: object
    core: object
    stub: object
    agents: dict[str, HostAgent]
    run_dir: Path
    _tags: int = 0

    def tag(self) -> str:
        self._tags += 1
        return f"{self._tags:08d}"


@pytest.fixture(scope="module")
def testbed() -> Iterator[Testbed]:
    run_dir = Path(tempfile.mkdtemp(prefix="ci-"))
    agents: dict[str, HostAgent] = {}
    with clos_with_controller(PREFIX, run_dir) as clos:
        try:
            for name in (f"{PREFIX}h0", f"{PREFIX}h1", f"{PREFIX}h3"):
                agents[name] = HostAgent(clos.net.get(name))
            yield Testbed(clos.net, clos.topo, clos.core, clos.stub, agents, run_dir)
        finally:
            for a in agents.values():
                a.close()
    assert fabric_leftovers(PREFIX) == []


@pytest.fixture(autouse=True)
def no_faults_after(testbed: Testbed) -> Iterator[None]:
    yield from clearing_faults(testbed.stub)


# -- traffic -----------------------------------------------------------------------------------------
def send(
    tb: Testbed,
    src: str,
    dst: str,
    plane: int,
    t1: int | None,
    count: int = BURST,
    ecmp_entropy: int | None = None,
) -> tuple[str, str]:
    """Send ``count`` frames src→dst in ``plane`` via T1 ``t1``; returns (tag, dst ifname)."""
    from mrc_fabric.ev import EV
    from mrc_fabric.hostconfig import HostConfig

    cfg = HostConfig.load(tb.run_dir / "hosts" / f"{src}.json")
    ev = EV(plane, t1 or 0, ecmp_entropy or 0)
    outer = cfg.carrier(dst, ev, ecmp=ecmp_entropy is not None)
    port = cfg.ports[plane]
    dest = cfg.destinations[dst]
    tag = tb.tag()
    reply = tb.agents[src].ask(
        op="send",
        ifname=port.ifname,
        src_mac=port.mac,
        dst_mac=port.t0_mac,
        outer_dst=str(outer),
        inner_src=port.address,
        inner_dst=dest.addresses[plane],
        ev=ev.value,
        count=count,
        tag=tag,
    )
    assert reply == {"sent": count}
    return tag, tb.topo.host(dst).port(plane).ifname


def received(tb: Testbed, dst: str, tag: str) -> dict[str, int]:
    return tb.agents[dst].ask(op="count", tag=tag)["counts"]


def wait_all(tb: Testbed, dst: str, tag: str, ifname: str, count: int = BURST) -> dict[str, int]:
    deadline = time.monotonic() + scaled(DEADLINE_S)
    while time.monotonic() < deadline:
        got = received(tb, dst, tag)
        if got.get(ifname, 0) >= count:
            return got
        time.sleep(0.02)
    return received(tb, dst, tag)


def expect_all(tb: Testbed, src: str, dst: str, plane: int, t1: int | None) -> None:
    tag, ifname = send(tb, src, dst, plane, t1)
    assert wait_all(tb, dst, tag, ifname) == {ifname: BURST}, (src, dst, plane, t1)


def count_then_sentinel(
    tb: Testbed,
    src: str,
    dst: str,
    plane: int,
    t1: int | None,
    sentinel: tuple[int, int | None],
    count: int = BURST,
) -> int:
    """Send on the path under test, then a sentinel burst on a working path; count once it is in."""
    tag, ifname = send(tb, src, dst, plane, t1, count)
    s_tag, s_ifname = send(tb, src, dst, *sentinel)
    assert wait_all(tb, dst, s_tag, s_ifname) == {s_ifname: BURST}, "the sentinel path must work"
    got = received(tb, dst, tag)
    assert set(got) <= {ifname}, f"frames arrived on the wrong interface: {got}"
    return got.get(ifname, 0)


def fault(tb: Testbed, kind: str, target: str, **kw):
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    spec = pb.FaultSpec(kind=getattr(pb, kind), target=target, **kw)
    return tb.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=scaled(30))


def clear(tb: Testbed, fault_id: str) -> None:
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    tb.stub.ClearFault(pb.ClearFaultRequest(id=fault_id), timeout=scaled(30))


H0, H1, H3 = f"{PREFIX}h0", f"{PREFIX}h1", f"{PREFIX}h3"


# -- tests -------------------------------------------------------------------------------------------
def test_installed_entries_read_back(testbed: Testbed) -> None:
    from controller.compiler import compile_routes

    for name, entries in compile_routes(testbed.topo).items():
        assert set(testbed.core.pool[name].read_entries()) == set(entries.entries), name


def test_every_path_delivers_to_the_right_port(testbed: Testbed) -> None:
    for plane in (0, 1):
        for t1 in (0, 1):
            expect_all(testbed, H0, H3, plane, t1)
            expect_all(testbed, H3, H0, plane, t1)
        expect_all(testbed, H0, H1, plane, None)  # same T0
        tag, ifname = send(testbed, H0, H3, plane, None, ecmp_entropy=7)  # ECMP baseline carrier
        assert wait_all(testbed, H3, tag, ifname) == {ifname: BURST}


def test_counters_count_the_traffic(testbed: Testbed) -> None:
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    t1 = f"{PREFIX}t1p1n1"

    def cells() -> dict[tuple[str, str], int]:
        resp = testbed.stub.GetCounters(pb.GetCountersRequest(switches=[t1]), timeout=scaled(30))
        assert not resp.errors
        return {(c.counter, c.label): c.packets for c in resp.counters}

    before = cells()
    expect_all(testbed, H0, H3, 1, 1)  # enters t1p1n1 on port 1 (from T0 0), leaves on port 2 (to T0 1)
    after = cells()
    assert after[("port_rx", f"{t1}-eth1")] - before[("port_rx", f"{t1}-eth1")] >= BURST
    assert after[("port_tx", f"{t1}-eth2")] - before[("port_tx", f"{t1}-eth2")] >= BURST


def test_link_down_drops_both_directions_until_cleared(testbed: Testbed) -> None:
    f = fault(testbed, "LINK_DOWN", f"{PREFIX}t0p0n0-{PREFIX}t1p0n0")
    assert count_then_sentinel(testbed, H0, H3, 0, 0, sentinel=(0, 1)) == 0
    assert count_then_sentinel(testbed, H3, H0, 0, 0, sentinel=(0, 1)) == 0
    clear(testbed, f.id)
    expect_all(testbed, H0, H3, 0, 0)
    expect_all(testbed, H3, H0, 0, 0)


def test_blackhole_is_per_direction(testbed: Testbed) -> None:
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    f = fault(testbed, "BLACKHOLE", f"{PREFIX}t0p0n0-{PREFIX}t1p0n0", direction=pb.A_TO_B)
    assert count_then_sentinel(testbed, H0, H3, 0, 0, sentinel=(0, 1)) == 0  # T0 -> T1: dropped
    expect_all(testbed, H3, H0, 0, 0)  # T1 -> T0 still forwards
    clear(testbed, f.id)
    expect_all(testbed, H0, H3, 0, 0)


def test_loss_drops_some_but_not_all(testbed: Testbed) -> None:
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    f = fault(testbed, "LOSS", f"{PREFIX}t1p1n1:2", direction=pb.B_TO_A, probability=0.5)
    n = count_then_sentinel(testbed, H0, H3, 1, 1, sentinel=(1, 0), count=200)
    assert 0 < n < 200  # p(all or none survive) = 2 * 2**-200
    clear(testbed, f.id)
    expect_all(testbed, H0, H3, 1, 1)


def test_flap_alternates_between_down_and_up(testbed: Testbed) -> None:
    f = fault(testbed, "FLAP", f"{PREFIX}t0p1n1-{PREFIX}t1p1n0", period_s=1.0)
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while seen != {"all", "none"} and time.monotonic() < deadline:
        n = count_then_sentinel(testbed, H0, H3, 1, 0, sentinel=(1, 1), count=10)
        seen.add("all" if n == 10 else "none" if n == 0 else "partial")
        seen.discard("partial")  # a burst that straddled a toggle says nothing
    assert seen == {"all", "none"}

    def kinds() -> set[str]:  # a toggle is published once its tables are written: wait for it
        return {e.kind for e in testbed.core.events.history if e.fault_id == f.id}

    wait_until(lambda: {"fault_injected", "flap_up"} <= kinds(), "the flap's events", DEADLINE_S)
    clear(testbed, f.id)
    expect_all(testbed, H0, H3, 1, 0)


def test_switch_down_blackholes_the_whole_switch(testbed: Testbed) -> None:
    f = fault(testbed, "SWITCH_DOWN", f"{PREFIX}t1p1n0")
    assert count_then_sentinel(testbed, H0, H3, 1, 0, sentinel=(1, 1)) == 0
    assert count_then_sentinel(testbed, H3, H0, 1, 0, sentinel=(1, 1)) == 0
    clear(testbed, f.id)
    expect_all(testbed, H0, H3, 1, 0)


def test_nic_port_down_cuts_one_plane_of_a_host(testbed: Testbed) -> None:
    f = fault(testbed, "NIC_PORT_DOWN", f"{H3}:0")
    for t1 in (0, 1):
        assert count_then_sentinel(testbed, H0, H3, 0, t1, sentinel=(1, t1)) == 0
    assert count_then_sentinel(testbed, H3, H0, 0, 0, sentinel=(1, 0)) == 0
    clear(testbed, f.id)
    expect_all(testbed, H0, H3, 0, 0)


def test_restarted_shim_is_reinstalled_by_the_controller(testbed: Testbed) -> None:
    from controller.compiler import compile_routes

    name = f"{PREFIX}t1p0n1"
    session = testbed.core.pool[name]
    connects = session.connects
    testbed.net.get(name).restart_shim()  # the kernel state of the switch is wiped
    deadline = time.monotonic() + scaled(DEADLINE_S)
    while not (session.ready and session.connects > connects) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert session.ready and session.connects == connects + 1
    assert set(session.read_entries()) == set(compile_routes(testbed.topo)[name].entries)
    wait_until(  # published once the session is ready, not before
        lambda: any(e.kind == "switch_reconciled" and e.switch == name for e in testbed.core.events.history),
        "the switch_reconciled event",
        DEADLINE_S,
    )
    expect_all(testbed, H0, H3, 0, 1)
    expect_all(testbed, H3, H0, 0, 1)
