"""Transfer bookkeeping: the ``mrc send`` requests in progress, their clocks and their history.

The agent's event loop starts a transfer here, feeds it completions and receipts through
the connections, and once per tick asks which transfers are past their deadline, whose
peer stopped answering, and who is due a progress line. Nothing here touches a socket or
reads the clock: ``now_ns`` comes in, decisions come out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from .connection import Received, SendConnection, Transfer
from .control import ControlClient

HISTORY = 50
PROGRESS_EVERY_NS = 200_000_000
RECEIPT_TIMEOUT_NS = 10_000_000_000


@dataclass
class ActiveTransfer:
    conn: SendConnection
    transfer: Transfer
    client: ControlClient | None
    progress: bool
    last_progress_ns: int = 0
    deadline_ns: int = 0  # the transfer ends with an error if not done by then
    seen_acked: int = -1  # bytes_acked when last seen to change ...
    seen_acked_ns: int = 0  # ... and when


@dataclass(frozen=True, slots=True)
class Expiry:
    """A transfer to end now with ``error``; ``peer_dead``: drop its connection too."""

    transfer_id: int
    error: str
    peer_dead: bool = False


class TransferBook:
    def __init__(self) -> None:
        self.active: dict[int, ActiveTransfer] = {}  # transfer id -> transfer in progress
        self.sent: deque[dict[str, Any]] = deque(maxlen=HISTORY)
        self.received: deque[Received] = deque(maxlen=HISTORY)

    def start(
        self,
        conn: SendConnection,
        t: Transfer,
        client: ControlClient | None,
        progress: bool,
        deadline_s: float,
        now_ns: int,
    ) -> ActiveTransfer:
        at = ActiveTransfer(conn, t, client, progress, now_ns, now_ns + int(deadline_s * 1e9), 0, now_ns)
        self.active[t.transfer_id] = at
        conn.start(t)
        return at

    def finish(self, tid: int, now_ns: int) -> tuple[ActiveTransfer, dict[str, Any]] | None:
        """End a transfer: its summary goes to the history; None if it already ended."""
        at = self.active.pop(tid, None)
        if at is None:
            return None
        t = at.transfer
        t.finished_ns = now_ns
        summary = at.conn.summary(t)
        self.sent.append(summary)
        return at, summary

    def on_receipt(self, peer: str, tid: int, ok: bool, received: int, crc: int) -> bool | None:
        """The receiver's verdict on transfer ``tid``: None if no such transfer to ``peer`` is
        active (a stray receipt), else whether the transfer is now done."""
        at = self.active.get(tid)
        if at is None or at.conn.peer.name != peer:
            return None
        t = at.transfer
        good = ok and f"{crc:08x}" == t.crc32 and received == t.size
        t.receipt = {"ok": good, "bytes": received, "crc32": f"{crc:08x}"}
        return t.all_acked

    def forget_client(self, c: ControlClient) -> None:
        for at in self.active.values():
            if at.client is c:
                at.client = None

    def expired(self, now_ns: int, peer_timeout_s: float) -> list[Expiry]:
        """Transfers to end now: receipt never came, deadline passed, or the peer went silent."""
        out = []
        for tid, at in self.active.items():
            t = at.transfer
            if t.all_acked and t.receipt is None and now_ns - t.acked_ns > RECEIPT_TIMEOUT_NS:
                out.append(Expiry(tid, t.error or "no receipt from the receiver"))
            elif now_ns >= at.deadline_ns:
                out.append(
                    Expiry(
                        tid,
                        f"deadline: not done after {(now_ns - t.started_ns) / 1e9:.1f} s "
                        f"({t.bytes_acked} of {t.size} bytes acknowledged)",
                    )
                )
            elif t.bytes_acked != at.seen_acked or t.all_acked or not at.conn.established:
                at.seen_acked, at.seen_acked_ns = t.bytes_acked, now_ns
            elif now_ns - at.seen_acked_ns >= peer_timeout_s * 1e9:
                error = (
                    f"peer {at.conn.peer.name} stopped answering: nothing acknowledged for "
                    f"{peer_timeout_s:g} s ({t.bytes_acked} of {t.size} bytes acknowledged)"
                )
                out.append(Expiry(tid, error, peer_dead=True))
        return out

    def progress_due(self, now_ns: int) -> list[tuple[ActiveTransfer, dict[str, Any]]]:
        """(transfer, progress line) for every client that asked for progress and is due one."""
        out = []
        for tid, at in self.active.items():
            if not at.progress or at.client is None or now_ns - at.last_progress_ns < PROGRESS_EVERY_NS:
                continue
            at.last_progress_ns = now_ns
            t = at.transfer
            c = at.conn.endpoint.counters
            line = {
                "event": "progress",
                "transfer_id": f"{tid:016x}",
                "bytes": t.size,
                "bytes_acked": t.bytes_acked,
                # payload the peer acknowledged, SACKed out of order included: the fabric's
                # delivery rate, while bytes_acked only moves with the cumulative ACK
                "bytes_delivered": c.data_bytes_delivered - t.base_counters.get("data_bytes_delivered", 0),
                "elapsed_s": round((now_ns - t.started_ns) / 1e9, 3),
                "retransmissions": c.retransmissions - t.base_counters.get("retransmissions", 0),
                "evs_retired": c.ev_retired - t.base_counters.get("ev_retired", 0),
            }
            out.append((at, line))
        return out

    def describe(self, now_ns: int) -> dict[str, Any]:
        return {
            "active": [at.conn.summary(at.transfer, now_ns) | {"done": False} for at in self.active.values()],
            "sent": list(self.sent),
            "received": [r.to_dict() for r in self.received],
        }
