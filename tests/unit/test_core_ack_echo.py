"""The ACK echo DATA carries, and the dead reverse paths it reveals (issue 26, item 3)."""

from __future__ import annotations

import itertools
import random

import pytest

from bench.sim_transport import link_delay_for_rtt
from mrc_fabric.ev import ENTROPY_BITS, ev_compose, ev_plane, ev_t1
from mrc_host.core import EvState, Transmit
from mrc_host.core.ack_echo import EchoQueue, SackSent
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.loopback import BASE, RKEY, Pair, make_pair
from mrc_host.sim.scenario import SimConfig, Simulation
from mrc_host.wire.messages import ACK_ECHO_MAX, DataPacket, Sack, ack_echo_of


@pytest.mark.parametrize("mib", [8, 16])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_dead_reverse_ev_is_retired_within_3_rtt(seed: int, mib: int) -> None:
    """Defect (issue 26): a dead reverse path was found only by the liveness probe tick,
    10.9 RTT after it died (98-323 SACKs lost meanwhile). The black hole on the receiver's
    T0 uplink to T1 1 (plane 0) kills the SACKs it sends that way. At 16 MiB the fault
    lands while slow start's queue swing is still in the delay spread: judged with the data
    paths' margin (2 x the spread) it took 3.1 RTT, with the echo margin (1.5 x) about 2.7."""
    shape = FabricShape(planes=2, t1=4, link_delay_ns=link_delay_for_rtt(21))
    sim = Simulation(SimConfig(shape=shape, size=mib << 20, faults=["blackhole:p0-t0_1-t1_1@30%"], seed=seed))
    r = sim.run()
    assert r["completed"] and r["data_ok"]
    start = r["faults"][0]["start_us"]
    retired = [
        e
        for e in r["ev_timeline"]
        if e["side"] == "receiver" and e["new"] == "ASSUMED_BAD" and e["t_us"] >= start
    ]
    assert retired
    first = min(retired, key=lambda e: e["t_us"])
    ev = int(first["ev"], 16)
    assert (ev_plane(ev), ev_t1(ev)) == (0, 1)  # the dead path, not a healthy one
    assert (first["t_us"] - start) / r["base_rtt_us"] <= 3
    assert "reverse path dead" in first["reason"]
    assert {(ev_plane(int(e["ev"], 16)), ev_t1(int(e["ev"], 16))) for e in retired} == {(0, 1)}
    c = sim.receiver.counters
    assert c.reverse_paths_retired >= 1 and c.ack_echo_unmatched == 0
    assert r["faults"][0]["acks_lost"] < 60


def payload(n: int) -> bytes:
    return random.Random(n).randbytes(n)


def started(n_pkts: int = 16) -> tuple[Pair, list[DataPacket]]:
    """A write in flight: its DATA packets, held (not yet delivered); a SACK for each
    (they return on the plane of the packet they answer: both planes carry some)."""
    p = make_pair(size=1 << 20, ack_every=1)
    _, acts = p.a.post_write(payload(n_pkts * 1024), BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    data = [m for _, m in p.in_flight if isinstance(m, DataPacket)]
    p.in_flight = []
    return p, data


def sacks_of(p: Pair, pkt: DataPacket) -> list[Sack]:
    out = p.b.receive(pkt, p.now)
    return [a.msg for a in out if isinstance(a, Transmit) and isinstance(a.msg, Sack)]


def test_data_echoes_every_sack_once_oldest_first() -> None:
    p, data = started()
    sacks = [s for pkt in data[:6] for s in sacks_of(p, pkt)]
    assert len(sacks) >= 2
    for s in sacks:
        p.a.receive(s, p.now)
    _, acts = p.a.post_write(payload(8 * 1024), BASE + (1 << 16), RKEY, p.now)
    p.absorb(p.a, acts)
    echoes = [m.ack_echo for _, m in p.in_flight if isinstance(m, DataPacket)]
    want = [ack_echo_of(s.echo_ts, s.echo_ev) for s in sacks]
    assert echoes[: len(want)] == want
    assert all(e == 0 for e in echoes[len(want) :])  # nothing new: no echo
    assert all(1 <= e <= ACK_ECHO_MAX for e in want)


def test_an_echo_naming_no_sack_is_counted_and_dropped() -> None:
    p, data = started()
    keys = {ack_echo_of(s.echo_ts, s.echo_ev) for pkt in data[:4] for s in sacks_of(p, pkt)}
    forged = next(k for k in range(1, ACK_ECHO_MAX) if k not in keys)
    data[5].ack_echo = forged
    p.b.receive(data[5], p.now)
    c = p.b.counters
    assert c.ack_echo_unmatched == 1 and c.reverse_paths_retired == 0
    assert c.data_bytes_placed == 5 * 1024  # the packet itself is placed as usual


def reverse_path_lost(p: Pair, data: list[DataPacket]) -> tuple[int, int]:
    """Deliver ``data`` to the receiver 2 us apart (each 1 us in flight), then echo every
    SACK it sent except those on one of its reverse paths. Returns that path (plane, T1)."""
    sacks: list[tuple[Sack, int]] = []
    for pkt in data:
        p.now += 2_000
        pkt.send_ts = p.now - 1_000
        sacks += [(s, s.meta.ev) for s in sacks_of(p, pkt)]
    paths = sorted({(ev_plane(ev), ev_t1(ev)) for _, ev in sacks})
    assert len(paths) >= 3
    victim = paths[0]
    echoed = [s for s, ev in sacks if (ev_plane(ev), ev_t1(ev)) != victim]
    for s in echoed:
        p.now += 1_000
        echo = DataPacket(
            22, 0, BASE, RKEY, b"", send_ts=p.now - 1_000, ack_echo=ack_echo_of(s.echo_ts, s.echo_ev)
        )
        echo.meta.ev = data[0].meta.ev
        p.b.receive(echo, p.now)  # a duplicate of PSN 0, carrying the echo
    return victim


def retired_paths(p: Pair) -> set[tuple[int, int]]:
    return {(e.plane, e.t1) for e in p.b.evset.entries.values() if e.state is EvState.ASSUMED_BAD}


def test_the_silent_reverse_path_is_retired_and_only_it() -> None:
    p, data = started(32)
    victim = reverse_path_lost(p, data)
    c = p.b.counters
    assert c.reverse_paths_retired == 1 and c.reverse_retire_refused == 0
    assert retired_paths(p) == {victim}


def test_a_late_echo_undoes_the_retirement() -> None:
    p, data = started(32)
    victim = reverse_path_lost(p, data)
    assert retired_paths(p) == {victim}
    rx = p.b.receiver.echoes
    key = next(k for k, s in rx._late.items() if (ev_plane(s.ev), ev_t1(s.ev)) == victim)
    p.now += 1_000
    echo = DataPacket(22, 0, BASE, RKEY, b"", send_ts=p.now - 1_000, ack_echo=key)
    p.b.receive(echo, p.now)
    assert retired_paths(p) == set() and p.b.counters.ev_loss_undone == 1


def test_forged_echoes_never_retire_a_planes_last_path() -> None:
    """Untrusted input: echoes that confirm plane 0's SACKs only make both of plane 1's
    paths look dead; one may go, the plane's last one is refused and counted."""
    p = make_pair(planes=2, t1=2)
    ev = p.b.evset
    rx = p.b.receiver.echoes

    def on(plane: int, t1: int) -> int:
        return next(e.value for e in ev.active[plane] if e.t1 == t1)

    sacks = [(on(1, 0), 1_000), (on(1, 1), 2_000), (on(0, 0), 10_000)]
    for k, (ev_, at) in enumerate(sacks):
        rx.sack_sent(at, k, SackSent(ev_, at))
    rx.echoed(ack_echo_of(10_000, 2), 20_000)  # only the last one, on plane 0
    assert retired_paths(p) == {(1, 0)}
    assert p.b.counters.reverse_paths_retired == 1 and p.b.counters.reverse_retire_refused == 1
    assert any(e.state is EvState.GOOD for e in ev.active[1])


def test_echoes_of_one_reverse_path_never_ride_one_forward_path_twice_in_a_row() -> None:
    """Defect: echoes went out strictly in order, and a steady flow answered each SACK of
    one reverse path with a burst whose first DATA took one forward path: every echo of
    that reverse path rode it (17 in a row in one run). When that forward path died, none
    came back, and the healthy reverse path was retired as dead. An echo now waits a packet
    rather than ride the forward path its reverse path's previous echo took."""
    q = EchoQueue()
    reverse = ev_compose(1, 3, 5)
    dying, other = ev_compose(0, 1, 7), ev_compose(0, 2, 9)
    carried: list[tuple[int, int]] = []
    for i in range(8):
        q.sack_received(1_000 + i, other, reverse)
        for forward in (dying, other):  # each SACK's burst: the dying path first
            echo = q.next_echo(forward)
            if echo:
                carried.append((forward, echo))
    assert sorted(e for _, e in carried) == sorted(ack_echo_of(1_000 + i, other) for i in range(8))
    paths = [f for f, _ in carried]
    assert all(a != b for a, b in itertools.pairwise(paths))
    assert paths.count(dying) <= 4


@pytest.mark.parametrize("seed", range(4))
def test_the_echo_book_remembers_as_an_ordered_dict_of_echoes_would(seed: int) -> None:
    """The book keeps only which echoes it remembers, oldest first: against a model (an
    ``OrderedDict``, a shared echo moved last and named ambiguous) over thousands of SACKs
    whose echoes collide often, the same echoes are remembered and the same ones unconfirmed,
    and an echo forgotten or never sent is counted as unmatched."""
    from collections import OrderedDict

    from mrc_host.core.ack_echo import SENT_MAX

    rng = random.Random(seed)
    p = make_pair()
    rx = p.b.receiver.echoes
    model: OrderedDict[int, bool] = OrderedDict()  # echo -> unambiguous
    for step in range(6 * SENT_MAX):
        ts, ev = rng.randrange(1 << 20), rng.randrange(4)
        key = ack_echo_of(ts, ev)
        rx.sack_sent(ts, ev, SackSent(-5, step))
        if key in model:
            del model[key]
            model[key] = False
        else:
            model[key] = True
        if len(model) > SENT_MAX:
            model.popitem(last=False)
        if step % 97 == 0:
            live = [k for k in rx._order[rx._head :] if k]
            assert live == list(model)
            assert set(rx._unconfirmed) == {k for k, alone in model.items() if alone}
    unmatched = p.b.counters.ack_echo_unmatched
    forgotten = next(k for k in range(1, ACK_ECHO_MAX + 1) if k not in model)
    rx.echoed(forgotten, 10**9)
    rx.echoed(next(k for k, alone in model.items() if not alone), 10**9)  # ambiguous: silent
    assert p.b.counters.ack_echo_unmatched == unmatched + 1


class _DequeEchoQueue:
    """The echo queue as it was written first (a deque of (echo, reverse path) tuples): the
    reference the packed list must pick exactly as."""

    def __init__(self) -> None:
        from collections import deque

        from mrc_host.core.ack_echo import ECHO_QUEUE_MAX

        self.pending: deque[tuple[int, int]] = deque(maxlen=ECHO_QUEUE_MAX)
        self.last: dict[int, int] = {}

    def sack_received(self, echo_ts: int, echo_ev: int, reverse_ev: int) -> None:
        self.pending.append((ack_echo_of(echo_ts, echo_ev), reverse_ev >> ENTROPY_BITS))

    def next_echo(self, forward_ev: int) -> int:
        from mrc_host.core.ack_echo import ECHO_LOOKAHEAD, ECHO_QUEUE_MAX

        pending = self.pending
        if not pending:
            return 0
        forward = forward_ev >> ENTROPY_BITS
        ahead = range(min(len(pending), ECHO_LOOKAHEAD))
        pick = next((k for k in ahead if self.last.get(pending[k][1], -1) != forward), -1)
        if pick < 0:
            if len(pending) < ECHO_QUEUE_MAX // 2:
                return 0
            pick = 0
        echo, reverse = pending[pick]
        del pending[pick]
        self.last[reverse] = forward
        return echo


@pytest.mark.parametrize("seed", range(8))
def test_the_echo_queue_picks_as_a_deque_of_pairs_would(seed: int) -> None:
    """The queue holds each echo packed with its reverse path in one integer: bursts of SACKs
    past the queue's cap (the oldest dropped), few and many paths each way, every pick the
    same as the first version's."""
    rng = random.Random(seed)
    q, model = EchoQueue(), _DequeEchoQueue()
    paths = rng.choice([2, 4, 16])
    evs = [ev_compose(rng.randrange(2), rng.randrange(paths), rng.getrandbits(18)) for _ in range(3 * paths)]
    for _ in range(3000):
        if rng.random() < rng.choice([0.3, 0.5, 0.9]):
            for _ in range(rng.choice([1, 1, 2, 40, 90])):
                ts, echo_ev, rev = rng.getrandbits(40), rng.choice(evs), rng.choice(evs)
                q.sack_received(ts, echo_ev, rev)
                model.sack_received(ts, echo_ev, rev)
        fwd = rng.choice(evs)
        assert q.next_echo(fwd) == model.next_echo(fwd)
