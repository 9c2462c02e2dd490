"""Hostile input at the agent: DATA frames forged onto more distinct EVs than a receiver keeps
rows for (``MAX_PEER_EV_ROWS``), each with a valid ICRC, in the middle of a transfer. The rows
stop at the cap, the rest is counted in ``recv_ev_overflow`` (the connection's counters and
the stats' totals) and the transfer still verifies.

Frames go to a real agent's packet path (agent_duo), copies of a DATA frame the receiver
placed with the EV's bits (flow labels, UDP source port) changed and the ICRC recomputed, as a
forger's would be.
"""

from __future__ import annotations

import random
import struct

from agent_duo import FakeClient, Net

from mrc_fabric.ev import MAX_PEER_EV_ROWS, PLANE_SHIFT, flow_label, udp_sport
from mrc_host.agent.commands import TOTALS
from mrc_host.wire.codec import INNER_OFF, OUTER_OFF, UDP_OFF, compute_icrc, decode_frame
from mrc_host.wire.messages import DataPacket


def with_ev(frame: bytes, ev: int) -> bytes:
    """``frame`` carrying ``ev`` (both flow labels and the UDP source port), ICRC recomputed."""
    f = bytearray(frame)
    label = flow_label(ev)
    for off in (OUTER_OFF, INNER_OFF):
        f[off + 1] = (f[off + 1] & 0xF0) | (label >> 16)
        f[off + 2 : off + 4] = struct.pack(">H", label & 0xFFFF)
    f[UDP_OFF : UDP_OFF + 2] = struct.pack(">H", udp_sport(ev))
    f[-4:] = struct.pack("<I", compute_icrc(bytes(f[INNER_OFF:-4])))
    return bytes(f)


def test_forged_ev_flood_is_bounded_counted_and_the_transfer_verifies() -> None:
    net = Net()
    client = FakeClient()
    net["uch0"].send("uch3", 256 << 10, net.now, client=client)
    rx = net["uch3"]
    net.run(lambda: any(k.endpoint.counters.data_packets_received >= 8 for k in rx.peers.conns.values()))
    conn = next(iter(rx.peers.conns.values()))
    c = conn.endpoint.counters
    placed = next(f for _t, src, f in net.log if src == "uch0" and isinstance(decode_frame(f), DataPacket))
    ev = decode_frame(placed).meta.ev
    rng = random.Random(20)
    forged: set[int] = set()
    while len(forged) < MAX_PEER_EV_ROWS + 2_000:  # the plane it came on, any T1 and entropy
        forged.add((ev >> PLANE_SHIFT << PLANE_SHIFT) | rng.getrandbits(PLANE_SHIFT))
    forged.discard(ev)
    rows, answered = len(c.tables[2]), len(rx.out)
    for value in forged:
        rx.deliver(with_ev(placed, value), net.now)
    assert rx.malformed == {}  # every frame valid: taken as DATA (a duplicate), not refused
    held = {row.ev for row in c.tables[2].rows()}
    assert len(held) == MAX_PEER_EV_ROWS and ev in held
    overflow = len(forged - held)  # a frame on each EV left without a row
    assert c.recv_ev_overflow == overflow == rows + len(forged) - MAX_PEER_EV_ROWS
    assert conn.describe()["counters"]["recv_ev_overflow"] == overflow
    assert "recv_ev_overflow" in TOTALS  # (``stats``: summed over the connections)
    del rx.out[answered:]  # (the answers go to the address the frames claim: not on this net)
    net.run(lambda: client.final is not None)
    assert client.final is not None and client.final["ok"] and client.final["summary"]["verified"]
    assert len(c.tables[2]) == MAX_PEER_EV_ROWS
