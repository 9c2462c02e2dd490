"""What the core asks its caller to do. Every input method returns a list of these."""

from __future__ import annotations

from dataclasses import dataclass

from mrc_host.wire.messages import Message

from .ev_state import EvEvent, EvState


@dataclass(slots=True)
class Transmit:
    """Send ``msg`` on the path of ``msg.meta.ev`` (its plane picks the NIC port)."""

    msg: Message


@dataclass(slots=True)
class SetTimer:
    """Call ``on_timer`` at ``at_ns`` (replaces any earlier request; None cancels)."""

    at_ns: int | None


@dataclass(slots=True)
class MessageSent:
    """Every packet of an RDMA WRITE was acknowledged (``ok``) or refused by the peer."""

    msg_id: int
    ok: bool = True
    reason: str = ""


@dataclass(slots=True)
class MessageReceived:
    """Every packet of an incoming RDMA WRITE has been placed in local memory."""

    msg_id: int


@dataclass(slots=True)
class EvStateChanged:
    """An EV changed state (``old``/``new`` are ``EvState``, a ``StrEnum``: they still
    compare equal to their names); ``event`` says what made it change."""

    ev: int
    old: EvState
    new: EvState
    reason: str
    event: EvEvent | None = None


@dataclass(slots=True)
class ConnectionFailed:
    """The connection ended in error and sends nothing more: ``RETRY_EXCEEDED`` (the peer
    stopped answering for ``retry_cnt`` timeouts in a row) or ``NO_USABLE_PATH`` (work
    waited that long with no EV allowed to carry it, e.g. every EV DENIED). Every write
    not yet complete got ``MessageSent(ok=False, reason)`` just before."""

    reason: str


Action = Transmit | SetTimer | MessageSent | MessageReceived | EvStateChanged | ConnectionFailed
