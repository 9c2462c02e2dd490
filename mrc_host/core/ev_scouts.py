"""Paths not proven lately -- back from a SKIP penalty, beside a path of their plane that just
went silent, or overdue by their own delay: each carries one packet, its scout (a packet in
flight may stand for it), until that packet is delivered.

Why: a penalty stops a path carrying packets, so nothing shows it dying meanwhile. A T0-T1
link that went down just after its ECN mark came back from its penalty at a full share and
lost 60 packets in a round trip. Proven (its scout delivered), the path carries its share
again; lost, the loss rules retire it. The same holds a plane's other paths when one of its
paths goes silent (``PlaneWatch.silent_path``): a dead link retires that path alone, and the
others carry their share again at their first delivery; a dead plane stops taking packets
until its scouts' silence fails it. A path whose oldest packet is overdue by its own delay
(``PathWatch.look``) is held to that packet too, until one of its packets is delivered. A
scout out longer than the RTO floor (its loss judged without retiring the path, or its SACK
lost) lets another go.

The EV table owns one (``EvTable.scouts``), tells it of each state change and each packet
sent or delivered; the rotation asks it whether a path may take a packet (``waiting``).
Only in MRC mode: an ECMP EV names no one path.
"""

from __future__ import annotations

from mrc_fabric.ev import T1_SHIFT


class PathScouts:
    """Per path (plane and T1, ``ev >> T1_SHIFT``) back from SKIP: the send time of its scout
    (-1: none sent yet)."""

    def __init__(self, enabled: bool, timeout_ns: int) -> None:
        self.enabled = enabled
        self.timeout_ns = timeout_ns
        self.out: dict[int, int] = {}

    def served(self, ev: int) -> None:
        """``ev``'s penalty is served: its path is proven before it carries a full share."""
        if self.enabled and ev >> T1_SHIFT not in self.out:
            self.out[ev >> T1_SHIFT] = -1

    def hold(self, key: int, sent_ns: int) -> None:
        """Path ``key`` (``ev >> T1_SHIFT``) takes nothing more until a packet sent on it at
        ``sent_ns`` or later is delivered (-1: its next packet is that scout): its plane's
        other path went silent, and whether the plane lives is not known yet."""
        if not self.enabled:
            return
        cur = self.out.get(key, -2)
        if cur < 0 or 0 <= sent_ns < cur:
            self.out[key] = sent_ns

    def suspect(self, key: int, sent_ns: int) -> None:
        """Path ``key`` is overdue: it takes nothing more until a packet sent on it at
        ``sent_ns`` or later is delivered. A path already waiting for a scout keeps waiting
        for that one (a scout out past the timeout is not held again by the same packet)."""
        if self.enabled and key not in self.out:
            self.out[key] = sent_ns

    def release(self, ev: int) -> None:
        """``ev``'s path needs no scout now: ``ev`` stopped being GOOD (skipped again, retired),
        or its path just delivered a packet sent after its penalty began (``EvHeat.unmarked_echo``)."""
        if self.out:
            self.out.pop(ev >> T1_SHIFT, None)

    def sent(self, ev: int, now_ns: int) -> None:
        """A packet left on ``ev``: the scout of its path, if the path waits for one."""
        out = self.out
        if out and out.get(ev >> T1_SHIFT, 0) < 0:
            out[ev >> T1_SHIFT] = now_ns

    def delivered(self, ev: int, sent_ns: int) -> None:
        """What was sent on ``ev`` at ``sent_ns`` was delivered: a scout's path is proven."""
        out = self.out
        if out and 0 <= out.get(ev >> T1_SHIFT, -1) <= sent_ns:
            del out[ev >> T1_SHIFT]

    def waiting(self, ev: int, now_ns: int) -> bool:
        """Whether ``ev``'s path has its scout out, not proven yet (so it takes nothing more).
        A scout out past the timeout is given up here: the path's next packet is its scout."""
        key = ev >> T1_SHIFT
        sent = self.out.get(key, -1)
        if sent < 0:
            return False
        if now_ns >= 0 and now_ns - sent > self.timeout_ns:
            self.out[key] = -1
            return False
        return True
