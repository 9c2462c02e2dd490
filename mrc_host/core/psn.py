"""24-bit packet sequence numbers mapped onto an unbounded internal sequence.

The core counts packets with plain Python ints that never wrap (``seq``); only the
wire carries ``seq & PSN_MASK``. An incoming 24-bit PSN is turned back into a ``seq``
by taking the value nearest to a reference (the receiver's expected PSN or the sender's
oldest unacknowledged one), which is correct as long as both ends stay within half the
PSN space of each other -- the receive window (``TransportConfig.rx_window``) is far smaller.
"""

from __future__ import annotations

from typing import Final

from mrc_host.wire.messages import PSN_BITS, PSN_MASK

PSN_MODULUS: Final = 1 << PSN_BITS
PSN_HALF: Final = PSN_MODULUS >> 1


def psn_of(seq: int) -> int:
    """The 24-bit wire PSN of an internal sequence number."""
    return seq & PSN_MASK


def unwrap(psn: int, ref_seq: int) -> int:
    """The internal sequence number closest to ``ref_seq`` whose wire PSN is ``psn``."""
    delta = ((psn & PSN_MASK) - (ref_seq & PSN_MASK)) & PSN_MASK
    if delta >= PSN_HALF:
        delta -= PSN_MODULUS
    return ref_seq + delta
