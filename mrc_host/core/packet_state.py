"""A sent packet's states and the one table of the transitions between them (in the manner of
h11's ``_state.py``, as ``ev_state.py`` is for EVs): every state change of a ``TxRecord``
goes through ``next_state``, in ``SentPackets`` (sent.py) alone, so what can happen to a
packet is readable here, and anything else is a bug that raises.

A packet is cut from a write (UNSENT) and sent (IN_FLIGHT). A loss rule may guess it lost --
the gap rule, RACK, the tail probe, the timers, a plane gone silent (GUESSED) -- or the sender
may know it -- a trim NACK of the copy in flight, its port down, go-back-N (LOST); either way
it waits in the retransmit queue, and is sent again: after a guess as RESENT (the guess stands
until an acknowledgement shows which copy arrived), after a fact as IN_FLIGHT. A guess is
withdrawn when a trim NACK names the copy guessed lost (congestion, not a failed path:
RESENT -> IN_FLIGHT, GUESSED -> LOST), and undone when the copy guessed lost turns out to have
arrived: the SACK that acknowledges the packet says so (``Recovery.on_delivered`` judges; the
packet is ACKED either way), or a D-SACK does later (``SentPackets.duplicate``). An ACKED
packet is DONE once the cumulative ACK passes it; a write the peer refused, or a connection
that failed, ends its packets at once.

States are small integers whose bits are what the loss rules ask per packet
(``TxRecord.lost``, ``gap_lost``, ``sacked``: compiled, one bit test, where an enum member
costs a dictionary look-up), and the table is flattened into bytes (``next_state``: one index).
"""

from __future__ import annotations

from typing import Final

# the bits of a state
IN_FLIGHT_BIT: Final = 1  # its latest copy is in flight
QUEUED_BIT: Final = 2  # it waits in the retransmit queue (``TxRecord.lost``)
GUESS_BIT: Final = 4  # a loss of it was guessed and not yet answered (``TxRecord.gap_lost``)
ACKED_BIT: Final = 8  # a SACK acknowledged it (``TxRecord.sacked``)
DONE_BIT: Final = 16  # forgotten: passed by the cumulative ACK, refused, or the connection failed

# the states
UNSENT: Final = 0
IN_FLIGHT: Final = IN_FLIGHT_BIT
RESENT: Final = IN_FLIGHT_BIT | GUESS_BIT  # resent on a guess the acknowledgement will judge
LOST: Final = QUEUED_BIT  # known lost, waiting to be resent
GUESSED: Final = QUEUED_BIT | GUESS_BIT  # guessed lost, waiting to be resent
ACKED: Final = ACKED_BIT
DONE: Final = DONE_BIT

# the events
SEND: Final = 0  # a copy leaves (the first, or a resend)
GUESS: Final = 1  # a loss rule guessed the latest copy lost
KNOWN_LOSS: Final = 2  # the latest copy is known lost (trim NACK, port down) or go-back-N resends it
ACK: Final = 3  # a SACK acknowledged it (its cumulative point or its bitmap)
GUESS_TRIMMED: Final = 4  # a trim NACK names the copy guessed lost: congestion, the guess is withdrawn
REFUSE: Final = 5  # the peer refused its write (BAD_RKEY, BAD_ADDRESS): it ends in error
CUMULATIVE: Final = 6  # the cumulative ACK passed it
FAIL: Final = 7  # the connection failed

STATE_NAMES: Final = {
    UNSENT: "UNSENT",
    IN_FLIGHT: "IN_FLIGHT",
    RESENT: "RESENT",
    LOST: "LOST",
    GUESSED: "GUESSED",
    ACKED: "ACKED",
    DONE: "DONE",
}
EVENT_NAMES: Final = {
    SEND: "SEND",
    GUESS: "GUESS",
    KNOWN_LOSS: "KNOWN_LOSS",
    ACK: "ACK",
    GUESS_TRIMMED: "GUESS_TRIMMED",
    REFUSE: "REFUSE",
    CUMULATIVE: "CUMULATIVE",
    FAIL: "FAIL",
}

_ENDS: Final = {REFUSE: DONE, FAIL: DONE}  # what ends a packet not yet acknowledged
TRANSITIONS: Final[dict[int, dict[int, int]]] = {
    UNSENT: {SEND: IN_FLIGHT, FAIL: DONE},
    IN_FLIGHT: {GUESS: GUESSED, KNOWN_LOSS: LOST, ACK: ACKED, **_ENDS},
    # (a known loss of the resent copy leaves the guess on the one before standing)
    RESENT: {GUESS: GUESSED, KNOWN_LOSS: GUESSED, ACK: ACKED, GUESS_TRIMMED: IN_FLIGHT, **_ENDS},
    # (go-back-N queues every packet again, queued ones too)
    LOST: {SEND: IN_FLIGHT, KNOWN_LOSS: LOST, ACK: ACKED, **_ENDS},
    GUESSED: {SEND: RESENT, KNOWN_LOSS: GUESSED, ACK: ACKED, GUESS_TRIMMED: LOST, **_ENDS},
    ACKED: {CUMULATIVE: DONE, FAIL: DONE},
    DONE: {},
}

_EVENTS: Final = 8
_REFUSED: Final = 255


def _flat() -> bytes:
    table = bytearray([_REFUSED] * ((DONE + 1) * _EVENTS))
    for state, moves in TRANSITIONS.items():
        for event, new in moves.items():
            table[state * _EVENTS + event] = new
    return bytes(table)


_NEXT: Final = _flat()


class PacketTransitionError(Exception):
    """An event the table does not allow in the packet's current state (a bug in the caller)."""


def next_state(state: int, event: int) -> int:
    new = _NEXT[state * _EVENTS + event]
    if new == _REFUSED:
        raise PacketTransitionError(
            f"packet event {EVENT_NAMES.get(event, event)} is not allowed in state "
            f"{STATE_NAMES.get(state, state)}"
        )
    return new


def allowed(state: int, event: int) -> bool:
    return event in TRANSITIONS.get(state, {})
