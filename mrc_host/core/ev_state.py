"""EV states and the one table of the transitions between them (in the manner of h11's
``_state.py``): every state change of an EV goes through ``next_state``, so what can
happen to an EV is readable in one place and anything else is a bug that raises.

GOOD carries data. SKIP is passed over by the data rotation for a few turns after an ECN
echo or a trim NACK (the penalty grows with repeated marks and decays with time).
ASSUMED_BAD is retired after an unexplained loss and probed until enough probes in a row
succeed. DENIED is set by an operator and never used. UNKNOWN is what an operator-denied
EV outside the connection's set becomes when the deny is lifted (the OCP API's state for
an EV the connection does not know).
"""

from __future__ import annotations

import enum


class EvState(enum.StrEnum):
    GOOD = "GOOD"
    SKIP = "SKIP"
    ASSUMED_BAD = "ASSUMED_BAD"
    DENIED = "DENIED"
    UNKNOWN = "UNKNOWN"


class EvEvent(enum.StrEnum):
    """What happened to an EV (``EvStateChanged.event``)."""

    ECN_ECHO = "ecn echo"  # a SACK echoed CE for a packet sent on it
    TRIM_NACK = "trim nack"  # a packet sent on it was trimmed inside the fabric
    PENALTY_SERVED = "penalty served"  # the rotation passed it over enough times
    LOSS = "loss"  # a packet sent on it was lost without a trim (gap rule or timeout)
    LOSS_WHILE_HOT = "loss on a congested path"  # ... while its path still signalled congestion
    ACK_LOST = "ack lost"  # a SACK sent on it never arrived (the peer resent the data)
    LIVENESS_LOST = "liveness probe lost"  # a probe of a GOOD EV went unanswered
    PLANE_FAILED = "plane failed"  # its whole plane stopped delivering
    NIC_PATH_DEAD = "path dead at the NIC"  # another connection of the NIC proved its path dead
    NIC_PATH_CLEARED = "path cleared at the NIC"  # ... and a delivery since revoked that verdict
    PROBE_TIMEOUT = "probe timeout"  # a probe of a retired EV went unanswered
    PROBES_ANSWERED = "probes answered"  # enough probes in a row came back
    LOSS_UNDONE = "loss undone"  # the packet whose loss retired it arrived after all
    PROMOTED = "promoted from backup"  # a backup stepped into the rotation (state unchanged)
    OPERATOR_DENY = "operator deny"
    OPERATOR_ALLOW = "operator allow"
    FORGOTTEN = "operator allow of an EV outside the set"


_G, _S, _B, _D, _U = EvState.GOOD, EvState.SKIP, EvState.ASSUMED_BAD, EvState.DENIED, EvState.UNKNOWN
_RETIRE = {
    EvEvent.LOSS: _B,
    EvEvent.ACK_LOST: _B,
    EvEvent.LIVENESS_LOST: _B,
    EvEvent.PLANE_FAILED: _B,
    EvEvent.NIC_PATH_DEAD: _B,
}

TRANSITIONS: dict[EvState, dict[EvEvent, EvState]] = {
    _G: {
        EvEvent.ECN_ECHO: _S,
        EvEvent.TRIM_NACK: _S,
        EvEvent.LOSS_WHILE_HOT: _S,
        EvEvent.PROMOTED: _G,
        EvEvent.OPERATOR_DENY: _D,
        **_RETIRE,
    },
    _S: {
        EvEvent.ECN_ECHO: _S,
        EvEvent.TRIM_NACK: _S,
        EvEvent.LOSS_WHILE_HOT: _S,
        EvEvent.PENALTY_SERVED: _G,
        EvEvent.PROMOTED: _S,
        EvEvent.OPERATOR_DENY: _D,
        **_RETIRE,
    },
    _B: {
        EvEvent.PROBE_TIMEOUT: _B,
        EvEvent.PROBES_ANSWERED: _G,
        EvEvent.LOSS_UNDONE: _G,
        EvEvent.NIC_PATH_CLEARED: _G,
        EvEvent.OPERATOR_DENY: _D,
    },
    _D: {EvEvent.OPERATOR_ALLOW: _G, EvEvent.FORGOTTEN: _U, EvEvent.OPERATOR_DENY: _D},
    _U: {EvEvent.OPERATOR_DENY: _D},
}


class EvTransitionError(RuntimeError):
    """An event the table does not allow in the EV's current state (a bug in the caller)."""


def next_state(state: EvState, event: EvEvent) -> EvState:
    try:
        return TRANSITIONS[state][event]
    except KeyError:
        raise EvTransitionError(f"EV event {event.name} is not allowed in state {state.name}") from None


def allowed(state: EvState, event: EvEvent) -> bool:
    return event in TRANSITIONS[state]
