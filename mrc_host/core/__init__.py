"""Sans-I/O MRC transport core: state machines fed messages and time, returning actions."""

from .actions import Action, EvStateChanged, MessageReceived, MessageSent, SetTimer, Transmit
from .config import CcParams, Mode, TransportConfig
from .counters import Counters, EvCounters
from .endpoint import Endpoint
from .ev_state import EvEvent, EvState, EvTransitionError
from .evset import EvSet, PathSpace
from .region import MemoryRegion, RegionTable

__all__ = [
    "Action",
    "CcParams",
    "Counters",
    "Endpoint",
    "EvCounters",
    "EvEvent",
    "EvSet",
    "EvState",
    "EvStateChanged",
    "EvTransitionError",
    "MemoryRegion",
    "MessageReceived",
    "MessageSent",
    "Mode",
    "PathSpace",
    "RegionTable",
    "SetTimer",
    "Transmit",
    "TransportConfig",
]
