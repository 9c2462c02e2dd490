"""Header fields the protocol fixes are checked, and a replayed trim draws nothing (issue 44:
1,000 of 1,000 frames with another partition key or SE/MigReq/PadCnt bits were taken as DATA,
and each replayed trimmed copy of DATA the receiver already held drew a NACK).

Frames go to a real agent's packet path (agent_duo): each forged frame carries an ICRC
recomputed over its changes, as a forger's would, so only the BTH check stands in its way.
"""

from __future__ import annotations

import random
import struct

import pytest
from agent_duo import FakeClient, Net

from mrc_fabric.drop_reasons import BAD_BTH
from mrc_host.wire.codec import BTH_OFF, INNER_OFF, compute_icrc, decode_frame, trim
from mrc_host.wire.messages import DataPacket, Nack

FORGERIES = {  # (offset from the BTH, bits)
    "pkey": (2, 0x80),
    "SE": (1, 0x80),
    "MigReq": (1, 0x40),
    "PadCnt": (1, 0x30),
    "FECN/BECN": (4, 0xC0),
}


def resign(frame: bytearray) -> bytes:
    frame[-4:] = struct.pack("<I", compute_icrc(bytes(frame[INNER_OFF:-4])))
    return bytes(frame)


def finished_transfer() -> tuple[Net, list[bytes]]:
    """A completed transfer uch0 -> uch3, and the DATA frames it sent."""
    net = Net()
    c = FakeClient()
    net["uch0"].send("uch3", 64 << 10, net.now, client=c)
    net.run(lambda: c.final is not None)
    assert c.final["ok"]  # type: ignore[index]
    data = [f for _t, src, f in net.log if src == "uch0" and isinstance(decode_frame(f), DataPacket)]
    return net, data


@pytest.mark.parametrize("field", sorted(FORGERIES))
def test_a_thousand_frames_with_a_fixed_bth_field_changed_are_counted_and_dropped(field: str) -> None:
    net, data = finished_transfer()
    rx = net["uch3"]
    conn = next(iter(rx.peers.conns.values()))
    before = conn.endpoint.counters.data_packets_received
    offset, bits = FORGERIES[field]
    rng = random.Random(44)
    for _ in range(1000):
        frame = bytearray(rng.choice(data))
        frame[BTH_OFF + offset] ^= bits
        rx.deliver(resign(frame), net.now)
    assert rx.malformed == {BAD_BTH: 1000}
    assert all(c.endpoint.counters.data_packets_received == before for c in [conn])
    assert not rx.out  # nothing answered


def test_a_replayed_trim_of_data_already_held_draws_nothing() -> None:
    net, data = finished_transfer()
    rx = net["uch3"]
    conn = next(iter(rx.peers.conns.values()))
    trimmed = conn.endpoint.counters.trimmed_received
    replays = (data * (1000 // len(data) + 1))[:1000]
    for frame in replays:  # 1,000 trimmed copies of DATA the receiver holds
        rx.deliver(trim(frame), net.now)
    assert rx.malformed == {} and conn.endpoint.counters.trimmed_received == trimmed + 1000
    assert not [f for _p, f in rx.out if isinstance(decode_frame(f), Nack)]
