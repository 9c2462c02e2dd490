"""BMv2 data-plane tests of p4src/mrc_switch.p4, driven over P4Runtime (PTF style, scapy + raw sockets).

Each test programs the switch through its P4Info names, sends frames built by the
MRC codec (mrc_host.wire) into a port and checks what comes out of the others,
byte for byte where the program's behaviour is fully defined. Absence of output is
never inferred from a pause: a dropped frame is followed by a "sentinel" frame on
the same path, and once the sentinel arrives the drop counter must say why the
others did not.
"""

from __future__ import annotations

import math
import struct
from ipaddress import IPv6Address

import pytest
from bmv2_lab import wait_for
from conftest import H0, H1, IN_PORT, OWN, PORT_OF, T1A, T1B, Switch
from finsy.proto import p4i
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Ether
from scapy.packet import Raw

from linux_target.p4info_compare import p4info_difference
from mrc_fabric.addressing import MRC_UDP_PORT, carrier, host_usid, nic_address, shift, t0_usid, usid_prefix
from mrc_fabric.drop_reasons import DropReason
from mrc_fabric.p4info import load_p4info
from mrc_host.wire.codec import decode, encode, trim
from mrc_host.wire.framing import FrameAddressing
from mrc_host.wire.messages import (
    Connect,
    ConnectAck,
    Credit,
    CreditRequest,
    DataPacket,
    Dscp,
    Ecn,
    Frame,
    PathMeta,
)
from mrc_host.wire.samples import sample_messages

pytestmark = [pytest.mark.bmv2, pytest.mark.root]  # root: veths and raw sockets

DROP_NO_ROUTE, DROP_HOP_LIMIT, DROP_FAULT, DROP_TRIMMED, DROP_MALFORMED = (
    DropReason.NO_ROUTE.cell,
    DropReason.HOP_LIMIT.cell,
    DropReason.FAULT.cell,
    DropReason.TRIMMED.cell,
    DropReason.MALFORMED.cell,
)
SRC_MAC = "02:00:00:00:00:01"
SWITCH_MAC = "02:00:00:00:00:fe"  # what the sender addresses the switch with
TRIMMED_LEN = 146
QDEPTH_NEVER = (1 << 19) - 1


def data_frame(
    usids: list[int],
    psn: int = 0,
    payload_len: int = 256,
    hop_limit: int = 64,
    dscp: int = Dscp.DATA,
    ecn: int = Ecn.ECT0,
    ev: int = 0x0123_4567,
) -> bytes:
    """An MRC DATA frame from host 0 to host 1 over the given uSID carrier."""
    addressing = FrameAddressing(
        src_mac=SRC_MAC, dst_mac=SWITCH_MAC, outer_src=nic_address(0, 0),
        inner_src=nic_address(0, 0), inner_dst=nic_address(0, 1), hop_limit=hop_limit,
    )  # fmt: skip
    payload = bytes((psn + i) & 0xFF for i in range(payload_len))
    msg = DataPacket(
        qp=7, psn=psn, vaddr=0x1000 + psn * payload_len, rkey=0xABCD, payload=payload, msg_id=psn // 16,
        meta=PathMeta(ev=ev, ecn=ecn, dscp=dscp),
    )  # fmt: skip
    return encode(msg, carrier(usids), addressing)


def psn_of(frame: bytes) -> int:
    return decode(frame).psn


def forwarded(frame: bytes, dmac: int, new_dst: IPv6Address) -> bytes:
    """What the program must send for ``frame``: MACs rewritten, hop limit - 1, outer dst replaced."""
    out = bytearray(frame)
    out[6:12] = out[0:6]  # source MAC = the MAC the frame was addressed to
    out[0:6] = dmac.to_bytes(6, "big")
    out[14 + 7] -= 1
    out[14 + 24 : 14 + 40] = new_dst.packed
    return bytes(out)


def outer(frame: bytes) -> IPv6:
    return Ether(frame)[IPv6]


def send_with_sentinel(sw: Switch, frames: list[bytes], sentinel_usids: list[int], out_port: int) -> bytes:
    """Send ``frames`` then one frame that is forwarded to ``out_port``; return it once it arrived.

    BMv2 keeps the order of frames from one port to one egress queue, so when the
    sentinel is out, every earlier frame has either left or been dropped.
    """
    tap = sw.lab.taps[out_port]
    sentinel = data_frame(sentinel_usids, psn=0xFFFFF, dscp=Dscp.CONTROL)
    sw.lab.taps[IN_PORT].send([*frames, sentinel])
    tap.wait(1, match=lambda f: _is_psn(f, 0xFFFFF))
    return sentinel


def send_paced(sw: Switch, frames: list[bytes], batch: int = 100) -> None:
    """Send in batches, each once the switch has taken in the previous one (port_rx): a veth
    and BMv2's capture buffer hold only so many frames, and this test is not about them."""
    base = sw.p4rt.read_counter("port_rx", IN_PORT).packets
    for start in range(0, len(frames), batch):
        chunk = frames[start : start + batch]
        sw.lab.taps[IN_PORT].send(chunk)
        want = base + start + len(chunk)
        wait_for(
            lambda w=want: sw.p4rt.read_counter("port_rx", IN_PORT).packets >= w, 10, f"{want} frames in"
        )


def _is_psn(frame: bytes, psn: int) -> bool:
    try:
        return psn_of(frame) == psn
    except ValueError:
        return False


def all_taps_frames(sw: Switch) -> dict[int, list[bytes]]:
    return {p: tap.frames() for p, tap in sw.lab.taps.items() if p != IN_PORT}


# -- uSID shift and routing -----------------------------------------------------------------------

CARRIERS = {
    # same T0: own uSID, then the host
    "2-usid": [OWN, H1],
    # ECMP-baseline shape: own, the far T0, the far host
    "3-usid": [OWN, t0_usid(0, 1), host_usid(0, 3)],
    # the spraying shape: own, a T1, the far T0, the far host
    "4-usid": [OWN, T1B, t0_usid(0, 1), host_usid(0, 3)],
    # a full carrier: all 80 bits after the active uSID move
    "6-usid": [OWN, T1A, 0x4123, 0x8456, 0x4789, 0xC3FF],
}


@pytest.mark.parametrize("name", list(CARRIERS))
def test_usid_shift_matches_the_reference_shift(switch: Switch, name: str) -> None:
    usids = CARRIERS[name]
    switch.t0_tables()
    switch.route(t0_usid(0, 1), 3)  # the far T0 of the ECMP-baseline carrier sits behind port 3
    next_usid = usids[1]
    out_port = PORT_OF.get(next_usid, 3)
    frames = [data_frame(usids, psn=i) for i in range(3)]
    switch.lab.taps[IN_PORT].send(frames)
    got = switch.lab.taps[out_port].wait(3)
    want_dst = shift(carrier(usids))
    assert [outer(f).dst for f in got] == [str(want_dst)] * 3
    assert got == [forwarded(f, switch.dmac(out_port), want_dst) for f in frames]
    assert outer(got[0]).hlim == 63
    for p, frs in all_taps_frames(switch).items():
        assert p == out_port or frs == [], f"frame leaked to port {p}"


def test_transit_packet_without_own_usid_is_routed_unchanged(switch: Switch) -> None:
    switch.t0_tables()
    usids = [T1A, t0_usid(0, 1), H0]  # active uSID is a T1, not ours: route on it, no shift
    frame = data_frame(usids)
    switch.lab.taps[IN_PORT].send([frame])
    (got,) = switch.lab.taps[PORT_OF[T1A]].wait(1)
    assert got == forwarded(frame, switch.dmac(PORT_OF[T1A]), carrier(usids))


def test_table_miss_is_dropped_and_counted(switch: Switch) -> None:
    switch.t0_tables()
    unknown = host_usid(0, 9)
    frames = [data_frame([OWN, unknown], psn=i) for i in range(5)]
    send_with_sentinel(switch, frames, [OWN, H1], PORT_OF[H1])
    assert switch.drops(DROP_NO_ROUTE) == 5
    assert switch.lab.taps[PORT_OF[H1]].frames(lambda f: psn_of(f) < 5) == []


def test_hop_limit_one_is_dropped_two_leaves_with_one(switch: Switch) -> None:
    switch.t0_tables()
    expiring = [data_frame([OWN, H1], psn=i, hop_limit=1) for i in range(3)]
    send_with_sentinel(switch, expiring, [OWN, H1], PORT_OF[H1])
    assert switch.drops(DROP_HOP_LIMIT) == 3
    assert switch.lab.taps[PORT_OF[H1]].frames(lambda f: psn_of(f) < 3) == []

    switch.lab.taps[IN_PORT].send([data_frame([OWN, H1], psn=7, hop_limit=2)])
    (got,) = switch.lab.taps[PORT_OF[H1]].wait(1, match=lambda f: psn_of(f) == 7)
    assert outer(got).hlim == 1


def test_non_ipv6_frame_is_dropped_as_malformed(switch: Switch) -> None:
    switch.t0_tables()
    arp = bytes(Ether(src=SRC_MAC, dst="ff:ff:ff:ff:ff:ff") / ARP(psrc="10.0.0.1", pdst="10.0.0.2"))
    send_with_sentinel(switch, [arp, arp], [OWN, H1], PORT_OF[H1])
    assert switch.drops(DROP_MALFORMED) == 2
    assert switch.p4rt.read_counter("port_rx", IN_PORT).packets == 3


# -- faults ---------------------------------------------------------------------------------------


def test_port_fault_black_hole_then_cleared(switch: Switch) -> None:
    switch.t0_tables()
    fault = switch.p4rt.table_entry("port_fault", {"port": PORT_OF[H1]}, "fault_drop")
    switch.p4rt.insert(fault)
    frames = [data_frame([OWN, H1], psn=i) for i in range(10)]
    # the sentinel goes to another port (the faulted one swallows everything)
    send_with_sentinel(switch, frames, [OWN, H0], PORT_OF[H0])
    assert switch.drops(DROP_FAULT) == 10
    assert switch.lab.taps[PORT_OF[H1]].frames() == []

    switch.p4rt.delete(fault)
    switch.lab.taps[IN_PORT].send(frames)
    assert len(switch.lab.taps[PORT_OF[H1]].wait(10)) == 10
    assert switch.drops(DROP_FAULT) == 10


def test_ingress_fault_black_hole(switch: Switch) -> None:
    switch.t0_tables()
    switch.p4rt.insert(switch.p4rt.table_entry("ingress_fault", {"port": 2}, "fault_drop"))
    switch.lab.taps[2].send([data_frame([OWN, H0], psn=i) for i in range(4)])
    # frames from port 1 are not affected; they also serve as the sentinel for port 2's frames
    # (ingress order across ports is not defined, so wait on the counter instead)
    wait_for(lambda: switch.drops(DROP_FAULT) == 4, 10, "4 ingress-fault drops")
    switch.lab.taps[IN_PORT].send([data_frame([OWN, H0], psn=100)])
    switch.lab.taps[PORT_OF[H0]].wait(1, match=lambda f: psn_of(f) == 100)
    assert switch.lab.taps[PORT_OF[H0]].frames(lambda f: psn_of(f) < 4) == []


def test_port_fault_random_loss_20_percent(switch: Switch) -> None:
    switch.t0_tables()
    prob = round(0.20 * 65536)
    switch.p4rt.insert(switch.p4rt.table_entry("port_fault", {"port": PORT_OF[H1]}, "fault_loss", prob=prob))
    n = 1000
    frames = [data_frame([OWN, H1], psn=i, payload_len=64) for i in range(n)]
    send_paced(switch, frames)
    send_with_sentinel(switch, [], [OWN, H0], PORT_OF[H0])
    wait_for(
        lambda: switch.drops(DROP_FAULT) + len(switch.lab.taps[PORT_OF[H1]].frames()) == n,
        20, "every frame either delivered or counted as a fault drop",
    )  # fmt: skip
    delivered = len(switch.lab.taps[PORT_OF[H1]].frames())
    lost = n - delivered
    sd = math.sqrt(n * 0.2 * 0.8)
    assert abs(lost - 0.2 * n) < 5 * sd, f"lost {lost} of {n}, expected about {0.2 * n:.0f}"
    assert switch.drops(DROP_FAULT) == lost
    assert len({psn_of(f) for f in switch.lab.taps[PORT_OF[H1]].frames()}) == delivered  # no duplicates


# -- ECN and trimming -----------------------------------------------------------------------------


def _burst(switch: Switch, out_port: int, frames: list[bytes], rate_pps: int) -> list[bytes]:
    """Send ``frames`` at once into a port drained at ``rate_pps``; return all that came out."""
    assert switch.lab.switch is not None
    switch.lab.switch.set_queue_rate(out_port, rate_pps)
    switch.lab.taps[IN_PORT].send(frames)
    return switch.lab.taps[out_port].wait(len(frames), timeout=10 + 2 * len(frames) / rate_pps)


def test_ecn_marks_ect_packets_behind_a_queue(switch: Switch) -> None:
    switch.t0_tables()
    out = PORT_OF[T1A]
    switch.policy(out, ecn=3, trim=QDEPTH_NEVER)
    usids = [OWN, T1A, t0_usid(0, 1), host_usid(0, 3)]
    frames = [
        data_frame(usids, psn=i, dscp=Dscp.RETX, ecn=Ecn.ECT0 if i % 2 == 0 else Ecn.NOT_ECT)
        for i in range(40)
    ]
    got = _burst(switch, out, frames, rate_pps=200)
    ecn = {psn_of(f): outer(f).tc & 0x3 for f in got}
    assert sorted(ecn) == list(range(40))
    assert all(ecn[i] == Ecn.NOT_ECT for i in range(1, 40, 2)), "a not-ECT packet was marked"
    marked = [i for i in range(0, 40, 2) if ecn[i] == Ecn.CE]
    assert marked, "no ECT packet was marked although the queue grew"
    assert ecn[0] == Ecn.ECT0, "the first packet met an empty queue"
    assert switch.p4rt.read_counter("ecn_marked", out).packets == len(marked)


def test_no_ecn_marking_on_last_hop_ports(switch: Switch) -> None:
    switch.t0_tables()
    out = PORT_OF[H1]
    switch.policy(out, ecn=1, trim=QDEPTH_NEVER, last_hop=True)
    frames = [data_frame([OWN, H1], psn=i, dscp=Dscp.RETX) for i in range(30)]
    got = _burst(switch, out, frames, rate_pps=200)
    assert {outer(f).tc & 0x3 for f in got} == {Ecn.ECT0}
    assert switch.p4rt.read_counter("ecn_marked", out).packets == 0


def test_trimming_under_congestion(switch: Switch) -> None:
    switch.t0_tables()
    out = PORT_OF[T1A]
    switch.policy(out, ecn=QDEPTH_NEVER, trim=4)
    usids = [OWN, T1A, t0_usid(0, 1), host_usid(0, 3)]
    new_dst = shift(carrier(usids))
    # 1. Congest the port with retransmissions (never trimmed), drained at 50 packets/s, until
    #    egress has recorded a queue above the trim threshold.
    assert switch.lab.switch is not None
    switch.lab.switch.set_queue_rate(out, 50)
    fillers = [data_frame(usids, psn=i, payload_len=1000, dscp=Dscp.RETX) for i in range(24)]
    switch.lab.taps[IN_PORT].send(fillers)
    wait_for(lambda: switch.qdepth(out) > 4, 5, "egress to record a queue deeper than 4")
    # 2. Data frames now meet a congested queue: they leave as headers, in the high-priority queue.
    data = [data_frame(usids, psn=100 + i, payload_len=1000) for i in range(8)]
    switch.lab.taps[IN_PORT].send(data)
    got = switch.lab.taps[out].wait(len(fillers) + len(data), timeout=15)

    assert sorted(psn_of(f) for f in got) == [*range(24), *range(100, 108)], "lost or duplicated frames"
    want = {psn_of(f): forwarded(f, switch.dmac(out), new_dst) for f in fillers + data}
    trimmed = [f for f in got if len(f) == TRIMMED_LEN]
    assert sorted(psn_of(f) for f in trimmed) == list(range(100, 108)), "exactly the data frames are trimmed"
    for f in trimmed:
        assert f == trim(want[psn_of(f)])  # the codec's reference trim, byte for byte
        o = outer(f)
        assert (o.tc >> 2, o.tc & 3, o.plen) == (Dscp.TRIMMED, Ecn.ECT0, 92)
        assert (o.payload.plen, struct.unpack(">H", f[98:100])[0]) == (52, 52)  # inner IPv6, UDP length
        assert decode(f).trimmed
    for f in got:
        if len(f) != TRIMMED_LEN:
            assert f == want[psn_of(f)]
    # higher priority: every trimmed frame left before the retransmissions still queued when it came
    order = [psn_of(f) for f in got]
    last_trimmed = max(order.index(p) for p in range(100, 108))
    assert any(p < 24 for p in order[last_trimmed + 1 :]), "trimmed frames did not overtake the queue"
    assert switch.drops(DROP_TRIMMED) == len(trimmed)


def congest_t1a(switch: Switch, fillers: int) -> tuple[int, list[int]]:
    """The port toward T1A trimming above 2 packets, drained at 50 packets/s, and ``fillers``
    retransmissions (never trimmed) sent into it until egress records a queue above that:
    (the port, the carrier's uSIDs that lead there)."""
    switch.t0_tables()
    out = PORT_OF[T1A]
    switch.policy(out, ecn=QDEPTH_NEVER, trim=2)
    usids = [OWN, T1A, t0_usid(0, 1), host_usid(0, 3)]
    assert switch.lab.switch is not None
    switch.lab.switch.set_queue_rate(out, 50)
    switch.lab.taps[IN_PORT].send(
        [data_frame(usids, psn=i, payload_len=500, dscp=Dscp.RETX) for i in range(fillers)]
    )
    wait_for(lambda: switch.qdepth(out) > 2, 5, "egress to record a queue deeper than 2")
    return out, usids


def test_only_whole_data_frames_are_trimmed(switch: Switch) -> None:
    """Under congestion, a DATA frame cut short before the end of its MRC header (or a non-MRC
    frame marked DATA) is forwarded as it is: trimming never claims bytes that are not there."""
    out, usids = congest_t1a(switch, 12)
    whole = data_frame(usids, psn=200, payload_len=500)
    short = data_frame(usids, psn=201)[:130]  # ends inside the RETH
    switch.lab.taps[IN_PORT].send([short, whole])
    got = switch.lab.taps[out].wait(14, timeout=15)
    lengths = sorted(len(f) for f in got if f[14 + 24 : 14 + 40] == shift(carrier(usids)).packed)
    assert 130 in lengths and TRIMMED_LEN in lengths
    (cut,) = [f for f in got if len(f) == 130]
    assert cut == forwarded(short, switch.dmac(out), shift(carrier(usids)))  # lengths and DSCP untouched
    assert switch.drops(DROP_TRIMMED) == 1


def control_frame(usids: list[int], msg: Frame, dscp: int) -> bytes:
    """``msg`` (a control message) from host 0 to host 1 over the given uSID carrier."""
    addressing = FrameAddressing(
        src_mac=SRC_MAC, dst_mac=SWITCH_MAC, outer_src=nic_address(0, 0),
        inner_src=nic_address(0, 0), inner_dst=nic_address(0, 1), hop_limit=64,
    )  # fmt: skip
    msg.meta = PathMeta(ev=0x0123_4567, ecn=Ecn.ECT0, dscp=dscp)
    return encode(msg, carrier(usids), addressing)


def test_control_messages_are_never_trimmed(switch: Switch) -> None:
    """Behind a queue above the trim threshold, every control message (SACK, NACK, PROBE,
    PROBE_ACK, CREDIT, CREDIT_REQUEST) is forwarded whole: the program trims only DATA opcodes,
    whatever the DSCP says (a CREDIT marked DATA too)."""
    out, usids = congest_t1a(switch, 12)
    controls = [m for m in sample_messages() if not isinstance(m, (DataPacket, Connect, ConnectAck))]
    assert {Credit, CreditRequest} <= {type(m) for m in controls}
    frames = [control_frame(usids, m, Dscp.CONTROL) for m in controls]
    frames.append(control_frame(usids, Credit(qp=7, granted=1 << 20), Dscp.DATA))
    switch.lab.taps[IN_PORT].send(frames)
    got = switch.lab.taps[out].wait(12 + len(frames), timeout=15)
    new_dst = shift(carrier(usids))
    for f in frames:
        assert forwarded(f, switch.dmac(out), new_dst) in got, decode(f)
    assert switch.drops(DROP_TRIMMED) == 0


def test_bad_outer_headers_are_dropped_as_malformed(switch: Switch) -> None:
    switch.t0_tables()
    good = data_frame([OWN, H1])
    runt = good[: 14 + 20]  # ends inside the outer IPv6 header
    version4 = good[:14] + bytes([0x40 | (good[14] & 0x0F)]) + good[15:]  # IP version 4 in an IPv6 EtherType
    send_with_sentinel(switch, [runt, version4], [OWN, H1], PORT_OF[H1])
    assert switch.drops(DROP_MALFORMED) == 2
    assert len(switch.lab.taps[PORT_OF[H1]].frames()) == 1  # the sentinel only


# -- ECMP baseline --------------------------------------------------------------------------------


def test_ecmp_group_spreads_flows_and_keeps_each_flow_on_one_member(switch: Switch) -> None:
    switch.own_usid()
    far_t0 = usid_prefix(t0_usid(0, 1))
    p = switch.p4rt
    p.insert(p.table_entry("usid_route", {"dst_addr": (int(far_t0.network_address), 48)}, "set_ecmp",
                           group_id=1, size=2))  # fmt: skip
    for member, port in ((0, 3), (1, 4)):
        p.insert(p.table_entry("ecmp_member", {"group_id": 1, "member": member}, "set_next_hop",
                               port=port, dmac=switch.dmac(port)))  # fmt: skip
    usids = [OWN, t0_usid(0, 1), host_usid(0, 3)]
    frames = [data_frame(usids, psn=i, ev=(i * 0x9E3779B1) & 0xFFFFFFFF) for i in range(64)]
    switch.lab.taps[IN_PORT].send(frames + frames)  # every flow twice
    wait_for(lambda: sum(len(switch.lab.taps[q].frames()) for q in (3, 4)) == 128, 10, "128 ECMP frames")
    by_port = {q: [psn_of(f) for f in switch.lab.taps[q].frames()] for q in (3, 4)}
    assert by_port[3] and by_port[4], f"one member got nothing: {by_port}"
    assert set(by_port[3]).isdisjoint(by_port[4]), "a flow was split over two members"


def test_ecmp_group_of_size_zero_drops(switch: Switch) -> None:
    switch.own_usid()
    switch.route(H0, PORT_OF[H0])
    far_t0 = usid_prefix(t0_usid(0, 1))
    p = switch.p4rt
    p.insert(p.table_entry("usid_route", {"dst_addr": (int(far_t0.network_address), 48)}, "set_ecmp",
                           group_id=1, size=0))  # fmt: skip
    send_with_sentinel(switch, [data_frame([OWN, t0_usid(0, 1), host_usid(0, 3)])], [OWN, H0], PORT_OF[H0])
    assert switch.drops(DROP_NO_ROUTE) == 1


# -- counters and P4Info --------------------------------------------------------------------------


def test_port_counters_count_packets_and_bytes(switch: Switch) -> None:
    switch.t0_tables()
    frames = [data_frame([OWN, H1], psn=i, payload_len=100 + i) for i in range(20)]
    switch.lab.taps[IN_PORT].send(frames)
    switch.lab.taps[PORT_OF[H1]].wait(20)
    wait_for(lambda: switch.p4rt.read_counter("port_tx", PORT_OF[H1]).packets == 20, 5, "port_tx = 20")
    rx = switch.p4rt.read_counter("port_rx", IN_PORT)
    assert (rx.packets, rx.bytes) == (20, sum(len(f) for f in frames))
    assert switch.p4rt.read_counter("port_tx", PORT_OF[H1]).bytes == sum(len(f) for f in frames)
    cells = dict(switch.p4rt.read_counters("port_tx"))
    assert {i for i, c in cells.items() if c.packets} == {PORT_OF[H1]}


def test_switch_reports_the_committed_p4info(switch: Switch) -> None:
    got: p4i.P4Info = switch.p4rt.get_p4info()
    assert p4info_difference(load_p4info(), got) is None


def test_plain_udp_over_ipv6_is_forwarded_on_its_outer_header(switch: Switch) -> None:
    """Not MRC (no inner header): still forwarded by the outer destination, never trimmed."""
    switch.t0_tables()
    switch.policy(PORT_OF[H1], ecn=QDEPTH_NEVER, trim=0)
    ip = IPv6(src=str(nic_address(0, 0)), dst=str(carrier([OWN, H1])), tc=Dscp.DATA << 2)
    pkt = Ether(src=SRC_MAC, dst=SWITCH_MAC) / ip / UDP(sport=1, dport=MRC_UDP_PORT) / Raw(b"x" * 300)
    switch.lab.taps[IN_PORT].send([bytes(pkt)])
    (got,) = switch.lab.taps[PORT_OF[H1]].wait(1)
    assert len(got) == len(pkt) and outer(got).dst == str(carrier([H1]))
