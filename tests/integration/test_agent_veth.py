"""The agent process on the smallest network (two namespaces, one veth; prefix ``agv``):
clean shutdown, kernel rules, a control socket that bad clients cannot break."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def lab() -> Iterator:
    from bench.vethlab import VethLab

    lab = VethLab(prefix="agv").open()
    try:
        yield lab
    finally:
        lab.close()
    assert lab.leftovers() == []


@pytest.fixture
def agents(lab) -> Iterator:
    for h in lab.hosts:
        lab.start_agent(h)
    try:
        yield lab.hosts
    finally:
        for h in lab.hosts:
            lab.stop_agent(h)


def _tables(ns: str) -> str:
    from bench.vethlab import in_ns

    return in_ns(ns, "nft", "list", "tables").stdout


def _raw_request(path, payload: bytes) -> list[dict]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(str(path))
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines()]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_agent_and_removes_its_rules_and_socket(lab, sig: int) -> None:
    h = lab.hosts[0]
    lab.start_agent(h)
    assert "mrc_agent" in _tables(h.name)
    proc = h.agent
    proc.send_signal(sig)
    assert proc.wait(timeout=scaled(15)) == 0
    lab.stop_agent(h)
    assert "mrc_agent" not in _tables(h.name)
    assert not h.control.exists()


def test_the_control_socket_is_the_agents_users_only_or_its_named_groups(lab, agents) -> None:
    import grp
    import os
    import stat

    a, _b = agents
    st = os.stat(a.control)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    lab.stop_agent(a)
    group = grp.getgrgid(65534).gr_name  # Debian's "nogroup"
    lab.start_agent(a, "--control-group", group)
    st = os.stat(a.control)
    assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 65534


def test_a_transfer_over_the_veth_is_verified_and_kernel_rules_see_it(agents) -> None:
    from mrc_host.agent.client import AgentClient

    a, b = agents
    summary = AgentClient(a.control).send(b.name, "3M")
    assert summary["ok"] and summary["verified"] is True and summary["bytes_acked"] == 3 << 20
    st = AgentClient(b.control).stats()
    (mine,) = [r for r in st["transfers"]["received"] if r["transfer_id"] == summary["transfer_id"]]
    assert mine["crc32"] == summary["crc32"]
    assert st["kernel_drops"]["mrc ipv6-in-ipv6"] >= summary["data_packets_sent"] - summary["retransmissions"]


def _ip6_in_receives(ns: str) -> int:
    from bench.vethlab import in_ns

    lines = in_ns(ns, "cat", "/proc/net/snmp6").stdout.splitlines()
    return int(dict(line.split() for line in lines if line.strip())["Ip6InReceives"])


def test_mrc_frames_stop_at_the_ports_ingress_and_plain_ipv6_still_flows(agents) -> None:
    """The agent's socket has its copy of a frame before the port's ingress hook, where its
    rule drops MRC frames: the IPv6 stack of the receiving host never sees the transfer's
    frames (with the rule at prerouting it saw every one), and the hosts' own IPv6 (a ping
    between them) is not touched."""
    from bench.vethlab import in_ns
    from mrc_host.agent.client import AgentClient

    a, b = agents
    before = _ip6_in_receives(b.name)
    summary = AgentClient(a.control).send(b.name, "2M")
    assert summary["ok"] and summary["verified"] is True
    seen = _ip6_in_receives(b.name) - before
    assert summary["data_packets_sent"] >= 500 and seen < 50, (seen, summary["data_packets_sent"])
    drops = AgentClient(b.control).stats()["kernel_drops"]["mrc ipv6-in-ipv6"]
    assert drops >= summary["data_packets_sent"] - summary["retransmissions"]
    # (their NIC addresses are in different /48s with no route: ping b's link-local address)
    link = in_ns(b.name, "ip", "-6", "-o", "addr", "show", "dev", b.ifname, "scope", "link").stdout.split()
    peer = link[link.index("inet6") + 1].split("/")[0]
    ping = in_ns(a.name, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", f"{peer}%{a.ifname}", check=False)
    assert ping.returncode == 0, ping.stdout + ping.stderr


def test_bad_clients_get_errors_naming_the_field_and_the_agent_lives_on(agents) -> None:
    from mrc_host.agent.client import AgentClient, AgentError

    a, _b = agents
    replies = _raw_request(
        a.control,
        b"garbage\n"
        b'{"cmd": "send", "peer": "nosuch", "size": 1}\n'
        b'{"cmd": "send", "peer": "' + a.name.encode() + b'", "size": 1}\n'
        b'{"cmd": "send", "peer": "x", "size": "many"}\n'
        b'{"cmd": "allow", "ev": "12345678"}\n'
        b"\n"
        b'{"cmd": "ping"}\n',
    )
    assert [r["ok"] for r in replies] == [False, False, False, False, False, True]
    assert [r["error"].split(":")[0] for r in replies[:5]] == ["request", "peer", "peer", "size", "ev"]
    _raw_request(a.control, b"x" * 200_000)  # a line longer than allowed, then a hang-up
    with pytest.raises(AgentError, match="peer"):
        AgentClient(a.control).send("nosuch", 10)
    assert AgentClient(a.control).ping()["host"] == a.name
    assert a.agent.poll() is None


def test_deny_and_allow_over_the_api(agents) -> None:
    from mrc_host.agent.client import AgentClient

    a, b = agents
    c = AgentClient(a.control)
    assert c.send(b.name, "100K")["ok"]
    ev = next(r["ev"] for r in c.evs() if r["conn"] == "send")
    assert c.deny(ev)["connections"] >= 1
    assert {r["state"] for r in c.evs() if r["ev"] == ev} == {"DENIED"}
    assert c.stats()["denied"] == [ev]
    assert c.allow(ev)["connections"] >= 1
    assert {r["state"] for r in c.evs() if r["ev"] == ev} == {"GOOD"}


def test_bad_arguments_stop_the_agent_with_a_message(lab, tmp_path) -> None:
    h = lab.hosts[0]
    base = [sys.executable, "-m", "mrc_host.agent.cli", "serve", "--control", str(tmp_path / "s.sock")]
    for extra, text in (
        (["--config", str(tmp_path / "missing.json")], "missing.json"),
        (["--config", str(h.config_path), "--mtu", "100000"], "--mtu"),
        (["--config", str(h.config_path), "--busy-poll-us", "-1"], "--busy-poll-us"),
        (["--config", str(h.config_path), "--control-group", "no-such-group-here"], "--control-group"),
        (["--config", str(h.config_path), "--peer-timeout", "0"], "--peer-timeout"),
    ):
        proc = subprocess.run(
            ["ip", "netns", "exec", h.name, *base, *extra], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode != 0 and text in proc.stderr, proc.stderr
    assert not (tmp_path / "s.sock").exists()
    assert "mrc_agent" not in _tables(h.name)


def test_an_ev_profile_sets_the_evs_and_denies_by_rule(lab, tmp_path) -> None:
    from mrc_host.agent.client import AgentClient

    profile = tmp_path / "evs.toml"
    profile.write_text(
        'explicit = ["00000011", "00000012", "00000013", "00000014"]\nevs = 4\nbackups_per_plane = 0\n'
        'cc = "window"\n[[deny]]\nev = "00000012"\n'
    )
    for h in lab.hosts:
        lab.start_agent(h, "--ev-profile", str(profile))
    try:
        a, b = lab.hosts
        c = AgentClient(a.control)
        assert c.send(b.name, "512K")["ok"]
        rows = {r["ev"]: r for r in c.evs() if r["conn"] == "send"}
        assert set(rows) == {"00000011", "00000012", "00000013", "00000014"}
        assert rows["00000012"]["state"] == "DENIED" and rows["00000012"]["data_sent"] == 0
        assert all(rows[ev]["data_sent"] > 0 for ev in ("00000011", "00000013", "00000014"))
    finally:
        for h in lab.hosts:
            lab.stop_agent(h)


def test_a_profile_the_fabric_cannot_honour_stops_the_agent_with_a_message(lab, tmp_path) -> None:
    h = lab.hosts[0]
    bad = tmp_path / "bad.toml"
    bad.write_text('explicit = ["30000001"]\n')  # plane 3: this host has one NIC port
    base = [sys.executable, "-m", "mrc_host.agent.cli", "serve", "--control", str(tmp_path / "s.sock"),
            "--config", str(h.config_path)]  # fmt: skip
    for extra, text in (
        (["--ev-profile", str(bad)], "plane 3"),
        (["--cc", "cubic"], "cc: 'cubic' is not one of"),
        (["--evs", "0"], "evs: must be an integer in 1..65536"),
    ):
        proc = subprocess.run(
            ["ip", "netns", "exec", h.name, *base, *extra], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2 and text in proc.stderr, proc.stderr
    assert not (tmp_path / "s.sock").exists()
    assert "mrc_agent" not in _tables(h.name)


def _cpu_ticks(pid: int) -> int:
    from pathlib import Path

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks


def test_busy_polling_stops_when_the_frames_stop(lab) -> None:
    """``--busy-poll-us`` keeps an agent awake only while frames arrive: after a transfer,
    both agents sleep in epoll again (a spinning agent would use a whole CPU second here)."""
    import os
    import time

    from mrc_host.agent.client import AgentClient

    for h in lab.hosts:
        lab.start_agent(h, "--busy-poll-us", "1000")
    try:
        a, b = lab.hosts
        assert AgentClient(a.control).send(b.name, "8M")["ok"]
        hz = os.sysconf("SC_CLK_TCK")
        before = {h.name: _cpu_ticks(h.agent.pid) for h in lab.hosts}
        t0 = time.monotonic()
        time.sleep(1.0)  # the interval measured: no frames in it
        seconds = time.monotonic() - t0
        used = {h.name: (_cpu_ticks(h.agent.pid) - before[h.name]) / hz / seconds for h in lab.hosts}
        assert all(u < 0.2 for u in used.values()), used
    finally:
        for h in lab.hosts:
            lab.stop_agent(h)
