"""The agent's hold on the host's network: raw sockets in, raw sockets out, kernel kept quiet.

``open_port_socket`` opens one AF_PACKET socket per NIC port, bound to that interface for
EtherType IPv6, with a classic BPF filter that passes only IPv6-in-IPv6 frames (outer next
header 41, what every MRC frame is) addressed to the host uSID alone: the kernel discards
everything else (neighbour discovery, MLD, the hosts' plain traffic, which carries a host
function uSID after the host's: mrc_fabric.addressing.HostFunction) before it is copied to the
agent. The filter is attached before the
socket is bound, so nothing unfiltered is ever queued. The socket is bound for every EtherType
(ETH_P_ALL), so it takes its copy of a frame where the kernel hands frames to its taps, before
the device's ingress hooks; ``PACKET_IGNORE_OUTGOING`` keeps the host's outgoing frames, the
agent's own among them, from it. The socket carries packet
rings (``rings.py``) where the kernel grants them (``open_port``), else it is read and written
a frame per system call.

``KernelQuiet`` installs an nftables table in the host's namespace that drops inbound MRC
traffic (IPv6-in-IPv6 to the NIC ports' MRC arrival /64s, and UDP 4791) at each NIC port's
ingress hook (the netdev family), after the agent's socket has its copy and before the IPv6
stack could answer it with an ICMPv6 error or spend its work on it (on a veth that work is
charged to whoever sent the frame). The host's other IPv6 traffic goes on as before.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import socket
import struct
import subprocess
from dataclasses import dataclass, field

from .rings import (
    RX_RING_BYTES,
    TX_RING_BYTES,
    VERSIONS,
    PortIO,
    RingGeometry,
    RingPort,
    SocketPort,
    setup_rings,
)

ETH_P_IPV6 = 0x86DD
SO_ATTACH_FILTER = 26
SO_SNDBUFFORCE = 32
SO_RCVBUFFORCE = 33
SIOCGIFMTU = 0x8921
SOCKET_BUFFER = 8 << 20
SOL_PACKET = 263
ETH_P_ALL = 0x0003
PACKET_IGNORE_OUTGOING = 23  # (Linux 4.20)
PACKET_STATISTICS = 6
ETH_HLEN = 14

# classic BPF: accept IPv6 frames whose (outer) next header is 41 and whose outer destination
# holds nothing after the host's uSID (bytes 44-45: MRC's arrival address); drop the rest, among
# them the hosts' plain kernel traffic, which carries a host function uSID there
_BPF_IPV6_IN_IPV6 = [
    (0x28, 0, 0, 12),  # ldh [12]          EtherType
    (0x15, 0, 5, ETH_P_IPV6),  # jeq #0x86dd    else drop
    (0x30, 0, 0, 20),  # ldb [20]          outer IPv6 next header
    (0x15, 0, 3, 41),  # jeq #41           else drop
    (0x28, 0, 0, 44),  # ldh [44]          the uSID after the host's in the outer destination
    (0x15, 0, 1, 0),  # jeq #0            else drop
    (0x06, 0, 0, 0x40000),  # ret #262144  accept (whole frame)
    (0x06, 0, 0, 0),  # ret #0            drop
]


def attach_bpf(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    insns = b"".join(struct.pack("HBBI", *ins) for ins in program)
    buf = ctypes.create_string_buffer(insns)
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def interface_mtu(ifname: str) -> int:
    """MTU of ``ifname`` in this process's network namespace (ioctl, not /sys: see below).

    /sys/class/net shows the namespace of whoever mounted /sys, which for a Mininet host is
    the root namespace, not the host's own.
    """
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16si", ifname.encode()[:15], 0)
        res = fcntl.ioctl(s.fileno(), SIOCGIFMTU, ifreq)
    mtu: int = struct.unpack("16si", res)[1]
    return mtu


def socket_drops(sock: socket.socket) -> int:
    """Frames the kernel dropped for want of room (the receive buffer, or the ring), since the
    last call.

    (PACKET_STATISTICS resets the kernel's counters on every read.)
    """
    raw = sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8)
    drops: int = struct.unpack("II", raw)[1]
    return drops


def open_port_socket(
    ifname: str,
    ring: int = 0,
    max_frame: int = 0,
    rx_bytes: int = RX_RING_BYTES,
    tx_bytes: int = TX_RING_BYTES,
) -> tuple[socket.socket, RingGeometry | None]:
    """A raw socket on ``ifname`` that reads only IPv6-in-IPv6 frames and can send any frame;
    with packet rings of TPACKET version ``ring`` (0: none) for frames of ``max_frame`` bytes
    (0: the interface's MTU), set up before the socket is bound (OSError or ValueError if they
    cannot be)."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing yet
    geo = None
    try:
        attach_bpf(sock, _BPF_IPV6_IN_IPV6)
        for opt, fallback in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)
            except PermissionError:
                sock.setsockopt(socket.SOL_SOCKET, fallback, SOCKET_BUFFER)
        if ring:
            geo = RingGeometry(ring, max_frame or interface_mtu(ifname) + ETH_HLEN, rx_bytes, tx_bytes)
            setup_rings(sock, geo)
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        sock.bind((ifname, ETH_P_ALL))
    except BaseException:
        sock.close()
        raise
    return sock, geo


def open_port(ifname: str, ring: str = "v2") -> PortIO:
    """The port's frames in and out: through packet rings of version ``ring`` ("v2", "v3"),
    else (``ring`` "off", or rings the kernel refuses) a plain socket, with the reason kept
    for ``mrc stats``."""
    version = VERSIONS.get(ring, 0)
    why = "--ring off"
    if version:
        try:
            sock, geo = open_port_socket(ifname, version)
            assert geo is not None
        except (OSError, ValueError) as exc:
            why = f"rings refused: {exc}"
        else:
            try:
                return RingPort(sock, geo)
            except (OSError, ValueError) as exc:  # the mapping failed
                sock.close()
                why = f"rings refused: {exc}"
    return SocketPort(open_port_socket(ifname)[0], why)


@dataclass
class KernelQuiet:
    """The nftables table that keeps the host kernel from answering MRC traffic: a chain on
    the ingress hook of each of ``devices`` (the NIC ports)."""

    prefixes: list[str]
    devices: list[str] = field(default_factory=list)
    table: str = "mrc_agent"
    installed: bool = False

    def script(self) -> str:
        nets = ", ".join(self.prefixes)
        lines = [f"table netdev {self.table} {{"]
        for i, dev in enumerate(self.devices):
            lines += [
                f"  chain port{i} {{",
                f'    type filter hook ingress device "{dev}" priority 0; policy accept;',
                f'    ip6 nexthdr 41 ip6 daddr {{ {nets} }} counter drop comment "mrc ipv6-in-ipv6"',
                '    udp dport 4791 counter drop comment "mrc udp"',
                "  }",
            ]
        return "\n".join([*lines, "}", ""])

    @staticmethod
    def _nft(script: str) -> None:
        proc = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"nft refused the agent's rules: {proc.stderr.strip()}")

    def _fresh(self) -> str:
        """nft commands deleting this table, and an inet one of its name (where older agents
        hooked prerouting)."""
        return "".join(
            f"add table {f} {self.table}\ndelete table {f} {self.table}\n" for f in ("inet", "netdev")
        )

    def install(self) -> None:
        # add+delete first: replaces a table an earlier agent in this namespace left behind
        self._nft(f"{self._fresh()}{self.script()}")
        self.installed = True

    def remove(self) -> None:
        if self.installed:
            self._nft(self._fresh())
            self.installed = False

    def counters(self) -> dict[str, int]:
        """Packets each rule dropped (by its comment), for ``mrc stats``."""
        if not self.installed:
            return {}
        proc = subprocess.run(
            ["nft", "-j", "list", "table", "netdev", self.table], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            return {}
        out: dict[str, int] = {}
        for item in json.loads(proc.stdout).get("nftables", []):
            rule = item.get("rule")
            if not rule:
                continue
            packets = next((e["counter"]["packets"] for e in rule.get("expr", []) if "counter" in e), 0)
            key = rule.get("comment", f"rule {rule.get('handle')}")
            out[key] = out.get(key, 0) + packets  # (summed over the ports' chains)
        return out
