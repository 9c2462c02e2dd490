"""A path silent past its own delay while its plane's other paths deliver (``PathWatch``).

Under a permutation beside a flapping T0-T1 link the other paths of the link's plane queued
20-40 us deeper than the rest; the reordering window grew to twice the SRTT, and a connection
sprayed the dead link for 85 us (65 packets) before its RTO found it. These tests hold the
rule to its three conditions -- overdue by the path's own latest delay, no delivery for twice
its own spacing, a packet of the same plane sent after it arrived by another path -- and to
what must never trip it: a path only queued deeper, a congested path whose headers are
trimmed, a plane slow as a whole, a path that never delivered.
"""

from __future__ import annotations

from loss_rig import deliver, recovery, send

from mrc_host.core import TransportConfig
from mrc_host.core.recovery import Recovery

GUARD = 1_000  # the configured reordering window: no SRTT sample in these tests


def ev(plane: int, t1: int, entropy: int = 1) -> int:
    return plane << 28 | t1 << 18 | entropy


A = ev(0, 1)  # the path that dies
B = ev(0, 2)  # its sibling in plane 0
C = ev(1, 1)  # a path of the other plane


def rig() -> Recovery:
    return recovery(TransportConfig(reorder_window_ns=GUARD), planes=2)


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
    assert r.silent_paths([later], 50_800) == []  # 20.8 us: not yet its delay plus the guard
    deliver(r, send(r, 5, B, 33_000), 52_000)
    assert r.silent_paths([later], 52_000) == [lost]
    assert lost.suspect_sent == lost.sent_ns  # judged: its delivery would undo the verdict
    assert r.silent_paths([later], 60_000) == []  # named once


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
    assert r.silent_paths([sibling], 25_500) == []
    newer = send(r, 6, B, 20_000)
    deliver(r, newer, 40_000)
    assert r.silent_paths([newer], 40_000) == [queued]  # 17 us without a delivery: silent


def test_a_trimmed_header_keeps_a_congested_path_alive() -> None:
    r = rig()
    warm(r)
    send(r, 3, A, 30_000)
    later = send(r, 4, B, 32_000)
    r.path_heard(A, 51_500)  # a trim NACK: the path reaches the peer
    deliver(r, later, 52_000)
    assert r.silent_paths([later], 52_000) == []


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
    assert r.silent_paths([other], 52_000) == []


def test_a_path_that_never_delivered_is_never_silent() -> None:
    r = rig()
    deliver(r, send(r, 2, B, 0), 20_000)
    send(r, 3, A, 1_000)
    later = send(r, 4, B, 30_000)
    deliver(r, later, 200_000)
    assert r.silent_paths([later], 200_000) == []  # its delay is unknown: the other rules' case
