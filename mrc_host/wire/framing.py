"""What a frame needs besides its message: the port's addresses and the wire's limits.

Why a module of its own: the agent's packet path needs these and nothing of scapy
(``layers``), whose import alone costs an agent process about 35 MiB; the codec, the
scapy layers and the agent all take them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv6Address

__all__ = ["MAX_PAYLOAD", "SACK_FLAG_DUPLICATE", "SACK_FLAG_ECN_ECHO", "FrameAddressing"]

MAX_PAYLOAD = 9000  # bytes of RDMA payload in one packet (jumbo frame)
SACK_FLAG_ECN_ECHO = 0x01
SACK_FLAG_DUPLICATE = 0x02  # D-SACK: the packet that triggered the SACK had already arrived


@dataclass(frozen=True, slots=True)
class FrameAddressing:
    """The per-port constants of a frame: MACs and the addresses that do not name the path.

    The outer destination (the uSID carrier) is per packet and is not here.
    """

    src_mac: str
    dst_mac: str
    outer_src: IPv6Address | str
    inner_src: IPv6Address | str
    inner_dst: IPv6Address | str
    hop_limit: int = 64
