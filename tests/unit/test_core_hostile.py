"""Hostile input: random, truncated and oversized frames, wrong rkeys, addresses outside
the region, nonsense control fields. Nothing escapes, nothing lands outside the region,
everything refused is counted by reason."""

from __future__ import annotations

import random
from ipaddress import IPv6Address

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mrc_fabric.ev import EV
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.codec import FrameAddressing, encode
from mrc_host.wire.messages import DataPacket, Message, Nack, Opcode, PathMeta, Probe, ProbeAck, Sack

ADDR = FrameAddressing(
    "02:00:00:00:00:01", "02:00:00:00:00:02", "fcbb:bb00:c000::1", "fcbb:bb00:c000::1", "fcbb:bb00:c001::1"
)
CARRIER = IPv6Address("fcbb:bb00:4000:8000:4001:c001::")
REGION = 4096
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def frame_of(msg: Message) -> bytes:
    return encode(msg, CARRIER, ADDR)


def sample_frames() -> list[bytes]:
    ev = EV(1, 2, 3).value
    return [
        frame_of(DataPacket(22, 5, BASE, RKEY, b"a" * 256, msg_id=1, send_ts=9, meta=PathMeta(ev=ev))),
        frame_of(Sack(11, 3, 3, 0b101, ev, echo_ts=7, port_status=3, meta=PathMeta(ev=ev))),
        frame_of(Nack(11, 4, 1, ev, meta=PathMeta(ev=ev))),
        frame_of(Probe(22, 9, ev, send_ts=5, meta=PathMeta(ev=ev))),
        frame_of(ProbeAck(11, 9, ev, echo_ts=5, meta=PathMeta(ev=ev))),
    ]


def region_bytes(p) -> bytes:  # type: ignore[no-untyped-def]
    region = p.b.regions.get(RKEY)
    assert region is not None and len(region.buffer) == REGION
    return bytes(region.buffer)


@SETTINGS
@given(st.binary(max_size=10_000))
def test_random_frames_are_counted_never_raise(frame: bytes) -> None:
    p = make_pair(size=REGION)
    for ep in (p.a, p.b):
        ep.receive_frame(frame, p.now)
        assert (
            sum(ep.counters.malformed.values())
            + ep.counters.wrong_qp
            + ep.counters.data_packets_received
            + ep.counters.sacks_received
            + ep.counters.probes_received
            + ep.counters.probe_acks_received
            + sum(ep.counters.nacks_received.values())
            + ep.counters.stray_acks
            >= 1
        )
    assert region_bytes(p) == bytes(REGION)


@SETTINGS
@given(st.integers(min_value=0, max_value=4), st.data())
def test_truncated_flipped_and_oversized_frames(kind: int, data: st.DataObject) -> None:
    frame = sample_frames()[kind]
    cut = data.draw(st.integers(min_value=0, max_value=len(frame) - 1))
    flip = data.draw(st.integers(min_value=0, max_value=len(frame) * 8 - 1))
    flipped = bytearray(frame)
    flipped[flip // 8] ^= 1 << (flip % 8)
    oversized = frame + bytes(data.draw(st.integers(min_value=1, max_value=9000)))
    p = make_pair(size=REGION)
    for ep in (p.a, p.b):
        for f in (frame[:cut], bytes(flipped), oversized):
            ep.receive_frame(f, p.now)  # must not raise
    assert p.b.counters.malformed["truncated"] + sum(p.b.counters.malformed.values()) >= 1
    # whatever got through wrote only inside the region (the sample write is in bounds)
    assert len(region_bytes(p)) == REGION


@SETTINGS
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=-(1 << 20), max_value=(1 << 64) + 10),  # vaddr
            st.sampled_from([RKEY, RKEY + 1, 0, 0xFFFFFFFF, -1]),  # rkey
            st.integers(min_value=0, max_value=(1 << 24) + 5),  # psn
            st.binary(max_size=1500),
            st.integers(min_value=-1, max_value=(1 << 32) + 1),  # ev
        ),
        max_size=25,
    )
)
def test_writes_outside_the_region_refused_and_counted(pkts: list[tuple[int, int, int, bytes, int]]) -> None:
    p = make_pair(size=REGION)
    c = p.b.counters
    shadow = bytearray(REGION)
    for vaddr, rkey, psn, payload, ev in pkts:
        msg = DataPacket(22, psn, vaddr, rkey, payload, opcode=Opcode.WRITE_ONLY, meta=PathMeta(ev=ev))
        in_range = 0 <= vaddr < 1 << 64 and 0 <= rkey <= 0xFFFFFFFF and psn < 1 << 24 and 0 <= ev < 1 << 32
        before = (
            sum(c.malformed.values()),
            c.duplicates_received,
            c.out_of_window,
            dict(c.refused_writes),
            c.data_bytes_placed,
        )
        p.b.receive(msg, p.now)
        assert (sum(c.malformed.values()) == before[0] + 1) == (not in_range)
        if not in_range or c.duplicates_received > before[1] or c.out_of_window > before[2]:
            assert c.refused_writes == before[3] and c.data_bytes_placed == before[4]
            continue
        if rkey != RKEY:
            reason = "BAD_RKEY"
        elif vaddr < BASE or vaddr + len(payload) > BASE + REGION:
            reason = "BAD_ADDRESS"
        else:
            reason = ""
            shadow[vaddr - BASE : vaddr - BASE + len(payload)] = payload
        if reason:
            assert c.refused_writes[reason] == before[3].get(reason, 0) + 1
            assert c.data_bytes_placed == before[4]
        else:
            assert c.data_bytes_placed == before[4] + len(payload)
    assert region_bytes(p) == bytes(shadow)  # exactly the in-bounds writes, nothing else
    # the same packets at the sending end, which registered no region: all refused or dropped
    for vaddr, rkey, psn, payload, ev in pkts:
        p.a.receive(DataPacket(11, psn, vaddr, rkey, payload, meta=PathMeta(ev=ev)), p.now)
    a = p.a.counters
    assert a.data_bytes_placed == 0
    assert a.refused_writes["BAD_RKEY"] + sum(
        a.malformed.values()
    ) + a.duplicates_received + a.out_of_window == len(pkts)


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.builds(
                Sack,
                st.just(11),
                st.integers(-2, (1 << 24) + 2),
                st.integers(-2, (1 << 24) + 2),
                st.integers(-1, (1 << 64) + 1),
                st.integers(-1, (1 << 32) + 1),
                st.booleans(),
                st.integers(-1, 1 << 65),
                st.integers(-1, 1 << 17),
            ),
            st.builds(
                Nack,
                st.just(11),
                st.integers(-2, (1 << 24) + 2),
                st.integers(-1, 9),
                st.integers(-1, (1 << 32) + 1),
            ),
            st.builds(
                Probe, st.integers(0, 30), st.integers(-1, (1 << 32) + 1), st.integers(-1, (1 << 32) + 1)
            ),
            st.builds(
                ProbeAck, st.integers(0, 30), st.integers(-1, (1 << 32) + 1), st.integers(-1, (1 << 32) + 1)
            ),
        ),
        max_size=30,
    )
)
def test_nonsense_control_messages_never_break_the_sender(msgs: list[Message]) -> None:
    p = make_pair(size=1 << 14)
    _, acts = p.a.post_write(random.Random(5).randbytes(1 << 14), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    c = p.a.counters
    for m in msgs:
        before = sum(c.malformed.values())
        p.absorb(p.a, p.a.receive(m, p.now))  # must not raise
        p.now += 10
        bad = not 0 <= m.meta.ev < 1 << 32
        if isinstance(m, Sack):
            bad |= not (
                0 <= m.cum_psn < 1 << 24
                and 0 <= m.base_psn < 1 << 24
                and 0 <= m.bitmap < 1 << 64
                and 0 <= m.echo_ev < 1 << 32
                and 0 <= m.echo_ts < 1 << 64
                and 0 <= m.port_status < 1 << 16
            )
        elif isinstance(m, Nack):
            bad |= not (0 <= m.psn < 1 << 24 and 0 <= m.echo_ev < 1 << 32) or not 1 <= m.reason <= 5
        else:
            bad |= not (0 <= m.probe_id < 1 << 32 and 0 <= m.ev_under_test < 1 << 32)
        assert (sum(c.malformed.values()) > before) == bad, m
    p.fire_timers()  # timers still work after all that
