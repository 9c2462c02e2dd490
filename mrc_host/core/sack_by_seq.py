"""The receiver's record of which SACK answered each PSN it placed, in arrays indexed by PSN.

The receiver keeps, per sequence number it placed, the ``SackSent`` of the SACK that answered
it: a retransmission of that PSN arriving long after says that SACK's path lost it
(``Receiver.on_data``). The PSNs kept are consecutive (every one placed since the window
moved on), so two arrays from the lowest PSN held, of the SACK's EV and its send time, cost
16 bytes a PSN: a dict cost an entry and a boxed integer key (about 100 bytes; 5 MB of the
128-host permutation's peak), a list of records a pointer and kept every SACK's record alive
(2.7 MB).

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
_SHORT_GAP: Final = 4  # a gap of up to this many PSNs is appended a PSN at a time (``set``)


class SackBySeq:
    """seq -> (EV, send time): ``_ev[seq - base]``, ``_ns[seq - base]``."""

    def __init__(self) -> None:
        self._ev = _ARRAY("q")
        self._ns = _ARRAY("q")
        self._base = 0  # the seq of slot 0
        self._held = 0  # slots holding a record

    def __len__(self) -> int:
        return self._held

    def set(self, seq: int, sent: SackSent) -> None:
        evs, ns = self._ev, self._ns
        if not evs:
            self._base = seq
        at = seq - self._base
        if at == len(evs):  # (the next PSN: nearly always; stored as it is appended)
            evs.append(sent.ev)
            ns.append(sent.sent_ns)
            self._held += 1
            return
        if at < 0:  # (below the lowest held: room at the front)
            evs[:0] = _ARRAY("q", [_NONE]) * -at
            ns[:0] = _ARRAY("q", [0]) * -at
            self._base = seq
            at = 0
        elif at > len(evs):
            # a few PSNs skipped (out of order: nearly half the sets of a sprayed permutation):
            # appended one by one, where two temporary arrays cost a list, a multiply and a
            # call each; a long gap still extends at once
            gap = at + 1 - len(evs)
            if gap <= _SHORT_GAP:
                for _ in range(gap):
                    evs.append(_NONE)
                    ns.append(0)
            else:
                evs.extend(_ARRAY("q", [_NONE]) * gap)
                ns.extend(_ARRAY("q", [0]) * gap)
        if evs[at] == _NONE:
            self._held += 1
        evs[at] = sent.ev
        ns[at] = sent.sent_ns

    def set_all(self, seqs: list[int], sent: SackSent) -> None:
        """``set`` each of ``seqs`` to ``sent``.

        Why: a SACK answers the ``ack_every`` PSNs placed since the last one, nearly always
        the next ones after the last held. The arrays' methods are generic calls from compiled
        code (about 65 ns each, against a few for a list's); that run takes one ``extend`` per
        array here instead of an ``append`` per PSN and array."""
        k = len(seqs)
        if not k:
            return
        evs = self._ev
        if not evs:
            self._base = seqs[0]
        first = self._base + len(evs)
        for i in range(k):
            if seqs[i] != first + i:  # (not that run: one at a time)
                for seq in seqs:
                    self.set(seq, sent)
                return
        evs.extend(_ARRAY("q", [sent.ev]) * k)
        self._ns.extend(_ARRAY("q", [sent.sent_ns]) * k)
        self._held += k

    def get(self, seq: int) -> SackSent | None:
        at = seq - self._base
        evs = self._ev
        if not 0 <= at < len(evs) or evs[at] == _NONE:
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
        cut = min(cut, len(evs))
        self._held -= cut - evs[:cut].count(_NONE)
        del evs[:cut]
        del self._ns[:cut]
        self._base = floor
