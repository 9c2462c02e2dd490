"""Port I/O: one packet socket per NIC port, read round-robin, written per plane, counted.

The agent's event loop asks ``Ports`` for the frames of the ports the selector found ready
and hands them to one callback a batch at a time (``BATCH`` frames: decoded and given to their
cores together, their ring slots handed back after); ``send`` queues a frame on the port of a plane and
``flush`` hands what was queued to the kernel. Each port is a ``rings.RingPort`` (packet rings:
no system call per frame) or, where the kernel refuses rings or ``--ring off`` asks for it, a
``rings.SocketPort`` (a ``recv``/``send`` per frame); ``describe`` says which, and why. No
protocol here: bytes in, bytes out, and the per-port counters ``mrc stats`` shows.

When frames go out: a ring port holds what ``send`` wrote until ``flush`` (one ``send`` call
for all of them) or until ``rings.FLUSH_EVERY`` wait. ``read`` flushes after each batch of
received frames whose handling queued any (the SACKs on the receiving side, the DATA they let
out on the sending side), and the agent flushes once more before it sleeps (timers, control
requests).
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

from mrc_host.wire.codec import FrameEncoder
from mrc_host.wire.messages import Frame

from .netio import open_port, socket_drops
from .rings import PortIO, SocketPort

log = logging.getLogger("mrc.agent")

RX_BATCH: Final = 64  # rounds of reading (one frame per ready port) before the loop looks at timers
OnBatch = Callable[[list[Any], list[int]], None]  # (frames, the plane of each) -> None
BATCH: Final = 16  # frames read before they are handled together (decoded, given to their cores)
_READ: Final = selectors.EVENT_READ
_READ_WRITE: Final = selectors.EVENT_READ | selectors.EVENT_WRITE


@dataclass
class PortCounters:
    ifname: str
    frames_rx: int = 0
    frames_tx: int = 0
    bytes_rx: int = 0
    bytes_tx: int = 0
    tx_errors: int = 0  # frames not sent: the kernel refused them, or the ring's backlog was full
    socket_drops: int = 0  # frames the kernel dropped for want of room (receive buffer or ring)


@dataclass
class LoopCounters:
    """What the packet loop counts outside any connection."""

    malformed: Counter[str] = field(default_factory=Counter)  # frames refused, by reason
    internal_errors: int = 0  # bugs that cost one frame, timer or request (logged)


class Ports:
    """The host's NIC ports, index = plane; ``ring``: "v2", "v3" or "off" (see rings.py)."""

    def __init__(self, ifnames: list[str], ring: str = "v2") -> None:
        self.counters = [PortCounters(n) for n in ifnames]
        self.ring = ring
        self.io: list[PortIO] = []
        self.sel: selectors.BaseSelector | None = None
        self.writing: list[bool] = []  # per plane: registered for writability (a ring's backlog waits)
        self.dirty = False  # a frame was queued since the last flush

    def add(self, s: socket.socket) -> None:
        """Take the plain socket ``s`` (or anything with ``send``/``recv``) as the next plane's port."""
        self.add_port(SocketPort(s))

    def add_port(self, port: PortIO) -> None:
        self.io.append(port)
        self.writing.append(False)

    def open(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel
        for plane, pc in enumerate(self.counters):
            port = open_port(pc.ifname, self.ring)
            self.add_port(port)
            sel.register(port.fileno(), _READ, ("port", plane))
            log.info("port %s: %s", pc.ifname, port.describe())

    def close(self) -> None:
        for port in self.io:
            port.close()
        self.io.clear()
        self.writing.clear()

    def read(self, planes: list[int], on_batch: OnBatch) -> None:
        """Read the ready ports round-robin, one frame each per round, so frames are handled in
        about the order they arrived across planes (reading one port's backlog before the
        other's would reorder packets by up to a batch). Every ``BATCH`` frames (and at the
        end) ``on_batch(frames, planes)`` handles them together (frame i came from plane
        ``planes[i]``; it must not raise); a frame is valid during that call only (a ring's
        slots go back to the kernel after it). What a batch's handling queued goes out before
        the next batch is read."""
        ready = list(planes)
        io, counters = self.io, self.counters
        frames: list[Any] = []
        where: list[int] = []
        for _ in range(RX_BATCH):
            if not ready:
                break
            for plane in list(ready):
                try:
                    n = io[plane].take(frames)
                except OSError as exc:
                    log.warning("receive on %s failed: %s", counters[plane].ifname, exc)
                    ready.remove(plane)
                    continue
                if n < 0:
                    ready.remove(plane)
                    continue
                if len(frames) > len(where):
                    where.append(plane)
                pc = counters[plane]
                pc.frames_rx += 1
                pc.bytes_rx += n
            if len(frames) >= BATCH:
                self._handle(frames, where, on_batch)
        if frames:
            self._handle(frames, where, on_batch)

    def _handle(self, frames: list[Any], where: list[int], on_batch: OnBatch) -> None:
        """One batch: handled, its slots handed back, what it queued sent."""
        try:
            on_batch(frames, where)
        finally:
            frames.clear()
            where.clear()
            for port in self.io:
                port.release()
        if self.dirty:
            self.flush()

    def send(self, plane: int, frame: bytes) -> bool:
        """Queue ``frame`` on the port of ``plane``; False (and counted) when the kernel refused it
        or no room was left for it: a lost packet, which the transport recovers."""
        pc = self.counters[plane]
        try:
            ok = self.io[plane].send(frame)
        except OSError as exc:
            pc.tx_errors += 1
            if not isinstance(exc, (BlockingIOError, InterruptedError)) and exc.errno != errno.ENOBUFS:
                log.warning("send on %s failed: %s", pc.ifname, exc)
            return False
        if not ok:
            pc.tx_errors += 1
            return False
        self.dirty = True
        pc.frames_tx += 1
        pc.bytes_tx += len(frame)
        return True

    def send_msg(
        self, plane: int, encoder: FrameEncoder, msg: Frame, carrier: bytes, payload_sum: int
    ) -> bool:
        """Encode ``msg`` (``FrameEncoder.encode``'s arguments) straight into the next slot of the
        port's ring where one is free, else as a frame for ``send``; False as for ``send``.
        ValueError/TypeError: a field the codec refuses (nothing is sent)."""
        port = self.io[plane]
        at = port.reserve()
        if at >= 0:
            n = encoder.encode_into(msg, carrier, port.view, at, port.tx_room, payload_sum)
            pc = self.counters[plane]
            if n < 0:  # longer than a slot: the NIC's MTU is smaller than the frame
                pc.tx_errors += 1
                return False
            try:
                port.commit(n)
            except OSError as exc:
                pc.tx_errors += 1
                log.warning("send on %s failed: %s", pc.ifname, exc)
                return False
            self.dirty = True
            pc.frames_tx += 1
            pc.bytes_tx += n
            return True
        return self.send(plane, encoder.encode(msg, carrier, payload_sum))

    def flush(self) -> None:
        """Hand every queued frame to the kernel; ask the selector for writability while a
        port's ring is full and frames wait for room (and stop asking once they are out)."""
        self.dirty = False
        for plane, port in enumerate(self.io):
            try:
                port.flush()
            except OSError as exc:
                log.warning("send on %s failed: %s", self.counters[plane].ifname, exc)
            waiting = port.backlog() > 0
            if waiting != self.writing[plane] and self.sel is not None:
                self.writing[plane] = waiting
                self.sel.modify(port.fileno(), _READ_WRITE if waiting else _READ, ("port", plane))

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for pc, port in zip(self.counters, self.io, strict=False):
            with contextlib.suppress(OSError):
                pc.socket_drops += socket_drops(port.sock)
            out.append(asdict(pc) | port.describe())
        return out
