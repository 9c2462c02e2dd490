"""DATA as one ``DataBurst`` per core call (``TransportConfig.data_bursts``, the agent without a
pacer) sends what a ``Transmit`` per packet sends: the same packets, in the same order, with
the same AckReq bits, through losses and resends; and the codec writes the same bytes from a
burst's fields (``FrameEncoder.encode_data_into``) as from the ``DataPacket`` it stands for,
refusing the same values."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from mrc_host.core import DataBurst, Endpoint, Mode, PathSpace, Transmit, TransportConfig
from mrc_host.core.sender import burst_packet
from mrc_host.wire.codec import FrameEncoder
from mrc_host.wire.messages import DataFlag, DataPacket, Dscp, Ecn, Opcode, PathMeta
from mrc_host.wire.samples import SAMPLE_ADDRESSING
from mrc_host.wire.samples import SAMPLE_CARRIER as _CARRIER

RKEY = 0x1234
SAMPLE_CARRIER = _CARRIER.packed
BASE = 0x10000


def _pair(bursts: bool, seed: int) -> tuple[Endpoint, Endpoint]:
    cfg = replace(TransportConfig(mode=Mode.MRC, mtu=1024, initial_psn=0xFFFF00), data_bursts=bursts)
    space = PathSpace(planes=2, t1_count=4)
    snd = Endpoint(local_qp=1, peer_qp=2, config=cfg, paths=space, rng=random.Random(seed))
    rcv = Endpoint(local_qp=2, peer_qp=1, config=replace(cfg, data_bursts=False), paths=space,
                   rng=random.Random(seed + 1))  # fmt: skip
    rcv.register_region(BASE, 1 << 20, RKEY)
    return snd, rcv


def _data(actions: list[object]) -> list[DataPacket]:
    """The DATA packets ``actions`` send, in order (a burst's as the Transmits it stands for)."""
    out: list[DataPacket] = []
    for a in actions:
        if isinstance(a, DataBurst):
            out += [burst_packet(a, i) for i in range(len(a.recs))]
        elif isinstance(a, Transmit) and isinstance(a.msg, DataPacket):
            out.append(a.msg)
    return out


def _run(bursts: bool, seed: int) -> tuple[list[list[DataPacket]], bool]:
    """A 200 KiB write, every 9th DATA packet lost, rounds of 10 µs: each round's DATA, and
    whether the write completed."""
    snd, rcv = _pair(bursts, seed)
    now = 1_000
    data = random.Random(seed).randbytes(200 << 10)
    _msg, acts = snd.post_write(data, BASE, RKEY, now)
    rounds: list[list[DataPacket]] = []
    sent = 0
    done = False
    for _ in range(400):
        pkts = _data(acts)
        rounds.append(pkts)
        bursts_seen = [a for a in acts if isinstance(a, DataBurst)]
        assert bool(bursts_seen) == (bursts and bool(pkts))  # (one mode or the other, never both)
        now += 10_000
        replies: list[object] = []
        for p in pkts:
            sent += 1
            if sent % 9:
                replies += rcv.receive(p, now)
        acts = []
        for r in replies:
            if isinstance(r, Transmit):
                acts += snd.receive(r.msg, now)
        acts += snd.on_timer(now)
        done = done or any(type(a).__name__ == "MessageSent" for a in acts)
        if done and snd.sender.idle():
            break
    return rounds, done


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_burst_sends_what_a_transmit_per_packet_sends(seed: int) -> None:
    plain, ok_plain = _run(False, seed)
    burst, ok_burst = _run(True, seed)
    assert ok_plain and ok_burst
    assert sum(len(r) for r in plain) > 200  # (resends among them)
    assert any(p.flags & DataFlag.RETRANSMISSION for r in plain for p in r)
    assert any(p.ack_req for r in plain for p in r)
    assert burst == plain


def _fields(m: DataPacket) -> tuple[int, int, int, int, int, int, int, int, int, int, int, int, int]:
    meta = m.meta
    return (m.qp, m.psn, int(m.ack_req), meta.ev, int(meta.dscp), int(meta.ecn), m.ack_echo, m.vaddr,
            m.rkey, m.msg_id, m.send_ts, int(m.flags), int(m.opcode))  # fmt: skip


def _random_packet(rng: random.Random) -> DataPacket:
    return DataPacket(
        rng.getrandbits(24), rng.getrandbits(24), rng.getrandbits(64), rng.getrandbits(32),
        rng.randbytes(rng.choice([0, 1, 3, 64, 1024, 4096])), msg_id=rng.getrandbits(32),
        send_ts=rng.getrandbits(64), flags=DataFlag(rng.getrandbits(2)),
        opcode=rng.choice([Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE, Opcode.WRITE_LAST, Opcode.WRITE_ONLY]),
        meta=PathMeta(rng.getrandbits(32), rng.choice(list(Ecn)), rng.choice(list(Dscp))),
        ack_req=rng.random() < 0.5, ack_echo=rng.getrandbits(14),
    )  # fmt: skip


def test_a_packet_written_from_its_fields_is_the_packet_written_from_its_message() -> None:
    rng = random.Random(7)
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    for _ in range(2_000):
        m = _random_packet(rng)
        psum = -1
        a = memoryview(bytearray(rng.randbytes(9_000)))
        b = memoryview(bytearray(a))
        off = rng.randrange(0, 64)
        n1 = enc.encode_into(m, SAMPLE_CARRIER, a, off, 8_800, psum)
        n2 = enc.encode_data_into(SAMPLE_CARRIER, b, off, 8_800, psum, m.payload, _fields(m))
        assert n1 == n2 and a.tobytes() == b.tobytes()
        assert bytes(a[off : off + n1]) == enc.encode(m, SAMPLE_CARRIER)
    short = _random_packet(rng)
    assert enc.encode_data_into(SAMPLE_CARRIER, memoryview(bytearray(100)), 0, 100, -1, b"x" * 64,
                                _fields(short)) == -(146 + 64 + 4)  # fmt: skip


@pytest.mark.parametrize(
    "index, value",
    [(0, 1 << 24), (1, 1 << 24), (3, 1 << 32), (3, -1), (4, 64), (5, 4), (6, 1 << 14), (6, -1),
     (7, 1 << 64), (8, 1 << 32), (9, 1 << 32), (10, 1 << 64)],
)  # fmt: skip
def test_a_field_out_of_range_is_refused_from_fields_as_from_a_message(index: int, value: int) -> None:
    enc = FrameEncoder(SAMPLE_ADDRESSING)
    m = DataPacket(1, 2, 3, 4, b"abcd", msg_id=5, send_ts=6)
    fields = list(_fields(m))
    fields[index] = value
    with pytest.raises(ValueError):
        enc.encode_data_into(SAMPLE_CARRIER, memoryview(bytearray(300)), 0, 300, -1, b"abcd",
                             tuple(fields))  # type: ignore[arg-type]  # fmt: skip
