"""Two network namespaces joined by one veth, with host configuration files: the smallest place
an agent can run (tests and ``bench/bench_agent.py``). Root only.

Each namespace is a one-plane host whose NIC's "T0 MAC" is the other end's MAC, and whose
carrier to the other is just the other's host uSID, so frames go straight across the veth.
``VethLab`` removes what it made (agents by PID, namespaces, temp files) in ``close``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mrc_fabric.addressing import DEFAULT_BLOCK, host_usid, nic_address
from mrc_fabric.hostconfig import CarrierTemplate, Destination, HostConfig, HostPort
from topologies.procs import terminate

STOP_TIMEOUT_S = 10.0


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


def in_ns(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return sh("ip", "netns", "exec", ns, *args, check=check)


@dataclass
class LabHost:
    name: str  # also the namespace name
    index: int
    ifname: str
    mac: str
    config_path: Path
    control: Path
    log: Path
    agent: subprocess.Popen[bytes] | None = None


@dataclass
class VethLab:
    prefix: str = "agv"
    mtu: int = 1500
    run_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="agv-")))
    hosts: list[LabHost] = field(default_factory=list)

    def open(self) -> VethLab:
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def _build(self) -> None:
        names = [f"{self.prefix}h0", f"{self.prefix}h1"]
        for i, n in enumerate(names):
            self.hosts.append(
                LabHost(
                    n,
                    i,
                    f"{n}-eth0",
                    f"02:00:c0:00:aa:{i:02x}",
                    self.run_dir / f"{n}.json",
                    self.run_dir / f"{n}.sock",
                    self.run_dir / f"{n}.log",
                )
            )
        for h in self.hosts:
            sh("ip", "netns", "add", h.name)
        a, b = self.hosts
        sh(
            "ip",
            "link",
            "add",
            a.ifname,
            "netns",
            a.name,
            "type",
            "veth",
            "peer",
            "name",
            b.ifname,
            "netns",
            b.name,
        )
        for h in self.hosts:
            in_ns(h.name, "ip", "link", "set", "lo", "up")
            in_ns(h.name, "ip", "link", "set", h.ifname, "address", h.mac, "mtu", str(self.mtu))
            for key in ("accept_dad=0", "router_solicitations=0", "accept_ra=0", "autoconf=0"):
                in_ns(h.name, "sysctl", "-qw", f"net.ipv6.conf.{h.ifname}.{key}")
            in_ns(h.name, "ip", "link", "set", h.ifname, "up")
            addr = nic_address(0, h.index, DEFAULT_BLOCK)
            in_ns(h.name, "ip", "-6", "addr", "add", f"{addr}/48", "dev", h.ifname, "nodad")
        for h, other in ((a, b), (b, a)):
            cfg = HostConfig(h.name, h.index, DEFAULT_BLOCK, 1, 1)
            cfg.ports.append(HostPort(0, h.ifname, h.mac, str(nic_address(0, h.index)), "direct", other.mac))
            tmpl = CarrierTemplate((host_usid(0, other.index),))
            cfg.destinations[other.name] = Destination(
                other.name, other.index, (str(nic_address(0, other.index)),), tmpl, tmpl
            )
            h.config_path.write_text(cfg.to_json())

    def start_agent(
        self, h: LabHost, *extra: str, source: Path | None = None, prefix: tuple[str, ...] = ()
    ) -> None:
        """``source``: run the agent of another checkout (a ``git worktree`` of an older
        commit, for before/after benchmarks); ``prefix`` goes before ``-m`` (e.g. cProfile)."""
        cmd = ["ip", "netns", "exec", h.name, sys.executable, *prefix, "-m", "mrc_host.agent.cli", "serve",
               "--config", str(h.config_path), "--control", str(h.control),
               "--log", str(h.log), *extra]  # fmt: skip
        env = None
        if source is not None:
            env = {**os.environ, "PYTHONPATH": str(source)}
        h.agent = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=source,
            env=env,
        )
        wait_for_socket(h.control, h.agent)

    def set_mtu(self, mtu: int) -> None:
        """Change the MTU of both veth ends (agents read it when they start)."""
        self.mtu = mtu
        for h in self.hosts:
            in_ns(h.name, "ip", "link", "set", h.ifname, "mtu", str(mtu))

    def stop_agent(self, h: LabHost) -> int | None:
        proc, h.agent = h.agent, None
        if proc is None:
            return None
        terminate(proc, STOP_TIMEOUT_S)
        if proc.stderr is not None:
            proc.stderr.close()
        return proc.returncode

    def close(self) -> None:
        for h in self.hosts:
            with contextlib.suppress(Exception):
                self.stop_agent(h)
        for h in self.hosts:
            sh("ip", "netns", "del", h.name, check=False)
        shutil.rmtree(self.run_dir, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """Namespaces or agents of this lab still around (should be none after close)."""
        out = [n for n in sh("ip", "netns", "list").stdout.split() if n.startswith(self.prefix)]
        out += [str(h.control) for h in self.hosts if h.control.exists()]
        return out


def wait_for_socket(path: Path, proc: subprocess.Popen[bytes], timeout_s: float = 20.0) -> None:
    """Wait until an agent's control socket answers, or its process dies (then say why)."""
    from mrc_host.agent.client import AgentClient, AgentError

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"agent exited with {proc.returncode}: {err[-2000:]}")
        if path.exists():
            with contextlib.suppress(AgentError):
                AgentClient(path, timeout_s=2).ping()
                return
        time.sleep(0.05)
    raise TimeoutError(f"agent socket {path} did not answer within {timeout_s} s")


def malformed_frames(dst_mac: str, src_mac: str, inner_src: str, inner_dst: str) -> list[tuple[str, bytes]]:
    """(reason the agent must count, frame): broken MRC frames for injection tests.

    Each starts from a well-formed frame (so it passes the socket's BPF filter: IPv6-in-IPv6)
    and breaks one thing; the last is well formed but names a queue pair no agent hands out.
    """
    from mrc_host.agent.paths import MODE_SHIFT
    from mrc_host.wire.codec import FrameEncoder
    from mrc_host.wire.framing import FrameAddressing
    from mrc_host.wire.messages import DataPacket, Probe

    enc = FrameEncoder(FrameAddressing(src_mac, dst_mac, inner_src, inner_src, inner_dst))
    carrier = bytes(16)
    data = enc.encode(DataPacket(qp=1, psn=1, vaddr=0, rkey=1, payload=b"x" * 64), carrier)
    out = [("truncated", data[:100])]
    f = bytearray(data)
    f[96:98] = (4792).to_bytes(2, "big")  # UDP destination port
    out.append(("not_mrc", bytes(f)))
    f = bytearray(data)
    f[102] = 0x55  # BTH opcode
    out.append(("unknown_opcode", bytes(f)))
    out.append(("bad_length", data + b"\0" * 8))
    f = bytearray(data)
    f[54] = 0x40 | (f[54] & 0x0F)  # inner IP version 4
    out.append(("not_ipv6", bytes(f)))
    # decodes, but names no connection this agent has: refused by the peer binding
    out.append(("no_connection", enc.encode(Probe(qp=3 << MODE_SHIFT, probe_id=1, ev_under_test=0), carrier)))
    return out
