"""Packet rings on a NIC port (packet_mmap): frames in and out through memory shared with the kernel.

Why: one ``recv`` or ``send`` per frame costs a system call, an skb copy to or from user
memory, and for a sleeping agent a wake-up, per frame. With ``PACKET_RX_RING`` the kernel
writes each frame into a slot of a ring mapped into the agent and the agent reads it in
place; with ``PACKET_TX_RING`` the agent writes frames into slots and one ``send`` hands
every written slot to the device (the kernel sends them from the ring's pages, uncopied).
Linux's Documentation/networking/packet_mmap.rst describes both.

Layout. One socket per port carries both rings, mapped by one ``mmap`` (receive ring first).
Every slot starts with the version's frame header (``tp_status`` first); a received frame
starts at its header's ``tp_mac``, a frame to send at ``TX_DATA[version]``.

- ``v2`` (TPACKET_V2, the default): a slot per frame. The kernel marks a slot
  ``TP_STATUS_USER`` and wakes a sleeping agent the moment a frame is in it; the agent hands
  each slot back (``TP_STATUS_KERNEL``) as soon as the frame is handled. A frame too long for
  a slot is also queued whole on the socket (``PACKET_COPY_THRESH``; its slot says
  ``TP_STATUS_COPY``) and read from there with ``recv``.
- ``v3`` (TPACKET_V3): blocks of frames packed back to back, handed to the agent a block at a
  time -- when a block is full or its timer (``RX_BLOCK_TIMEOUT_MS``, in jiffies: 4 ms at HZ 250)
  runs out. That suits capture, not a transport: the last frame of every burst (the SACK a
  sender waits for, the DATA that ends a window) waits for the timer. docs/agent.md ("Packet
  rings") has the numbers; ``--ring v3`` is there to measure it. A frame longer than a block
  is cut to it by the kernel (no copy-threshold in v3) and counted (``truncated``).

Sending. ``send`` writes the frame into the next slot and marks it ``TP_STATUS_SEND_REQUEST``;
``flush`` (one ``send`` call) asks the kernel to transmit every requested slot. A slot stays
the kernel's (``TP_STATUS_SENDING``) until the last reference to its frame is gone, which is
when the port's own qdisc has released it (on a shaped host link, its HTB), not when the frame
has crossed the fabric: so it is no departure signal for the core (``pacer.py`` is), and a ring
behind a slow link can fill up. Then frames wait, in order, in a bounded backlog
(``TX_BACKLOG``) and move into the ring as slots come free (``drain``; the agent asks for the
socket's writability meanwhile); only beyond it is a frame dropped and counted, as a full
socket buffer's was. ``PACKET_LOSS`` is set so a slot the kernel cannot send is marked
``TP_STATUS_WRONG_FORMAT`` (counted) instead of stopping the ring. The queueing discipline is
not bypassed: a port's qdisc (a shaped host link) and its tc hooks see every frame, as they
would from a socket.

The agent reads the status words through a 32-bit view of the mapping: Python's loads and
stores are not reordered on x86-64 (total store order), which is what the kernel's own
barriers pair with; a frame torn anyway would fail its ICRC and be counted, never placed.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import socket
import struct
from collections import deque
from collections.abc import Callable
from typing import Any, Final

SOL_PACKET: Final = 263
PACKET_RX_RING: Final = 5
PACKET_STATISTICS: Final = 6
PACKET_COPY_THRESH: Final = 7
PACKET_VERSION: Final = 10
PACKET_TX_RING: Final = 13
PACKET_LOSS: Final = 14
TPACKET_V2: Final = 1
TPACKET_V3: Final = 2
VERSIONS: Final = {"v2": TPACKET_V2, "v3": TPACKET_V3}

TP_STATUS_KERNEL: Final = 0
TP_STATUS_USER: Final = 1
TP_STATUS_COPY: Final = 2
TP_STATUS_AVAILABLE: Final = 0
TP_STATUS_SEND_REQUEST: Final = 1
TP_STATUS_WRONG_FORMAT: Final = 4

TPACKET_ALIGNMENT: Final = 16
PAGE: Final = mmap.PAGESIZE
SOCKADDR_LL: Final = 20
HDR: Final = {TPACKET_V2: 32, TPACKET_V3: 48}  # TPACKET_ALIGN(sizeof(tpacket{2,3}_hdr))
TX_DATA: Final = HDR  # a frame to send starts right after the header (tp_hdrlen - sockaddr_ll)
TX_STATUS: Final = {TPACKET_V2: 0, TPACKET_V3: 20}  # tp_status's offset in a slot's header
# where a received Ethernet frame starts in its slot (SOCK_RAW, tp_reserve 0): the kernel puts
# the network header at TPACKET_ALIGN(tp_hdrlen + 16) and the 14-byte MAC header before it
RX_MAC: Final = {v: ((h + SOCKADDR_LL + 16 + 15) & ~15) - 14 for v, h in HDR.items()}
V3_BLOCK_HDR: Final = 48  # tpacket_block_desc, aligned to 8

RX_RING_BYTES: Final = (
    4 << 20
)  # per port: ~900 frames of the fabric's MTU (the socket buffer was 8 MiB of skbs)
TX_RING_BYTES: Final = 2 << 20  # per port: ~450 frames in flight before frames wait in the backlog
TX_BACKLOG: Final = 4096  # frames waiting for a free slot; past this a frame is dropped (tx_errors)
FLUSH_EVERY: Final = 32  # a send() once this many slots are requested (and at every loop turn)
RX_BLOCK_TIMEOUT_MS: Final = 1  # v3: the kernel hands a partly filled block over after this
MAX_BLOCK: Final = 1 << 22  # the largest block asked for (physically contiguous pages)

_REQ2: Final = struct.Struct("4I")  # tpacket_req: block size, blocks, frame size, frames
_REQ3: Final = struct.Struct("7I")  # tpacket_req3: ... + retire timeout, priv size, features
_INT: Final = struct.Struct("i")
_EMPTY: Final = mmap.mmap(-1, PAGE)  # what a closed port's mapping attribute holds


def _align(n: int, to: int) -> int:
    return (n + to - 1) // to * to


class RingGeometry:
    """Block and slot sizes for frames of up to ``max_frame`` bytes (Ethernet header included)."""

    def __init__(self, version: int, max_frame: int, rx_bytes: int = RX_RING_BYTES,
                 tx_bytes: int = TX_RING_BYTES) -> None:  # fmt: skip
        self.version = version
        self.max_frame = max_frame
        # a slot holds the header, then the frame; a block whole slots (or, v3, one frame at least)
        self.rx_slot = _align(RX_MAC[version] + max_frame, TPACKET_ALIGNMENT)
        self.tx_slot = _align(TX_DATA[version] + max_frame, TPACKET_ALIGNMENT)
        if version == TPACKET_V3:
            need = V3_BLOCK_HDR + self.rx_slot
            self.rx_block = max(1 << 16, 1 << (need - 1).bit_length())
        else:
            self.rx_block = _block_for(self.rx_slot)
        self.tx_block = _block_for(self.tx_slot)
        if self.rx_block > MAX_BLOCK or self.tx_block > MAX_BLOCK:
            raise ValueError(f"frames of {max_frame} B need blocks over {MAX_BLOCK} B")
        self.rx_blocks = max(2, rx_bytes // self.rx_block)
        self.tx_blocks = max(1, tx_bytes // self.tx_block)
        self.rx_per_block = self.rx_block // self.rx_slot
        self.tx_per_block = self.tx_block // self.tx_slot
        self.rx_frames = self.rx_blocks * self.rx_per_block  # (v3: slots counted, not enforced)
        self.tx_frames = self.tx_blocks * self.tx_per_block
        self.rx_bytes = self.rx_block * self.rx_blocks
        self.tx_bytes = self.tx_block * self.tx_blocks

    def rx_request(self) -> bytes:
        if self.version == TPACKET_V3:
            return _REQ3.pack(
                self.rx_block, self.rx_blocks, self.rx_slot, self.rx_frames, RX_BLOCK_TIMEOUT_MS, 0, 0
            )
        return _REQ2.pack(self.rx_block, self.rx_blocks, self.rx_slot, self.rx_frames)

    def tx_request(self) -> bytes:
        if self.version == TPACKET_V3:  # (a v3 TX ring is slot-based: the v3 fields stay 0)
            return _REQ3.pack(self.tx_block, self.tx_blocks, self.tx_slot, self.tx_frames, 0, 0, 0)
        return _REQ2.pack(self.tx_block, self.tx_blocks, self.tx_slot, self.tx_frames)


def _block_for(slot: int) -> int:
    """The smallest power-of-two block of pages that holds 8 slots (a few pages at most)."""
    block = PAGE
    while block < 8 * slot:
        block *= 2
    return block


class PortIO:
    """One port's frames in and out; ``SocketPort`` and ``RingPort`` are the two kinds."""

    kind = "none"
    sock: Any  # the port's packet socket (``netio.socket_drops`` reads its statistics)
    view: memoryview  # where ``reserve`` offsets point (a ring's mapping)
    tx_room: int  # the longest frame a slot takes (0: no slots)

    def fileno(self) -> int:
        raise NotImplementedError

    def read_one(self, on_frame: Callable[[Any, int], None], plane: int) -> int:
        """Hand the next received frame to ``on_frame(frame, plane)``: its length, -1 if none
        is waiting. The frame (bytes or a view of the ring) is valid during the call only."""
        frames: list[Any] = []
        n = self.take(frames)
        if n < 0:
            return -1
        try:
            if frames:
                on_frame(frames[0], plane)
        finally:
            self.release()
        return n

    def take(self, frames: list[Any]) -> int:
        """Append the next received frame to ``frames``: its length; 0 if a frame was due but
        could not be read (nothing appended); -1 if none is waiting. A frame that is a view of
        the ring stays valid, its slot the agent's, until ``release`` (so a batch of frames can
        be handled together, then handed back at once)."""
        raise NotImplementedError

    def release(self) -> None:
        """Hand every slot ``take`` read back to the kernel (a socket has none)."""

    def send(self, frame: bytes) -> int:
        """Queue ``frame`` to go out: 1 sent or queued, 0 dropped (counted by the port)."""
        raise NotImplementedError

    def reserve(self) -> int:
        """Where in ``view`` the next frame may be written in place (``commit`` then sends it),
        -1 where there is no such place (a socket, a full ring, frames waiting)."""
        return -1

    def commit(self, n: int) -> None:
        """The frame of ``n`` bytes written at the last ``reserve``'s offset goes out."""
        raise NotImplementedError

    def flush(self) -> None:
        """Have the kernel transmit what ``send`` queued (rings; a socket sends at once)."""

    def backlog(self) -> int:
        """Frames waiting for room in the ring (the caller polls for writability meanwhile)."""
        return 0

    def describe(self) -> dict[str, Any]:
        return {"io": self.kind}

    def close(self) -> None:
        raise NotImplementedError


class RingPort(PortIO):
    """A port's socket with a receive ring and a transmit ring (``open_ring_port`` makes one)."""

    kind = "ring"

    def __init__(self, sock: socket.socket, geo: RingGeometry) -> None:
        self.sock = sock
        self.geo = geo
        self.v3 = geo.version == TPACKET_V3
        self.map = mmap.mmap(sock.fileno(), geo.rx_bytes + geo.tx_bytes, mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)  # fmt: skip
        self.view = memoryview(self.map)
        self.words = self.view.cast("I")  # the headers' 32-bit fields, by byte offset // 4
        self._send = sock.send
        self._recv = sock.recv
        # every slot's byte offset in the mapping (a slot never spans two blocks)
        self.rx_slots = [b * geo.rx_block + i * geo.rx_slot for b in range(geo.rx_blocks)
                         for i in range(geo.rx_per_block)]  # fmt: skip
        self.tx_slots = [geo.rx_bytes + b * geo.tx_block + i * geo.tx_slot for b in range(geo.tx_blocks)
                         for i in range(geo.tx_per_block)]  # fmt: skip
        # receive side: v2, the next slot; v3, the block being read and the next frame in it
        self.rx_head = 0
        self.block = 0
        self.block_left = 0  # frames of the current block not read yet (v3)
        self.block_next = 0  # byte offset of the next frame in it
        self.rx_held = 0  # frames taken and not released yet (v2: the slots before rx_head)
        self.blocks_read: list[int] = []  # v3: blocks whose every frame was taken, not released yet
        # transmit side
        self.tx_status = TX_STATUS[geo.version]
        self.tx_data = TX_DATA[geo.version]
        self.tx_room = geo.tx_slot - self.tx_data  # the longest frame a slot takes
        self.tx_head = 0
        self.requested = 0  # slots marked SEND_REQUEST since the last flush
        self.waiting: deque[bytes] = deque()
        self.tx_drops = 0  # frames dropped: the backlog was full
        self.tx_refused = 0  # slots the kernel marked WRONG_FORMAT
        self.oversized = 0  # frames longer than a slot (never sent)
        self.rx_copied = 0  # frames longer than a slot, read whole with recv (v2)
        self.rx_truncated = 0  # frames longer than a block, cut by the kernel (v3)
        self.flushes = 0

    def fileno(self) -> int:
        fd: int = self.sock.fileno()
        return fd

    # ---- receive ------------------------------------------------------------------------
    def take(self, frames: list[Any]) -> int:
        if self.v3:
            return self._take_v3(frames)
        head = self.rx_head
        off = self.rx_slots[head]
        words = self.words
        status = words[off >> 2]
        if not status & TP_STATUS_USER or self.rx_held >= len(self.rx_slots):
            return -1
        self.rx_head = head + 1 if head + 1 < len(self.rx_slots) else 0
        self.rx_held += 1
        if status & TP_STATUS_COPY:  # too long for the slot: whole on the socket's queue
            self.rx_copied += 1
            try:
                frame: bytes = self._recv(65536, socket.MSG_DONTWAIT)
            except OSError:
                return 0
            frames.append(frame)
            return len(frame)
        snaplen = words[(off + 8) >> 2]
        mac = words[(off + 12) >> 2] & 0xFFFF
        frames.append(self.view[off + mac : off + mac + snaplen])
        return snaplen

    def release(self) -> None:
        held = self.rx_held
        if not held:
            if self.v3:
                self._release_blocks()
            return
        self.rx_held = 0
        if self.v3:
            self._release_blocks()
            return
        words, slots = self.words, self.rx_slots
        i = self.rx_head - held
        if i < 0:
            i += len(slots)
        for _ in range(held):
            words[slots[i] >> 2] = TP_STATUS_KERNEL
            i = i + 1 if i + 1 < len(slots) else 0

    def _take_v3(self, frames: list[Any]) -> int:
        geo = self.geo
        words = self.words
        base = self.block * geo.rx_block
        if not self.block_left:
            if not words[(base + 8) >> 2] & TP_STATUS_USER:  # block_status
                return -1
            read = self.blocks_read
            if read and read[0] == self.block:  # round the ring to a block not released yet
                return -1
            self.block_left = words[(base + 12) >> 2]  # num_pkts
            self.block_next = base + words[(base + 16) >> 2]  # offset_to_first_pkt
            if not self.block_left:
                self._block_read()
                self._release_blocks()
                return -1
        off = self.block_next
        nxt = words[off >> 2]
        snaplen = words[(off + 12) >> 2]
        length = words[(off + 16) >> 2]
        mac = words[(off + 24) >> 2] & 0xFFFF
        self.block_next = off + nxt
        self.block_left -= 1
        self.rx_held += 1
        if snaplen < length:
            self.rx_truncated += 1
        frames.append(self.view[off + mac : off + mac + snaplen])
        if not self.block_left:
            self._block_read()
        return snaplen

    def _block_read(self) -> None:
        """Every frame of the current block was taken: on to the next; this one goes back to
        the kernel at the next ``release``."""
        self.blocks_read.append(self.block)
        self.block = self.block + 1 if self.block + 1 < self.geo.rx_blocks else 0

    def _release_blocks(self) -> None:
        words, size = self.words, self.geo.rx_block
        for b in self.blocks_read:
            words[(b * size + 8) >> 2] = TP_STATUS_KERNEL  # block_status
        self.blocks_read.clear()

    # ---- transmit -----------------------------------------------------------------------
    def send(self, frame: bytes) -> int:
        if len(frame) > self.tx_room:
            self.oversized += 1
            return 0
        if not self.waiting and self._put(frame):
            return 1
        # the ring is full: frames wait in order; the slots handed over so far go out now
        if len(self.waiting) >= TX_BACKLOG:
            self.tx_drops += 1
            return 0
        self.waiting.append(frame)
        self.flush()
        return 1

    def _put(self, frame: bytes) -> bool:
        """Write ``frame`` into the next slot if the kernel has given it back."""
        at = self._free()
        if at < 0:
            return False
        n = len(frame)
        self.map[at : at + n] = frame
        self.commit(n)
        return True

    def _free(self) -> int:
        """The data offset of the next slot if the kernel has given it back, else -1."""
        off = self.tx_slots[self.tx_head]
        status = self.words[(off + self.tx_status) >> 2]
        if status != TP_STATUS_AVAILABLE and status != TP_STATUS_WRONG_FORMAT:
            return -1
        return off + self.tx_data

    def reserve(self) -> int:
        return -1 if self.waiting else self._free()

    def commit(self, n: int) -> None:
        off = self.tx_slots[self.tx_head]
        words = self.words
        at = (off + self.tx_status) >> 2
        if words[at] == TP_STATUS_WRONG_FORMAT:
            self.tx_refused += 1  # the kernel could not send the frame this slot held
        if self.v3:  # tpacket3_hdr: next_offset 0 (fixed slots), snaplen, len
            words[(off + 12) >> 2] = n
            words[(off + 16) >> 2] = n
        else:  # tpacket2_hdr: len, snaplen
            words[(off + 4) >> 2] = n
            words[(off + 8) >> 2] = n
        words[at] = TP_STATUS_SEND_REQUEST
        self.tx_head = self.tx_head + 1 if self.tx_head + 1 < len(self.tx_slots) else 0
        self.requested += 1
        if self.requested >= FLUSH_EVERY:
            self._kick()

    def _kick(self) -> bool:
        """One send(): the kernel transmits every requested slot. False if the socket's send
        buffer was full (the slots stay requested for the next call)."""
        try:
            self._send(b"", socket.MSG_DONTWAIT)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ENOBUFS):
                raise
            return False
        self.flushes += 1
        self.requested = 0
        return True

    def flush(self) -> None:
        """Transmit the requested slots; move waiting frames into slots that came free (on a
        veth the kernel often frees them within the same call), and transmit those too."""
        while True:
            if self.requested and not self._kick():
                return
            waiting = self.waiting
            moved = False
            while waiting and self.requested < FLUSH_EVERY and self._put(waiting[0]):
                waiting.popleft()
                moved = True
            if not moved:
                return

    def backlog(self) -> int:
        return len(self.waiting)

    def describe(self) -> dict[str, Any]:
        geo = self.geo
        return {
            "io": f"ring {'TPACKET_V3' if self.v3 else 'TPACKET_V2'}",
            "rx_ring": f"{geo.rx_frames} x {geo.rx_slot} B"
            if not self.v3
            else f"{geo.rx_blocks} x {geo.rx_block} B blocks",
            "tx_ring": f"{geo.tx_frames} x {geo.tx_slot} B",
            "tx_backlog": len(self.waiting),
            "tx_backlog_drops": self.tx_drops,
            "tx_refused": self.tx_refused,
            "tx_oversized": self.oversized,
            "rx_copied": self.rx_copied,
            "rx_truncated": self.rx_truncated,
            "tx_flushes": self.flushes,
        }

    def close(self) -> None:
        """Hand the requested slots to the kernel once more, then let go of the rings. Frames
        still in the backlog are dropped with the agent; the kernel sends the ones it has."""
        with contextlib.suppress(OSError):
            self.waiting.clear()
            self.flush()
        self.words.release()
        try:
            self.view.release()
            self.map.close()
        except BufferError:
            # a received frame's view is still held somewhere (a core keeps the last DATA it
            # will acknowledge): the mapping, and the descriptor mmap keeps of the socket, go
            # when that view does
            self.view = memoryview(b"")
            self.map = _EMPTY
        self.sock.close()


class SocketPort(PortIO):
    """A port's plain raw socket: a system call per frame each way (where rings are not
    available, or ``--ring off``)."""

    kind = "socket"

    def __init__(self, sock: Any, why: str = "") -> None:
        self.sock = sock
        self.why = why  # why not a ring
        self.view = memoryview(b"")
        self.tx_room = 0
        self._send = sock.send
        self._recv = sock.recv

    def fileno(self) -> int:
        fd: int = self.sock.fileno()
        return fd

    def take(self, frames: list[Any]) -> int:
        try:
            frame: bytes = self._recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return -1
        frames.append(frame)
        return len(frame)

    def send(self, frame: bytes) -> int:
        self._send(frame)
        return 1

    def describe(self) -> dict[str, Any]:
        return {"io": "socket", "why": self.why} if self.why else {"io": "socket"}

    def close(self) -> None:
        self.sock.close()


def setup_rings(sock: socket.socket, geo: RingGeometry) -> None:
    """Ask the kernel for ``geo``'s rings on ``sock`` (before it is bound); OSError if it refuses."""
    sock.setsockopt(SOL_PACKET, PACKET_VERSION, _INT.pack(geo.version))
    sock.setsockopt(SOL_PACKET, PACKET_LOSS, _INT.pack(1))
    if geo.version != TPACKET_V3:
        sock.setsockopt(SOL_PACKET, PACKET_COPY_THRESH, _INT.pack(1))
    sock.setsockopt(SOL_PACKET, PACKET_RX_RING, geo.rx_request())
    sock.setsockopt(SOL_PACKET, PACKET_TX_RING, geo.tx_request())
