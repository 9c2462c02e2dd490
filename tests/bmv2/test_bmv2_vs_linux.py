"""Differential tests: the same frames through BMv2 and through the Linux SRv6 target.

Both switches get the same P4Runtime writes from the same client code. The Linux switch
lives in namespace ``pb-lsw`` and is fed from ``pb-lhost``; the BMv2 switch is the bench of
conftest.

1. Random uSID carriers: every carrier must leave both on the same port with the same outer
   destination and hop limit, or be dropped by both. Carriers never repeat the switch's own
   uSID after the first position: Linux would shift it a second time in the same pass (its
   lookup of the shifted address hits the local End route again) where BMv2 routes it; that is
   not a carrier MRC ever builds.
2. ECN and trimming on a congested port: the same ``port_policy`` entry, the same drain rate
   (BMv2's queue rate in packets/s, the Linux port's HTB rate in bits/s for full frames), the
   same paced burst of ECT(0) DATA frames; which frames each target marked CE and trimmed must
   agree within the offsets and tolerance that the two queue models predict (see
   ``test_congested_port_marks_and_trims_on_bmv2_and_linux_alike``).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import queue_models
from bmv2_lab import wait_for
from bmv2_p4rt import P4RuntimeClient
from conftest import H0, H1, IN_PORT, OWN, PORT_OF, T1A, T1B, Switch, write_policy
from linux_lab import NetnsLab, Sniffer, run, send_frames, send_paced
from linux_lab import leftovers as linux_leftovers
from scapy.layers.inet import UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw
from test_bmv2_dataplane import TRIMMED_LEN, data_frame, forwarded, outer, psn_of

from linux_target.egress import QUEUE_CELL_BYTES, missing_tools
from mrc_fabric.addressing import carrier, host_usid, nic_address, shift, t0_usid, top48, usid_prefix
from mrc_fabric.drop_reasons import DropReason
from mrc_fabric.p4info import load_p4info
from mrc_host.wire.codec import trim
from mrc_host.wire.messages import Ecn
from topologies.bmv2_switch import REALTIME_PRIORITY, realtime_prefix

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

MARKER = b"pb-diff-"
HOST_NS, SW_NS = "pb-lhost", "pb-lsw"
POOL = [H0, H1, T1A, T1B, host_usid(0, 15), t0_usid(0, 5), 0x8123]  # routed and unknown uSIDs
N_CARRIERS = 60


@dataclass
class LinuxSwitch:
    p4rt: P4RuntimeClient
    lab: NetnsLab
    sniffers: dict[int, Sniffer]
    in_mac: str

    @staticmethod
    def host_if(port: int) -> str:
        return f"pbl{port}h"

    @staticmethod
    def switch_if(port: int) -> str:
        return f"pbl{port}s"


@pytest.fixture(scope="module")
def linux_switch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LinuxSwitch]:
    run_dir: Path = tmp_path_factory.mktemp("pb-linux")
    with NetnsLab(run_dir) as lab:
        sniffers: dict[int, Sniffer] = {}
        client = None
        try:
            lab.add_ns(HOST_NS)
            lab.add_ns(SW_NS)
            for p in PORT_OF.values():
                lab.veth(HOST_NS, LinuxSwitch.host_if(p), SW_NS, LinuxSwitch.switch_if(p))
            address = lab.start_shim(
                SW_NS, "pb-lsw", 11, {p: LinuxSwitch.switch_if(p) for p in PORT_OF.values()}
            )
            client = P4RuntimeClient(address, 11)
            client.arbitrate()
            client.set_pipeline(load_p4info(), b"")
            for p in PORT_OF.values():
                sniffers[p] = Sniffer(HOST_NS, LinuxSwitch.host_if(p), MARKER)
            in_mac = lab.mac(SW_NS, LinuxSwitch.switch_if(IN_PORT))
            yield LinuxSwitch(client, lab, sniffers, f"{in_mac:012x}")
        finally:
            for s in sniffers.values():
                s.close()
            if client is not None:
                client.close()
    assert linux_leftovers("pb-l") == []


@pytest.fixture
def linux(linux_switch: LinuxSwitch) -> Iterator[LinuxSwitch]:
    """The Linux switch with a freshly committed pipeline (no entries), as ``switch`` is for BMv2;
    committed again afterwards, so a test using ``linux_switch`` directly still finds no entries."""
    linux_switch.p4rt.set_pipeline(load_p4info(), b"")
    try:
        yield linux_switch
    finally:
        linux_switch.p4rt.set_pipeline(load_p4info(), b"")


def program(p4rt: P4RuntimeClient, dmac_of) -> None:
    """The same entries on either target: own uSID and one /48 per neighbour."""
    p4rt.insert(
        p4rt.table_entry("my_usid", {"dst_top48": top48(usid_prefix(OWN).network_address)}, "usid_shift")
    )
    for usid, port in PORT_OF.items():
        prefix = usid_prefix(usid)
        p4rt.insert(
            p4rt.table_entry(
                "usid_route", {"dst_addr": (int(prefix.network_address), 48)}, "set_next_hop",
                port=port, dmac=dmac_of(port),
            )
        )  # fmt: skip


def random_carriers(rng: random.Random, n: int) -> list[list[int]]:
    out = []
    for _ in range(n):
        length = rng.randint(2, 6)
        first = OWN if rng.random() < 0.75 else rng.choice(POOL)
        out.append([first, *(rng.choice(POOL) for _ in range(length - 1))])
    return out


def frame(usids: list[int], i: int, dst_mac: str) -> bytes:
    mac = ":".join(dst_mac[k : k + 2] for k in range(0, 12, 2)) if ":" not in dst_mac else dst_mac
    return bytes(
        Ether(src="02:00:00:00:00:01", dst=mac)
        / IPv6(src=str(nic_address(0, 0)), dst=str(carrier(usids)), nh=41, hlim=64, fl=i)
        / IPv6(src=str(nic_address(0, 0)), dst=str(nic_address(0, 1)), nh=17)
        / UDP(sport=1000 + i, dport=4791)
        / Raw(MARKER + f"{i:04d}".encode())
    )


def outcome(frames_by_port: dict[int, list[bytes]]) -> dict[int, tuple[int, str, int]]:
    """carrier index -> (port, outer destination, hop limit), for MRC-shaped frames that came out."""
    got: dict[int, tuple[int, str, int]] = {}
    for port, frames in frames_by_port.items():
        for f in frames:
            pkt = Ether(f)
            if IPv6 not in pkt or pkt[IPv6].nh != 41 or MARKER not in f:
                continue  # e.g. an ICMPv6 error quoting our frame
            i = int(f[f.index(MARKER) + len(MARKER) :][:4])
            assert i not in got, f"carrier {i} came out twice"
            got[i] = (port, pkt[IPv6].dst, pkt[IPv6].hlim)
    return got


def test_random_carriers_leave_bmv2_and_linux_alike(switch: Switch, linux_switch: LinuxSwitch) -> None:
    rng = random.Random(0x5EED)
    carriers = random_carriers(rng, N_CARRIERS)
    program(switch.p4rt, switch.dmac)
    program(linux_switch.p4rt, lambda port: switch.lab.mac(switch.lab.host_if(port)))  # any MAC will do

    # BMv2: send, then one sentinel per port; in-order delivery per egress makes "all arrived" exact.
    sentinels = {p: frame([OWN, usid], 9000 + p, "02:00:00:00:00:fe") for usid, p in PORT_OF.items()}
    switch.lab.taps[IN_PORT].send([frame(c, i, "02:00:00:00:00:fe") for i, c in enumerate(carriers)])
    switch.lab.taps[IN_PORT].send(list(sentinels.values()))
    for p in PORT_OF.values():
        switch.lab.taps[p].wait(1, match=lambda f, p=p: MARKER + f"{9000 + p:04d}".encode() in f)
    bmv2 = {i: o for i, o in outcome({p: t.frames() for p, t in switch.lab.taps.items()}).items() if i < 9000}

    # Linux: the same frames, addressed to the switch port's MAC (the kernel routes only those).
    mac = linux_switch.in_mac
    send_frames(HOST_NS, LinuxSwitch.host_if(IN_PORT), [frame(c, i, mac) for i, c in enumerate(carriers)])
    send_frames(
        HOST_NS, LinuxSwitch.host_if(IN_PORT), [frame([OWN, u], 9000 + p, mac) for u, p in PORT_OF.items()]
    )
    sniffers = linux_switch.sniffers
    for p in PORT_OF.values():
        wait_for(lambda p=p: any(MARKER + f"{9000 + p:04d}".encode() in f for f in sniffers[p].frames), 10,
                 f"the Linux sentinel on port {p}")  # fmt: skip
    linux = {i: o for i, o in outcome({p: s.frames for p, s in sniffers.items()}).items() if i < 9000}

    assert 0 < len(bmv2) < N_CARRIERS, "the random carriers should include routed and dropped ones"
    diffs = {
        i: (carriers[i], bmv2.get(i), linux.get(i)) for i in range(N_CARRIERS) if bmv2.get(i) != linux.get(i)
    }
    assert diffs == {}, "carrier: (uSIDs, BMv2 (port, dst, hlim), Linux (port, dst, hlim))"


# -- ECN and trimming on a congested port ----------------------------------------------------------

RATE_PPS = 20  # drain rate: BMv2's queue rate; the Linux port's HTB rate is this many full frames/s
SLOT = 1 / RATE_PPS  # one frame's time on the congested link
ECN_PKTS, TRIM_PKTS = 4, 8  # port_policy thresholds, in queued packets on both targets
N_BURST = 40
# Frame 0 at 0, frame k at (k + 1/2) half-slots: two arrivals per slot, each a quarter slot away
# from BMv2's dequeue instants (which frame 0 fixes at whole slots after itself).
OFFSETS = [0.0] + [(k + 0.5) * SLOT / 2 for k in range(1, N_BURST)]
MAX_LATE = 0.4 * SLOT  # a send later than this may cross a dequeue instant: see the test's docstring
# The paced sender at the switches' real-time priority (where permitted): on a loaded machine a
# normal process woke up to 65 ms late. A burst still sent too late is run again, up to ATTEMPTS.
SENDER_RT = realtime_prefix(REALTIME_PRIORITY)
ATTEMPTS = 3
# BMv2 minus Linux as the two queue models predict it for this burst (queue_models.py; on a
# fabric port: first marked 2, first trimmed 3, marked 1, trimmed -3), and the tolerance.
SCHEDULE_SLOTS = [t / SLOT for t in OFFSETS]
TOLERANCE = 2
INNER_DST = nic_address(0, 1).packed  # in every burst frame, whole or trimmed (data_frame's inner dst)


def full_frame_payload(usids: list[int]) -> int:
    """The payload that makes a DATA frame exactly one queue cell (1514 bytes with its ICRC), so a
    packet of BMv2's queue and a cell of the Linux virtual queue are the same thing."""
    return QUEUE_CELL_BYTES - len(data_frame(usids, payload_len=0))


def burst(usids: list[int]) -> list[bytes]:
    """N_BURST trimmable DATA frames, ECT(0), one cell each, psn = index."""
    payload = full_frame_payload(usids)
    frames = [data_frame(usids, psn=i, payload_len=payload) for i in range(N_BURST)]
    assert {len(f) for f in frames} == {QUEUE_CELL_BYTES}
    return frames


@dataclass(frozen=True)
class Decisions:
    """What one target did to the burst: the indices it marked CE (whole frames), the ones it
    trimmed, and the trimmed ones that left CE (a fabric trim above the ECN threshold)."""

    marked: frozenset[int]
    trimmed: frozenset[int]
    trimmed_ce: frozenset[int] = frozenset()

    @classmethod
    def of(cls, out: dict[int, bytes]) -> Decisions:
        ce = {i for i, f in out.items() if outer(f).tc & 3 == Ecn.CE}
        trimmed = frozenset(i for i, f in out.items() if len(f) == TRIMMED_LEN)
        return cls(frozenset(ce - trimmed), trimmed, frozenset(ce & trimmed))

    def measures(self) -> dict[str, int]:
        """The quantities compared across targets (a first index is N_BURST when there is none)."""
        return {
            "first marked": min(self.marked, default=N_BURST),
            "first trimmed": min(self.trimmed, default=N_BURST),
            "marked": len(self.marked),
            "trimmed": len(self.trimmed),
        }


def by_index(frames: list[bytes]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for f in frames:
        i = psn_of(f)
        assert i not in out, f"frame {i} came out twice"
        out[i] = f
    assert sorted(out) == list(range(N_BURST)), f"lost frames: {sorted(set(range(N_BURST)) - set(out))}"
    return out


def bmv2_congested_burst(
    switch: Switch, port: int, frames: list[bytes]
) -> tuple[dict[int, bytes], list[float]]:
    """Drain ``port`` at RATE_PPS (every priority queue: BMv2's Thrift CLI, as the data-plane
    tests do), send the paced burst into IN_PORT, return what left ``port`` by index and how
    late each send was."""
    assert switch.lab.switch is not None
    switch.lab.switch.set_queue_rate(port, RATE_PPS)
    late = send_paced("", switch.lab.host_if(IN_PORT), frames, OFFSETS, prefix=[*SENDER_RT])
    got = switch.lab.taps[port].wait(N_BURST, timeout=10 + 2 * N_BURST / RATE_PPS)
    return by_index(got), late


def linux_congested_burst(
    linux: LinuxSwitch, port: int, frames: list[bytes]
) -> tuple[dict[int, bytes], list[float]]:
    """The same on the Linux switch: the port's HTB (and the egress program's virtual queue) at
    RATE_PPS full frames per second, as ``python -m linux_target.egress set-link`` sets it
    (tests/integration/test_linux_egress.py), the same frames addressed to the switch port's MAC,
    sent from ``pb-lhost``, captured by tcpdump; the port is unlimited again afterwards."""
    dev = LinuxSwitch.switch_if(port)
    rate_mbit = RATE_PPS * QUEUE_CELL_BYTES * 8 / 1e6

    def set_link(mbit: float) -> None:
        run([sys.executable, "-m", "linux_target.egress", "set-link", "--dev", dev, "--rate-mbit", str(mbit)],
            ns=SW_NS)  # fmt: skip

    mac = bytes.fromhex(linux.in_mac)
    set_link(rate_mbit)
    tap = Sniffer(HOST_NS, LinuxSwitch.host_if(port), INNER_DST)
    try:
        late = send_paced(
            HOST_NS, LinuxSwitch.host_if(IN_PORT), [mac + f[6:] for f in frames], OFFSETS,
            prefix=["ip", "netns", "exec", HOST_NS, *SENDER_RT],
        )  # fmt: skip
        got = tap.wait_count(N_BURST, timeout=10 + 2 * N_BURST / RATE_PPS)
    finally:
        tap.close()
        set_link(0)
    return by_index(got), late


def counters(p4rt: P4RuntimeClient, port: int) -> tuple[int, int]:
    """(ecn_marked of ``port``, drop_reason[TRIMMED]) in packets."""
    marked = p4rt.read_counter("ecn_marked", port).packets
    return marked, p4rt.read_counter("drop_reason", DropReason.TRIMMED.cell).packets


def without_src_mac(frame: bytes) -> bytes:
    return frame[:6] + frame[12:]


@pytest.mark.skipif(bool(missing_tools()), reason=f"egress program cannot be built: {missing_tools()}")
@pytest.mark.parametrize("last_hop", [False, True], ids=["fabric-port", "last-hop-port"])
def test_congested_port_marks_and_trims_on_bmv2_and_linux_alike(
    switch: Switch, linux: LinuxSwitch, last_hop: bool
) -> None:
    """The same ``port_policy`` (ECN above 4 queued packets, trimming above 8, last hop or not),
    the same drain rate, the same 40 ECT(0) DATA frames of one full cell (1514 bytes) each, paced
    at two arrivals per drain slot; then which frames each target marked and trimmed.

    Why the decisions differ at all — the queue models (traced frame by frame with the actual
    code: BMv2 ``QueueingLogicPriRL`` and ``simple_switch``, ``linux_target/bpf/mrc_egress.c``):

    - BMv2 gives each frame a departure time when it is queued (one slot after the previous
      one) and takes it off the queue at that instant: ``enq_qdepth`` counts the frames waiting
      behind the one on the wire. The Linux virtual queue counts bytes not yet drained, the
      frame on the wire included: at an arrival a fraction f into a slot it reads W + 1 - f
      frames when BMv2 reads W. With integer thresholds Linux marks from W >= 4, BMv2 from
      W >= 5: one queued frame, which at two arrivals per slot is 2 frames later on BMv2.
    - BMv2 trims on ``egress_qdepth``, the depth the last dequeued data frame left behind:
      fresh for the first arrival after a dequeue, one arrival stale for the second. Linux trims
      on its live queue from W >= 8, BMv2 from W >= 9 (fresh) or 10 (stale): 3 frames later with
      these arrival phases (2 to 4 for others).
    - A trimmed header leaves BMv2 through priority queue 7, whose rate is its own, so the data
      queue never sees it; the virtual queue adds its 146 bytes (0.1 frame) to the link's
      backlog. Linux therefore trims a little more once both trim, and marks fewer (a trimmed
      frame is not marked): counted over the burst, BMv2 marks 1 more and trims 3 fewer.
    - Neither target marks a trimmed header: Linux never does; BMv2 could (its ECN rule reads
      the depth of priority queue 7), but at two arrivals per slot that queue holds at most one.

    ``queue_models.py`` replays these rules on the burst: Linux first mark 9, first trim 17,
    18 marked, 13 trimmed; BMv2 11, 20, 19, 10 (BMv2 minus Linux: 2, 3, 1, -3; on the last-hop
    port nothing is marked and trimming is the same). The Linux half, run alone against the real
    kernel 11 times, gave the replay's first indices and counts every time (and its exact index
    sets in 3 of 5 compared: in the trimming phase, where the queue sits within ms of the
    threshold, the trimmed/untrimmed alternation may shift by one frame). Both clocks are
    exact between arrivals; what moves a decision is an arrival that slips across a dequeue
    instant on one target's clock (a late send, the switch's own latency), and each slip moves
    a first index or a count by one. In 2000 replays with every send up to 0.4 slot (20 ms)
    late, independently on each target, no measure moved more than 2 from the on-time offset
    (up to 0.25 slot: none moved): so every measure must be within TOLERANCE = 2 of the models'
    offset, and a run whose sender was later than 0.4 slot (a loaded machine) is skipped with
    the lateness, not judged.

    Frames both targets forwarded whole, or both trimmed, must be the same bytes but for the
    source MAC (BMv2 writes the MAC the frame was addressed to, the kernel its egress port's
    own) and, for whole frames in the marking region, the ECN bits; trimmed frames must be
    ``codec.trim`` of the forwarded frame on both (DSCP 46, lengths 92/52/52; ECN CE on a fabric
    port, whose queue is above the ECN threshold whenever it is above the trim one, kept on a
    last-hop port). On a last-hop port neither target marks anything, and trimming agrees as on
    a fabric port. The
    counters each target reports (``ecn_marked``, ``drop_reason[TRIMMED]``) equal what left it.
    """
    if last_hop:
        usids, port = [OWN, H1], PORT_OF[H1]
    else:
        usids, port = [OWN, T1A, t0_usid(0, 1), host_usid(0, 3)], PORT_OF[T1A]
    program(switch.p4rt, switch.dmac)
    program(linux.p4rt, switch.dmac)  # the same next-hop MACs: only the source MAC may differ
    for p4rt in (switch.p4rt, linux.p4rt):
        write_policy(p4rt, port, ECN_PKTS, TRIM_PKTS, last_hop)
    frames = burst(usids)
    for _attempt in range(ATTEMPTS):  # each burst drains completely before the next
        before = {"BMv2": counters(switch.p4rt, port), "Linux": counters(linux.p4rt, port)}
        bmv2_out, bmv2_late = bmv2_congested_burst(switch, port, frames)
        linux_out, linux_late = linux_congested_burst(linux, port, frames)
        late = max(*bmv2_late, *linux_late)
        if late <= MAX_LATE:
            break
    else:
        pytest.skip(
            f"the paced sender left a frame {late * 1e3:.1f} ms late (more than {MAX_LATE * 1e3:.0f} ms, "
            f"0.4 drain slot) in each of {ATTEMPTS} bursts: a loaded machine; the queue models' "
            "tolerance does not cover that"
        )
    outs = {"BMv2": bmv2_out, "Linux": linux_out}
    decisions = {name: Decisions.of(out) for name, out in outs.items()}
    measures = {name: d.measures() for name, d in decisions.items()}
    print("decisions (BMv2, Linux):", measures, "sends late up to", f"{late * 1e3:.1f} ms")

    # Each target on its own: its counters say what its frames show; marks only above the
    # threshold (the queue cannot hold 4 frames before arrival 2 * 4 + 1 on either model).
    for name, d in decisions.items():
        p4rt = switch.p4rt if name == "BMv2" else linux.p4rt
        marked, trimmed = counters(p4rt, port)
        assert (marked - before[name][0], trimmed - before[name][1]) == (len(d.marked), len(d.trimmed)), name
        assert d.trimmed, f"{name} trimmed nothing although the queue passed {TRIM_PKTS} packets"
        assert min(d.marked | d.trimmed) >= 2 * ECN_PKTS, f"{name} acted below the threshold: {d}"
        if last_hop:
            assert d.marked == frozenset(), f"{name} marked CE on a last-hop port: {sorted(d.marked)}"
            assert d.trimmed_ce == frozenset(), f"{name} left CE on a last-hop trim: {sorted(d.trimmed_ce)}"
        else:
            assert d.marked, f"{name} marked nothing although the queue passed {ECN_PKTS} packets"
            # the trim threshold is above the ECN one: every fabric trim is congestion experienced
            assert d.trimmed_ce == d.trimmed, f"{name} trimmed without CE: {sorted(d.trimmed - d.trimmed_ce)}"

    # Across targets: every measure within TOLERANCE of what the queue models predict.
    offsets = queue_models.offsets(SCHEDULE_SLOTS, ECN_PKTS, TRIM_PKTS, last_hop)
    diffs = {k: measures["BMv2"][k] - measures["Linux"][k] for k in offsets}
    off = {k: diffs[k] - offsets[k] for k in offsets if abs(diffs[k] - offsets[k]) > TOLERANCE}
    assert off == {}, f"BMv2 minus Linux {diffs}, models predict {offsets} +- {TOLERANCE}: {measures}"

    # The frames themselves, where both targets did the same thing to them.
    new_dst = shift(carrier(usids))
    for i in range(N_BURST):
        b, lx = bmv2_out[i], linux_out[i]
        if (i in decisions["BMv2"].trimmed) != (i in decisions["Linux"].trimmed):
            continue  # one trimmed it, the other did not: counted above
        want = forwarded(frames[i], switch.dmac(port), new_dst)
        if len(b) == TRIMMED_LEN:
            ref = without_src_mac(trim(want, ce=not last_hop))
            assert without_src_mac(b) == without_src_mac(lx) == ref, f"trimmed {i}"
        else:
            ecn_free = [bytearray(without_src_mac(f)) for f in (b, lx, want)]
            for f in ecn_free:
                f[9] &= 0xCF  # the ECN bits: byte 15 of the frame, byte 9 once the source MAC is out
            assert ecn_free[0] == ecn_free[1] == ecn_free[2], f"whole frame {i}"
