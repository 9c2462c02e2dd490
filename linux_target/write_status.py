"""The status a Write with failed updates ends with, sized so that it reaches the client.

P4Runtime §12.3: the top-level code is UNKNOWN and the ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer holds one ``p4.v1.Error`` per update, in update order (OK
for those that went through). That list grows with the batch: past about 100 failures it
outgrows what a gRPC client accepts in trailing metadata (8 KiB soft, 16 KiB hard limit),
and the client gets RESOURCE_EXHAUSTED "Stream removed" instead -- not knowing which updates
went through. So the details stop at a byte budget: they cover the first
updates in order, as many as fit, and the top-level message (which every client sees) says
how many failed, which (as index ranges), the first failures, and how far the details go.
"""

from __future__ import annotations

from finsy.proto import p4r, rpc_code, rpc_status
from google.protobuf import any_pb2

from .errors import P4RuntimeError

TRAILER_BUDGET = 6144  # bytes of trailing metadata for the status: under gRPC's 8 KiB soft limit
MESSAGE_CHARS = 160  # of one update's error message, in the details and the top-level message
RANGES_SHOWN = 20  # failed-update index ranges named in the top-level message
FIRST_SHOWN = 3  # failures quoted in the top-level message
TRUNCATED = "; the per-update details cover {covered} (the rest would pass gRPC's metadata limit)"


def index_ranges(indices: list[int], shown: int = RANGES_SHOWN) -> str:
    """``0-3, 7, 9-4095`` for sorted indices, at most ``shown`` ranges (then ``... (N more)``)."""
    ranges: list[tuple[int, int]] = []
    for i in indices:
        if ranges and ranges[-1][1] == i - 1:
            ranges[-1] = (ranges[-1][0], i)
        else:
            ranges.append((i, i))
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:shown])
    return text + (f", ... ({len(ranges) - shown} more ranges)" if len(ranges) > shown else "")


def _clip(text: str) -> str:
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."


def _packed(err: P4RuntimeError | None) -> any_pb2.Any:
    detail = p4r.Error(canonical_code=rpc_code.OK)
    if err is not None:
        detail = p4r.Error(canonical_code=int(err.code.value[0]), message=_clip(err.message), space="mrc")
    packed = any_pb2.Any()
    packed.Pack(detail)
    return packed


def _wire_len(text: str) -> int:
    """Bytes of ``text`` in the grpc-message trailer (percent-encoded outside printable ASCII)."""
    return sum(1 if 0x20 <= b < 0x7F else 3 for b in text.encode())


def failure_summary(failed: list[tuple[int, P4RuntimeError]], total: int) -> str:
    """How many of ``total`` updates failed, which (as index ranges), and the first few."""
    first = "; ".join(f"update {i}: {e.code.name}: {_clip(e.message)}" for i, e in failed[:FIRST_SHOWN])
    more = f"; and {len(failed) - FIRST_SHOWN} more" if len(failed) > FIRST_SHOWN else ""
    ranges = index_ranges([i for i, _ in failed])
    return f"{len(failed)} of {total} updates failed (updates {ranges}): {first}{more}"


def write_error_status(
    errors: list[P4RuntimeError | None], budget: int = TRAILER_BUDGET
) -> rpc_status.Status:
    """The UNKNOWN status of a Write in which some of ``errors`` (one per update) are set: one
    detail per update, in order, for as many updates as the trailer budget holds."""
    failed = [(i, e) for i, e in enumerate(errors) if e is not None]
    message = failure_summary(failed, len(errors))
    longest = message + TRUNCATED.format(covered=f"updates 0-{len(errors)} only")
    # the message travels twice (grpc-message, and inside the base64'd status); the details once
    room = (budget - 2 * _wire_len(longest)) * 3 // 4 - _wire_len(longest)
    details: list[any_pb2.Any] = []
    size = 0
    for err in errors:
        packed = _packed(err)
        cost = packed.ByteSize() + 3  # with the field's tag and length
        if size + cost > room:
            covered = f"updates 0-{len(details) - 1} only" if details else "no update"
            message += TRUNCATED.format(covered=covered)
            break
        details.append(packed)
        size += cost
    status = rpc_status.Status(code=rpc_code.UNKNOWN, message=message)
    status.details.extend(details)
    return status
