"""Which reverse EVs deliver: the ACK echo that DATA carries.

A receiver sends its SACKs on a few reverse EVs per plane (``EvSet.next_control_ev``) and,
without help, learns that one of them is dead only from a liveness probe, every
``probe_interval_ns``. So each DATA packet carries an ACK echo (14 bits of the DATA flags
word): ``EchoQueue`` on the data sender echoes every SACK it received once, about oldest first,
as ``messages.ack_echo_of`` the DATA copy the SACK answers. On the SACK sender,
``AckEchoes`` takes an echo for what a SACK is for DATA: proof that the SACK's EV delivered
what was sent on it then (``EvEntry.ok_sent_ns``). The sender's rule for a path that delivers
nothing then applies (``EvSet.path_dead``, with ``EvSet.echo_margin_ns``): once a SACK sent a margin after an
unechoed one is echoed, the unechoed SACK's path is retired (its EVs and their siblings,
whatever the floor) if nothing sent on it since has been echoed. A SACK that was merely
lost proves nothing while the path's later SACKs are echoed; one echoed late undoes the
retirement. An echo value two remembered SACKs share names neither.

The echo is untrusted: one that names no SACK sent lately is counted (``ack_echo_unmatched``)
and dropped, and the rule never retires a plane's last path (``reverse_retire_refused``).
"""

from __future__ import annotations

from array import array
from typing import Final

from mypy_extensions import mypyc_attr

from mrc_fabric.ev import ENTROPY_BITS
from mrc_host.wire.messages import ACK_ECHO_MAX, ack_echo_of

from .counters import Counters
from .ev_state import EvEvent, EvState
from .evset import EvEntry, EvSet

SENT_MAX: Final = 512  # SACKs remembered for their echo: several round trips' worth
ECHO_QUEUE_MAX: Final = 64  # SACKs a data sender holds to echo (an idle spell's worth)
ECHO_LOOKAHEAD: Final = 4  # how far past the oldest echo the next may be taken from
_USABLE: Final = (EvState.GOOD, EvState.SKIP)
_AMBIGUOUS: Final = -1  # in place of the EV of a SACK whose echo is not unique
_KNOWN_BYTES: Final = (ACK_ECHO_MAX >> 3) + 1  # a bit per echo value
_PATH_BITS: Final = 32  # a queued echo: its reverse path in the low bits (``_pack``)
_PATH_MASK: Final = (1 << _PATH_BITS) - 1
# Shared empty stand-ins until first use (never added to: the owner swaps in its own first), so
# an endpoint that only receives holds no echo queue and one that only sends no echo bitmap
# (the 128-host permutation: 0.4 MB of its peak)
_NO_PENDING: Final[list[int]] = []
_NO_KNOWN: Final = bytearray(_KNOWN_BYTES)
_ROOM: Final = array("H", bytes(2 * 64))  # the echo book's order grows by 64 echoes at a time


@mypyc_attr(acyclic=True)
class SackSent:
    """A SACK's EV and send time, one object for every record of it: the receiver's per PSN
    the SACK answers and the echo book's. Not a tuple: compiled, a ``tuple[int, int]`` is a C
    struct, boxed into a new tuple (and two new ints) wherever it is stored; on the 128-host
    permutation those copies were ~14 MB of the peak. Acyclic (integers only): compiled, it
    has no garbage-collector header, 48 bytes rather than 64."""

    def __init__(self, ev: int, sent_ns: int) -> None:
        self.ev = ev
        self.sent_ns = sent_ns


def _oldest(d: dict[int, SackSent]) -> tuple[int, SackSent]:
    """The first item of ``d`` (compiled, ``next(iter(d))`` is two generic calls)."""
    for item in d.items():
        return item
    raise KeyError("empty")


class EchoQueue:
    """The data sender's side: which SACK the next DATA packet echoes.

    Every SACK received once, oldest first, but the echoes of one reverse path never ride
    the same forward path twice in a row. An echo is lost with the DATA packet carrying it,
    so a dead forward path loses the echoes it carries; in order alone, a steady flow could
    put every echo of one reverse path on it (one run echoed none of 17 SACKs on a healthy
    path, which was then retired). Alternating (an echo waits a packet rather than ride the
    same forward path again), at most every other one is lost, and the next gets through
    within the margin.

    The echoes wait in a list of integers, each an echo and its reverse path packed
    (``_pack``): compiled, a list's items and ``pop`` are native calls, where a deque of
    tuples paid generic calls and a tuple a packet (~1.2 k instructions a DATA packet)."""

    def __init__(self) -> None:
        # packed (echo, reverse path), oldest first, at most ECHO_QUEUE_MAX; made at the first
        # SACK: an endpoint that never sends gets none
        self._pending: list[int] = _NO_PENDING
        self._last_forward: dict[int, int] = {}  # reverse path -> forward path of its last echo

    def sack_received(self, echo_ts: int, echo_ev: int, reverse_ev: int) -> None:
        """A SACK answering the DATA copy (``echo_ts``, ``echo_ev``) arrived on ``reverse_ev``."""
        pending = self._pending
        if pending is _NO_PENDING:
            pending = self._pending = []
        elif len(pending) >= ECHO_QUEUE_MAX:
            pending.pop(0)  # (full: the oldest is dropped)
        pending.append(_pack(ack_echo_of(echo_ts, echo_ev), reverse_ev >> ENTROPY_BITS))

    def next_echo(self, forward_ev: int) -> int:
        """The echo for a DATA packet leaving on ``forward_ev``; 0 when none is waiting."""
        pending = self._pending
        n = len(pending)
        if n == 0:
            return 0
        forward = forward_ev >> ENTROPY_BITS
        last = self._last_forward
        pick = -1
        for k in range(min(n, ECHO_LOOKAHEAD)):
            if last.get(pending[k] & _PATH_MASK, -1) != forward:
                pick = k
                break
        if pick < 0:
            if n < ECHO_QUEUE_MAX // 2:
                return 0  # the next DATA packet takes it, on another path
            pick = 0
        packed = pending.pop(pick)
        last[packed & _PATH_MASK] = forward
        return packed >> _PATH_BITS


def _pack(echo: int, path: int) -> int:
    """An echo and its reverse path (an EV's bits above the entropy) as one integer."""
    return (echo << _PATH_BITS) | path


class AckEchoes:
    """The SACK sender's side: the SACKs sent and not yet echoed, and what echoes prove."""

    def __init__(self, evset: EvSet, counters: Counters) -> None:
        self.evset = evset
        self.counters = counters
        # the echoes of the SACKs remembered (``SENT_MAX``), oldest first from ``_head`` (0: a
        # slot whose echo was sent again since, and moved last), and a bit per echo value
        # remembered: only whether an echo is remembered is ever asked, so no record is kept
        # (an ``OrderedDict`` of records was ~40 kB a receiver: 5 MB of the 128-host permutation);
        # the bitmap is made at the first SACK sent (shared zeros, only read, until then);
        # ``_order`` holds ``_end`` echoes and zeros past them, room for the next ones (compiled,
        # storing into an ``array`` is a generic call, ``append`` a generic method call: ~4x that)
        self._order = array("H")
        self._end = 0
        self._head = 0
        self._held = 0
        self._known = _NO_KNOWN
        self._unconfirmed: dict[int, SackSent] = {}  # the same, not yet echoed, oldest first
        self._late: dict[int, SackSent] = {}  # unechoed SACKs of paths retired since
        # path retired here -> (send time of its lost SACK, the retirement's undo key)
        self._dead: dict[tuple[int, int], tuple[int, tuple[int, int] | None]] = {}

    def sack_sent(self, echo_ts: int, echo_ev: int, sent_on: SackSent) -> None:
        """A SACK echoing the DATA copy (``echo_ts``, ``echo_ev``) left as ``sent_on`` (the
        receiver's record of it, kept here as it is)."""
        key = ack_echo_of(echo_ts, echo_ev)
        unconfirmed, late, order, known = self._unconfirmed, self._late, self._order, self._known
        if known is _NO_KNOWN:
            known = self._known = bytearray(_KNOWN_BYTES)
        if late:  # (nearly always empty: asked first, no method call)
            late.pop(key, None)
        end = self._end
        if end == len(order):
            order.extend(_ROOM)
        order[end] = key  # (the newest)
        self._end = end + 1
        if known[key >> 3] >> (key & 7) & 1:
            # two SACKs we remember share the 14-bit echo: its echo could name either, so
            # it names neither (judging the older one on no evidence would be a guess too)
            order[order.index(key, self._head, end)] = 0  # (the older one's place)
            unconfirmed.pop(key, None)
            return
        known[key >> 3] |= 1 << (key & 7)
        unconfirmed[key] = sent_on
        self._held += 1
        if self._held > SENT_MAX:  # the oldest remembered is forgotten
            head = self._head
            while not order[head]:
                head += 1
            old = order[head]
            self._head = head + 1
            self._held -= 1
            known[old >> 3] &= ~(1 << (old & 7)) & 0xFF
            if old in unconfirmed:  # (mostly echoed long ago)
                del unconfirmed[old]
            if late:
                late.pop(old, None)
            if self._head >= SENT_MAX:
                del order[: self._head]
                self._end -= self._head
                self._head = 0

    def echoed(self, key: int, now_ns: int) -> None:
        """A DATA packet echoed ``key`` (0: no echo)."""
        if not key:
            return
        unconfirmed = self._unconfirmed
        # (get, then del: compiled, both are native calls; ``pop(key, None)`` is a generic
        # method call, once per DATA packet)
        got = unconfirmed.get(key)
        if got is not None:
            del unconfirmed[key]
        elif self._late:
            late = self._late
            got = late.get(key)  # on a path retired since: may undo that
            if got is not None:
                del late[key]
        if got is None:
            if not self._known[key >> 3] >> (key & 7) & 1:
                self.counters.ack_echo_unmatched += 1  # forged, or older than we remember: dropped
            return  # (else confirmed already, or ambiguous)
        ev, sent_ns = got.ev, got.sent_ns
        evset = self.evset
        e = evset.entry(ev)
        if e is None:
            return
        if sent_ns > e.ok_sent_ns:
            e.ok_sent_ns = sent_ns  # (the evidence only: liveness probes go on as they were)
        if self._dead:
            self._undo_if_slow(e, sent_ns, now_ns)
        margin = evset.echo_margin_ns()
        while unconfirmed:
            key, old = _oldest(unconfirmed)
            if old.sent_ns + margin > sent_ns:
                break
            del unconfirmed[key]
            self._judge(key, old, now_ns, margin)

    def _undo_if_slow(self, e: EvEntry, sent_ns: int, now_ns: int) -> None:
        """``e`` delivered a SACK sent at ``sent_ns``: if that is at or after the one taken for
        lost on its path, the path was slow, and its retirement is undone."""
        path = (e.plane, e.t1)
        dead = self._dead.get(path)
        if dead is not None and sent_ns >= dead[0]:
            del self._dead[path]
            back = self.evset.undo_loss(e.value, now_ns) if e.retired_for == dead[1] else 0
            if back:
                self.counters.ev_loss_undone += 1
                self.counters.ev_undone += back

    def _judge(self, key: int, sack: SackSent, now_ns: int, margin_ns: int) -> None:
        """A SACK (sent on ``sack.ev`` at ``sack.sent_ns``) is unechoed while one sent a margin
        later is echoed: retire its path if nothing sent on it since was echoed."""
        ev, sent_ns = sack.ev, sack.sent_ns
        evset = self.evset
        e = evset.entry(ev)
        if e is None:
            return
        path = (e.plane, e.t1)
        if e.state not in _USABLE or not evset.path_dead(e, EvEvent.LOSS, sent_ns, margin_ns):
            if path in self._dead:
                self._late[key] = sack  # its echo may yet undo the retirement
            return  # (else one SACK lost, or its echo: the path's later ones got through)
        if not any(
            x.t1 != e.t1 and x.state in _USABLE for x in (*evset.active[e.plane], *evset.backup[e.plane])
        ):
            self.counters.reverse_retire_refused += 1  # never a plane's last path, whatever the echoes say
            return
        why = "reverse path dead: its SACKs went unechoed"
        if evset.retire(ev, why, now_ns, EvEvent.LOSS, sent_ns, margin_ns):
            self.counters.reverse_paths_retired += 1
            self._dead[path] = (sent_ns, e.retired_for)
            self._late[key] = sack
            entries = evset.entries
            for k, other in list(self._unconfirmed.items()):
                o = entries.get(other.ev)
                if o is not None and (o.plane, o.t1) == path:
                    del self._unconfirmed[k]  # nothing to judge again; its echo may undo
                    self._late[k] = other
