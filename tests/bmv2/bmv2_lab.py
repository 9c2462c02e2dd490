"""Test bench for one BMv2 switch: veth pairs (prefix ``pb``), the switch process, raw-socket taps.

Layout (PTF style, everything in the root namespace, no kernel IPv6 on the veths so
the kernel injects no ND/MLD frames into the switch)::

    test  pb<tag>h1 ──veth── pb<tag>s1  port 1 ┐
    test  pb<tag>h2 ──veth── pb<tag>s2  port 2 ├ simple_switch_grpc (Bmv2Process)
    ...                                         ┘

The test sends frames on ``h<n>`` and reads what the switch sent out of port n on
the same interface. Every veth and the process are removed on close, even after
a failure; ``leftovers()`` lets a session fixture prove it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from topologies.bmv2_switch import Bmv2Process

PREFIX = "pb"
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SO_RCVBUFFORCE = 33  # socket.h: SO_RCVBUF past net.core.rmem_max (root)
TAP_BUFFER_BYTES = 16 << 20


def wait_for(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.02) -> None:
    """Poll ``condition`` until true; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def run(cmd: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, check=check)


def leftovers(prefix: str = PREFIX) -> list[str]:
    """Interfaces with our prefix that still exist (there should be none after a test run)."""
    return sorted(n for n in os.listdir("/sys/class/net") if n.startswith(prefix))


class Tap:
    """Raw AF_PACKET socket on one test-side interface: sends frames, records what arrives."""

    def __init__(self, ifname: str) -> None:
        self.ifname = ifname
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        # room for every frame of a test even while this thread waits for the CPU: the switch
        # (real-time) can send a thousand frames before a busy machine schedules the reader
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, TAP_BUFFER_BYTES)
        self.sock.bind((ifname, 0))
        self.sock.settimeout(0.2)
        self._frames: list[tuple[float, bytes]] = []
        self._cv = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._collect, name=f"tap-{ifname}", daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            if addr[2] == PACKET_OUTGOING:
                continue  # our own transmissions
            with self._cv:
                self._frames.append((time.monotonic(), data))
                self._cv.notify_all()

    def send(self, frames: Iterable[bytes]) -> None:
        for f in frames:
            self.sock.send(f)

    def frames(self, match: Callable[[bytes], bool] | None = None) -> list[bytes]:
        with self._cv:
            return [f for _t, f in self._frames if match is None or match(f)]

    def wait(
        self, n: int, timeout: float = 10.0, match: Callable[[bytes], bool] | None = None
    ) -> list[bytes]:
        """At least ``n`` frames (that ``match``) received; AssertionError after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                got = [f for _t, f in self._frames if match is None or match(f)]
                if len(got) >= n:
                    return got
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.ifname}: {len(got)} of {n} expected frames after {timeout:.1f}s"
                    )
                self._cv.wait(left)

    def clear(self) -> None:
        with self._cv:
            self._frames.clear()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


class ThriftRegisters:
    """Register reads over BMv2's Thrift API (the Python modules BMv2 installs), one connection."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        from bm_runtime.standard import Standard
        from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
        from thrift.transport import TSocket, TTransport

        self.transport = TTransport.TBufferedTransport(TSocket.TSocket(host, port))
        protocol = TMultiplexedProtocol.TMultiplexedProtocol(
            TBinaryProtocol.TBinaryProtocol(self.transport), "standard"
        )
        self.client = Standard.Client(protocol)
        self.transport.open()

    def read(self, register: str, index: int) -> int:
        return int(self.client.bm_register_read(0, register, index))

    def close(self) -> None:
        self.transport.close()


class Bmv2Lab:
    """One BMv2 switch with ``nports`` veth-attached ports; a context manager that cleans up."""

    def __init__(self, run_dir: Path, nports: int = 4, device_id: int = 1, tag: str | None = None) -> None:
        self.run_dir = run_dir
        self.nports = nports
        self.tag = tag or f"{os.getpid() % 0xFFF:03x}"
        self.device_id = device_id
        self.veths: list[str] = []
        self.taps: dict[int, Tap] = {}
        self.switch: Bmv2Process | None = None
        self._registers: ThriftRegisters | None = None

    def registers(self) -> ThriftRegisters:
        if self._registers is None:
            assert self.switch is not None
            self._registers = ThriftRegisters(self.switch.thrift_port)
        return self._registers

    def host_if(self, port: int) -> str:
        return f"{PREFIX}{self.tag}h{port}"

    def switch_if(self, port: int) -> str:
        return f"{PREFIX}{self.tag}s{port}"

    @staticmethod
    def mac(ifname: str) -> int:
        return int(Path(f"/sys/class/net/{ifname}/address").read_text().strip().replace(":", ""), 16)

    def __enter__(self) -> Bmv2Lab:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        ports = {}
        for p in range(1, self.nports + 1):
            h, s = self.host_if(p), self.switch_if(p)
            run(["ip", "link", "add", h, "type", "veth", "peer", "name", s])
            self.veths.append(h)
            for ifname in (h, s):
                run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"])
                run(["ip", "link", "set", "dev", ifname, "mtu", "9500"])
                run(
                    ["ethtool", "-K", ifname, "tx", "off", "rx", "off", "tso", "off", "gso", "off"],
                    check=False,
                )
                run(["ip", "link", "set", "dev", ifname, "up"])
            ports[p] = s
        for p in ports:
            self.taps[p] = Tap(self.host_if(p))
        self.switch = Bmv2Process(name="pb-sw", device_id=self.device_id, ports=ports, run_dir=self.run_dir)
        self.switch.start()

    def close(self) -> None:
        if self._registers is not None:
            self._registers.close()
            self._registers = None
        if self.switch is not None:
            self.switch.stop()
            self.switch = None
        for tap in self.taps.values():
            tap.close()
        self.taps.clear()
        for h in self.veths:
            with contextlib.suppress(subprocess.CalledProcessError):
                run(["ip", "link", "del", h])
        self.veths.clear()
