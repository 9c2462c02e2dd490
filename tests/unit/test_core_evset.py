"""EV set: drawing, rotation, SKIP, retirement with replacement, deny/allow, probing, ports."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from mrc_fabric.ev import EV
from mrc_host.core import EvEvent, EvProber, EvSet, EvState, Mode, PathSpace, TransportConfig


def make(planes: int = 2, t1: int = 8, **kw: object) -> EvSet:
    cfg = TransportConfig(**kw)  # type: ignore[arg-type]
    return EvSet(cfg, PathSpace(planes, t1), random.Random(7))


_PROBERS: dict[int, tuple[EvSet, EvProber]] = {}


def prober(s: EvSet) -> EvProber:
    """The one prober of ``s`` (probe ids are its own: a second one would reuse them)."""
    if id(s) not in _PROBERS or _PROBERS[id(s)][0] is not s:
        _PROBERS[id(s)] = (s, EvProber(s))
    return _PROBERS[id(s)][1]


def test_draw_distinct_paths_split_across_planes_with_backups() -> None:
    s = make(planes=2, t1=8, max_evs=8, backup_evs_per_plane=2)
    active = [EV.decode(v) for v in s.active_evs()]
    assert len(active) == 8
    assert Counter(e.plane for e in active) == {0: 4, 1: 4}
    assert len({(e.plane, e.t1) for e in active}) == 8  # distinct paths
    backups = [EV.decode(v) for v in s.backup_evs()]
    assert Counter(e.plane for e in backups) == {0: 2, 1: 2}
    assert not {(e.plane, e.t1) for e in backups} & {(e.plane, e.t1) for e in active}


def test_ev_count_is_independent_of_path_count() -> None:
    """Defect (issue 10): EV count equalled path count (8 EVs on the default fabric, no backups)."""
    s = make(planes=2, t1=2)  # default max_evs = 128
    assert len(s.active_evs()) == 128 and len(set(s.active_evs())) == 128
    assert s.evs_per_path() == {(0, 0): 32, (0, 1): 32, (1, 0): 32, (1, 1): 32}
    assert len(s.backup_evs()) == 8
    big = make(planes=8, t1=16, max_evs=256)
    assert len(big.active_evs()) == 256
    assert set(big.evs_per_path().values()) == {2} and len(big.evs_per_path()) == 128
    assert Counter(EV.decode(v).plane for v in big.backup_evs()) == dict.fromkeys(range(8), 4)


def test_rotation_alternates_planes_and_covers_every_ev() -> None:
    s = make(planes=2, t1=4, max_evs=8)
    picks = [s.next_data_ev() for _ in range(16)]
    assert [EV.decode(v).plane for v in picks[:4]] == [0, 1, 0, 1]  # type: ignore[arg-type]
    assert Counter(picks) == dict.fromkeys(s.active_evs(), 2)


def test_skip_sits_out_rotations_then_good_again() -> None:
    # skip_heat 0: every mark skips (the rule of ECMP mode; MRC's first mark only heats)
    s = make(planes=1, t1=4, max_evs=4, skip_rotations=2, penalty_evs=4, skip_heat=0)  # 2 turns
    evs = s.active_evs()
    assert s.ecn_echo(evs[1], 0)
    assert s.state(evs[1]) is EvState.SKIP
    first_rounds = [s.next_data_ev() for _ in range(6)]  # two turns of the 3 others
    assert evs[1] not in first_rounds
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
        due = prober(s).due_probes(1000 * (i + 1))
        assert [ev for ev, _ in due] == [victim]
        restored = prober(s).probe_acked(victim, due[0][1], 1000 * (i + 1) + 10)
        assert restored == (i == 2)
    assert s.state(victim) is EvState.GOOD
    # the restored EV rejoins the rotation; the plane's quota holds, so the EV that stood
    # in for it goes back among the backups
    assert victim in s.active_evs()
    assert len(s.active[0]) == 2 and len(s.backup[0]) == 2


def test_unanswered_probe_resets_the_success_streak() -> None:
    s = make(
        planes=1,
        t1=4,
        max_evs=2,
        backup_evs_per_plane=2,
        retired_probe_interval_ns=100,
        probe_successes_to_restore=2,
    )
    victim = s.active_evs()[0]
    s.retire(victim, "loss")
    ((ev, pid),) = prober(s).due_probes(0)
    prober(s).probe_acked(ev, pid, 5)  # one success
    ((_, lost_pid),) = prober(s).due_probes(5)
    assert prober(s).due_probes(50) == []  # not due yet
    ((_, pid3),) = prober(s).due_probes(105)  # the previous probe timed out
    assert not prober(s).probe_acked(ev, lost_pid, 106)  # stale reply ignored
    assert not prober(s).probe_acked(ev, pid3, 107)  # streak restarted: 1 of 2
    assert s.state(victim) is EvState.ASSUMED_BAD


def test_denied_ev_never_chosen_until_allowed() -> None:
    s = make(planes=2, t1=4, max_evs=8, backup_evs_per_plane=0)
    denied = s.active_evs()[3]
    s.deny(denied)
    assert s.state(denied) is EvState.DENIED
    assert denied not in {s.next_data_ev() for _ in range(100)}
    assert denied not in {s.next_control_ev() for _ in range(100)}
    assert prober(s).due_probes(10**9) == []
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
    s = make(planes=1, t1=2, max_evs=2, backup_evs_per_plane=0, ev_min_active=1)
    for ev in s.active_evs():
        s.retire(ev, "loss")
    assert s.usable_count() == 1 and s.floor_holds == 1  # the floor kept one
    s = make(planes=1, t1=2, max_evs=2, backup_evs_per_plane=0, ev_min_active=1)
    for ev in s.active_evs():
        s.retire(ev, "plane failed", event=EvEvent.PLANE_FAILED)
    assert s.next_data_ev() is None
    assert s.last_resort_ev() in {e.value for e in s.entries.values()}


def test_every_state_change_goes_through_the_table_and_carries_enums() -> None:
    """Defect (issue 10): events carried strings and transitions were scattered."""
    from mrc_host.core import EvTransitionError
    from mrc_host.core.ev_state import TRANSITIONS, next_state

    s = make(planes=1, t1=4, max_evs=4, backup_evs_per_plane=0, ev_min_active=1, skip_heat=0)
    ev = s.active_evs()[0]
    s.ecn_echo(ev, 0)
    s.retire(ev, "loss", 10)
    s.deny(ev)
    changes = s.take_changes()
    assert [(c.old, c.new, c.event) for c in changes] == [
        (EvState.GOOD, EvState.SKIP, EvEvent.ECN_ECHO),
        (EvState.SKIP, EvState.ASSUMED_BAD, EvEvent.LOSS),
        (EvState.ASSUMED_BAD, EvState.DENIED, EvEvent.OPERATOR_DENY),
    ]
    assert all(type(c.old) is EvState and type(c.new) is EvState for c in changes)
    with pytest.raises(EvTransitionError):
        next_state(EvState.DENIED, EvEvent.PROBES_ANSWERED)
    assert set(TRANSITIONS) == set(EvState)


def _packets_sat_out(s: EvSet) -> int:
    """DATA packets the rotation sends before a just-marked EV carries one again."""
    ev = s.active_evs()[0]
    assert s.ecn_echo(ev, 0)
    for n in range(1, 10_000):
        if s.next_data_ev() == ev:
            return n
    raise AssertionError("the marked EV never came back")


def test_penalty_lasts_as_many_packets_with_few_evs_as_with_many() -> None:
    """Defect (issue 45): the penalty was counted in turns of the rotation alone, so with 16 EVs
    (2 a plane) a mark kept an EV out for 1/8 of the packets it does with 128: about 3 us, a
    third of an RTT, and a flow pinned onto a's path got 0.64 of line rate."""
    few = _packets_sat_out(make(planes=8, t1=16, max_evs=16, skip_heat=0))
    many = _packets_sat_out(make(planes=8, t1=16, max_evs=128, skip_heat=0))
    assert 0.9 * many <= few <= 1.1 * many, (few, many)
    assert many > 4 * (128 - 8)  # skip_rotations turns of 128 EVs: each (EVs - planes) packets
    # the cap scales alike: a hot EV of the small set sits out max_skip_rotations x 15 turns
    s = make(planes=8, t1=16, max_evs=16, penalty_halflife_ns=10**9)
    ev = s.active_evs()[0]
    for t in range(20):
        s.ecn_echo(ev, t)
    assert s.entries[ev].skips_left == 32 * 15


def test_ecn_penalty_grows_with_repeated_marks_and_decays() -> None:
    """Defect (issue 10): the ECN reaction lasted exactly one rotation."""
    s = make(planes=1, t1=4, max_evs=4, skip_rotations=2, penalty_halflife_ns=1000, skip_heat=0)
    ev = s.active_evs()[0]
    s.ecn_echo(ev, 0)
    first = s.entries[ev].skips_left
    for t in (1, 2, 3):
        s.ecn_echo(ev, t)
    assert s.entries[ev].skips_left > 2 * first  # marks in a row: a longer penalty
    s2 = make(planes=1, t1=4, max_evs=4, skip_rotations=2, penalty_halflife_ns=1000, skip_heat=0)
    ev2 = s2.active_evs()[0]
    s2.ecn_echo(ev2, 0)
    s2.entries[ev2].skips_left = 0
    s2.ecn_echo(ev2, 100_000)  # long after: the heat has decayed
    assert s2.entries[ev2].skips_left == first


def test_restored_ev_failing_again_soon_waits_longer() -> None:
    """Defect (issue 10): no flap damping (a 20 us flap cycled one EV 16 times)."""
    s = make(planes=1, t1=4, max_evs=2, backup_evs_per_plane=2, probe_interval_ns=100,
             probe_successes_to_restore=1, flap_window_ns=10_000)  # fmt: skip
    ev = s.active_evs()[0]
    t = 0
    waits = []
    for _ in range(3):
        s.retire(ev, "loss", t)
        waits.append(s.entries[ev].next_probe_ns - t)
        t = s.entries[ev].next_probe_ns
        ((pev, pid),) = prober(s).due_probes(t)
        assert prober(s).probe_acked(pev, pid, t + 1)
        t += 2
    assert waits[0] == 0 and waits[1] == 200 and waits[2] == 400
    s.retire(ev, "loss", t + 50_000)  # a failure long after: not a flap
    assert s.entries[ev].next_probe_ns == t + 50_000


def test_a_flapping_ev_that_stayed_up_waits_at_most_half_that_for_its_probe() -> None:
    """Defect (issue 66 item 2): a flapping EV waited 2**flaps probe intervals however long it
    had stayed up, and a T0-T1 link flapping every 200 us (up 200, down 200) carried 0.14 of
    its siblings' bytes where it was up half the time. One that fails as soon as it is back
    (under a few round trips up) is still damped as before."""
    s = make(planes=1, t1=4, max_evs=2, backup_evs_per_plane=2, probe_interval_ns=100_000,
             probe_successes_to_restore=1, flap_window_ns=10_000_000)  # fmt: skip
    rtt = s.cfg.cc.base_rtt_ns
    ev = s.active_evs()[0]

    def restore(t: int) -> None:
        ((pev, pid),) = prober(s).due_probes(s.entries[ev].next_probe_ns)
        assert prober(s).probe_acked(pev, pid, t)

    s.retire(ev, "loss", 0)
    restore(1_000)
    s.retire(ev, "loss", 1_000 + 30 * rtt)  # up 30 round trips: a flap (flaps 1), worth its use
    assert s.entries[ev].next_probe_ns - (1_000 + 30 * rtt) == min(200_000, 15 * rtt)
    t = s.entries[ev].next_probe_ns + 1
    restore(t)
    s.retire(ev, "loss", t + rtt)  # back for one round trip: damped in full (flaps 2)
    assert s.entries[ev].next_probe_ns - (t + rtt) == 400_000


def test_liveness_probe_id_does_not_survive_retire() -> None:
    """Defect (issue 10): an EV restored by probes was retired again at the next liveness tick."""
    s = make(planes=1, t1=4, max_evs=2, backup_evs_per_plane=2, probe_interval_ns=100,
             probe_successes_to_restore=1)  # fmt: skip
    ev = s.active_evs()[0]
    s.note_sent(ev, 0)
    assert [e for e, _ in prober(s).liveness_tick(100)] == [ev]  # a liveness probe goes out ...
    s.retire(ev, "loss", 120)  # ... and the EV is retired for a loss meanwhile
    ((pev, pid),) = prober(s).due_probes(130)
    assert prober(s).probe_acked(pev, pid, 131)
    prober(s).liveness_tick(200)
    assert s.state(ev) is EvState.GOOD


def test_loss_retires_nothing_below_ev_min_active() -> None:
    s = make(planes=2, t1=4, max_evs=16, backup_evs_per_plane=0, ev_min_active=10)
    for ev in list(s.active_evs()):
        s.retire(ev, "loss", 0)
    assert s.usable_count() >= 10  # whole paths (2 EVs) go at once, never below the floor
    assert s.floor_holds > 0
    assert make(planes=2, t1=4, max_evs=16).min_active == 12  # default: 3/4 of the drawn EVs


def test_one_probe_per_path_and_the_path_comes_back_together() -> None:
    s = make(planes=1, t1=2, max_evs=8, backup_evs_per_plane=0, probe_successes_to_restore=1, ev_min_active=1)
    path = [e.value for e in s.active[0] if e.t1 == s.active[0][0].t1]
    assert len(path) == 4
    s.retire(path[0], "loss", 0)
    assert all(s.state(v) is EvState.ASSUMED_BAD for v in path)
    due = prober(s).due_probes(1)
    assert len(due) == 1 and due[0][0] in path
    assert prober(s).probe_acked(due[0][0], due[0][1], 2)
    assert all(s.state(v) is EvState.GOOD for v in path)
    assert prober(s).next_deadline() is None or prober(s).next_deadline() > 2  # nothing left due


# -- EV profiles (OCP: EVs generated from field masks or listed explicitly) ------------------


def test_profile_entropy_mask_and_base_fix_the_entropy_bits() -> None:
    from mrc_host.core import EvProfile

    prof = EvProfile(entropy_mask=0x00FF, entropy_base=0x2A00)
    s = make(planes=2, t1=4, ev_profile=prof)
    values = s.active_evs() + s.backup_evs()
    assert len(values) == len(set(values)) == 128 + 8
    assert all(EV.decode(v).entropy & ~0x00FF == 0x2A00 for v in values)
    assert len({EV.decode(v).entropy for v in values}) > 16  # the masked bits still vary


def test_profile_too_narrow_for_the_ev_count_names_the_mask() -> None:
    from mrc_host.core import EvProfile

    with pytest.raises(ValueError, match="entropy_mask 0x3 gives 4 values per path"):
        make(planes=2, t1=4, ev_profile=EvProfile(entropy_mask=0x3))
    with pytest.raises(ValueError, match="entropy_base"):
        EvProfile(entropy_mask=0xFF, entropy_base=0x1)  # base overlaps the mask
    with pytest.raises(ValueError, match="listed twice"):
        EvProfile(explicit=(5, 5))


def test_profile_explicit_list_is_used_in_order_actives_then_backups() -> None:
    from mrc_host.core import EvProfile

    listed = [
        EV(p, t, 100 + i).value for i, (p, t) in enumerate([(0, 0), (1, 1), (0, 1), (1, 0), (0, 2), (1, 2)])
    ]
    s = make(planes=2, t1=4, max_evs=4, backup_evs_per_plane=1, ev_profile=EvProfile(explicit=tuple(listed)))
    assert s.active_evs() == [listed[0], listed[2], listed[1], listed[3]]  # plane 0 first, in order
    assert s.backup_evs() == [listed[4], listed[5]]
    assert set(s.entries) == set(listed)


def test_profile_explicit_ev_outside_the_fabric_or_a_plane_left_empty_is_refused() -> None:
    from mrc_host.core import EvProfile

    with pytest.raises(ValueError, match="T1 7 is outside"):
        make(planes=2, t1=4, ev_profile=EvProfile(explicit=(EV(0, 7, 1).value, EV(1, 0, 1).value)))
    with pytest.raises(ValueError, match="no EV on plane 1"):
        make(planes=2, t1=4, ev_profile=EvProfile(explicit=(EV(0, 1, 1).value,)))


def test_a_failed_plane_comes_back_path_by_path_as_its_late_packets_arrive() -> None:
    """A plane taken for failed whose packets turn up after all had stalled: the EVs of the
    path a late packet came on come back at once, those of another path of the plane do not
    (that T1 may be the one that is really dead, as with a black hole on one uplink)."""
    s = make(planes=2, t1=2, max_evs=16, backup_evs_per_plane=0)
    plane0 = [s.entries[v] for v in s.active_evs() if s.entries[v].plane == 0]
    by_t1 = {t1: [e.value for e in plane0 if e.t1 == t1] for t1 in (0, 1)}
    assert by_t1[0] and by_t1[1]
    assert s.fail_plane(0, 1_000) == len(plane0)
    assert all(s.entries[v].state is EvState.ASSUMED_BAD for v in by_t1[0] + by_t1[1])
    assert s.undo_loss(by_t1[1][0], 2_000) == len(by_t1[1])  # a late packet of T1 1
    assert all(s.entries[v].state is EvState.GOOD for v in by_t1[1])
    assert all(s.entries[v].state is EvState.ASSUMED_BAD for v in by_t1[0])  # T1 0 stays out
    assert s.undo_loss(by_t1[0][0], 3_000) == len(by_t1[0])  # until its own packet turns up


def _t1s(s: EvSet, packets: int) -> set[int]:
    picks = [s.next_data_ev() for _ in range(packets)]
    return {EV.decode(v).t1 for v in picks if v is not None}


def test_one_mark_on_a_cool_path_only_heats_it_and_a_short_message_keeps_every_t1() -> None:
    """Defect (issue 45): one mark made the marked EV and its (plane, T1) siblings sit out
    about 96 of the connection's packets. A 16-packet write of an all-to-all (its NIC port
    shared with 30 other queue pairs, so its rotation turns 31x slower than the queue that
    marked it drains) lost that T1 for its whole life, and the T0's hosts, marked by the same
    uplink together, all herded onto its other three: 4x htsim's trims."""
    s = make(planes=1, t1=4)  # one plane, 4 T1s, 32 EVs each: the all-to-all's connections
    ev = s.active_evs()[0]
    path_evs = [v for v in s.active_evs() if EV.decode(v).t1 == EV.decode(ev).t1]
    assert s.ecn_echo(ev, 0)
    assert {s.state(v) for v in path_evs} == {EvState.GOOD}
    assert _t1s(s, 16) == {0, 1, 2, 3}
    assert all(s.is_hot(v, 0) for v in path_evs)  # a loss on it is still taken for a queue


def test_a_repeat_mark_within_a_half_life_skips_the_path_with_its_siblings() -> None:
    s = make(planes=1, t1=4, penalty_halflife_ns=16_000)
    ev = s.active_evs()[0]
    t1 = EV.decode(ev).t1
    path_evs = [v for v in s.active_evs() if EV.decode(v).t1 == t1]
    s.ecn_echo(ev, 0)
    assert s.trimmed(path_evs[5], 8_000)  # a sibling, half a half-life later: a repeat
    assert {s.state(v) for v in path_evs} == {EvState.SKIP}
    assert t1 not in _t1s(s, 64)
    # a mark long after the path cooled is a first mark again
    s2 = make(planes=1, t1=4, penalty_halflife_ns=16_000)
    s2.ecn_echo(ev, 0)
    s2.ecn_echo(ev, 100_000)
    assert s2.state(ev) is EvState.GOOD


def test_ecmp_mode_skips_on_the_first_mark_its_ev_alone() -> None:
    """In ECMP mode an EV is one hashed path of many: a mark skips it at once, siblings not."""
    s = make(planes=1, t1=4, mode=Mode.ECMP)
    ev, other = s.active_evs()[:2]
    assert s.ecn_echo(ev, 0)
    assert s.state(ev) is EvState.SKIP and s.state(other) is EvState.GOOD
