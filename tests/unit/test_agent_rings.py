"""The packet rings' geometry (no root): slots fit the largest frame, blocks hold whole slots
and are what the kernel accepts (page multiples; v3 one frame and its block header at least)."""

from __future__ import annotations

import mmap
from pathlib import Path

import pytest

from mrc_host.agent.options import AgentOptions
from mrc_host.agent.rings import (
    HDR,
    RX_MAC,
    TPACKET_V2,
    TPACKET_V3,
    TX_DATA,
    V3_BLOCK_HDR,
    RingGeometry,
)


@pytest.mark.parametrize("version", [TPACKET_V2, TPACKET_V3])
@pytest.mark.parametrize("max_frame", [1514, 4246, 9014, 65549])
def test_slots_fit_the_largest_frame_and_blocks_suit_the_kernel(version: int, max_frame: int) -> None:
    g = RingGeometry(version, max_frame)
    assert g.tx_slot % 16 == 0 and g.tx_slot >= TX_DATA[version] + max_frame
    assert g.tx_block % mmap.PAGESIZE == 0 and g.tx_per_block >= 1
    assert g.tx_frames == g.tx_blocks * (g.tx_block // g.tx_slot)
    assert g.rx_block % mmap.PAGESIZE == 0 and g.rx_blocks >= 2
    if version == TPACKET_V3:  # the kernel cuts a frame longer than block - block header
        assert g.rx_block - V3_BLOCK_HDR >= RX_MAC[version] + max_frame
    else:
        assert g.rx_slot % 16 == 0 and g.rx_slot >= RX_MAC[version] + max_frame and g.rx_per_block >= 1
    assert g.rx_request() and g.tx_request()  # what setsockopt is given


def test_frame_offsets_follow_the_kernel_headers() -> None:
    # tp_hdrlen - sockaddr_ll; the MAC header ends on TPACKET_ALIGN(tp_hdrlen + 16)
    assert TX_DATA == HDR == {TPACKET_V2: 32, TPACKET_V3: 48}
    assert RX_MAC == {TPACKET_V2: 66, TPACKET_V3: 82}


def test_rings_for_frames_over_the_largest_block_are_refused() -> None:
    with pytest.raises(ValueError, match="blocks"):
        RingGeometry(TPACKET_V2, 1 << 20)


def test_the_ring_option_is_checked() -> None:
    with pytest.raises(ValueError, match="--ring"):
        AgentOptions(Path("c.json"), Path("s"), ring="v4").check()
    AgentOptions(Path("c.json"), Path("s"), ring="off").check()
