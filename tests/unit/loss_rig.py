"""Hand-made packets for the loss rules' tests: a ``Recovery`` with its own ``SentPackets``
and no sender, each packet moved through ``SentPackets`` as the sender moves it (sent,
guessed lost, resent, acknowledged)."""

from __future__ import annotations

from mrc_host.core import TransportConfig
from mrc_host.core.records import PendingWrite, TxRecord
from mrc_host.core.recovery import Recovery
from mrc_host.core.sent import SentPackets
from mrc_host.wire.messages import Opcode


def recovery(cfg: TransportConfig, planes: int = 2) -> Recovery:
    return Recovery(cfg, planes, SentPackets(cfg, [0] * planes))


def packet(seq: int, size: int = 100, opcode: Opcode = Opcode.WRITE_MIDDLE) -> TxRecord:
    return TxRecord(seq, PendingWrite(1, [], 0, 0), 0, b"x" * size, opcode)


def transmit(r: Recovery, rec: TxRecord, ev: int, at: int) -> TxRecord:
    """``rec`` leaves on ``ev`` at ``at`` (a first copy, or a resend of one queued)."""
    idle = r.packets.sent(rec, ev, at)
    r.on_sent(rec, at, idle)
    return rec


def send(r: Recovery, seq: int, ev: int, at: int, size: int = 100) -> TxRecord:
    return transmit(r, packet(seq, size), ev, at)


def resend(r: Recovery, rec: TxRecord, ev: int, at: int, guess: bool = True) -> TxRecord:
    """``rec`` in flight is guessed lost (or, not ``guess``, known lost) and resent at once."""
    if guess:
        r.packets.guessed_lost(rec)
    else:
        r.packets.known_lost(rec)
    return transmit(r, rec, ev, at)


def deliver(r: Recovery, rec: TxRecord, now: int, earlier_copy: bool = False, own_sack: bool = True) -> bool:
    """``rec`` is acknowledged at ``now``: whether its loss guess proved spurious."""
    spurious = r.on_delivered(rec, now, earlier_copy, own_sack)
    r.packets.acked(rec, spurious)
    return spurious
