"""The DATA header check: what a receiver verifies on a trimmed frame.

A switch that trims a DATA packet keeps its headers and cuts the payload and the ICRC with
it, so the ICRC can no longer vouch for what is left. The MRC data header's 16 bits after
the flags carry a CRC-16 (CCITT, initial 0xFFFF; ``binascii.crc_hqx``) over the fields a
trim leaves as they were: the inner source and destination addresses, the UDP source port,
the BTH opcode, destination QP and AckReq/PSN word, the RETH and the MRC data header's
message id, flags and send time. A trim changes only the outer header, the lengths and the
DSCP/ECN bits, none of them covered. A frame that says it was trimmed is believed only if
this check holds: a DATA frame cut short by anything else, or a header damaged on the way,
is dropped rather than answered with an immediate resend.
"""

from __future__ import annotations

import struct
from binascii import crc_hqx
from typing import Final

__all__ = ["header_check"]

_FIELDS: Final = struct.Struct(">32sHBIIQIIIHQ")
_FIELDS_PACK: Final = _FIELDS.pack


def header_check(
    inner_addrs: bytes,
    sport: int,
    opcode: int,
    qp: int,
    ack_psn: int,
    va: int,
    rkey: int,
    dlen: int,
    msg_id: int,
    flags: int,
    send_ts: int,
) -> int:
    """The check of a DATA frame with these header fields (``inner_addrs``: source then
    destination, 32 bytes; ``ack_psn``: the BTH word with AckReq in its top bit)."""
    return crc_hqx(
        _FIELDS_PACK(inner_addrs, sport, opcode, qp, ack_psn, va, rkey, dlen, msg_id, flags, send_ts), 0xFFFF
    )
