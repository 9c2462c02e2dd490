"""Counters of everything the core does, per connection and per EV.

Plain classes, each counter declared once, in its ``__init__``: as dataclasses their 70
fields cost every ``mrc-sim`` start about 2 ms to build, and nothing needs their methods.
``as_dict`` lists the counters in that order.

Per-EV counters are slots of machine integers in arrays, in three tables by EV
(``EvSlots``): what DATA we sent on our EV carried (``SENT_FIELDS``), the rarer marks on our
EV (``MARK_FIELDS``: control packets, losses, ECN echoes, trims) and what arrived on the
peer's (``RECV_FIELDS``). Why: an object of all nine an EV, in a dict by EV, was ~170 bytes
with its key and entry, and every EV of a permutation has one at each end (33,800 on the
128-host one), while a sender moves three counters of most EVs and a receiver two of the
peer's. An EV's slot is 24 + 32 + 16 bytes at most, found with no dict and no boxed key.
The core counts by slot (``sent_on``, ``delivered``, ``recv_slot``, ``recv_add``) or by EV
(``mark``); ``ev`` and ``per_ev`` give ``EvCounters`` views to readers.
"""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Final


def _attribute_names(obj: object) -> tuple[str, ...]:
    """``obj``'s attributes in the order its ``__init__`` sets them, read from its pickle state:
    the instance ``__dict__`` as Python runs it; compiled (mypyc objects have none), the
    attributes the class declares, in that order."""
    state = obj.__getstate__()
    assert isinstance(state, dict)
    return tuple(state)


# One EV's counters, in the report's order
EV_COUNTER_FIELDS: Final = (
    "data_packets_sent",
    "data_bytes_sent",
    "control_packets_sent",
    "packets_delivered",  # DATA sent on this EV that the peer acknowledged
    "packets_lost",  # DATA sent on this EV declared lost (gap or timeout)
    "ecn_echoes",
    "trims",
    "data_packets_received",  # DATA that arrived carrying this EV
    "data_bytes_received",
)
# the three tables' fields, each a field's offset in its slot
SENT_FIELDS: Final = ("data_packets_sent", "data_bytes_sent", "packets_delivered")
MARK_FIELDS: Final = ("control_packets_sent", "packets_lost", "ecn_echoes", "trims")
RECV_FIELDS: Final = ("data_packets_received", "data_bytes_received")
SENT_PACKETS: Final = 0
SENT_BYTES: Final = 1
SENT_DELIVERED: Final = 2
MARK_CONTROL: Final = 0
MARK_LOST: Final = 1
MARK_ECN: Final = 2
MARK_TRIMS: Final = 3
RECV_PACKETS: Final = 0
RECV_BYTES: Final = 1
# where each of EV_COUNTER_FIELDS lives: table (0 sent, 1 marks, 2 received) and offset
_WHERE: Final = ((0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1))


class EvSlots:
    """Counters in slots by EV value: slot numbers 0, 1, 2, ... in the order EVs are first
    counted, ``stride`` counters a slot in ``values``.

    Why not a dict: an entry and the boxed key of a 32-bit EV cost ~70 bytes, an EV here
    8 + 4-8 bytes besides its counters: the EVs in an array by slot, and an open-addressing
    table (linear probing, at most half full) of slot + 1 by the EV's hash (0: empty).
    """

    def __init__(self, stride: int) -> None:
        self.stride = stride
        self.evs: array[int] = array("q")  # by slot
        self.values: array[int] = array("q")  # by slot * stride + field
        self._zeros: array[int] = array("q", bytes(8 * stride))
        self._table: array[int] = array("i")
        self._mask = -1  # len(self._table) - 1; no table yet

    def __len__(self) -> int:
        return len(self.evs)

    def find(self, ev: int) -> int:
        """``ev``'s slot, or -1."""
        mask = self._mask
        if mask < 0:
            return -1
        table = self._table
        h = _hash(ev) & mask
        while True:
            s = table[h]
            if s == 0:
                return -1
            if self.evs[s - 1] == ev:
                return s - 1
            h = (h + 1) & mask

    def slot(self, ev: int) -> int:
        """``ev``'s slot, made (its counters zero) if it has none."""
        slot = self.find(ev)
        return slot if slot >= 0 else self.add(ev)

    def add(self, ev: int) -> int:
        """A new slot for ``ev``, which has none (its counters zero). Why apart from ``slot``:
        the core's counting methods have just looked ``ev`` up (``find``) and not found it."""
        slot = len(self.evs)
        self.evs.append(ev)
        self.values.extend(self._zeros)
        if 2 * (slot + 1) > self._mask + 1:
            self._grow()
        else:
            self._place(slot, ev)
        return slot

    def get(self, ev: int, field: int) -> int:
        slot = self.find(ev)
        return 0 if slot < 0 else self.values[slot * self.stride + field]

    def _place(self, slot: int, ev: int) -> None:
        mask = self._mask
        table = self._table
        h = _hash(ev) & mask
        while table[h] != 0:
            h = (h + 1) & mask
        table[h] = slot + 1

    def _grow(self) -> None:
        size = max(8, 2 * (self._mask + 1))
        self._table = array("i", bytes(4 * size))
        self._mask = size - 1
        for slot, ev in enumerate(self.evs):
            self._place(slot, ev)


def _hash(ev: int) -> int:
    """A 32-bit EV's bits mixed (its low bits alone are a few paths' entropy); stays within
    the compiled code's fast integers for any EV below 2**32."""
    x = (ev ^ (ev >> 16)) & 0xFFFFFFFF
    return (x * 0x45D9F3B) >> 11


class EvCounters:
    """What one EV carried, both ways: a live view of its slots in ``Counters``' tables (read
    and write). The core counts through ``Counters``' slot methods; this is for readers."""

    def __init__(self, counters: Counters, ev: int) -> None:
        self._c = counters
        self._ev = ev

    def _get(self, i: int) -> int:
        table, field = _WHERE[i]
        return self._c.tables[table].get(self._ev, field)

    def _set(self, i: int, value: int) -> None:
        table, field = _WHERE[i]
        t = self._c._table(table)
        t.values[t.slot(self._ev) * t.stride + field] = value

    @property
    def data_packets_sent(self) -> int:
        return self._get(0)

    @data_packets_sent.setter
    def data_packets_sent(self, value: int) -> None:
        self._set(0, value)

    @property
    def data_bytes_sent(self) -> int:
        return self._get(1)

    @data_bytes_sent.setter
    def data_bytes_sent(self, value: int) -> None:
        self._set(1, value)

    @property
    def control_packets_sent(self) -> int:
        return self._get(2)

    @control_packets_sent.setter
    def control_packets_sent(self, value: int) -> None:
        self._set(2, value)

    @property
    def packets_delivered(self) -> int:
        return self._get(3)

    @packets_delivered.setter
    def packets_delivered(self, value: int) -> None:
        self._set(3, value)

    @property
    def packets_lost(self) -> int:
        return self._get(4)

    @packets_lost.setter
    def packets_lost(self, value: int) -> None:
        self._set(4, value)

    @property
    def ecn_echoes(self) -> int:
        return self._get(5)

    @ecn_echoes.setter
    def ecn_echoes(self, value: int) -> None:
        self._set(5, value)

    @property
    def trims(self) -> int:
        return self._get(6)

    @trims.setter
    def trims(self, value: int) -> None:
        self._set(6, value)

    @property
    def data_packets_received(self) -> int:
        return self._get(7)

    @data_packets_received.setter
    def data_packets_received(self, value: int) -> None:
        self._set(7, value)

    @property
    def data_bytes_received(self) -> int:
        return self._get(8)

    @data_bytes_received.setter
    def data_bytes_received(self, value: int) -> None:
        self._set(8, value)


class Counters:
    """One endpoint's counters (its sender's and its receiver's)."""

    def __init__(self) -> None:
        # sender
        self.messages_posted = 0
        self.messages_completed = 0
        self.messages_failed = 0
        self.messages_abandoned = 0  # given up by the application (Endpoint.abandon)
        self.data_packets_sent = 0
        self.data_bytes_sent = 0
        self.data_bytes_delivered = 0  # payload the peer acknowledged (SACK or cumulative), once each
        self.retransmissions = 0
        self.losses_gap = 0
        self.losses_rto = 0
        self.spurious_losses = 0  # gap losses whose original was SACKed after all (reordering)
        self.undo_refused_dead = 0  # of those, on a path that died since: retirement kept
        self.spurious_acks_lost = 0  # of those, shown by a later SACK only: its own SACK was lost
        self.losses_trimmed_after_guess = 0  # guessed lost, then its trim NACK came: congestion
        self.losses_while_hot = 0  # guessed lost on a path marked/trimmed lately: no retirement
        self.losses_hot_dead = 0  # such a path that proved nothing a round trip later: retired
        self.losses_floor_dead = 0  # the same for a loss the ev_min_active floor held
        self.losses_path = 0  # overdue packets on a path a loss just retired, resent at once
        self.nic_paths_dead = 0  # paths retired by the NIC's shared verdict (path_health.py)
        self.rto_fired = 0
        self.rto_probes = 0  # timeouts before any RTT sample: the oldest packet resent, none declared lost
        self.dsacks_received = 0  # SACKs reporting a duplicate arrival (D-SACK)
        self.losses_tail = 0  # resent by the tail probe (nothing new left to send), no EV blamed
        self.tail_twins = 0  # second copies of resends at the tail, on another plane (MRC)
        self.tail_twin_duplicates = 0  # D-SACKs for the second of those two copies to arrive
        self.losses_port = 0  # in flight on a plane whose local or peer NIC port went down: resent
        self.losses_plane = 0  # in flight on a plane found silently failed: resent
        self.planes_failed = 0  # silent whole-plane failures detected from the other planes
        self.go_back_n_rewinds = 0
        self.sacks_received = 0
        self.ecn_echoes_received = 0
        self.nacks_received: Counter[str] = Counter()
        self.stray_acks = 0  # SACK/NACK not believed (the total of acks_dropped)
        self.sack_spares = 0  # second copies of a message's last SACK, after the first (not stray)
        self.acks_dropped: Counter[str] = Counter()  # by reason (peer safety)
        self.sack_echo_unmatched = 0  # SACKs whose echoed EV/time match no newly acked packet
        self.connection_failures: Counter[str] = Counter()  # RETRY_EXCEEDED ...
        self.last_resort_sends = 0  # sent on an ASSUMED_BAD EV because nothing else was usable
        # receiver
        self.messages_received = 0
        self.data_packets_received = 0
        self.data_bytes_placed = 0
        self.duplicates_received = 0
        self.out_of_window = 0
        self.out_of_order_dropped = 0  # go-back-N only
        self.trimmed_received = 0
        self.ecn_ce_received = 0
        self.sacks_sent = 0
        self.nacks_sent: Counter[str] = Counter()
        self.refused_writes: Counter[str] = Counter()  # BAD_RKEY / BAD_ADDRESS
        # both
        self.malformed: Counter[str] = Counter()  # codec reasons + core checks
        self.wrong_qp = 0
        self.probes_sent = 0
        self.probes_received = 0
        self.probe_acks_sent = 0
        self.probe_acks_received = 0
        self.probe_timeouts = 0
        self.ev_retired = 0
        self.ev_retired_by_loss = 0  # of those, retired by a data loss guess (with path siblings)
        self.ev_restored = 0
        self.ev_loss_undone = 0  # retirements undone: the "lost" packet arrived after all
        self.ev_undone = 0  # EVs those undos brought back (a path's siblings, a whole plane)
        self.ev_skipped = 0
        self.ev_retire_floor_holds = 0  # losses that retired no EV: ev_min_active reached
        self.reverse_ev_retired = 0  # ack paths retired after a duplicate retransmission
        self.reverse_paths_retired = 0  # ack paths retired: their SACKs went unechoed (ack_echo.py)
        self.reverse_retire_refused = 0  # ... not retired: the plane's last path
        self.ack_echo_unmatched = 0  # DATA echoing no SACK sent lately (forged or old): ignored
        # per EV: slots in three tables (module docstring), made on first use
        self._sent: EvSlots | None = None
        self._marks: EvSlots | None = None
        self._recv: EvSlots | None = None
        self._views: dict[int, EvCounters] | None = None

    # ---- per EV --------------------------------------------------------------------------
    @property
    def tables(self) -> tuple[EvSlots, EvSlots, EvSlots]:
        """The sent, marks and received tables, to read (shared empty ones for those not made)."""
        sent, marks, recv = self._sent, self._marks, self._recv
        return (
            _EMPTY[0] if sent is None else sent,
            _EMPTY[1] if marks is None else marks,
            _EMPTY[2] if recv is None else recv,
        )

    def _table(self, which: int) -> EvSlots:
        """Table ``which`` (0 sent, 1 marks, 2 received), made if it is not yet."""
        self._views = None  # (a slot may be made: the views' dict is made again)
        if which == 0:
            if self._sent is None:
                self._sent = EvSlots(len(SENT_FIELDS))
            return self._sent
        if which == 1:
            if self._marks is None:
                self._marks = EvSlots(len(MARK_FIELDS))
            return self._marks
        if self._recv is None:
            self._recv = EvSlots(len(RECV_FIELDS))
        return self._recv

    def sent_on(self, ev: int, size: int) -> int:
        """A DATA packet of ``size`` payload bytes sent on our EV ``ev``, counted; its slot
        in the sent table (for ``delivered``)."""
        t = self._sent
        if t is None or (slot := t.find(ev)) < 0:
            t = self._table(0)
            slot = t.add(ev)  # (not found: none made)
        i = slot * 3  # (SENT_FIELDS a slot)
        values = t.values
        values[i] += 1
        values[i + SENT_BYTES] += size
        return slot

    def delivered(self, slot: int) -> None:
        """A DATA packet sent on the EV of ``slot`` (``sent_on``) acknowledged."""
        t = self._sent
        assert t is not None
        t.values[slot * 3 + SENT_DELIVERED] += 1

    def sent_slot(self, ev: int) -> int:
        """Our EV ``ev``'s slot in the sent table (made if it has none)."""
        t = self._sent
        if t is None or (slot := t.find(ev)) < 0:
            return self._table(0).add(ev)
        return slot

    def mark(self, ev: int, field: int, n: int = 1) -> None:
        """Add ``n`` to our EV ``ev``'s ``MARK_*`` counter ``field``."""
        t = self._marks
        if t is None or (slot := t.find(ev)) < 0:
            t = self._table(1)
            slot = t.add(ev)
        t.values[slot * 4 + field] += n

    def recv_slot(self, ev: int) -> int:
        """The peer's EV ``ev``'s slot in the received table (made if it has none)."""
        t = self._recv
        if t is None or (slot := t.find(ev)) < 0:
            return self._table(2).add(ev)
        return slot

    def recv_add(self, slot: int, field: int, n: int) -> None:
        """Add ``n`` to received counter ``field`` (``RECV_*``) of ``slot`` (``recv_slot``)."""
        t = self._recv
        assert t is not None
        t.values[slot * 2 + field] += n

    def ev(self, ev: int) -> EvCounters:
        """``ev``'s counters (a live view), counted from now on as an EV of ours if it is not
        counted yet: it is in ``per_ev`` from now on, as an EV any counter was added to."""
        if all(t.find(ev) < 0 for t in self.tables):
            self.sent_slot(ev)
        return EvCounters(self, ev)

    def _counted(self) -> list[int]:
        """Every EV counted, ascending."""
        return sorted({ev for t in self.tables for ev in t.evs})

    @property
    def per_ev(self) -> dict[int, EvCounters]:
        """Every EV counted, by EV value in ascending order, as live views (the dict is made
        again only after a slot is made). Read it, do not store into it."""
        views = self._views
        if views is None:
            views = self._views = {ev: EvCounters(self, ev) for ev in self._counted()}
        return views

    def _ev_row(self, ev: int, tables: tuple[EvSlots, EvSlots, EvSlots]) -> dict[str, object]:
        return {name: tables[t].get(ev, f) for name, (t, f) in zip(EV_COUNTER_FIELDS, _WHERE, strict=True)}

    def as_dict(self) -> dict[str, object]:
        """Every counter in the order ``__init__`` sets them, the counters of reasons and EVs as
        plain dicts (a shallow walk: ``dataclasses.asdict`` copied ``per_ev`` twice and was a
        tenth of a short run's report)."""
        d: dict[str, object] = {name: getattr(self, name) for name in COUNTER_FIELDS}
        tables = self.tables
        d["per_ev"] = {f"{ev:08x}": self._ev_row(ev, tables) for ev in self._counted()}
        for key in (
            "nacks_received",
            "nacks_sent",
            "refused_writes",
            "malformed",
            "acks_dropped",
            "connection_failures",
        ):
            d[key] = dict(getattr(self, key))
        return d


# (the per-EV tables' private names aside: ``per_ev`` goes last, where it was an attribute)
COUNTER_FIELDS: tuple[str, ...] = tuple(n for n in _attribute_names(Counters()) if not n.startswith("_"))
_EMPTY: Final = (EvSlots(len(SENT_FIELDS)), EvSlots(len(MARK_FIELDS)), EvSlots(len(RECV_FIELDS)))
