"""Faults that add up (issue 26): the ev_min_active floor never holds a dead path, restored
EVs rejoin the rotation, and a failed connection is finished."""

from __future__ import annotations

import random

from mrc_host.core import EvEvent, EvProber, EvSet, EvState, PathSpace, TransportConfig
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import Probe


def make(planes: int = 2, t1: int = 4, **kw: object) -> EvSet:
    return EvSet(TransportConfig(**kw), PathSpace(planes, t1), random.Random(7))  # type: ignore[arg-type]


def _deliver_everywhere_but(s: EvSet, dead: tuple[int, int], sent_ns: int) -> None:
    """Every other path delivers packets sent well after ``sent_ns`` (beyond the reorder
    window); the dead one delivers nothing sent since."""
    for e in s.entries.values():
        if (e.plane, e.t1) != dead:
            s.note_ok(e.value, sent_ns + 20_000, sent_ns + 10_000)


def test_a_dead_path_is_retired_below_the_floor() -> None:
    """Defect (5ab0dd2): retire() refused below ev_min_active even for a path that delivers
    nothing, so 28 of 34 EVs through a dead T1 kept spraying into it."""
    s = make(max_evs=16, backup_evs_per_plane=0, ev_min_active=16)
    dead = (s.active[0][0].plane, s.active[0][0].t1)
    victims = [e.value for e in s.entries.values() if (e.plane, e.t1) == dead]
    assert victims
    _deliver_everywhere_but(s, dead, sent_ns=1_000)
    assert s.retire(victims[0], "loss", 20_000, sent_ns=1_000)
    assert all(s.state(v) is EvState.ASSUMED_BAD for v in victims)
    assert s.usable_count() == 16 - len(victims)  # below the floor: a dead path is no use


def test_the_floor_still_holds_under_diffuse_loss() -> None:
    """A lost packet on a path whose later packets got through is diffuse loss: the floor
    holds (retiring would only shrink the set)."""
    s = make(max_evs=16, backup_evs_per_plane=0, ev_min_active=16)
    ev = s.active[0][0]
    for e in s.entries.values():
        s.note_ok(e.value, 3_000, 2_000)  # every path, this one included, delivered later
    assert not s.retire(ev.value, "loss", 3_000, sent_ns=1_000)
    assert s.state(ev.value) is EvState.GOOD and s.floor_holds == 1


def test_a_lost_liveness_probe_retires_below_the_floor() -> None:
    s = make(max_evs=16, backup_evs_per_plane=0, ev_min_active=16)
    ev = s.active[1][0].value
    assert s.retire(ev, "liveness probe lost", 5_000, EvEvent.LIVENESS_LOST)
    assert s.state(ev) is EvState.ASSUMED_BAD


def test_a_restored_ev_rejoins_the_rotation_and_its_path_regains_its_share() -> None:
    """Defect (5ab0dd2): _place_good parked a restored EV among the backups when its plane's
    quota was full, so a cleared path carried nothing for the rest of the transfer."""
    s = make(planes=1, t1=4, max_evs=8, backup_evs_per_plane=4, probe_successes_to_restore=1)
    victim = s.active[0][0]
    path = victim.t1
    on_path = sum(1 for e in s.active[0] if e.t1 == path)
    assert s.retire(victim.value, "loss", 100, EvEvent.LIVENESS_LOST)
    assert not any(e.t1 == path for e in s.active[0])
    prober = EvProber(s)
    for ev, pid in prober.due_probes(10_000):
        prober.probe_acked(ev, pid, 10_010)
    assert s.state(victim.value) is EvState.GOOD
    assert len(s.active[0]) == s.quota[0]
    assert sum(1 for e in s.active[0] if e.t1 == path) == on_path  # its whole share back
    picks = [s.next_data_ev() for _ in range(8 * len(s.active[0]))]
    share = sum(1 for v in picks if v is not None and s.entries[v].t1 == path) / len(picks)
    assert share >= 0.9 * on_path / s.quota[0]


def test_a_flapping_path_waits_longer_but_always_comes_back() -> None:
    s = make(
        planes=1,
        t1=4,
        max_evs=8,
        backup_evs_per_plane=4,
        probe_successes_to_restore=1,
        probe_interval_ns=1_000,
        flap_window_ns=1_000_000,
    )
    victim = s.active[0][0].value
    prober = EvProber(s)
    now = 0
    waits = []
    for _ in range(4):
        assert s.retire(victim, "liveness", now, EvEvent.LIVENESS_LOST)
        start = now
        while s.state(victim) is not EvState.GOOD:
            now += 500
            assert now - start < 1_000_000, "a flapping path was abandoned"
            for ev, pid in prober.due_probes(now):
                prober.probe_acked(ev, pid, now + 1)
        waits.append(now - start)
        assert victim in s.active_evs()
    assert waits[-1] > waits[0]


def test_a_failed_connection_sends_no_probes_and_asks_for_no_timer() -> None:
    """Defect (5ab0dd2): after RETRY_EXCEEDED the endpoint kept probing (about 2,500 probes)
    because Endpoint ignored sender.failed."""
    from mrc_host.core import ConnectionFailed, SetTimer

    p = make_pair(retry_cnt=2)
    _, acts = p.a.post_write(b"x" * 40_000, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    for _ in range(200):
        p.deliver(keep=lambda m: False)
        p.fire_timers()
        if any(isinstance(e, ConnectionFailed) for e in p.events):
            break
    assert any(isinstance(e, ConnectionFailed) for e in p.events)
    assert p.a.evset.retired == {} and p.a.next_deadline() is None
    for t in range(1, 50):
        acts = p.a.on_timer(p.now + t * 10_000_000)
        assert not [a for a in acts if not isinstance(a, SetTimer)]
        assert acts[-1] == SetTimer(None)
    probe = Probe(p.a.local_qp, 1, next(iter(p.a.evset.entries)), send_ts=1)
    acts = p.a.receive(probe, p.now + 1_000_000_000)
    assert [type(a) for a in acts] == [SetTimer]
    assert p.a.counters.malformed["after_error"] == 1


def test_one_default_ev_count_everywhere() -> None:
    """Defect (5ab0dd2): the core drew 128 EVs, mrc-sim, SimConfig and scenario flows 64."""
    import argparse

    from mrc_host.core import DEFAULT_MAX_EVS
    from mrc_host.sim.cli import build_parser
    from mrc_host.sim.network import FlowSpec
    from mrc_host.sim.scenario import SimConfig

    assert TransportConfig().max_evs == DEFAULT_MAX_EVS
    assert SimConfig().max_evs == DEFAULT_MAX_EVS
    assert FlowSpec("f", 0, 1).max_evs == DEFAULT_MAX_EVS
    args = build_parser().parse_args([])
    assert isinstance(args, argparse.Namespace) and args.evs == DEFAULT_MAX_EVS


def test_mrc_sim_json_reports_evs_per_path() -> None:
    from mrc_host.sim.fabric import FabricShape
    from mrc_host.sim.report import summarise
    from mrc_host.sim.scenario import SimConfig, Simulation

    sim = Simulation(SimConfig(shape=FabricShape(planes=2, t1=4), size=64 << 10))
    sim.run()
    r = summarise(sim)
    per_path = r["evs_per_path"]["sender"]
    assert len(per_path) == 8
    assert sum(sum(row.values()) for row in per_path.values()) == len(sim.sender.evset.entries)
    assert sum(row.get("active", 0) for row in per_path.values()) == r["max_evs"]


def test_a_path_whose_later_packets_are_merely_late_is_not_dead() -> None:
    """Only deliveries of packets sent a reorder window after the lost one count against its
    path: on a jittery fabric the path's next packets may just be slower."""
    s = make(max_evs=16, backup_evs_per_plane=0, ev_min_active=16, reorder_window_ns=1_000)
    dead = (s.active[0][0].plane, s.active[0][0].t1)
    for e in s.entries.values():
        if (e.plane, e.t1) != dead:
            s.note_ok(e.value, 2_000, 1_500)  # sent only 500 ns after the lost packet
    assert not s.retire(s.active[0][0].value, "loss", 2_000, sent_ns=1_000)
    assert s.floor_holds == 1


def _longest_run(picks: list[int], s: EvSet, t1: int) -> int:
    run = best = 0
    for v in picks:
        run = run + 1 if s.entries[v].t1 == t1 else 0
        best = max(best, run)
    return best


def test_a_restored_path_rejoins_spread_through_the_rotation_not_in_a_row() -> None:
    """Defect (b2311fc): probes restore a path's EVs in a burst and each was appended to the
    end of the rotation, so the plane then sent its next packets down that one T1 in a row
    (9 on a live paced link, 8 ms); a link-down inside the run left the plane silent and it
    was declared dead whole. Restored EVs now sit between the other T1s' EVs."""
    for seed in range(5):
        s = EvSet(
            TransportConfig(max_evs=32, backup_evs_per_plane=0, probe_successes_to_restore=1),
            PathSpace(1, 4),
            random.Random(seed),
        )
        path = s.active[0][0].t1
        on_path = sum(1 for e in s.active[0] if e.t1 == path)
        assert on_path >= 3
        _deliver_everywhere_but(s, (0, path), sent_ns=1_000)
        assert s.retire(s.active[0][0].value, "loss", 20_000, sent_ns=1_000)
        assert not any(e.t1 == path for e in s.active[0])
        prober = EvProber(s)
        for ev, pid in prober.due_probes(40_000):
            prober.probe_acked(ev, pid, 40_010)
        assert sum(1 for e in s.active[0] if e.t1 == path) == on_path
        picks = [v for v in (s.next_data_ev() for _ in range(2 * len(s.active[0]))) if v is not None]
        assert _longest_run(picks, s, path) <= 2, seed
