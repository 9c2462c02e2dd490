"""Helpers for root tests of the Linux target: namespaces, veths, shims, raw-socket I/O.

Everything created here is tracked and removed by :class:`NetnsLab` even when
a test fails, and :func:`leftovers` lists anything with the given prefix that
is still around (namespaces, root-namespace interfaces, shim processes), for a
session-end leak check. Traffic only ever flows between namespaces the lab made.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from linux_target.p4rt_client import wait_until_serving
from mrc_fabric.time_scale import scaled
from topologies.procs import terminate

SEND_CODE = r"""
import socket, sys, time
iface, count = sys.argv[1], int(sys.argv[2])
frames = [bytes.fromhex(line) for line in sys.stdin.read().split()]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
for i in range(count):
    s.send(frames[i % len(frames)])
    if i % 50 == 49:
        time.sleep(0.002)  # pace bursts: veth backlogs are 1000 packets, we test faults, not queues
"""

PACED_SEND_CODE = r"""
import json, socket, sys, time
iface, offsets = sys.argv[1], json.loads(sys.argv[2])
frames = [bytes.fromhex(line) for line in sys.stdin.read().split()]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
late = []
start = time.monotonic()
for frame, offset in zip(frames, offsets):
    due = start + offset
    while (left := due - time.monotonic()) > 0:
        time.sleep(left)
    s.send(frame)
    late.append(time.monotonic() - due)
print(json.dumps(late))
"""


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll ``condition`` until it is true; TimeoutError naming ``what`` after ``timeout`` s
    (a figure for the reference machine, scaled to this one: mrc_fabric.time_scale)."""
    timeout = scaled(timeout)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def run(
    cmd: list[str], ns: str | None = None, check: bool = True, **kw: Any
) -> subprocess.CompletedProcess[str]:
    full = (["ip", "netns", "exec", ns] if ns else []) + cmd
    return subprocess.run(full, capture_output=True, text=True, check=check, **kw)


class Sniffer:
    """Frames containing ``marker`` arriving on ``ifname`` in ``ns``, collected as they come.

    It reads tcpdump's pcap stream rather than a plain AF_PACKET socket:
    seg6local next-csid rewrites the destination in place in a buffer that a
    socket's queued clone still shares, so a late ``recv`` can show the
    already-shifted address; tcpdump's ring copies each frame when it is tapped.
    """

    def __init__(self, ns: str, ifname: str, marker: bytes, prefix: list[str] | None = None) -> None:
        """``prefix`` enters the namespace (default ``ip netns exec ns``; ``mnexec -a PID`` for Mininet)."""
        self.marker = marker
        self.frames: list[bytes] = []
        prefix = ["ip", "netns", "exec", ns] if prefix is None else prefix
        self.proc = subprocess.Popen(
            [*prefix, "tcpdump", "-i", ifname, "-Q", "in", "-U", "-n", "-s", "0", "-w", "-"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        said = []  # tcpdump may warn before it listens: read until it says so, or ends
        for raw in iter(self.proc.stderr.readline, b""):
            said.append(raw.decode(errors="replace"))
            if "listening on" in said[-1]:
                break
        else:
            self.close()
            raise RuntimeError(f"tcpdump on {ns}/{ifname} failed: {''.join(said)}")
        self._thread = threading.Thread(target=self._collect, daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        out = self.proc.stdout
        assert out is not None
        if len(out.read(24)) < 24:  # pcap global header
            return
        while True:
            header = out.read(16)
            if len(header) < 16:
                return
            caplen = struct.unpack("=IIII", header)[2]
            frame = out.read(caplen)
            if self.marker in frame:
                self.frames.append(frame)

    def wait_count(self, n: int, timeout: float = 10) -> list[bytes]:
        wait_for(lambda: len(self.frames) >= n, timeout, f"{n} frames (got {len(self.frames)})")
        return self.frames

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=scaled(10))
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def send_frames(
    ns: str, ifname: str, frames: list[bytes], count: int | None = None, prefix: list[str] | None = None
) -> None:
    """Send ``count`` frames (cycling through ``frames``) from a raw socket inside ``ns``."""
    count = len(frames) if count is None else count
    prefix = ["ip", "netns", "exec", ns] if prefix is None else prefix
    subprocess.run(
        [*prefix, sys.executable, "-c", SEND_CODE, ifname, str(count)],
        input="\n".join(f.hex() for f in frames),
        text=True,
        check=True,
        capture_output=True,
        timeout=scaled(120),
    )


def send_paced(
    ns: str, ifname: str, frames: list[bytes], offsets: list[float], prefix: list[str] | None = None
) -> list[float]:
    """Send frame i from a raw socket inside ``ns`` at ``offsets[i]`` seconds after the first
    send (deadlines from one start, so lateness never accumulates); return how late each send
    left (seconds), so a caller can tell a loaded machine from the behaviour it tests.
    ``prefix`` as for :func:`send_frames` (``[]``: the current namespace)."""
    if len(offsets) != len(frames):
        raise ValueError(f"{len(frames)} frames but {len(offsets)} send times")
    prefix = ["ip", "netns", "exec", ns] if prefix is None else prefix
    out = subprocess.run(
        [*prefix, sys.executable, "-c", PACED_SEND_CODE, ifname, json.dumps(offsets)],
        input="\n".join(f.hex() for f in frames),
        text=True,
        check=True,
        capture_output=True,
        timeout=scaled(120) + (max(offsets) if offsets else 0),
    )
    return [float(x) for x in json.loads(out.stdout)]


class NetnsLab:
    """Namespaces, veth pairs and shim processes of one test, removed on close()."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.namespaces: list[str] = []
        self.shims: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> NetnsLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_ns(self, name: str) -> str:
        """Create ``name``; one left behind by a killed run (no process inside) is removed
        first, so one hard kill cannot fail every later run; a live one is an error."""
        if name in run(["ip", "netns", "list"]).stdout.split():
            pids = run(["ip", "netns", "pids", name], check=False).stdout.split()
            if pids:
                raise RuntimeError(f"namespace {name} is in use by pids {pids}: another run?")
            run(["ip", "netns", "del", name])
        run(["ip", "netns", "add", name])
        self.namespaces.append(name)
        run(["ip", "link", "set", "lo", "up"], ns=name)
        for knob in ("all", "default"):
            run(["sysctl", "-qw", f"net.ipv6.conf.{knob}.accept_dad=0"], ns=name)
        return name

    def veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
        """A veth pair from ``ns_a``/``if_a`` to ``ns_b``/``if_b`` (created inside ``ns_a``)."""
        run(["ip", "link", "add", if_a, "type", "veth", "peer", "name", if_b, "netns", ns_b], ns=ns_a)
        run(["ip", "link", "set", if_a, "up"], ns=ns_a)
        run(["ip", "link", "set", if_b, "up"], ns=ns_b)

    def switch_ns(self, ns: str, ports: dict[int, str], peer_prefix: str) -> str:
        """A namespace for one shim: each of its ``ports`` is a veth to ``<peer_prefix><port>``
        in the same namespace, where the test sends and listens."""
        self.add_ns(ns)
        for port, ifname in ports.items():
            self.veth(ns, ifname, ns, f"{peer_prefix}{port}")
        return ns

    @staticmethod
    def mac(ns: str, ifname: str) -> int:
        text = run(["cat", f"/sys/class/net/{ifname}/address"], ns=ns).stdout.strip()
        return int(text.replace(":", ""), 16)

    def start_shim(
        self,
        ns: str,
        name: str,
        device_id: int,
        ports: dict[int, str],
        timeout: float = 20,
        extra_args: list[str] | None = None,
    ) -> str:
        """Start a shim in ``ns``; return its P4Runtime address once it answers (within
        ``timeout`` seconds on the reference machine, scaled to this one).

        ``extra_args`` go to the shim's command line (``--rate 1=50``, ``--buffer-bytes N``...).
        """
        sock = self.run_dir / f"{name}.p4rt.sock"
        log = self.run_dir / f"{name}.shim.log"
        cmd = [
            "ip",
            "netns",
            "exec",
            ns,
            sys.executable,
            "-m",
            "linux_target.shim_main",
            "--name",
            name,
            "--device-id",
            str(device_id),
            "--listen",
            f"unix:{sock}",
            "--log",
            str(log),
        ]
        for port, ifname in sorted(ports.items()):
            cmd += ["--port", f"{port}={ifname}"]
        cmd += extra_args or []
        proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        self.shims.append(proc)
        address = f"unix:{sock}"
        try:
            wait_until_serving(address, scaled(timeout), alive=lambda: proc.poll() is None)
        except (TimeoutError, RuntimeError) as exc:
            tail = log.read_text() if log.exists() else ""
            raise RuntimeError(f"shim {name} did not start: {exc}\n{tail}") from exc
        return address

    def stop_shims(self) -> None:
        """SIGTERM every shim and wait for it (it removes what it installed)."""
        for proc in self.shims:
            terminate(proc, scaled(10))
        self.shims.clear()

    def close(self) -> None:
        self.stop_shims()
        for ns in reversed(self.namespaces):
            run(["ip", "netns", "del", ns], check=False)
        self.namespaces.clear()


def leftovers(prefix: str = "ls") -> list[str]:
    """Namespaces, root-namespace interfaces and shim processes named with ``prefix``."""
    found: list[str] = []
    netns = run(["ip", "netns", "list"], check=False).stdout.split("\n")
    found += [f"netns {line.split()[0]}" for line in netns if line.startswith(prefix + "-")]
    found += [f"interface {name}" for name in os.listdir("/sys/class/net") if name.startswith(prefix)]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        is_shim = b"linux_target.shim_main" in args or any(a.endswith(b"mrc-p4rt-shim") for a in args)
        if is_shim and b"--name" in args:
            name = args[args.index(b"--name") + 1] if args.index(b"--name") + 1 < len(args) else b""
            if name.startswith(prefix.encode()):
                found.append(f"shim process {pid} ({name.decode(errors='replace')})")
    return found
