"""Hostile input: the peer's EVs come off the wire, where 2**32 values pass the ICRC. A
receiver keeps at most ``MAX_PEER_EV_ROWS`` rows of them; DATA on any further EV is still
placed and counted in ``recv_ev_overflow``, and the transfer around it verifies."""

from __future__ import annotations

import random
from ipaddress import IPv6Address

from mrc_fabric.addressing import MAX_PLANES
from mrc_fabric.ev import MAX_PEER_EV_ROWS, ev_compose
from mrc_host.core.config import MAX_PROFILE_EVS
from mrc_host.core.counters import COUNTER_FIELDS, Counters
from mrc_host.ev_profile import _COUNTS
from mrc_host.sim.loopback import BASE, RKEY, Pair, make_pair
from mrc_host.wire.codec import FrameAddressing, encode
from mrc_host.wire.messages import DataPacket, Opcode, PathMeta

ADDR = FrameAddressing(
    "02:00:00:00:00:01", "02:00:00:00:00:02", "fcbb:bb00:c000::1", "fcbb:bb00:c000::1", "fcbb:bb00:c001::1"
)
CARRIER = IPv6Address("fcbb:bb00:4000:8000:4001:c001::")
SIZE = 64 * 1024


def forged_evs(n: int, seed: int = 7) -> list[int]:
    """``n`` distinct EVs (plane 0-1, T1 4-1023, any entropy): none of them the pair's (T1 0-3)."""
    rng = random.Random(seed)
    out: set[int] = set()
    while len(out) < n:
        out.add(ev_compose(rng.randrange(2), rng.randrange(4, 1024), rng.getrandbits(18)))
    return list(out)


def forged(ev: int, psn: int) -> DataPacket:
    """DATA to the receiver's QP on ``ev``: a copy of a packet it placed (a duplicate)."""
    meta = PathMeta(ev=ev)
    return DataPacket(22, psn, BASE, RKEY, b"x" * 64, opcode=Opcode.WRITE_ONLY, msg_id=9, meta=meta)


def half_sent_pair(data: bytes) -> Pair:
    """A pair whose sender posted ``data`` and whose receiver placed its first packets."""
    p = make_pair(size=SIZE)
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    first, p.in_flight = p.in_flight[:4], p.in_flight[4:]
    for dst, msg in first:
        p.absorb(dst, dst.receive(msg, p.now))
    return p


def test_cap_is_above_any_legitimate_peer_set() -> None:
    # OCP's largest profile plus the most backups a host takes, on every plane: a peer's
    # set is drawn once, so that is every EV it can send on; the cap leaves half as much again
    largest = MAX_PROFILE_EVS + MAX_PLANES * _COUNTS["backups_per_plane"][1]
    assert 3 * largest <= 2 * MAX_PEER_EV_ROWS


def test_received_rows_stop_at_the_cap_and_overflow_is_counted() -> None:
    c = Counters()
    extra = 1_000
    evs = forged_evs(MAX_PEER_EV_ROWS + extra)
    for ev in evs:
        c.recv_row(ev).packets += 1
    recv = c.tables[2]
    assert len(recv) == MAX_PEER_EV_ROWS
    assert c.recv_ev_overflow == extra
    held = evs[0]
    c.recv_row(held).packets += 1  # an EV that has its row keeps counting into it
    assert recv.get(held, "packets") == 2 and c.recv_ev_overflow == extra
    assert recv.find(evs[-1]) is None
    d = c.as_dict()
    assert "recv_ev_overflow" in COUNTER_FIELDS and d["recv_ev_overflow"] == extra
    per_ev = d["per_ev"]
    assert isinstance(per_ev, dict) and len(per_ev) == MAX_PEER_EV_ROWS


def test_forged_ev_flood_keeps_rows_bounded_and_transfer_verifies() -> None:
    data = random.Random(5).randbytes(SIZE)
    p = half_sent_pair(data)
    c = p.b.counters
    evs = forged_evs(MAX_PEER_EV_ROWS + 5_000)
    flood, wire = evs[:-200], evs[-200:]
    before = len(c.tables[2])  # the pair's own EVs, of the packets placed
    for ev in flood:
        p.b.receive(forged(ev, 0), p.now)  # (its answers go to the claimed peer: dropped)
    # the last ones as frames with a valid ICRC, through the decoder
    malformed = sum(c.malformed.values())
    for ev in wire:
        p.b.receive_frame(encode(forged(ev, 0), CARRIER, ADDR), p.now)
    assert sum(c.malformed.values()) == malformed  # (a valid frame: accepted, not refused)
    assert len(c.tables[2]) <= MAX_PEER_EV_ROWS
    assert before > 0 and c.recv_ev_overflow == before + len(evs) - MAX_PEER_EV_ROWS
    placed = c.data_bytes_placed
    p.settle()
    assert c.data_bytes_placed > placed  # the rest placed after the flood, on known EVs
    region = p.b.regions.get(RKEY)
    assert region is not None and bytes(region.buffer) == data
    assert len(p.received_done()) == 1 and p.sent_done()[0].ok
