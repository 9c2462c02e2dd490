"""Frame sizes every part of the testbed agrees on (docs/design.md §4, docs/protocol.md).

An MRC DATA packet is, after the Ethernet header: outer IPv6 (40) + inner IPv6 (40) + UDP
(8) + BTH (12) + RETH (16) + MRC data header (16) + payload + ICRC (4). The fabric's links
and host ports get an MTU (the IPv6 packet size Linux calls MTU) that fits a RoCE-sized
4096-byte payload; agents can choose any smaller payload.
"""

from __future__ import annotations

from typing import Final

DATA_OVERHEAD: Final = 40 + 40 + 8 + 12 + 16 + 16 + 4  # 136 bytes of headers and ICRC per DATA packet
DEFAULT_PAYLOAD: Final = 4096  # bytes of RDMA payload per DATA packet, as RoCE NICs use
FABRIC_MTU: Final = DEFAULT_PAYLOAD + DATA_OVERHEAD  # 4232: every link and host port of the fabric


def payload_for_mtu(mtu: int) -> int:
    """Largest DATA payload whose packet fits an interface MTU."""
    return mtu - DATA_OVERHEAD


BTH_PKEY: Final = 0xFFFF  # the default partition key (IBA): the only one MRC frames carry
