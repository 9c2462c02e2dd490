"""The bytes entry point with the real codec: a whole transfer through encoded frames."""

from __future__ import annotations

import random
from ipaddress import IPv6Address

from mrc_host.core import Transmit
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.codec import FrameAddressing, decode, encode, trim
from mrc_host.wire.messages import DataPacket, Nack, NackReason

ADDR = FrameAddressing(
    "02:00:00:00:00:01", "02:00:00:00:00:02", "fcbb:bb00:c000::1", "fcbb:bb00:c000::1", "fcbb:bb00:c001::1"
)
CARRIER = IPv6Address("fcbb:bb00:4000:8000:4001:c001::")


def test_transfer_through_encoded_frames_with_one_trim() -> None:
    p = make_pair(size=1 << 15)
    data = random.Random(9).randbytes(1 << 15)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    queue = [(p.b, a.msg) for a in acts if isinstance(a, Transmit)]
    trimmed_once = False
    nacks = []
    for _ in range(10_000):
        if not queue:
            break
        dst, msg = queue.pop(0)
        frame = encode(msg, CARRIER, ADDR)
        if isinstance(msg, DataPacket) and not trimmed_once:
            trimmed_once = True
            frame = trim(frame)  # a switch cut it: the receiver must NACK, the sender resend
        assert decode(frame).meta.ev == msg.meta.ev
        p.now += 50
        for a in dst.receive_frame(frame, p.now):
            if isinstance(a, Transmit):
                if isinstance(a.msg, Nack):
                    nacks.append(a.msg)
                queue.append((p.a if dst is p.b else p.b, a.msg))
    assert [n.reason for n in nacks] == [NackReason.TRIMMED_LASTHOP]  # not CE-marked: cut at the last hop
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data
    assert p.a.counters.retransmissions == 1 and p.b.counters.trimmed_received == 1
    assert p.a.counters.messages_completed == 1 and p.b.counters.messages_received == 1
    assert not p.a.counters.malformed and not p.b.counters.malformed


def test_garbage_frame_counted_by_codec_reason() -> None:
    p = make_pair()
    p.b.receive_frame(b"\x00" * 20, p.now)
    p.b.receive_frame(b"", p.now)
    assert sum(p.b.counters.malformed.values()) == 2
    assert set(p.b.counters.malformed) <= {"truncated", "not_ipv6"}
