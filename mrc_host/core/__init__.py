"""Sans-I/O MRC transport core: state machines fed messages and time, returning actions."""

from .actions import (
    Action,
    ConnectionFailed,
    EvStateChanged,
    MessageReceived,
    MessageSent,
    PathHealthChanged,
    SetTimer,
    Transmit,
)
from .cc_base import CongestionControl, cc_names, create_cc, register_cc
from .config import DEFAULT_MAX_EVS, CcParams, EvProfile, Mode, NsccParams, RcccParams, TransportConfig
from .counters import Counters, EvCounters
from .credit_rx import NicCredits, nic_credits_for
from .endpoint import Endpoint
from .ev_draw import PathSpace
from .ev_probe import EvProber
from .ev_state import EvEvent, EvState, EvTransitionError
from .evset import EvSet
from .path_health import NicPathHealth
from .plane_delays import NicPlaneDelays
from .region import MemoryRegion, RegionTable

__all__ = [
    "DEFAULT_MAX_EVS",
    "Action",
    "CcParams",
    "CongestionControl",
    "ConnectionFailed",
    "Counters",
    "Endpoint",
    "EvCounters",
    "EvEvent",
    "EvProber",
    "EvProfile",
    "EvSet",
    "EvState",
    "EvStateChanged",
    "EvTransitionError",
    "MemoryRegion",
    "MessageReceived",
    "MessageSent",
    "Mode",
    "NicCredits",
    "NicPathHealth",
    "NicPlaneDelays",
    "NsccParams",
    "PathHealthChanged",
    "PathSpace",
    "RcccParams",
    "RegionTable",
    "SetTimer",
    "Transmit",
    "TransportConfig",
    "cc_names",
    "create_cc",
    "nic_credits_for",
    "register_cc",
]
