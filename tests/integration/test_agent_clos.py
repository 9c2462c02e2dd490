"""The MRC host agent on a live fabric: Mininet, Linux SRv6 switches, the controller, and one
``mrc serve`` per host (raw sockets, nftables rules), under the node prefix ``ag``.

Default fabric (P=2, L=2, S=2, 2 hosts per T0): agh0/agh1 under T0 0, agh2/agh3 under T0 1,
so agh0 -> agh3 has four paths (two planes x two T1s). Every wait is on a condition with a
deadline; teardown stops agents by PID (SIGTERM, checking they clean up after themselves),
stops the network and checks nothing of ours is left.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from live_fabric import fabric_leftovers

pytestmark = pytest.mark.root

PREFIX = "ag"
H0, H1, H3 = f"{PREFIX}h0", f"{PREFIX}h1", f"{PREFIX}h3"
DEADLINE_S = 60.0


@dataclass
class Fabric:
    __test__ = False

    net: Any
    topo: Any
    stub: Any
    run_dir: Path
    agents: dict[str, subprocess.Popen] = field(default_factory=dict)

    def sock(self, host: str) -> Path:
        return self.run_dir / "agents" / f"{host}.sock"

    def client(self, host: str):
        from mrc_host.agent.client import AgentClient

        return AgentClient(self.sock(host), timeout_s=30)


def _start_agent(fab: Fabric, host: str) -> None:
    from mrc_host.agent.vethlab import wait_for_socket

    node = fab.net.get(host)
    cmd = [
        sys.executable, "-m", "mrc_host.agent.cli", "serve",
        "--config", str(fab.run_dir / "hosts" / f"{host}.json"),
        "--control", str(fab.sock(host)),
        "--log", str(fab.run_dir / "agents" / f"{host}.log"),
    ]  # fmt: skip
    proc = node.popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fab.agents[host] = proc
    wait_for_socket(fab.sock(host), proc)


def _stop_agent(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        proc.terminate()  # SIGTERM by PID
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stderr is not None:
        proc.stderr.close()
    return proc.returncode


@pytest.fixture(scope="module")
def fabric() -> Iterator[Fabric]:
    from controller.core import ControllerCore
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb
    from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
    from controller.server import serve
    from mrc_fabric.topology import Topology
    from topologies.clos import TOPOLOGY_FILE, start_clos

    run_dir = Path(tempfile.mkdtemp(prefix="ag-"))
    net = core = server = channel = None
    fab: Fabric | None = None
    try:
        net, _ = start_clos(run_dir, 2, 2, 2, 2, node_prefix=PREFIX)
        topo = Topology.load(run_dir / TOPOLOGY_FILE)
        core = ControllerCore(topo, run_dir=run_dir)
        core.start()
        assert core.wait_ready(30) == []
        server, _svc, address = serve(core, f"unix:{run_dir}/controller.sock")
        channel = grpc.insecure_channel(address)
        stub = pb_grpc.ControllerStub(channel)
        stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=60)
        (run_dir / "agents").mkdir()
        fab = Fabric(net, topo, stub, run_dir)
        for h in topo.hosts:
            _start_agent(fab, h.name)
        yield fab
        # clean shutdown: every agent exits 0 on SIGTERM, removing its socket and its nft table
        for host, proc in list(fab.agents.items()):
            assert _stop_agent(proc) == 0, (fab.run_dir / "agents" / f"{host}.log").read_text()[-3000:]
            del fab.agents[host]
            assert not fab.sock(host).exists()
            tables = net.get(host).cmd("nft list tables")
            assert "mrc_agent" not in tables, tables
    finally:
        if fab is not None:
            for proc in fab.agents.values():
                _stop_agent(proc)
        if os.environ.get("MRC_KEEP_AGENT_LOGS"):  # debugging aid: copy the agents' logs out
            shutil.copytree(run_dir / "agents", os.environ["MRC_KEEP_AGENT_LOGS"], dirs_exist_ok=True)
        if channel is not None:
            channel.close()
        if server is not None:
            server.stop(grace=0).wait()
        if core is not None:
            core.stop()
        if net is not None:
            net.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    assert fabric_leftovers(PREFIX) == []


@pytest.fixture(autouse=True)
def no_faults_after(fabric: Fabric) -> Iterator[None]:
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    yield
    fabric.stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=30)


def wait_until(cond, what: str, timeout_s: float = DEADLINE_S, every_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def received_record(fab: Fabric, host: str, transfer_id: str) -> dict | None:
    for r in fab.client(host).stats()["transfers"]["received"]:
        if r["transfer_id"] == transfer_id:
            return r
    return None


def send_evs(fab: Fabric, src: str, dst: str, mode: str = "mrc") -> dict[tuple[int, int], dict]:
    """(plane, t1) -> EV row of ``src``'s send connection to ``dst``."""
    rows = fab.client(src).evs()
    return {
        (r["plane"], r["t1"]): r
        for r in rows
        if r["peer"] == dst and r["conn"] == "send" and r["mode"] == mode
    }


# -- tests -------------------------------------------------------------------------------------------
def test_transfer_between_t0s_delivers_the_exact_bytes(fabric: Fabric) -> None:
    progress: list[dict] = []
    summary = fabric.client(H0).send(H3, "6MiB", on_progress=progress.append)
    assert summary["ok"] and summary["verified"] is True, summary
    assert summary["bytes_acked"] == 6 << 20
    rec = received_record(fabric, H3, summary["transfer_id"])
    assert rec is not None
    assert rec["ok"] and rec["received"] == 6 << 20 and rec["mismatched_chunks"] == 0
    assert rec["sha256"] == summary["sha256"]
    # sprayed: DATA left on all four (plane, T1) paths
    evs = send_evs(fabric, H0, H3)
    assert set(evs) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert all(r["data_sent"] > 0 for r in evs.values()), evs
    # and it arrived on both NIC ports of the receiver
    ports = {p["ifname"]: p["frames_rx"] for p in fabric.client(H3).stats()["ports"]}
    assert all(n > 0 for n in ports.values()), ports


@pytest.mark.parametrize("mode", ["single-path", "ecmp"])
def test_baseline_modes_deliver(fabric: Fabric, mode: str) -> None:
    summary = fabric.client(H3).send(H0, "2M", mode=mode)
    assert summary["ok"] and summary["verified"] is True, summary
    rec = received_record(fabric, H0, summary["transfer_id"])
    assert rec is not None and rec["ok"]


def test_blackhole_mid_transfer_retires_the_ev_and_probes_restore_it(fabric: Fabric) -> None:
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    size = 48 << 20
    started = threading.Event()
    result: dict[str, Any] = {}

    def on_progress(ev: dict) -> None:
        if ev["bytes_acked"] >= size // 10:
            started.set()

    def run() -> None:
        try:
            result["summary"] = fabric.client(H0).send(H3, size, on_progress=on_progress)
        except Exception as exc:  # reported by the main thread
            result["error"] = exc
        started.set()

    th = threading.Thread(target=run)
    th.start()
    try:
        assert started.wait(DEADLINE_S), "the transfer made no progress"
        assert "summary" not in result, "transfer finished before the fault: make it larger"
        spec = pb.FaultSpec(kind=pb.BLACKHOLE, target=f"{PREFIX}t0p0n0-{PREFIX}t1p0n0", direction=pb.A_TO_B)
        fault = fabric.stub.InjectFault(pb.InjectFaultRequest(spec=spec), timeout=30)
    finally:
        th.join(timeout=120)
    assert not th.is_alive(), "the transfer did not complete"
    assert "error" not in result, result.get("error")
    summary = result["summary"]
    assert summary["ok"] and summary["verified"] is True, summary
    assert summary["evs_retired"] >= 1 and summary["retransmissions"] >= 1, summary
    rec = received_record(fabric, H3, summary["transfer_id"])
    assert rec is not None and rec["ok"] and rec["sha256"] == summary["sha256"]

    # the path through the black hole is retired and stays so while the fault lasts
    assert send_evs(fabric, H0, H3)[(0, 0)]["state"] == "ASSUMED_BAD"
    # the paths of the other plane were never hit
    evs = send_evs(fabric, H0, H3)
    history = [c["ev_history"] for c in fabric.client(H0).stats()["connections"]]
    assert all(evs[k]["state"] != "ASSUMED_BAD" for k in ((1, 0), (1, 1))), (evs, history)

    fabric.stub.ClearFault(pb.ClearFaultRequest(id=fault.id), timeout=30)
    wait_until(lambda: send_evs(fabric, H0, H3)[(0, 0)]["state"] == "GOOD", "the EV back to GOOD by probes")
    stats = fabric.client(H0).stats()
    conn = next(
        c for c in stats["connections"] if c["peer"] == H3 and c["conn"] == "send" and c["mode"] == "mrc"
    )
    assert conn["counters"]["ev_restored"] >= 1
    assert any(h["new"] == "GOOD" and "probes answered" in h["reason"] for h in conn["ev_history"])


MALFORMED_INJECTOR = r"""
import json, socket, sys
from mrc_host.agent.vethlab import malformed_frames
ifname, dst_mac, src_mac, inner_src, inner_dst = sys.argv[1:6]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
frames = malformed_frames(dst_mac, src_mac, inner_src, inner_dst)
for name, frame in frames:
    s.send(frame)
print(json.dumps([name for name, _ in frames]))
"""


def test_malformed_frames_are_counted_and_the_agent_keeps_working(fabric: Fabric) -> None:
    host = fabric.topo.host(H1)
    port = host.port(0)
    link = fabric.topo.link_at(port.t0, port.t0_port)
    t0_end = link.a if link.a.node == port.t0 else link.b
    before = fabric.client(H1).stats()["malformed"]
    src = fabric.topo.host(H0).port(0).address
    args = [t0_end.ifname, port.mac, t0_end.mac, src, port.address]
    proc = fabric.net.get(port.t0).popen(
        [sys.executable, "-c", MALFORMED_INJECTOR, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    sent = json.loads(out.strip().splitlines()[-1])
    expected = {}
    for name in sent:
        expected[name] = expected.get(name, 0) + 1

    def counted() -> dict | None:
        now = fabric.client(H1).stats()["malformed"]
        delta = {k: now.get(k, 0) - before.get(k, 0) for k in expected}
        return delta if delta == expected else None

    wait_until(counted, f"malformed counters to reach {expected}")
    assert fabric.agents[H1].poll() is None
    summary = fabric.client(H0).send(H1, "1M")  # same T0: one path per plane
    assert summary["ok"] and summary["verified"] is True, summary


SNIFFER = r"""
import json, select, socket, sys
socks = []
for ifname in sys.argv[1:]:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.bind((ifname, 0))
    socks.append(s)
print("ready", flush=True)
counts = {"icmpv6_out": 0, "other_out": 0, "mrc_in": 0}
while True:
    r, _, _ = select.select(socks + [sys.stdin], [], [], 1.0)
    if sys.stdin in r:
        break
    for s in r:
        data, addr = s.recvfrom(65535)
        if len(data) < 54 or data[12:14] != b"\x86\xdd":
            continue
        if addr[2] == socket.PACKET_OUTGOING:
            counts["icmpv6_out" if data[20] == 58 else "other_out"] += 1
        elif data[20] == 41:
            counts["mrc_in"] += 1
print(json.dumps(counts), flush=True)
"""


def test_host_kernel_sends_no_icmpv6_while_mrc_traffic_arrives(fabric: Fabric) -> None:
    node = fabric.net.get(H3)
    ifnames = [p.ifname for p in fabric.topo.host(H3).ports]
    # The agents probe their EVs in the background, so MRC packets arrive at any time. Read the
    # nftables counters BEFORE the sniffer opens: every packet the sniffer then counts arrived
    # after this read, so the rule's count can only be >= the sniffer's (the invariant asserted
    # below). Read after "ready", a probe landing in between is sniffed but not in the delta.
    drops_before = sum(fabric.client(H3).stats()["kernel_drops"].values())
    proc = node.popen(
        [sys.executable, "-u", "-c", SNIFFER, *ifnames],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        summary = fabric.client(H0).send(H3, "4M")
        assert summary["ok"], summary
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        counts = json.loads(proc.stdout.readline())
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert counts["mrc_in"] > 1000, counts  # the traffic did arrive at the host
    assert counts["icmpv6_out"] == 0, counts
    # the nftables rule is what saw it, before the IPv6 stack
    assert sum(fabric.client(H3).stats()["kernel_drops"].values()) - drops_before >= counts["mrc_in"]


def test_cli_send_deny_allow_and_json(fabric: Fabric) -> None:
    node = fabric.net.get(H1)
    sock = fabric.sock(H1)

    def mrc(*args: str) -> Any:
        out = node.cmd(
            f"{sys.executable} -m mrc_host.agent.cli {' '.join(args)} --agent {sock} --json; echo rc=$?"
        )
        body, _, rc = out.rpartition("rc=")
        assert rc.strip() == "0", out
        return json.loads(body)

    summary = mrc("send", H3, "1MiB")
    assert summary["ok"] and summary["verified"] is True
    evs = [r for r in mrc("evs") if r["peer"] == H3 and r["conn"] == "send" and r["mode"] == "mrc"]
    assert len(evs) == 4
    target = evs[0]["ev"]
    assert mrc("deny", target)["connections"] >= 1
    row = next(r for r in mrc("evs") if r["ev"] == target and r["peer"] == H3 and r["conn"] == "send")
    assert row["state"] == "DENIED"
    sent_before = row["data_sent"]
    summary = mrc("send", H3, "1MiB")
    assert summary["ok"]
    row = next(r for r in mrc("evs") if r["ev"] == target and r["peer"] == H3 and r["conn"] == "send")
    assert row["data_sent"] == sent_before  # a denied EV carries nothing
    mrc("allow", target)
    row = next(r for r in mrc("evs") if r["ev"] == target and r["peer"] == H3 and r["conn"] == "send")
    assert row["state"] == "GOOD"
    stats = mrc("stats")
    assert stats["host"] == H1 and stats["totals"]["data_packets_sent"] > 0
