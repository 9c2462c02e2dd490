"""The live testbed (``topologies.testbed.Testbed``): fabric, controller and agents together.

One default fabric (P=2, L=2, S=2, 2 hosts per T0) on the Linux target under the node
prefix ``tb``: tbh0/tbh1 under T0 0, tbh2/tbh3 under T0 1, so tbh0 -> tbh3 has four
paths (two planes x two T1s). Faults go through the controller's northbound API, as
the CLI sends them; transfers and EV states through the agents. Every wait is on a
condition with a deadline. Teardown is checked: no process, namespace, link or socket
of the run is left.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live_fabric import (
    big_transfer_bytes,
    check_hosts_quiet,
    check_link_down_then_up,
    check_mininet_commands,
    check_refused_commands,
    check_silent_switch_is_flagged,
    path_view,
    running_testbed,
    skip_without_agent,
    wait_controller_primary,
    wait_until,
)

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root

PREFIX = "tb"
H0, H1, H2, H3 = (f"{PREFIX}h{i}" for i in range(4))
UPLINK_P0_T1_0 = f"{PREFIX}t0p0n0-{PREFIX}t1p0n0"  # tbh0's plane-0 uplink to T1 0
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def testbed() -> Iterator[Any]:
    skip_without_agent()
    with running_testbed(PREFIX, "linux") as tb:
        yield tb


@pytest.fixture(autouse=True)
def no_faults_after(testbed: Any) -> Iterator[None]:
    yield
    testbed.controller.clear()


def send_evs(tb: Any, src: str, dst: str) -> dict[tuple[int, int], dict]:
    """(plane, t1) -> that path as ``src``'s mrc send connection to ``dst`` sees it."""
    return path_view(tb.agent(src).client.evs(), dst, "mrc")


def transfer_with_fault(tb: Any, src: str, dst: str, kind: str, target: str, at: float = 0.1) -> dict:
    """A big transfer (live_fabric.big_transfer_bytes: a fault injected after 10 % lands long
    before its end) during which ``kind`` hits ``target`` once ``at`` of it is acknowledged."""
    big = big_transfer_bytes(tb, src, dst)
    due = threading.Event()
    result: dict[str, Any] = {}

    def on_progress(update: dict) -> None:
        if update["bytes_acked"] >= at * big:
            due.set()

    def run() -> None:
        try:
            result["summary"] = tb.send(src, dst, big, on_progress=on_progress)
        except Exception as exc:  # re-raised by the test thread
            result["error"] = exc
        due.set()

    th = threading.Thread(target=run)
    th.start()
    try:
        assert due.wait(scaled(DEADLINE_S)), "the transfer made no progress"
        assert "summary" not in result, f"the transfer of {big} bytes finished before the fault"
        result["fault"] = tb.controller.inject(kind, target)
    finally:
        th.join(timeout=scaled(180))
    assert not th.is_alive(), "the transfer did not complete"
    if "error" in result:
        raise result["error"]
    s = result["summary"]
    assert s["ok"] and s["verified"] is True and s["bytes_acked"] == big, s
    return result


# -- bring-up and the run directory -----------------------------------------------------------------
def test_default_fabric_and_run_directory(testbed: Any) -> None:
    topo, run = testbed.topology, testbed.run.path
    assert (topo.planes, topo.t0_per_plane, topo.t1_per_plane, len(topo.hosts)) == (2, 2, 2, 4)
    assert len(topo.switches) == 8 and set(testbed.agents) == {H0, H1, H2, H3}
    assert (run.parent / "latest").resolve() == run
    for name in ("topology.json", "run.json", "pids", "controller.log", "controller.sock"):
        assert (run / name).exists(), name
    for h in (H0, H1, H2, H3):
        assert (run / "hosts" / f"{h}.json").exists() and (run / "agents" / f"{h}.log").exists()
    assert all((run / f"{s.name}.shim.log").exists() for s in topo.switches)
    kinds = {}
    for r in testbed.run.records():
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
        assert r.alive(), r
    # (the shims are forked from one launcher, recorded with them; the controller has a standby)
    assert kinds == {"node": 12, "shim": 8, "launcher": 1, "controller": 2, "agent": 4}


def test_every_host_pair_transfers_the_right_bytes(testbed: Any) -> None:
    size = 256 << 10
    for src in (H0, H1, H2, H3):
        for dst in (H0, H1, H2, H3):
            if src == dst:
                continue
            s = testbed.send(src, dst, size)
            assert s["ok"] and s["verified"] is True and s["bytes_acked"] == size, (src, dst, s)


# -- faults mid-transfer -----------------------------------------------------------------------------
def test_blackhole_mid_transfer_completes_and_retires_the_ev_then_probes_restore_it(testbed: Any) -> None:
    r = transfer_with_fault(testbed, H0, H3, "blackhole", UPLINK_P0_T1_0)
    assert r["summary"]["evs_retired"] >= 1, r["summary"]
    assert send_evs(testbed, H0, H3)[(0, 0)]["state"] == "ASSUMED_BAD"  # retired while the fault lasts
    testbed.controller.clear(r["fault"].id)
    wait_until(lambda: send_evs(testbed, H0, H3)[(0, 0)]["state"] == "GOOD", "the EV back to GOOD by probes")


def test_t1_switch_down_mid_transfer_completes(testbed: Any) -> None:
    t1 = f"{PREFIX}t1p1n1"
    r = transfer_with_fault(testbed, H0, H3, "switch_down", t1)
    assert send_evs(testbed, H0, H3)[(1, 1)]["state"] == "ASSUMED_BAD"
    testbed.controller.clear(r["fault"].id)
    wait_until(lambda: send_evs(testbed, H0, H3)[(1, 1)]["state"] == "GOOD", "the EV back to GOOD by probes")


def test_nic_port_down_mid_transfer_completes(testbed: Any) -> None:
    r = transfer_with_fault(testbed, H0, H3, "nic_port_down", f"{H0}:0")
    evs = send_evs(testbed, H0, H3)
    assert evs[(0, 0)]["state"] == evs[(0, 1)]["state"] == "ASSUMED_BAD", evs
    testbed.controller.clear(r["fault"].id)
    wait_until(
        lambda: {row["state"] for row in send_evs(testbed, H0, H3).values()} == {"GOOD"},
        "plane 0's EVs back to GOOD by probes",
    )


def test_with_a_nic_port_down_the_data_takes_the_other_plane(testbed: Any) -> None:
    def tx_by_plane() -> dict[int, int]:
        planes = {p.ifname: p.plane for p in testbed.topology.host(H0).ports}
        return {planes[p["ifname"]]: p["bytes_tx"] for p in testbed.agent(H0).client.stats()["ports"]}

    f = testbed.controller.inject("nic_port_down", f"{H0}:0")
    before = tx_by_plane()
    s = testbed.send(H0, H3, 8 << 20)
    after = tx_by_plane()
    testbed.controller.clear(f.id)
    assert s["ok"] and s["verified"] is True, s
    assert after[1] - before[1] >= 8 << 20
    assert after[0] - before[0] < (after[1] - before[1]) // 10  # plane 0: a few probes, no data


# -- CLI verbs -------------------------------------------------------------------------------------------
@pytest.fixture
def verbs(testbed: Any) -> tuple[Any, io.StringIO]:
    from rich.console import Console

    from topologies.cli import MrcCommands

    out = io.StringIO()
    return MrcCommands(testbed, Console(file=out, width=250, color_system=None)), out


def test_cli_fault_faults_paths_clear(verbs: tuple[Any, io.StringIO]) -> None:
    cmd, out = verbs
    assert cmd.faults("") == [] and "no active faults" in out.getvalue()
    f = cmd.fault(f"blackhole {UPLINK_P0_T1_0} --direction a2b")
    assert [x.id for x in cmd.faults("")] == [f.id]
    paths = {(p.plane, p.t1): p.status for p in cmd.paths(f"{H0} {H3}")}
    assert paths == {(0, 0): "dropped", (0, 1): "ok", (1, 0): "ok", (1, 1): "ok"}
    assert "dropped" in out.getvalue() and f"{PREFIX}t0p0n0" in out.getvalue()
    assert cmd.clear(f.id) == [f.id]
    assert cmd.faults("") == []


def test_cli_mrc_evs_counters(verbs: tuple[Any, io.StringIO]) -> None:
    cmd, out = verbs
    t1 = f"{PREFIX}t1p1n0"
    before = {(c.counter, c.label): c.bytes for c in cmd.counters(f"{t1} --all")}
    s = cmd.mrc(f"{H1} {H2} 1M --mode mrc")
    assert s["ok"] and s["verified"] is True and s["bytes_acked"] == 1 << 20
    assert "completed" in out.getvalue() and "goodput" in out.getvalue()
    after = {(c.counter, c.label): c.bytes for c in cmd.counters(t1)}
    assert after[("port_tx", f"{t1}-eth2")] > before[("port_tx", f"{t1}-eth2")]  # towards T0 1
    rows = cmd.evs(H1)
    assert {r["state"] for r in rows if r["peer"] == H2 and r["conn"] == "send"} == {"GOOD"}
    assert "EVs of " + H1 in out.getvalue()


def test_cli_capture_writes_a_pcap_of_the_traffic(testbed: Any, verbs: tuple[Any, io.StringIO]) -> None:
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.utils import rdpcap

    cmd, _out = verbs
    cap = cmd.capture(f"{H0}:0 30")  # tbh0's plane-0 NIC port
    # the command returns once tcpdump listens (the file exists earlier: the copier opens it;
    # waiting for that alone let a loaded CI run send before tcpdump listened: 18 frames caught)
    assert cap.listening
    s = testbed.send(H0, H3, 4 << 20)  # 1,024 DATA frames of 4 KiB, about half on plane 0
    assert s["ok"], s
    # what tcpdump took in is copied into the file as it writes it: stopping it at once would
    # drop what it still holds in its kernel buffer on a busy machine
    wait_until(lambda: cap.packets > 100, "the capture to hold the transfer's frames")
    cap.stop()
    assert cap.proc.poll() is not None
    packets = rdpcap(str(cap.path))
    assert len(packets) > 100
    outer = [p[IPv6] for p in packets if p.haslayer(Ether) and p.haslayer(IPv6)]
    assert sum(1 for ip in outer if ip.nh == 41) > 100  # the MRC traffic, IPv6-in-IPv6
    assert cap.path.parent == testbed.run.path / "captures"


def test_cli_bad_input_is_an_error_message_not_a_crash(testbed: Any, verbs: tuple[Any, io.StringIO]) -> None:
    from topologies.cli import CommandError

    cmd, _out = verbs
    for verb, line in [
        ("mrc", f"{H0} {H0} 1M"),
        ("mrc", f"{H0} nohost 1M"),
        ("mrc", f"{H0} {H3} lots"),
        ("mrc", f"{H0} {H3} 1M --mode warp"),
        ("fault", "meteor tbt1p0n0"),
        ("paths", H0),
        ("evs", "nohost"),
        ("counters", "noswitch"),
        ("capture", "nolink"),
        ("capture", f"{H0}:0 -1"),
        ("clear", "a b"),
    ]:
        with pytest.raises(CommandError):
            getattr(cmd, verb)(line)
    import grpc

    with pytest.raises(grpc.RpcError):  # the controller's NOT_FOUND, shown by the CLI
        cmd.fault("switch_down noswitch")


def test_cli_help_text_for_every_verb(testbed: Any, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from topologies.cli import MrcCLI

    script = tmp_path / "script"
    script.write_text("help mrc\nhelp fault\nhelp capture\nfault meteor x\nfaults\n")
    with open(script) as stdin:  # Mininet polls stdin; pytest's has no file descriptor
        MrcCLI(testbed.net, stdin=stdin, testbed=testbed, script=str(script))
    text = capsys.readouterr().out
    assert "mrc SRC DST SIZE" in text and "fault KIND TARGET" in text and "capture LINK" in text
    assert "invalid choice: 'meteor'" in text and "no active faults" in text


# -- Mininet's own commands ------------------------------------------------------------------------
def test_the_hosts_announce_nothing_onto_the_fabric(testbed: Any) -> None:
    check_hosts_quiet(testbed)


def test_mininet_pingall_ping_and_iperf_work_over_the_fabric(testbed: Any) -> None:
    out = check_mininet_commands(testbed, H0, H3)
    assert "*** Iperf: testing TCP bandwidth between tbh0 and tbh3" in out


def test_mininet_commands_that_cannot_work_say_why_and_leave_the_fabric_up(testbed: Any) -> None:
    check_refused_commands(testbed, H0, H3)
    assert all(testbed.net.get(s.name).shim.poll() is None for s in testbed.topology.switches)


def test_pcaps_are_off_by_default_and_capped_when_on(testbed: Any) -> None:
    from scapy.utils import rdpcap

    run = testbed.run.path
    assert not (run / "pcap").exists() and testbed.config.pcap is False
    testbed.config.pcap_limit_mb = 1.0
    first = len(testbed.captures)
    testbed.start_pcaps()  # what --pcap does at start, with a 1 MB cap
    caps = testbed.captures[first:]
    assert len(caps) == len(testbed.topology.links) and all(c.listening for c in caps)
    s = testbed.send(H0, H3, 4 << 20)  # far more than 1 MB crosses the links
    assert s["ok"], s
    wait_until(lambda: all(c.proc.poll() is not None for c in caps), "every capture stopped at the cap")
    for c in caps:
        c.stop()
    files = sorted((run / "pcap").glob("*.pcap"))
    assert len(files) == len(caps)
    assert sum(f.stat().st_size for f in files) <= 1 << 20
    assert any(c.cut_short for c in caps)
    assert sum(len(rdpcap(str(f))) for f in files) == sum(c.packets for c in caps) > 100


# -- supervision ------------------------------------------------------------------------------------
def switch_entries(address: str, device_id: int) -> set[bytes]:
    """Every table entry the switch's P4Runtime server holds (a wildcard Read; no arbitration)."""
    import grpc
    from finsy.proto import p4r, p4r_grpc

    with grpc.insecure_channel(address) as channel:
        stub = p4r_grpc.P4RuntimeStub(channel)
        req = p4r.ReadRequest(device_id=device_id, entities=[p4r.Entity(table_entry=p4r.TableEntry())])
        return {
            e.table_entry.SerializeToString(deterministic=True)
            for resp in stub.Read(req, timeout=scaled(10))
            for e in resp.entities
        }


def test_a_killed_shim_is_restarted_and_the_controller_resyncs_it(testbed: Any) -> None:
    import os
    import signal

    from mrc_fabric.health import EventKind, ProcessState, read_events, read_health
    from topologies.rundir import proc_start_time

    name = f"{PREFIX}t1p0n1"
    sw = testbed.net.get(name)
    old_pid = sw.shim.pid
    old_start = proc_start_time(old_pid)
    # the switches served by the same shim process (topologies.shim_groups) go down with it
    sharing = {s.name for s in testbed.topology.switches if testbed.net.get(s.name).shim.pid == old_pid}
    before = switch_entries(sw.p4rt_address, sw.device_id)
    assert before, "the controller installed nothing on the switch?"

    def health() -> Any:
        return next(h for h in testbed.health() if h.name == name)

    assert health().state == ProcessState.RUNNING and health().pid == old_pid
    os.kill(old_pid, signal.SIGKILL)
    wait_until(
        lambda: health().restarts == 1 and health().state == ProcessState.RUNNING, "the shim restarted", 30
    )
    new_pid = sw.shim.pid
    assert new_pid != old_pid and health().pid == new_pid and sw.shim.poll() is None
    assert proc_start_time(old_pid) != old_start  # the killed one is gone (reaped), not a zombie

    def mine() -> list[Any]:
        return [e for e in read_events(testbed.run.path) if e.name == name]

    wait_until(lambda: any(e.kind == EventKind.RESTARTED for e in mine()), "the restart in events.jsonl")
    assert [(e.kind, e.pid) for e in mine()] == [(EventKind.EXITED, old_pid), (EventKind.RESTARTED, new_pid)]
    assert mine()[0].detail == "killed by SIGKILL"
    # health.json is written after the in-memory state changes: wait for the file, do not race it
    wait_until(
        lambda: any(
            h.name == name and h.restarts == 1 and h.state == ProcessState.RUNNING and h.pid == new_pid
            for h in read_health(testbed.run.path)
        ),
        "the restart in health.json",
    )
    assert any(r.pid == new_pid and r.kind == "shim" for r in testbed.run.records())  # cleanup finds it
    # the controller reconnects and re-installs what it holds for the switch (until it has pushed
    # the pipeline, the new shim answers a Read with FAILED_PRECONDITION)
    import grpc

    def entries_back() -> bool:
        try:
            return switch_entries(sw.p4rt_address, sw.device_id) == before
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.FAILED_PRECONDITION, exc
            return False

    wait_until(entries_back, "the controller to re-install the switch's entries", 30)
    f = testbed.controller.inject("switch_down", name)  # faults on it work again
    testbed.controller.clear(f.id)
    summary = testbed.send(H0, H3, 4 << 20)
    assert summary["ok"] and summary["verified"] is True, summary

    # every other process is as it was; each switch of the killed process was restarted once
    # (the supervisor restarts the killed process's switches one after another: wait, do not race it)
    def restarted() -> dict[str, int]:
        return {h.name: h.restarts for h in testbed.health() if h.restarts}

    wait_until(lambda: restarted() == dict.fromkeys(sharing, 1), f"{sorted(sharing)} restarted once each")
    wait_until(lambda: all(h.state == ProcessState.RUNNING for h in testbed.health()), "all running")
    assert restarted() == dict.fromkeys(sharing, 1)
    wait_controller_primary(testbed)  # and the controller holds every switch of the group again


def test_mininet_link_down_then_up_is_a_fault_meanwhile(testbed: Any) -> None:
    check_link_down_then_up(testbed, f"{PREFIX}t0p0n0", f"{PREFIX}t1p0n0", H0, H3)


def test_a_switch_that_stops_forwarding_is_flagged_by_health(testbed: Any) -> None:
    """A T0 whose kernel stops forwarding (IPv6 forwarding off in its namespace) while frames
    reach it: its session is fine, its counters are not -- health says `not forwarding`."""
    t0 = f"{PREFIX}t0p0n1"  # tbh3's plane-0 T0
    node = testbed.net.get(t0)

    def forwarding(on: int) -> None:
        node.cmd(f"sysctl -qw net.ipv6.conf.all.forwarding={on}")

    check_silent_switch_is_flagged(
        testbed, {t0}, "not forwarding", H0, H3, lambda: forwarding(0), lambda: forwarding(1),
        [(H0, H3, 0), (H1, H2, 0)],
    )  # fmt: skip
