"""The receiving end of transfers: each chunk checked as the ring delivers it, a record when a
transfer ends (verified, or cancelled by its sender), the receipt that goes back.

``Inbound`` keeps one ``payload.Verifier`` per transfer in progress on each receiving
connection; a CANCEL chunk from the sender ends one, and the number kept per connection is
bounded (a sender that vanishes mid-transfer leaves nothing behind for long).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Final

from .connection import RecvConnection
from .payload import ChunkFlag, ChunkHeader, ChunkKind, Verifier

HISTORY: Final = 50
MAX_VERIFIERS: Final = 256  # transfers in progress kept per receiving connection (oldest out first)


@dataclass
class Received:
    """A transfer the receive ring delivered (what ``mrc stats`` lists under transfers.received)."""

    peer: str
    transfer_id: int
    size: int
    received: int
    chunks: int
    mismatched_chunks: int
    out_of_order: int
    crc32: str
    ok: bool
    cancelled: bool = False  # its sender gave it up (deadline, cancel, its client went away)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)  # (a compiled class has no __dict__)
        d["transfer_id"] = f"{self.transfer_id:016x}"
        return d

    def receipt(self) -> bytes:
        """The RECEIPT chunk that tells the sender the verdict (header only)."""
        flags = ChunkFlag.OK if self.ok else ChunkFlag.NONE
        crc = int(self.crc32, 16)
        return ChunkHeader(ChunkKind.RECEIPT, flags, self.transfer_id, 0, 0, self.received, 0, crc).pack()


class Inbound:
    def __init__(self) -> None:
        # (local QP, handshake nonce, transfer id) -> its running check
        self.verifiers: dict[tuple[int, int, int], Verifier] = {}
        self.received: deque[Received] = deque(maxlen=HISTORY)

    def _key(self, conn: RecvConnection, tid: int) -> tuple[int, int, int]:
        return (conn.qp.value, conn.nonce, tid)

    def on_data(self, conn: RecvConnection, hdr: ChunkHeader, data: memoryview) -> Received | None:
        """Check a DATA chunk; the transfer's record after its last chunk (then a receipt is due)."""
        key = self._key(conn, hdr.transfer_id)
        v = self.verifiers.get(key)
        if v is None:
            if sum(1 for k in self.verifiers if k[0] == key[0]) >= MAX_VERIFIERS:
                oldest = next(k for k in self.verifiers if k[0] == key[0])
                del self.verifiers[oldest]
            v = self.verifiers[key] = Verifier(hdr)
        if not v.add(hdr, data):
            return None
        del self.verifiers[key]
        rec = self._record(conn, v)
        self.received.append(rec)
        return rec

    def cancel(self, conn: RecvConnection, tid: int) -> Received | None:
        """The sender gave transfer ``tid`` up: its check ends, recorded as cancelled."""
        v = self.verifiers.pop(self._key(conn, tid), None)
        if v is None:
            return None
        rec = self._record(conn, v)
        rec.ok, rec.cancelled = False, True
        self.received.append(rec)
        return rec

    def _record(self, conn: RecvConnection, v: Verifier) -> Received:
        return Received(
            conn.peer.name, v.transfer_id, v.total, v.received, v.chunks, v.mismatched_chunks,
            v.out_of_order, v.crc32, v.ok,
        )  # fmt: skip

    def in_progress(self) -> int:
        return len(self.verifiers)
