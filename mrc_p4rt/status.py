"""The one error type for a failed P4Runtime call, and the decoding of a failed Write.

A Write whose updates fail answers UNKNOWN and carries one ``p4.v1.Error`` per update
(OK for those that went through) packed in a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer (P4Runtime spec §12.3). finsy's
:class:`~finsy.p4client.P4RpcStatus` decodes that trailer; finsy's own
``P4ClientError`` only wraps asyncio calls, so the synchronous clients here (the
controller's sessions, the Linux target's test client) share :class:`P4RuntimeCallError`
instead, built on the same decoder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import grpc
from finsy.p4client import P4RpcStatus
from finsy.proto import p4r, rpc_status

STATUS_DETAILS_KEY = "grpc-status-details-bin"


def _trailer(exc: grpc.RpcError) -> bytes | None:
    trailing = getattr(exc, "trailing_metadata", None)
    for key, value in (trailing() if trailing else None) or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            return value
    return None


def rpc_status_of(exc: grpc.RpcError) -> P4RpcStatus:
    """The call's status: the rich one from the trailer when the server sent it."""
    data = _trailer(exc)
    if data is not None:
        return P4RpcStatus.from_bytes(data)
    return P4RpcStatus.from_status(rpc_status.Status(code=_code(exc).value[0], message=_message(exc)))


def update_statuses(exc: grpc.RpcError) -> list[p4r.Error]:
    """Every update's ``p4.v1.Error`` of a failed Write, in update order, OK ones included."""
    data = _trailer(exc)
    if data is None:
        return []
    out = []
    for detail in rpc_status.Status.FromString(data).details:
        err = p4r.Error()
        detail.Unpack(err)
        out.append(err)
    return out


def _code(exc: grpc.RpcError) -> grpc.StatusCode:
    code = exc.code() if hasattr(exc, "code") else None
    return code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN


def _message(exc: grpc.RpcError) -> str:
    details = exc.details() if hasattr(exc, "details") else None
    return details if isinstance(details, str) else ""


_CODES = {c.value[0]: c for c in grpc.StatusCode}


@dataclass(frozen=True)
class UpdateFailure:
    """One failed update of a Write: its position in the request, code and message."""

    index: int
    code: grpc.StatusCode
    message: str


class P4RuntimeCallError(Exception):
    """A P4Runtime call to ``target`` failed; the message starts with the target's name.

    ``code`` is the gRPC status (None when the failure is not a gRPC status, e.g. a
    stream that closed); ``failures`` are the failed updates of a Write.
    """

    def __init__(
        self,
        target: str,
        message: str,
        code: grpc.StatusCode | None = None,
        failures: list[UpdateFailure] | None = None,
        covered: int | None = None,
    ) -> None:
        super().__init__(f"{target}: {message}")
        self.target = target
        self.code = code
        self.failures = failures or []
        # how many updates (the first ones) the per-update details cover; None: no details. A
        # switch may stop them short to fit gRPC's trailer limit: the rest went through or not.
        self.covered = covered

    @classmethod
    def from_rpc_error(cls, target: str, operation: str, exc: grpc.RpcError, **extra: Any) -> Self:
        """``operation`` (``write``, ``read of counter x``...) failed with ``exc``."""
        status = rpc_status_of(exc)
        code = _code(exc)
        failures = [
            UpdateFailure(i, _CODES.get(int(err.canonical_code), grpc.StatusCode.UNKNOWN), err.message)
            for i, err in sorted(status.details.items())
        ]
        data = _trailer(exc)
        covered = len(rpc_status.Status.FromString(data).details) if data is not None else None
        return cls(
            target,
            f"{operation} failed: {code.name}: {_message(exc)}",
            code,
            failures=failures,
            covered=covered,
            **extra,
        )
