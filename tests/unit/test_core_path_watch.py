"""A path silent past its own delay while its plane's other paths deliver (``PathWatch``).

Under a permutation beside a flapping T0-T1 link the other paths of the link's plane queued
20-40 us deeper than the rest; the reordering window grew to twice the SRTT, and a connection
sprayed the dead link for 85 us (65 packets) before its RTO found it. These tests hold the
rule to its three conditions -- overdue by the path's own latest delay, no delivery for twice
its own spacing, a packet of the same plane sent after it arrived by another path -- and to
what must never trip it: a path only queued deeper, a congested path whose headers are
trimmed, a plane slow as a whole, a path that never delivered. A path overdue by its own delay
alone, the guard not yet waited out, is not silent but held to its packet (the last tests).
"""

from __future__ import annotations

from loss_rig import deliver, recovery, send

from mrc_host.core import TransportConfig
from mrc_host.core.records import TxRecord
from mrc_host.core.recovery import Recovery

GUARD = 1_000  # the configured reordering window: no SRTT sample in these tests


def ev(plane: int, t1: int, entropy: int = 1) -> int:
    return plane << 28 | t1 << 18 | entropy


A = ev(0, 1)  # the path that dies
B = ev(0, 2)  # its sibling in plane 0
C = ev(1, 1)  # a path of the other plane


def rig() -> Recovery:
    return recovery(TransportConfig(reorder_window_ns=GUARD), planes=2)


def silent(r: Recovery, newly: list[TxRecord], now: int) -> list[TxRecord]:
    return r.look_at_paths(newly, now)[0]


def warm(r: Recovery) -> None:
    """A and B each deliver a packet sent at 0 after 20 us: their own delay."""
    deliver(r, send(r, 1, A, 0), 20_000)
    deliver(r, send(r, 2, B, 0), 20_000)


def test_a_path_silent_past_its_own_delay_is_named_once() -> None:
    r = rig()
    warm(r)
    lost = send(r, 3, A, 30_000)
    later = send(r, 4, B, 32_000)  # (the guard after it: the plane still delivers past it)
    deliver(r, later, 50_800)
    assert silent(r, [later], 50_800) == []  # 20.8 us: not yet its delay plus the guard
    deliver(r, send(r, 5, B, 33_000), 52_000)
    assert silent(r, [later], 52_000) == [lost]
    assert lost.suspect_sent == lost.sent_ns  # judged: its delivery would undo the verdict
    assert silent(r, [later], 60_000) == []  # named once


def test_a_path_queued_deeper_that_still_delivers_is_not_silent() -> None:
    r = rig()
    deliver(r, send(r, 1, A, 0), 20_000)
    second = send(r, 3, A, 1_000)
    queued = send(r, 5, A, 2_000)
    deliver(r, second, 23_000)  # left before the first arrived: a service gap of 3 us
    deliver(r, send(r, 2, B, 0), 20_000)
    sibling = send(r, 4, B, 5_000)
    deliver(r, sibling, 25_500)
    # its oldest waits 23.5 us against a latest delay of 22 us plus the guard, but the path
    # delivered 2.5 us ago: within twice its gap plus the guard
    assert r.look_at_paths([sibling], 25_500) == ([], [])  # nor overdue: within its gap
    # 4 us without a delivery: past its gap, not twice it plus the guard -- overdue, held
    assert r.look_at_paths([sibling], 27_000) == ([], [queued])
    newer = send(r, 6, B, 20_000)
    deliver(r, newer, 40_000)
    assert silent(r, [newer], 40_000) == [queued]  # 17 us without a delivery: silent


def test_a_trimmed_header_keeps_a_congested_path_alive() -> None:
    r = rig()
    warm(r)
    send(r, 3, A, 30_000)
    later = send(r, 4, B, 32_000)
    r.path_heard(A, 51_500)  # a trim NACK: the path reaches the peer
    deliver(r, later, 52_000)
    assert silent(r, [later], 52_000) == []


def test_a_plane_slow_as_a_whole_is_not_a_silent_path() -> None:
    """Only a later packet of the same plane, by another path, shows the path itself is
    silent; the other plane's deliveries (a plane behind a slow NIC link delivers every
    path late) and a sibling sent within the guard do not."""
    r = rig()
    warm(r)
    deliver(r, send(r, 9, C, 0), 10_000)
    send(r, 3, A, 30_000)
    near = send(r, 4, B, 30_500)  # within the guard of A's packet
    other = send(r, 5, C, 40_000)
    deliver(r, near, 50_000)
    deliver(r, other, 52_000)
    assert silent(r, [other], 52_000) == []


def test_a_path_that_never_delivered_is_never_silent() -> None:
    r = rig()
    deliver(r, send(r, 2, B, 0), 20_000)
    send(r, 3, A, 1_000)
    later = send(r, 4, B, 30_000)
    deliver(r, later, 200_000)
    assert silent(r, [later], 200_000) == []  # its delay is unknown: the other rules' case


def test_a_path_overdue_by_its_own_delay_is_held_before_it_is_silent() -> None:
    """Defect: a dead T0-T1 link under a flapping permutation was fed until its verdict, a
    guard (SRTT/4) after the path's own delay: each down phase lost up to 1.6 x its limit.
    Its oldest packet past the path's latest delay, a later one of its plane delivered by
    another path, now names it overdue at once; silent only a guard later."""
    r = rig()
    warm(r)
    lost = send(r, 3, A, 30_000)
    later = send(r, 4, B, 30_500)
    deliver(r, later, 49_900)
    assert r.look_at_paths([later], 49_900) == ([], [])  # 19.9 us: within its delay of 20 us
    deliver(r, send(r, 5, B, 31_000), 50_600)
    assert r.look_at_paths([later], 50_600) == ([], [lost])  # 20.6 us: overdue, not silent
    deliver(r, send(r, 6, B, 32_000), 52_000)
    assert r.look_at_paths([later], 52_000) == ([lost], [lost])  # the guard waited out: silent


def test_no_path_is_overdue_without_a_later_packet_of_its_plane_delivered() -> None:
    """Only a packet of its own plane sent no earlier, by another path, shows the path itself
    is late: its sibling's older packet, or the other plane's newer one, do not."""
    r = rig()
    warm(r)
    deliver(r, send(r, 9, C, 0), 10_000)
    send(r, 3, A, 30_000)
    older = send(r, 4, B, 29_000)
    newer_elsewhere = send(r, 5, C, 40_000)
    deliver(r, older, 50_600)
    deliver(r, newer_elsewhere, 50_700)
    assert r.look_at_paths([newer_elsewhere], 50_700) == ([], [])
