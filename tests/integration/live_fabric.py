"""Helpers shared by the integration tests that bring up a live fabric.

Each test module owns a node-name prefix; these helpers look only at names with that
prefix, so suites running side by side never judge (or clean) each other's objects.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from controller_lab import stop_controller

from mrc_fabric.time_scale import scale, scaled

# A transfer an event lands in the middle of (a fault, a controller's takeover): its size on the
# reference machine, where the agents move about REFERENCE_GOODPUT_MBIT.
REFERENCE_BIG_BYTES = 512 << 20
REFERENCE_GOODPUT_MBIT = 2000.0
BIG_HEADROOM = 2.0  # how much longer than the reference's, scaled, a big transfer may last


def fabric_leftovers(prefix: str) -> list[str]:
    """Shims, agents and interfaces of a ``prefix`` fabric still around after teardown."""
    ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
    out = [ln for ln in ps if f"--name {prefix}t" in ln and "shim_main" in ln]
    out += [ln for ln in ps if "mrc_host.agent.cli" in ln and f"/{prefix}h" in ln]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [ln.split(":")[1].strip() for ln in links.splitlines()]
    out += [n for n in names if n.startswith((f"{prefix}t", f"{prefix}h"))]
    return out


@contextlib.contextmanager
def running_testbed(prefix: str, target: str) -> Iterator[Any]:
    """A started ``Testbed`` of the default shape; on exit it is stopped and must leave nothing."""
    from topologies.leaks import leftovers
    from topologies.testbed import Testbed, TestbedConfig

    root = Path(tempfile.mkdtemp(prefix=f"{prefix}-runs-"))
    tb = Testbed(TestbedConfig(prefix=prefix, runs_root=root, target=target), say=lambda _m: None)
    try:
        with tb:
            yield tb
    finally:
        tb.stop()
        left = leftovers(tb.run.path, tb.namespaces, prefix, tb.teardown_ticks) if tb.run else []
        shutil.rmtree(root, ignore_errors=True)
    assert left == []


def run_cleanup(args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess[str]:
    """``python -m topologies.cleanup <args>`` from ``cwd``, its output captured as text
    (``timeout_s`` on the reference machine, scaled to this one)."""
    return subprocess.run(
        [sys.executable, "-m", "topologies.cleanup", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=scaled(timeout_s),
    )


@dataclass
class ClosControl:
    """A running Mininet Clos and the controller that programs it (routes installed)."""

    net: Any
    topo: Any
    core: Any
    stub: Any


@contextlib.contextmanager
def clos_with_controller(prefix: str, run_dir: Path) -> Iterator[ClosControl]:
    """A 2 x 2 x 2 x 2 Clos of ``prefix`` nodes in ``run_dir``, its controller serving on a unix
    socket there with every route installed. On exit the controller and the network are
    stopped and ``run_dir`` is removed, whatever had started."""
    import grpc

    from controller.core import ControllerCore
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb
    from controller.proto.mrc.controller.v1 import controller_pb2_grpc as pb_grpc
    from controller.server import serve
    from mrc_fabric.topology import Topology
    from topologies.clos import TOPOLOGY_FILE, start_clos

    net = core = server = channel = None
    try:
        net, _ = start_clos(run_dir, 2, 2, 2, 2, node_prefix=prefix)
        topo = Topology.load(run_dir / TOPOLOGY_FILE)
        core = ControllerCore(topo, run_dir=run_dir)
        core.start()
        assert core.wait_ready(scaled(30)) == []
        server, _svc, address = serve(core, f"unix:{run_dir}/controller.sock")
        channel = grpc.insecure_channel(address)
        stub = pb_grpc.ControllerStub(channel)
        stub.InstallRoutes(pb.InstallRoutesRequest(), timeout=scaled(60))
        yield ClosControl(net, topo, core, stub)
    finally:
        stop_fabric(net, run_dir, channel, server, core)


def stop_fabric(net: Any, run_dir: Path, channel: Any, server: Any, core: Any) -> None:
    """Stops what a Mininet fabric fixture started (None: never started) and removes its run
    directory: the controller first, then the network."""
    stop_controller(channel, server, core)
    if net is not None:
        net.stop()
    shutil.rmtree(run_dir, ignore_errors=True)


def clearing_faults(stub: Any) -> Iterator[None]:
    """The body of a per-test fixture (``yield from``): the test runs, then every fault it
    left in the controller is cleared, so the next test starts on a healthy fabric."""
    from controller.proto.mrc.controller.v1 import controller_pb2 as pb

    yield
    stub.ClearFault(pb.ClearFaultRequest(all=True), timeout=scaled(30))


def skip_without_agent() -> None:
    """Skips the calling test (or fixture) where the live host agent is not installed."""
    from topologies.agents import agent_available

    ok, why = agent_available()
    if not ok:
        pytest.skip(f"the live host agent is not installed: {why}")


def wait_until(cond: Callable[[], Any], what: str, timeout_s: float = 60.0, every_s: float = 0.05) -> Any:
    """``cond()``'s first truthy value, polled every ``every_s``; fails the test after ``timeout_s``
    (a figure for the reference machine, scaled to this one: mrc_fabric.time_scale)."""
    timeout_s = scaled(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def big_transfer_bytes(tb: Any, src: str, dst: str, reference_bytes: int = REFERENCE_BIG_BYTES) -> int:
    """The size of a transfer ``src`` -> ``dst`` that an event lands in the middle of, on this
    machine: ``reference_bytes``, unless this machine's agents are so slow that it would last
    more than BIG_HEADROOM times as long as there, with the time scale (the event's own steps
    are scaled by it: ``mrc_fabric.time_scale``) — then as much as fits that time, in whole
    4 KiB DATA frames. The agents' speed is measured with one 4 MiB transfer (slow start
    included: it underestimates, so the size errs on the long side)."""
    probe = tb.send(src, dst, 4 << 20)
    assert probe["ok"] and probe["verified"] is True, probe
    reference_s = reference_bytes * 8 / (REFERENCE_GOODPUT_MBIT * 1e6)
    fits = float(probe["goodput_mbit_s"]) * 1e6 / 8 * reference_s * scale() * BIG_HEADROOM
    return max(4 << 20, min(reference_bytes, int(fits) // 4096 * 4096))


def path_view(rows: list[dict[str, Any]], dst: str, mode: str) -> dict[tuple[int, int], dict[str, Any]]:
    """(plane, t1) -> one path of a send connection to ``dst`` from an agent's ``evs`` rows.

    The core draws many EVs per path (128 over 4 paths, plus backups), so a path's DATA is
    summed over its EVs and its state is the worst of theirs (ASSUMED_BAD if any is, then
    DENIED, SKIP, GOOD): a path is "retired" while any EV on it is, "GOOD" once all are.
    """
    worst = ["GOOD", "SKIP", "DENIED", "ASSUMED_BAD"]
    paths: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        if r["peer"] != dst or r["conn"] != "send" or r["mode"] != mode:
            continue
        p = paths.setdefault((r["plane"], r["t1"]), {"data_sent": 0, "state": "GOOD", "evs": []})
        p["data_sent"] += r["data_sent"]
        p["evs"].append(r["ev"])
        if worst.index(r["state"]) > worst.index(p["state"]):
            p["state"] = r["state"]
    return paths


def run_cli(tb: Any, lines: list[str]) -> str:
    """``lines`` typed into the testbed's CLI (``topologies.cli.MrcCLI``, Mininet's command loop),
    and everything it printed: Mininet's output and the MRC verbs'.

    stdin is an empty pipe: Mininet forwards whatever its stdin holds to a node command that is
    running (``h0 ping ...``), so a script file there would be typed into the node's shell."""
    import io
    import logging
    import os

    from mininet.log import lg
    from rich.console import Console

    from topologies.cli import MrcCLI

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.terminator = ""  # Mininet's messages carry their own newlines
    old_level = lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    with tempfile.NamedTemporaryFile("w", suffix=".mn", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    r, w = os.pipe()
    try:
        with os.fdopen(r) as stdin:
            MrcCLI(tb.net, stdin=stdin, testbed=tb, script=f.name, console=Console(file=buf, width=250))
    finally:
        os.close(w)
        os.unlink(f.name)
        lg.removeHandler(handler)
        lg.setLevel(old_level)
    return buf.getvalue()


def hostile_input(tb: Any) -> dict[str, dict[str, int]]:
    """Per agent, every counter of input it refused (malformed frames, refused peers, the core's
    malformed packets and refused acknowledgements): what foreign traffic must not move."""
    out = {}
    for host in tb.host_names():
        st = tb.agent(host).client.stats()
        counts = {f"malformed_{k}": int(v) for k, v in st.get("malformed", {}).items()}
        counts |= {f"refused_{k}": int(v) for k, v in st.get("refused", {}).items()}
        counts |= {
            k: int(v)
            for k, v in st.get("totals", {}).items()
            if k.startswith(("core_malformed_", "acks_dropped_")) or k == "stray_acks"
        }
        counts["internal_errors"] = int(st.get("internal_errors", 0))
        out[host] = counts
    return out


def no_route_drops(tb: Any) -> int:
    """Packets every switch dropped for want of a route so far."""
    cells, _errors = tb.controller.counters()
    return sum(c.packets for c in cells if c.counter == "drop_reason" and c.label == "no_route")


def check_hosts_quiet(tb: Any) -> None:
    """The hosts' own announcements (MLD, router solicitations, neighbour discovery) never reach
    a switch, where they were no_route drops: each host's filter caught some, no switch saw one."""
    from topologies.fabric_host import noise_counters

    assert no_route_drops(tb) == 0
    assert all(noise_counters(tb.net.get(h)) > 0 for h in tb.host_names())


def check_mininet_commands(tb: Any, h0: str, h3: str) -> str:
    """``pingall``, ``h0 ping -c 3 h3`` and a 5 s ``iperf h0 h3`` through the CLI's own command path:
    every ping answered, a rate above zero, and none of it seen by an agent as hostile input nor
    dropped by a switch for want of a route. Returns what the CLI printed."""
    import re

    before, no_route = hostile_input(tb), no_route_drops(tb)
    out = run_cli(tb, ["pingall", f"{h0} ping -c 3 {h3}", f"iperf {h0} {h3}"])
    n = len(tb.host_names())
    assert f"*** Results: 0% dropped ({n * (n - 1)}/{n * (n - 1)} received)" in out, out
    assert "3 packets transmitted, 3 received, 0% packet loss" in out, out
    rates = re.search(r"\*\*\* Results: \['([\d.]+) (\w?)bits/sec', '([\d.]+) (\w?)bits/sec'\]", out)
    assert rates is not None and float(rates[1]) > 0 and float(rates[3]) > 0, out
    assert hostile_input(tb) == before
    assert no_route_drops(tb) == no_route
    return out


def check_refused_commands(tb: Any, h0: str, h3: str) -> str:
    """Mininet commands that cannot work on these switches (OpenFlow's ``dpctl``, ``wait``,
    ``switch NAME stop``, an ``iperf`` to no host), typed into the CLI: each says why, and the
    fabric stays up (every switch reachable, ``pingall`` all answered, a transfer verified).
    Returns what the CLI printed."""
    switch = tb.topology.switches[-1].name
    out = run_cli(tb, ["dpctl dump-flows", "wait", f"switch {switch} stop", f"iperf {h0} nohost"])
    for command in ("dpctl", "wait", "switch"):
        assert f"{command}: cannot work here:" in out, out
    assert "no node 'nohost'" in out
    assert all(s.reachable for s in tb.controller.health().switches)
    out += run_cli(tb, ["pingall"])
    n = len(tb.host_names())
    assert f"*** Results: 0% dropped ({n * (n - 1)}/{n * (n - 1)} received)" in out, out
    s = tb.send(h0, h3, 1 << 20)
    assert s["ok"] and s["verified"] is True, s
    return out


def wait_controller_primary(tb: Any) -> None:
    """Every switch's controller session is primary again: a test that restarted switches (or
    their shim) is done only once the controller has reconnected and reconciled each of them, and
    a test that injects faults starts from a whole fabric."""
    wait_until(
        lambda: all(s.primary for s in tb.controller.health().switches),
        "the controller primary on every switch",
        30,
        0.2,
    )


def check_link_down_then_up(tb: Any, a: str, b: str, src: str, dst: str) -> str:
    """Mininet's ``link a b down`` then ``up`` typed into the CLI. While down, the controller
    holds the link as a ``link_down`` fault: ``faults``, ``health`` and ``paths`` say so, with
    the reason. Once up, the fault is gone and ``pingall`` answers every ping (on BMv2 it
    dropped 58 % for good: the switch's packet thread hung on the port that went down).
    Returns what the CLI printed."""
    wait_controller_primary(tb)
    name = tb.topology.find_link(f"{a}-{b}").name
    out = run_cli(tb, [f"link {a} {b} down", "faults", "health", f"paths {src} {dst}"])
    assert f"link {name} down: the controller holds it as fault" in out, out
    assert out.count(f"Mininet `link {name.replace('-', ' ')} down`") >= 2, out  # faults and health
    assert "dropped" in out, out  # the paths over it
    (fault,) = tb.controller.faults()
    assert fault.spec.target == name
    out += run_cli(tb, [f"link {a} {b} up"])
    assert f"link {name} up: fault {fault.id} cleared" in out, out
    assert not tb.controller.faults()
    n = len(tb.host_names())
    answered = f"*** Results: 0% dropped ({n * (n - 1)}/{n * (n - 1)} received)"

    def all_answered() -> str | None:
        text = run_cli(tb, ["pingall"])
        return text if answered in text else None

    # the Linux shim puts the port's routes back as the kernel reports it up: allow it a moment
    out += wait_until(all_answered, "pingall to answer every ping", 30, 0.5)
    again = run_cli(tb, ["pingall"])
    assert answered in again, again
    return out + again


def ping_route(tb: Any, src: str, dst: str, plane: int) -> tuple[str, str]:
    """(``dst``'s NIC address on ``plane``, ``src``'s own port of that plane): where a ping of
    ``pinging`` goes and the port it leaves by."""
    return tb.topology.host(dst).port(plane).address, tb.topology.host(src).port(plane).ifname


@contextlib.contextmanager
def pinging(tb: Any, pairs: list[tuple[str, str, int]]) -> Iterator[list[Any]]:
    """``ping -i 0.05`` from each host to another's NIC address of one plane, out of its own
    port of that plane, while the block runs (frames through the fabric for the data-plane
    watch to count); yields the pingers. The port is named (``-I``) because the route to a
    peer's address is a multipath one over every plane, and the kernel's per-boot hash would
    otherwise pick the plane: on some boots (two VM runs) both pings went around the switch
    under test, and it never saw a frame."""
    procs = []
    try:
        for src, dst, plane in pairs:
            address, port = ping_route(tb, src, dst, plane)
            procs.append(tb.net.get(src).popen(["ping", "-q", "-i", "0.05", "-I", port, address]))
        yield procs
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def switch_evidence(
    tb: Any, names: set[str], pingers: Sequence[Any] = (), traffic: Sequence[tuple[str, str, int]] = ()
) -> str:
    """What a watch that gave no verdict had to go on, for a failure message: each switch's
    health row, its kernel's per-port frame counts and IPv6 drop counters read twice, 2 s
    apart (what went in, out and where it was dropped meanwhile), and whether the traffic
    meant to cross it was sent (each pinger alive, its host's route to its target)."""
    rows = [s for s in tb.controller.health().switches if s.switch in names]
    lines = [f"health: {[(s.switch, s.primary, s.dataplane, s.dataplane_detail) for s in rows]}"]
    for p, (src, dst, plane) in zip(pingers, traffic, strict=False):
        address, port = ping_route(tb, src, dst, plane)
        route = tb.net.get(src).cmd(f"ip -6 route get {address} oif {port}").strip()
        alive = "running" if p.poll() is None else f"exited {p.returncode}"
        lines.append(f"ping {src} -> {address}: {alive}; {route}")
    keys = ("Ip6InReceives", "Ip6InNoRoutes", "Ip6InAddrErrors", "Ip6InHdrErrors", "Ip6OutForwDatagrams")

    def counts(name: str) -> dict[str, int]:
        node = tb.net.get(name)
        out = {}
        for link in json.loads(node.cmd("ip -s -j link show") or "[]"):
            if link.get("ifname", "lo") != "lo":
                stats = link.get("stats64", {})
                out[f"{link['ifname']} rx"] = stats.get("rx", {}).get("packets", 0)
                out[f"{link['ifname']} tx"] = stats.get("tx", {}).get("packets", 0)
        for line in node.cmd("cat /proc/net/snmp6").splitlines():
            key, _, value = line.partition(" ")
            if key in keys:
                out[key] = int(value.split()[0])
        return out

    for name in sorted(names):
        first = counts(name)
        time.sleep(2)
        second = counts(name)
        lines.append(
            f"{name} over 2 s: "
            + ", ".join(f"{k} +{second[k] - first[k]}" for k in sorted(first) if k in second)
        )
    return "\n".join(lines)


def check_silent_switch_is_flagged(
    tb: Any, candidates: set[str], state: str, src: str, dst: str, break_it: Callable[[], None],
    repair: Callable[[], None], traffic: list[tuple[str, str, int]],
) -> str:  # fmt: skip
    """A switch whose data plane stops (``break_it``: one of ``candidates``, whichever the traffic
    crosses) while frames cross it is flagged by ``health`` (``state``, with the figures), the paths
    from ``src`` to ``dst`` through it are ``silent``, and all clears once it carries frames again
    (``repair``). Returns what the CLI printed meanwhile."""

    def flagged() -> list[Any]:
        return [s for s in tb.controller.health().switches if s.switch in candidates and s.dataplane]

    def healthy() -> bool:
        switches = [s for s in tb.controller.health().switches if s.switch in candidates]
        return all(s.primary and not s.dataplane for s in switches)

    wait_controller_primary(tb)
    assert healthy()
    with pinging(tb, traffic) as pingers:
        break_it()
        try:
            try:
                found = wait_until(flagged, f"one of {sorted(candidates)} {state}", 40, 0.5)
            except AssertionError as exc:
                evidence = switch_evidence(tb, candidates, pingers, traffic)
                raise AssertionError(f"{exc}\n{evidence}") from None
            assert all(s.dataplane == state and s.reachable for s in found), found
            out = run_cli(tb, ["health", f"paths {src} {dst}"])
            assert state in out and found[0].dataplane_detail.split(",")[0] in out, out
            names = {s.switch for s in found}
            crossing = [p for p in tb.controller.paths(src, dst) if names & {h.node for h in p.hops}]
            assert crossing and all(p.status == "silent" for p in crossing), crossing
        finally:
            repair()
        wait_until(healthy, f"{sorted(candidates)} healthy again", 90, 0.5)
    return out
