"""The receiver's record of which SACK answered each PSN it placed, in arrays indexed by PSN.

The receiver keeps, per sequence number it placed, the ``SackSent`` of the SACK that answered
it: a retransmission of that PSN arriving long after says that SACK's path lost it
(``Receiver.on_data``). The PSNs kept are consecutive (every one placed since the window
moved on), so two arrays from the lowest PSN held, of the SACK's EV and its send time, cost
16 bytes a PSN (and up to an eighth more of spare room, where a PSN is stored in place): a
dict cost an entry and a boxed integer key (about 100 bytes; 5 MB of the 128-host
permutation's peak), a list of records a pointer and kept every SACK's record alive (2.7 MB).

It behaves exactly as that dict did: ``len`` counts the PSNs held (the receiver trims the
table by it), ``get`` and ``pop`` answer a record with the EV and time set (a new one),
``keep_from`` drops every PSN below a floor.
"""

from __future__ import annotations

from array import array
from typing import Final

from .ack_echo import SackSent

# (Final: compiled code reads these from C statics, any other global from the module's dict)
_ARRAY: Final = array
_NONE: Final = -1  # in ``_ev``: no record held for that PSN (an EV is 32 bits, never negative)
_RUN: Final = 4  # ``set_all`` writes a run of this many PSNs or more at once


class SackBySeq:
    """seq -> (EV, send time): ``_ev[seq - base]``, ``_ns[seq - base]`` for the first ``_len``
    slots; the arrays' spare tail (``_grow``) holds nothing (``_NONE``, 0) until used."""

    def __init__(self) -> None:
        self._ev = _ARRAY("q")
        self._ns = _ARRAY("q")
        self._base = 0  # the seq of slot 0
        self._len = 0  # slots in use (from the base): the rest of the arrays is spare
        self._held = 0  # slots holding a record

    def __len__(self) -> int:
        return self._held

    def _grow(self, need: int) -> None:
        """Room for ``need`` slots: the arrays grow by an eighth (at least 16 slots) at a
        time, so that a slot is then written in place. Why: compiled, an array's
        ``append`` is a generic method call (looked up by name, ~700 instructions), a store
        to an element a generic ``setitem`` (~330); a SACK's records cost two of either."""
        cap = len(self._ev)
        more = max(need - cap, cap // 8 + 16)
        self._ev.extend(_ARRAY("q", [_NONE]) * more)
        self._ns.extend(_ARRAY("q", [0]) * more)

    def set(self, seq: int, sent: SackSent) -> None:
        if not self._len:
            self._base = seq
        at = seq - self._base
        evs = self._ev
        if at >= self._len:  # (the next PSN, nearly always, or a few skipped: they hold nothing)
            if at >= len(evs):
                self._grow(at + 1)
            self._len = at + 1
            self._held += 1
        elif at < 0:  # (below the lowest held: room at the front)
            evs[:0] = _ARRAY("q", [_NONE]) * -at
            self._ns[:0] = _ARRAY("q", [0]) * -at
            self._len -= at
            self._base = seq
            at = 0
            self._held += 1
        elif evs[at] == _NONE:
            self._held += 1
        evs[at] = sent.ev
        self._ns[at] = sent.sent_ns

    def set_all(self, seqs: list[int], sent: SackSent) -> None:
        """``set`` each of ``seqs`` to ``sent``.

        A SACK answers the PSNs placed since the last one: on a sprayed permutation nearly
        always one, the next; up to ``ack_every`` of them in order otherwise. A few are
        written in place one by one (``set``); a longer run right after the last held at
        once, a temporary array per array (dearer than a PSN's two stores, cheaper than
        four of them), appended where no spare room was made."""
        k = len(seqs)
        if k < _RUN:
            for seq in seqs:
                self.set(seq, sent)
            return
        if not self._len:
            self._base = seqs[0]
        start = self._len
        first = self._base + start
        for i in range(k):
            if seqs[i] != first + i:  # (not that run: one at a time)
                for seq in seqs:
                    self.set(seq, sent)
                return
        end = start + k
        evs, ns = self._ev, self._ns
        if start == len(evs):  # (no spare room: appended; runs alone never make any)
            evs.extend(_ARRAY("q", [sent.ev]) * k)
            ns.extend(_ARRAY("q", [sent.sent_ns]) * k)
        else:  # (a slice store costs the run ~700 instructions more than an extend)
            if end > len(evs):
                self._grow(end)
            evs[start:end] = _ARRAY("q", [sent.ev]) * k
            ns[start:end] = _ARRAY("q", [sent.sent_ns]) * k
        self._len = end
        self._held += k

    def get(self, seq: int) -> SackSent | None:
        at = seq - self._base
        evs = self._ev
        if not 0 <= at < self._len or evs[at] == _NONE:
            return None
        return SackSent(evs[at], self._ns[at])

    def pop(self, seq: int) -> SackSent | None:
        """The record of ``seq``, removed (None if none is held)."""
        sent = self.get(seq)
        if sent is not None:
            self._ev[seq - self._base] = _NONE
            self._held -= 1
        return sent

    def keep_from(self, floor: int) -> None:
        """Drop every seq below ``floor``."""
        cut = floor - self._base
        if cut <= 0:
            return
        evs = self._ev
        cut = min(cut, self._len)
        self._held -= cut - evs[:cut].count(_NONE)
        del evs[:cut]
        del self._ns[:cut]
        self._len -= cut
        self._base = floor
