"""The receiver's record of which SACK answered each PSN it placed, as a list indexed by PSN.

The receiver keeps, per sequence number it placed, the ``SackSent`` of the SACK that answered
it: a retransmission of that PSN arriving long after says that SACK's path lost it
(``Receiver.on_data``). The PSNs kept are consecutive (every one placed since the window
moved on), so a list from the lowest PSN held costs one pointer a PSN where a dict cost an
entry and a boxed integer key (about 100 bytes; 5 MB of the 128-host permutation's peak).

It behaves exactly as that dict did: ``len`` counts the PSNs held (the receiver trims the
table by it), ``pop`` takes one, ``keep_from`` drops every PSN below a floor.
"""

from __future__ import annotations

from .ack_echo import SackSent


class SackBySeq:
    """seq -> ``SackSent``: ``slots[seq - base]``, None where none is held."""

    def __init__(self) -> None:
        self._slots: list[SackSent | None] = []
        self._base = 0  # the seq of ``_slots[0]``
        self._held = 0  # slots not None

    def __len__(self) -> int:
        return self._held

    def set(self, seq: int, sent: SackSent) -> None:
        slots = self._slots
        if not slots:
            self._base = seq
        at = seq - self._base
        if at < 0:  # (below the lowest held: room at the front)
            slots[:0] = [None] * -at
            self._base = seq
            at = 0
        elif at == len(slots):  # (the next PSN: nearly always)
            slots.append(None)
        elif at > len(slots):
            slots.extend([None] * (at + 1 - len(slots)))
        if slots[at] is None:
            self._held += 1
        slots[at] = sent

    def get(self, seq: int) -> SackSent | None:
        at = seq - self._base
        slots = self._slots
        return slots[at] if 0 <= at < len(slots) else None

    def pop(self, seq: int) -> SackSent | None:
        """The record of ``seq``, removed (None if none is held)."""
        at = seq - self._base
        slots = self._slots
        if not 0 <= at < len(slots):
            return None
        sent = slots[at]
        if sent is not None:
            slots[at] = None
            self._held -= 1
        return sent

    def keep_from(self, floor: int) -> None:
        """Drop every seq below ``floor``."""
        cut = floor - self._base
        if cut <= 0:
            return
        slots = self._slots
        cut = min(cut, len(slots))
        self._held -= sum(1 for s in slots[:cut] if s is not None)
        del slots[:cut]
        self._base = floor
