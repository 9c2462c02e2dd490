"""Client arbitration for the P4Runtime StreamChannel (P4Runtime spec §5).

Every open stream may carry an election id; the stream with the highest one
is the primary and the only client allowed to write. Whenever the primary
changes (a higher id arrives, or the primary's stream closes) every client is
told with a MasterArbitrationUpdate: OK for the primary, ALREADY_EXISTS for
backups. Only the default role is supported.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field

import grpc
from finsy.proto import p4r, rpc_code, rpc_status

from .errors import P4RuntimeError

_ids = itertools.count(1)


def election_value(uint128: p4r.Uint128) -> int:
    return int((uint128.high << 64) | uint128.low)


@dataclass(eq=False)
class ClientStream:
    """One StreamChannel: its election id and the queue its responses wait in."""

    outbox: queue.Queue[object] = field(default_factory=queue.Queue)
    election_id: int | None = None
    arbitrated: bool = False  # has sent a MasterArbitrationUpdate (only then is it told of changes)
    ident: int = field(default_factory=lambda: next(_ids))


class Arbitration:
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._lock = threading.Lock()
        self._streams: list[ClientStream] = []
        self._primary: ClientStream | None = None

    def primary_election_id(self) -> int | None:
        with self._lock:
            return self._primary.election_id if self._primary else None

    def _elect(self) -> ClientStream | None:
        candidates = [s for s in self._streams if s.election_id is not None]
        return max(candidates, key=lambda s: s.election_id) if candidates else None  # type: ignore[arg-type,return-value]

    def _update_for(self, stream: ClientStream) -> p4r.StreamMessageResponse:
        msg = p4r.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.device_id
        if self._primary is not None and self._primary.election_id is not None:
            eid = self._primary.election_id
            arb.election_id.high, arb.election_id.low = eid >> 64, eid & ((1 << 64) - 1)
        if stream is self._primary:
            arb.status.CopyFrom(rpc_status.Status(code=rpc_code.OK, message="you are the primary"))
        else:
            arb.status.CopyFrom(rpc_status.Status(code=rpc_code.ALREADY_EXISTS, message="you are a backup"))
        return msg

    def _reelect(self, always_tell: ClientStream | None) -> None:
        new = self._elect()
        changed = new is not self._primary
        self._primary = new
        for s in self._streams:
            if (changed and s.arbitrated) or s is always_tell:
                s.outbox.put(self._update_for(s))

    def open(self, stream: ClientStream) -> None:
        with self._lock:
            self._streams.append(stream)

    def request(self, stream: ClientStream, update: p4r.MasterArbitrationUpdate) -> None:
        """Handle a MasterArbitrationUpdate from a client; raises to end its stream."""
        if update.device_id != self.device_id:
            raise P4RuntimeError(
                grpc.StatusCode.NOT_FOUND,
                f"device_id: {update.device_id} is not this switch (device_id {self.device_id})",
            )
        if update.HasField("role") and update.role.name:
            raise P4RuntimeError(
                grpc.StatusCode.UNIMPLEMENTED,
                f"role: only the default role is supported, not {update.role.name!r}",
            )
        eid = election_value(update.election_id) if update.HasField("election_id") else None
        with self._lock:
            if eid is not None and any(s.election_id == eid for s in self._streams if s is not stream):
                raise P4RuntimeError(
                    grpc.StatusCode.INVALID_ARGUMENT, f"election_id: {eid} is already used by another client"
                )
            stream.election_id = eid
            stream.arbitrated = True
            self._reelect(always_tell=stream)

    def close(self, stream: ClientStream) -> None:
        with self._lock:
            if stream in self._streams:
                self._streams.remove(stream)
                self._reelect(always_tell=None)

    def check_primary(self, election_id: p4r.Uint128, has_id: bool) -> None:
        """Writes and pipeline changes: only the primary, named by its election id."""
        with self._lock:
            primary = self._primary
            if primary is None:
                raise P4RuntimeError(
                    grpc.StatusCode.PERMISSION_DENIED,
                    "election_id: no primary client: open a StreamChannel and arbitrate first",
                )
            if not has_id or election_value(election_id) != primary.election_id:
                raise P4RuntimeError(
                    grpc.StatusCode.PERMISSION_DENIED, "election_id: this client is not the primary"
                )
