"""EV set: drawing, rotation, SKIP, retirement with replacement, deny/allow, probing, ports."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mrc_fabric.ev import EV
from mrc_host.core import EvSet, EvState, Mode, PathSpace, TransportConfig


def make(planes: int = 2, t1: int = 8, **kw: object) -> EvSet:
    cfg = TransportConfig(**kw)  # type: ignore[arg-type]
    return EvSet(cfg, PathSpace(planes, t1), random.Random(7))


def test_draw_distinct_paths_split_across_planes_with_backups() -> None:
    s = make(planes=2, t1=8, max_evs=8, backup_evs_per_plane=2)
    active = [EV.decode(v) for v in s.active_evs()]
    assert len(active) == 8
    assert Counter(e.plane for e in active) == {0: 4, 1: 4}
    assert len({(e.plane, e.t1) for e in active}) == 8  # distinct paths
    backups = [EV.decode(v) for v in s.backup_evs()]
    assert Counter(e.plane for e in backups) == {0: 2, 1: 2}
    assert not {(e.plane, e.t1) for e in backups} & {(e.plane, e.t1) for e in active}


def test_small_fabric_uses_every_path_once() -> None:
    s = make(planes=2, t1=2, max_evs=64)
    assert sorted((EV.decode(v).plane, EV.decode(v).t1) for v in s.active_evs()) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert s.backup_evs() == []


def test_rotation_alternates_planes_and_covers_every_ev() -> None:
    s = make(planes=2, t1=4, max_evs=8)
    picks = [s.next_data_ev() for _ in range(16)]
    assert [EV.decode(v).plane for v in picks[:4]] == [0, 1, 0, 1]  # type: ignore[arg-type]
    assert Counter(picks) == dict.fromkeys(s.active_evs(), 2)


def test_skip_passes_one_turn_then_good_again() -> None:
    s = make(planes=1, t1=4, max_evs=4)
    evs = s.active_evs()
    assert s.skip(evs[1], "ecn echo")
    assert s.state(evs[1]) is EvState.SKIP
    first_round = [s.next_data_ev() for _ in range(3)]
    assert evs[1] not in first_round
    assert s.state(evs[1]) is EvState.GOOD
    assert evs[1] in [s.next_data_ev() for _ in range(4)]


def test_retire_replaces_from_same_plane_backup_and_probes_restore() -> None:
    s = make(planes=2, t1=8, max_evs=4, backup_evs_per_plane=2, probe_successes_to_restore=3)
    victim = s.active[0][0].value
    assert s.retire(victim, "loss")
    assert s.state(victim) is EvState.ASSUMED_BAD
    assert victim not in s.active_evs()
    assert len(s.active[0]) == 2 and all(e.plane == 0 for e in s.active[0])  # a plane-0 backup stepped in
    assert len(s.backup[0]) == 1
    for i in range(3):
        due = s.due_probes(1000 * (i + 1))
        assert [ev for ev, _ in due] == [victim]
        restored = s.probe_acked(victim, due[0][1], 1000 * (i + 1) + 10)
        assert restored == (i == 2)
    assert s.state(victim) is EvState.GOOD
    assert victim in s.backup_evs()  # the plane's active set is full: it stays a backup


def test_unanswered_probe_resets_the_success_streak() -> None:
    s = make(planes=1, t1=4, max_evs=2, probe_interval_ns=100, probe_successes_to_restore=2)
    victim = s.active_evs()[0]
    s.retire(victim, "loss")
    ((ev, pid),) = s.due_probes(0)
    s.probe_acked(ev, pid, 5)  # one success
    ((_, lost_pid),) = s.due_probes(5)
    assert s.due_probes(50) == []  # not due yet
    ((_, pid3),) = s.due_probes(105)  # the previous probe timed out
    assert not s.probe_acked(ev, lost_pid, 106)  # stale reply ignored
    assert not s.probe_acked(ev, pid3, 107)  # streak restarted: 1 of 2
    assert s.state(victim) is EvState.ASSUMED_BAD


def test_denied_ev_never_chosen_until_allowed() -> None:
    s = make(planes=2, t1=4, max_evs=8)
    denied = s.active_evs()[3]
    s.deny(denied)
    assert s.state(denied) is EvState.DENIED
    assert denied not in {s.next_data_ev() for _ in range(100)}
    assert denied not in {s.next_control_ev() for _ in range(100)}
    assert s.due_probes(10**9) == []
    s.allow(denied)
    assert s.state(denied) is EvState.GOOD
    assert denied in {s.next_data_ev() for _ in range(100)}


def test_deny_unknown_ev_is_remembered_and_bad_value_refused() -> None:
    s = make()
    s.deny(EV(1, 3, 5).value)
    assert s.state(EV(1, 3, 5).value) is EvState.DENIED
    with pytest.raises(ValueError):
        s.deny(1 << 40)
    with pytest.raises(KeyError):
        s.allow(EV(1, 9, 9).value)


def test_port_down_plane_not_used_and_peer_bitmap_zero_ignored() -> None:
    s = make(planes=2, t1=4, max_evs=8)
    s.set_local_ports(0b10)
    assert {EV.decode(s.next_data_ev()).plane for _ in range(20)} == {1}  # type: ignore[arg-type]
    s.set_local_ports(0b11)
    s.set_peer_ports(0b01)
    assert {EV.decode(s.next_data_ev()).plane for _ in range(20)} == {0}  # type: ignore[arg-type]
    s.set_peer_ports(0)  # "not reported"
    assert {EV.decode(s.next_data_ev()).plane for _ in range(20)} == {0}  # type: ignore[arg-type]


def test_single_path_and_ecmp_draws() -> None:
    single = make(planes=2, t1=4, mode=Mode.SINGLE_PATH)
    assert len(single.active_evs()) == 1
    assert len({single.next_data_ev(exclude=single.active_evs()[0]) for _ in range(5)}) == 1
    ecmp = make(planes=2, t1=4, max_evs=8, mode=Mode.ECMP)
    assert len(ecmp.active_evs()) == 8
    assert {EV.decode(v).t1 for v in ecmp.active_evs()} == {0}  # the switches pick the T1


def test_no_good_ev_leaves_last_resort() -> None:
    s = make(planes=1, t1=2, max_evs=2, backup_evs_per_plane=0)
    for ev in s.active_evs():
        s.retire(ev, "loss")
    assert s.next_data_ev() is None
    assert s.last_resort_ev() in {e.value for e in s.entries.values()}
