"""The NIC's shared path verdicts (mrc_host/core/path_health.py, ev_shared.py): a path one
connection proves dead is retired by the NIC's other connections toward the same T0, by all of
them once connections toward two T0s proved it; a delivery since revokes it everywhere; a
connection that does not share learns nothing from the others."""

from __future__ import annotations

import random

from mrc_host.core import (
    Endpoint,
    EvEvent,
    EvState,
    EvStateChanged,
    NicPathHealth,
    PathHealthChanged,
    PathSpace,
    TransportConfig,
)
from mrc_host.core.path_health import WIDE, path_key

BASE_RTT = 10_000
PATH = (1, 2)  # (plane, T1) that dies
T_LOSS = 1_000_000  # when the lost packet left


def endpoint(nic: NicPathHealth, group: int | None, seed: int, share: bool = True) -> Endpoint:
    """An endpoint on ``nic`` toward T0 ``group``, sharing verdicts (an option, off by default)."""
    cfg = TransportConfig.for_rtt(BASE_RTT, 125_000, share_path_health=share)
    return Endpoint(
        local_qp=1,
        peer_qp=2,
        config=cfg,
        paths=PathSpace(planes=2, t1_count=4),
        rng=random.Random(seed),
        nic=nic,
        nic_group=group,
    )


def evs_on(ep: Endpoint, path: tuple[int, int]) -> list[int]:
    return [v for v, e in ep.evset.entries.items() if (e.plane, e.t1) == path]


def prove_dead(ep: Endpoint, path: tuple[int, int]) -> list[object]:
    """``ep`` lost a packet sent on ``path`` at T_LOSS while another path delivered one sent a
    base RTT later: its own rule (``path_dead``) retires the path; returns the endpoint's actions."""
    other = next(v for v, e in ep.evset.entries.items() if (e.plane, e.t1) != path and e.active)
    ep.evset.note_ok(other, T_LOSS + 3 * BASE_RTT, T_LOSS + BASE_RTT)
    assert ep.evset.retire(evs_on(ep, path)[0], "loss (gap)", T_LOSS + 3 * BASE_RTT, sent_ns=T_LOSS)
    return list(ep.on_timer(T_LOSS + 3 * BASE_RTT))


def states(ep: Endpoint, path: tuple[int, int]) -> set[EvState]:
    return {ep.evset.entries[v].state for v in evs_on(ep, path)}


def test_a_path_proved_dead_is_retired_toward_the_same_t0_and_revoked_by_a_delivery() -> None:
    nic = NicPathHealth()
    a, b = endpoint(nic, 7, 1), endpoint(nic, 7, 2)  # two connections toward T0 7
    c = endpoint(nic, 8, 3)  # one toward T0 8: another downlink
    alone = endpoint(nic, 7, 4, share=False)
    actions = prove_dead(a, PATH)
    assert any(isinstance(x, PathHealthChanged) for x in actions)
    assert nic.dead_for(7) == {path_key(evs_on(a, PATH)[0]): T_LOSS}
    now = T_LOSS + 4 * BASE_RTT
    changed = [
        x for x in b.on_path_health(now) if isinstance(x, EvStateChanged) and x.new is EvState.ASSUMED_BAD
    ]
    assert changed and all(x.event is EvEvent.NIC_PATH_DEAD for x in changed)
    assert states(b, PATH) == {EvState.ASSUMED_BAD}
    assert b.counters.nic_paths_dead == 1
    # another T0's connection keeps the path (its downlink may be fine); one not sharing too
    c.on_path_health(now)
    assert states(c, PATH) <= {EvState.GOOD}
    assert alone.on_path_health(now) == [] and states(alone, PATH) <= {EvState.GOOD}
    # b's packet that left on the path after the loss arrives: the verdict goes, everywhere
    b.evset.note_ok(evs_on(b, PATH)[0], now + BASE_RTT, T_LOSS + BASE_RTT)
    assert nic.dead_for(7) == {} and nic.revoked == 1
    assert states(b, PATH) == {EvState.ASSUMED_BAD}  # (applied at its next input)
    back = [
        x
        for x in b.on_timer(now + BASE_RTT)
        if isinstance(x, EvStateChanged) and x.old is EvState.ASSUMED_BAD
    ]
    assert {x.event for x in back} == {EvEvent.NIC_PATH_CLEARED}
    assert states(b, PATH) <= {EvState.GOOD}


def test_two_t0s_proving_one_path_dead_retire_it_for_every_t0() -> None:
    nic = NicPathHealth()
    a, b, c = endpoint(nic, 7, 1), endpoint(nic, 8, 2), endpoint(nic, 9, 3)
    prove_dead(a, PATH)
    now = T_LOSS + 4 * BASE_RTT
    c.on_path_health(now)
    assert states(c, PATH) <= {EvState.GOOD}  # one T0's downlink proves nothing for T0 9
    prove_dead(b, PATH)  # a second T0: the uplink or the T1 itself
    key = path_key(evs_on(a, PATH)[0])
    assert WIDE in nic.paths[key].dead
    c.on_path_health(now)
    assert states(c, PATH) == {EvState.ASSUMED_BAD}
    # a delivery toward T0 9 of a packet that left before the loss proves nothing
    c.evset.note_ok(evs_on(c, PATH)[0], now, T_LOSS - BASE_RTT)
    assert WIDE in nic.paths[key].dead
    # one that left after it: the uplink and the T1 work; the two downlink verdicts stand
    nic.alive(9, key, T_LOSS + 1)
    assert WIDE not in nic.paths[key].dead and set(nic.paths[key].dead) == {7, 8}
    c.on_path_health(now + BASE_RTT)
    assert states(c, PATH) <= {EvState.GOOD}


def test_a_peer_under_our_own_t0_joins_no_group() -> None:
    nic = NicPathHealth()
    a, local = endpoint(nic, 7, 1), endpoint(nic, None, 2)
    prove_dead(a, PATH)
    assert local.on_path_health(T_LOSS + 4 * BASE_RTT) == []
    assert states(local, PATH) <= {EvState.GOOD}
