"""What the core asks its caller to do. Every input method returns a list of these."""

from __future__ import annotations

from dataclasses import dataclass

from mrc_host.wire.messages import Message

from .ev_state import EvEvent, EvState


# ``init=False`` + a spelled-out ``__init__``: mypyc compiles it (see mrc_host/wire/messages.py)
@dataclass(slots=True, init=False)
class Transmit:
    """Send ``msg`` on the path of ``msg.meta.ev`` (its plane picks the NIC port)."""

    msg: Message

    def __init__(
        self,
        msg: Message,
    ) -> None:
        self.msg = msg


@dataclass(slots=True, init=False)
class SetTimer:
    """Call ``on_timer`` at ``at_ns`` (replaces any earlier request; None cancels)."""

    at_ns: int | None

    def __init__(
        self,
        at_ns: int | None,
    ) -> None:
        self.at_ns = at_ns


@dataclass(slots=True, init=False)
class MessageSent:
    """Every packet of an RDMA WRITE was acknowledged (``ok``) or refused by the peer."""

    msg_id: int
    ok: bool = True
    reason: str = ""

    def __init__(
        self,
        msg_id: int,
        ok: bool = True,
        reason: str = "",
    ) -> None:
        self.msg_id = msg_id
        self.ok = ok
        self.reason = reason


@dataclass(slots=True, init=False)
class MessageReceived:
    """Every packet of an incoming RDMA WRITE has been placed in local memory."""

    msg_id: int

    def __init__(
        self,
        msg_id: int,
    ) -> None:
        self.msg_id = msg_id


@dataclass(slots=True, init=False)
class EvStateChanged:
    """An EV changed state (``old``/``new`` are ``EvState``, a ``StrEnum``: they still
    compare equal to their names); ``event`` says what made it change."""

    ev: int
    old: EvState
    new: EvState
    reason: str
    event: EvEvent | None = None

    def __init__(
        self,
        ev: int,
        old: EvState,
        new: EvState,
        reason: str,
        event: EvEvent | None = None,
    ) -> None:
        self.ev = ev
        self.old = old
        self.new = new
        self.reason = reason
        self.event = event


@dataclass(slots=True)
class PathHealthChanged:
    """Evidence this endpoint reported changed its NIC's shared path verdicts
    (``path_health.py``): the caller lets the NIC's other endpoints read them
    (``Endpoint.on_path_health``)."""


@dataclass(slots=True)
class ConnectionFailed:
    """The connection ended in error and sends nothing more: ``RETRY_EXCEEDED`` (the peer
    stopped answering for ``retry_cnt`` timeouts in a row) or ``NO_USABLE_PATH`` (work
    waited that long with no EV allowed to carry it, e.g. every EV DENIED). Every write
    not yet complete got ``MessageSent(ok=False, reason)`` just before."""

    reason: str


Action = (
    Transmit
    | SetTimer
    | MessageSent
    | MessageReceived
    | EvStateChanged
    | PathHealthChanged
    | ConnectionFailed
)
