"""A fault-free all-to-all: no timeout, no resend that no trim explains.

Every host starts a write to every other host at once, so each NIC port carries several queue
pairs. Served first in first out, each connection's window left whole, one after another: every
host began with the same peer (an incast) and the last queue pairs' first packets waited several
windows at their own port, past the first timeout (23 timeouts and 730 resends on 8 hosts)."""

from __future__ import annotations

import pytest

from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fabric import DATA_OVERHEAD, LEAF_TO_HOST, FabricShape, PacketQueue, SimPacket
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.traffic import Job, all_to_all_pairs, point_to_point
from mrc_host.wire.messages import DataPacket

PKT = 4096 + DATA_OVERHEAD


def test_a_fault_free_all_to_all_fires_no_timeout_and_resends_only_trimmed_packets() -> None:
    shape = FabricShape(
        planes=1, t0=2, t1=2, hosts_per_t0=4, link_delay_ns=1000,
        ecn_bytes=14 * PKT, trim_bytes=28 * PKT, buffer_bytes=200 * PKT,
    )  # fmt: skip
    net = Network(shape, 1, "virtual")
    pairs = [(a, b) for a in range(shape.hosts) for b in range(shape.hosts) if a != b]
    job = point_to_point(net, Job("a2a", "all-to-all", 0), FlowSpec("a2a", 0, 1), pairs, 128 << 10)
    net.run(10_000_000_000)
    assert job.done and all(c.data_ok for c in job.connections)
    counters = [c.sender.counters for c in job.connections]
    trims = sum(p.trimmed for p in net.fabric.ports.values())
    resent = sum(c.retransmissions for c in counters)
    assert sum(c.rto_fired for c in counters) == 0
    assert sum(c.spurious_losses for c in counters) == 0
    assert resent <= trims <= 0.02 * sum(c.data_packets_sent for c in counters)


def data(qp: int) -> SimPacket:
    msg = DataPacket(qp, 0, 0, 0, b"")
    return SimPacket(msg, 0, 1, 0, 0, PKT, True)


def test_a_nic_port_serves_its_queue_pairs_a_packet_each_in_turn() -> None:
    q = PacketQueue(per_qp=True)
    pkts = [data(1) for _ in range(3)] + [data(2) for _ in range(2)] + [data(3)]
    for p in pkts:
        q.push(p)
    assert len(q) == 6 and q.bytes_of(data(1), 0) == 3 * PKT and q.bytes_of(data(9), 0) == 0
    assert [q.take().msg.qp for _ in range(6)] == [1, 2, 3, 1, 2, 1]
    assert not q and not q.waiting() and q.bytes_of(data(1), 0) == 0


A2A = """name = "a2a"
seed = 1
[fabric]
planes = 8
t0 = 4
t1 = 4
hosts_per_t0 = 4
[[traffic]]
pattern = "all-to-all"
name = "a2a"
size = "64KiB"
"""


def test_an_all_to_all_s_hosts_write_to_their_peers_in_turn_never_all_to_the_same_one() -> None:
    """Each NIC port serves its queue pairs in the order their writes were posted. In ascending
    order every host served the same peer at once, a 15-to-1 incast moving from receiver to
    receiver: last-hop queues of 19 packets (6 in turn), and the first packets of some planes
    back so late that the loss rules took them for lost (63 resends, nothing dropped)."""
    sc = sf.load_text(A2A)
    net, jobs = sf.build(sc, sc.runs[0])
    pairs = [(c.spec.src, c.spec.dst) for c in jobs[0].connections]  # type: ignore[attr-defined]
    hosts = sorted({a for a, _ in pairs})
    assert sorted(pairs) == [(a, b) for a in hosts for b in hosts if a != b]
    for k in range(len(hosts) - 1):  # each host's k-th write: every host a different peer
        assert len({dsts[k] for dsts in _peers(pairs).values()}) == len(hosts)
    net.run(sc.time_limit_ns)
    assert jobs[0].done and all(c.data_ok for c in jobs[0].connections)  # type: ignore[attr-defined]
    counters = [c.sender.counters for c in jobs[0].connections]  # type: ignore[attr-defined]
    sent = sum(c.data_packets_sent for c in counters)
    assert sum(c.rto_fired for c in counters) == 0
    assert sum(c.retransmissions for c in counters) <= 0.01 * sent
    last_hop = max(p.peak_queued for p in net.fabric.ports.values() if p.kind == LEAF_TO_HOST)
    assert last_hop <= 10 * PKT


def _peers(pairs: list[tuple[int, int]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for a, b in pairs:
        out.setdefault(a, []).append(b)
    return out


SMALL_A2A = """
name = "a2a"
[fabric]
planes = 1
t0 = 2
t1 = 2
hosts_per_t0 = 2
[[traffic]]
pattern = "all-to-all"
size = "16KiB"
"""


def test_the_lockstep_all_to_all_stays_a_choice_and_a_bad_order_names_its_field() -> None:
    """``order = "ascending"`` keeps the lockstep all-to-all (every host to the same peer at
    once) measurable; the default is the shifted order; a bad value or one on another pattern
    is refused naming ``order``; ``to_toml`` writes the choice back."""
    hosts = [0, 1, 2, 3]
    assert all_to_all_pairs(hosts, ascending=True) == [(a, b) for a in hosts for b in hosts if a != b]
    assert [p[1] for p in all_to_all_pairs(hosts)[::3]] == [1, 2, 3, 0]  # each host's first peer differs
    assert sf.load_text(SMALL_A2A).traffic[0].order == "shifted"
    lockstep = sf.load_text(SMALL_A2A + 'order = "ascending"\n')
    assert lockstep.traffic[0].order == "ascending"
    assert sf.load_text(sf.to_toml(lockstep)).traffic[0].order == "ascending"
    with pytest.raises(sf.ScenarioError, match=r"traffic\[0\]\.order: must be one of shifted, ascending"):
        sf.load_text(SMALL_A2A + 'order = "random"\n')
    with pytest.raises(sf.ScenarioError, match=r"traffic\[0\]\.order: only for all-to-all"):
        sf.load_text(SMALL_A2A.replace('"all-to-all"', '"permutation"') + 'order = "ascending"\n')
