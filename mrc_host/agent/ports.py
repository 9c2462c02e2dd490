"""Port I/O: one raw socket per NIC port, read round-robin, written per plane, counted.

The agent's event loop asks ``Ports`` for the frames of the ports the selector found ready
and hands every frame to one callback; ``send`` puts a frame on the port of a plane. No
protocol here: bytes in, bytes out, and the per-port counters ``mrc stats`` shows.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import selectors
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from .netio import open_port_socket, socket_drops

log = logging.getLogger("mrc.agent")

RX_BATCH: Final = 64  # rounds of reading (one frame per ready port) before the loop looks at timers


@dataclass
class PortCounters:
    ifname: str
    frames_rx: int = 0
    frames_tx: int = 0
    bytes_rx: int = 0
    bytes_tx: int = 0
    tx_errors: int = 0
    socket_drops: int = 0  # frames the kernel dropped for a full receive buffer


@dataclass
class LoopCounters:
    """What the packet loop counts outside any connection."""

    malformed: Counter[str] = field(default_factory=Counter)  # frames refused, by reason
    internal_errors: int = 0  # bugs that cost one frame, timer or request (logged)


class Ports:
    """The host's NIC ports, index = plane."""

    def __init__(self, ifnames: list[str]) -> None:
        self.counters = [PortCounters(n) for n in ifnames]
        self.sockets: list[socket.socket] = []
        # each socket's send and recv bound once: compiled, ``sock.send(...)`` looks the method
        # up through socket.socket's class dict on every frame
        self._send: list[Callable[[bytes], int]] = []
        self._recv: list[Callable[[int, int], bytes]] = []

    def add(self, s: socket.socket) -> None:
        """Take ``s`` as the next plane's port."""
        self.sockets.append(s)
        self._send.append(s.send)
        self._recv.append(s.recv)

    def open(self, sel: selectors.BaseSelector) -> None:
        for plane, pc in enumerate(self.counters):
            s = open_port_socket(pc.ifname)
            self.add(s)
            sel.register(s, selectors.EVENT_READ, ("port", plane))

    def close(self) -> None:
        for s in self.sockets:
            s.close()
        self.sockets.clear()
        self._send.clear()
        self._recv.clear()

    def read(self, planes: list[int], on_frame: Callable[[bytes, int], None]) -> None:
        """Read the ready ports round-robin, one frame each per round, so frames are handled in
        about the order they arrived across planes (reading one port's backlog before the
        other's would reorder packets by up to a batch). ``on_frame(frame, plane)`` must not
        raise."""
        ready = list(planes)
        recv, counters = self._recv, self.counters
        dontwait = socket.MSG_DONTWAIT
        for _ in range(RX_BATCH):
            if not ready:
                return
            for plane in list(ready):
                try:
                    frame = recv[plane](65536, dontwait)
                except BlockingIOError:
                    ready.remove(plane)
                    continue
                except OSError as exc:
                    log.warning("receive on %s failed: %s", counters[plane].ifname, exc)
                    ready.remove(plane)
                    continue
                pc = counters[plane]
                pc.frames_rx += 1
                pc.bytes_rx += len(frame)
                on_frame(frame, plane)

    def send(self, plane: int, frame: bytes) -> bool:
        """Put ``frame`` on the port of ``plane``; False (and counted) when the kernel refused it:
        a lost packet, which the transport recovers."""
        pc = self.counters[plane]
        try:
            self._send[plane](frame)
        except OSError as exc:
            pc.tx_errors += 1
            if exc.errno not in (errno.ENOBUFS, errno.EAGAIN):
                log.warning("send on %s failed: %s", pc.ifname, exc)
            return False
        pc.frames_tx += 1
        pc.bytes_tx += len(frame)
        return True

    def describe(self) -> list[dict[str, Any]]:
        for pc, s in zip(self.counters, self.sockets, strict=False):
            with contextlib.suppress(OSError):
                pc.socket_drops += socket_drops(s)
        return [asdict(pc) for pc in self.counters]
