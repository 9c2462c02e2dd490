"""Counters of everything the core does, per connection and per EV.

Plain classes, each counter declared once, in its ``__init__``: as dataclasses their 70
fields cost every ``mrc-sim`` start about 2 ms to build, and nothing needs their methods.
``as_dict`` lists the counters in that order.

Per-EV counters are rows in three tables by EV (``EvRows``): what DATA we sent on our EV
carried (``SentRow``), the rarer marks on our EV (``MarkRow``: control packets, losses, ECN
echoes, trims) and what arrived on the peer's (``RecvRow``). Why three: every EV of a
permutation is counted at each end (33,800 on the 128-host one), while a sender moves three
counters of most EVs and a receiver two of the peer's; one row of all nine, in a dict by EV,
was ~170 bytes with its key and entry. Compiled, a row is 48-64 bytes (no garbage-collector
header) and its table entry 12-24: ~70 bytes an EV, against ~50 in ``array`` slots, where every
read or write of a counter is a generic call.
The core counts into a row's native attributes (``sent_on``, ``recv_row``, ``mark``; a
sent packet's record keeps its EV's row for its acknowledgement); ``ev`` and ``per_ev`` give
``EvCounters`` views to readers. The received table's EVs are the peer's, off the wire: it stops
at ``MAX_PEER_EV_ROWS`` rows (``recv_row``), where our own tables are bounded by our EV set.
"""

from __future__ import annotations

from collections import Counter
from typing import Final, cast, final

from mypy_extensions import mypyc_attr

from mrc_fabric.ev import MAX_PEER_EV_ROWS

# Why a packet was resent (``Counters.retx_causes``): each resend counts under the loss kind
# that put its packet in the retransmit queue last, so the kinds sum to ``retransmissions``.
RETX_CAUSES: Final = {
    "gap": "gap",  # the SACK gap rule or RACK
    "timeout": "timeout",  # its retransmission timer (RTO)
    "timeout_probe": "timeout probe",  # the RTO before any RTT sample: the oldest packet, once
    "tail_probe": "tail probe",  # nothing new to send and no SACK for it in time
    "trim_nack": "trim NACK",  # a switch cut it to its header: the receiver asked again
    "path": "path retired",  # overdue on a path a loss just retired (hot-dead, floor-dead ...)
    "plane_dead": "plane dead",  # in flight on a plane found silently failed
    "port_down": "NIC port down",  # in flight on a plane whose NIC port (ours or the peer's) went down
    "go_back_n": "go-back-N",  # resent in order after an out-of-window NACK (single path)
}


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
# the three tables' fields, each a field's number in its table
SENT_FIELDS: Final = ("data_packets_sent", "data_bytes_sent", "packets_delivered")
MARK_FIELDS: Final = ("control_packets_sent", "packets_lost", "ecn_echoes", "trims")
RECV_FIELDS: Final = ("data_packets_received", "data_bytes_received")
MARK_CONTROL: Final = 0
MARK_LOST: Final = 1
MARK_ECN: Final = 2
MARK_TRIMS: Final = 3
# where each of EV_COUNTER_FIELDS lives: table (0 sent, 1 marks, 2 received) and the row's attribute
_WHERE: Final = (
    (0, "packets"),
    (0, "bytes"),
    (1, "control"),
    (0, "delivered"),
    (1, "lost"),
    (1, "ecn"),
    (1, "trims"),
    (2, "packets"),
    (2, "bytes"),
)


@mypyc_attr(acyclic=True)
class EvRow:
    """One EV's counters in one table: the base of the three kinds of row, which the core
    counts into in place (compiled, a native attribute: no look-up, no boxed integer).
    Acyclic (it holds integers only): compiled, no garbage-collector header, 16 bytes a row;
    slots: run as Python, no instance dict."""

    __slots__ = ("ev",)

    def __init__(self, ev: int) -> None:
        self.ev = ev


@final
@mypyc_attr(acyclic=True)
class SentRow(EvRow):
    """What DATA we sent on our EV carried (``SENT_FIELDS``)."""

    __slots__ = ("bytes", "delivered", "packets")

    def __init__(self, ev: int) -> None:
        super().__init__(ev)
        self.packets = 0
        self.bytes = 0
        self.delivered = 0


@final
@mypyc_attr(acyclic=True)
class MarkRow(EvRow):
    """The rarer marks on our EV (``MARK_FIELDS``): control packets, losses, ECN echoes, trims."""

    __slots__ = ("control", "ecn", "lost", "trims")

    def __init__(self, ev: int) -> None:
        super().__init__(ev)
        self.control = 0
        self.lost = 0
        self.ecn = 0
        self.trims = 0


@final
@mypyc_attr(acyclic=True)
class RecvRow(EvRow):
    """What arrived carrying the peer's EV (``RECV_FIELDS``)."""

    __slots__ = ("bytes", "packets")

    def __init__(self, ev: int) -> None:
        super().__init__(ev)
        self.packets = 0
        self.bytes = 0


class EvRows:
    """One kind of row by EV value: an open-addressing table (linear probing, at most two
    thirds full) of the rows themselves, found by the EV's hash.

    Why not a dict: an entry and the boxed key of a 32-bit EV cost ~70 bytes, and every
    look-up boxes the EV; here a row holds its EV and a table entry is a pointer. Why rows
    and not counters in ``array`` slots: compiled, every read or write of an ``array``
    element is a generic call that boxes the index and the value (~800 instructions a
    ``+=``, ~700 a probe); a row's counter is a native attribute. What it costs is memory:
    a row is an object (40 bytes of header, 8 a counter).
    """

    def __init__(self) -> None:
        self._table: list[EvRow | None] = _NO_ROWS  # (shared and empty until the first row)
        self._mask = -1  # len(self._table) - 1
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def find(self, ev: int) -> EvRow | None:
        """``ev``'s row, or None."""
        mask = self._mask
        if mask < 0:
            return None
        table = self._table
        h = _hash(ev) & mask
        while True:
            row = table[h]
            if row is None or row.ev == ev:
                return row
            h = (h + 1) & mask

    def add(self, row: EvRow) -> None:
        """``row``, of an EV that has none (``find`` just missed it)."""
        self._n += 1
        if 3 * self._n > 2 * (self._mask + 1):
            self._grow()
        self._place(row)

    def rows(self) -> list[EvRow]:
        """Every row, in no particular order."""
        return [row for row in self._table if row is not None]

    def get(self, ev: int, name: str) -> int:
        """Counter ``name`` of ``ev``'s row, 0 if it has none (for readers: by name)."""
        row = self.find(ev)
        if row is None:
            return 0
        value = getattr(row, name)
        assert isinstance(value, int)
        return value

    def _place(self, row: EvRow) -> None:
        mask = self._mask
        table = self._table
        h = _hash(row.ev) & mask
        while table[h] is not None:
            h = (h + 1) & mask
        table[h] = row

    def _grow(self) -> None:
        """Twice the room, the rows placed again (walked in the old table as they are: a table
        of 128 EVs grows five times, and a list of its rows and a call a row were half of it)."""
        old = self._table
        size = max(8, 2 * (self._mask + 1))
        mask = size - 1
        table: list[EvRow | None] = [None] * size
        for row in old:
            if row is not None:
                h = _hash(row.ev) & mask
                while table[h] is not None:
                    h = (h + 1) & mask
                table[h] = row
        self._table = table
        self._mask = mask


_NO_ROWS: Final[list[EvRow | None]] = []


def _hash(ev: int) -> int:
    """A 32-bit EV's bits mixed (its low bits alone are a few paths' entropy); stays within
    the compiled code's fast integers for any EV below 2**32."""
    x = (ev ^ (ev >> 16)) & 0xFFFFFFFF
    return (x * 0x45D9F3B) >> 11


class EvCounters:
    """What one EV carried, both ways: a live view of its rows in ``Counters``' tables (read
    and write). The core counts into the rows; this is for readers."""

    def __init__(self, counters: Counters, ev: int) -> None:
        self._c = counters
        self._ev = ev

    def _get(self, i: int) -> int:
        table, name = _WHERE[i]
        return self._c.tables[table].get(self._ev, name)

    def _set(self, i: int, value: int) -> None:
        table, name = _WHERE[i]
        setattr(self._c.row(table, self._ev), name, value)

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
        # the same resends by the loss kind that queued each (RETX_CAUSES): they sum to it
        self.retx_causes: Counter[str] = Counter()
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
        self.recv_ev_overflow = 0  # DATA on a peer EV beyond MAX_PEER_EV_ROWS rows: placed, no row
        # per EV: rows in three tables (``EvRows``), each made on first use
        self._sent: EvRows | None = None
        self._marks: EvRows | None = None
        self._recv: EvRows | None = None
        self._views: dict[int, EvCounters] | None = None
        self._spill: RecvRow | None = None  # counts into nothing read: beyond the cap
        self._both()

    def _both(self) -> None:
        """The counters both halves keep: refusals, probes, EV changes, receiver credits (set
        last in ``__init__``: the report's order is the order they are set in)."""
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
        # receiver credits (credit_tx.py, credit_rx.py)
        self.credit_requests_sent = 0  # CREDIT_REQUESTs (a sender's)
        self.credit_requests_received = 0
        self.credits_sent = 0  # CREDITs (a receiver's grants)
        self.credits_received = 0
        self.credit_bytes_dropped = 0  # credit held unused beyond the cap (asked again when needed)
        self.credit_request_retries = 0  # requests repeated after two base RTTs without a CREDIT

    # ---- per EV --------------------------------------------------------------------------
    @property
    def tables(self) -> tuple[EvRows, EvRows, EvRows]:
        """The sent, marks and received tables, to read (shared empty ones for those not made)."""
        sent, marks, recv = self._sent, self._marks, self._recv
        return (
            _EMPTY[0] if sent is None else sent,
            _EMPTY[1] if marks is None else marks,
            _EMPTY[2] if recv is None else recv,
        )

    def _table(self, which: int) -> EvRows:
        """Table ``which`` (0 sent, 1 marks, 2 received), made if it is not yet."""
        self._views = None  # (a row is made: the views' dict is made again)
        if which == 0:
            if self._sent is None:
                self._sent = EvRows()
            return self._sent
        if which == 1:
            if self._marks is None:
                self._marks = EvRows()
            return self._marks
        if self._recv is None:
            self._recv = EvRows()
        return self._recv

    def row(self, which: int, ev: int) -> EvRow:
        """``ev``'s row in table ``which`` (0 sent, 1 marks, 2 received), made if it has none."""
        if which == 0:
            return self.sent_row(ev)
        if which == 1:
            return self._mark_row(ev)
        return self.recv_row(ev)

    def sent_on(self, ev: int, size: int) -> SentRow:
        """A DATA packet of ``size`` payload bytes sent on our EV ``ev``, counted; the EV's row,
        where the packet's acknowledgement counts (``SentRow.delivered``)."""
        row = self.sent_row(ev)
        row.packets += 1
        row.bytes += size
        return row

    def sent_row(self, ev: int) -> SentRow:
        """Our EV ``ev``'s row in the sent table (made if it has none)."""
        t = self._sent
        if t is not None:
            found = t.find(ev)
            if found is not None:
                return cast(SentRow, found)
        row = SentRow(ev)
        self._table(0).add(row)
        return row

    def mark(self, ev: int, field: int, n: int = 1) -> None:
        """Add ``n`` to our EV ``ev``'s ``MARK_*`` counter ``field``."""
        row = self._mark_row(ev)
        if field == MARK_CONTROL:
            row.control += n
        elif field == MARK_LOST:
            row.lost += n
        elif field == MARK_ECN:
            row.ecn += n
        else:
            row.trims += n

    def _mark_row(self, ev: int) -> MarkRow:
        t = self._marks
        if t is not None:
            found = t.find(ev)
            if found is not None:
                return cast(MarkRow, found)
        row = MarkRow(ev)
        self._table(1).add(row)
        return row

    def recv_row(self, ev: int) -> RecvRow:
        """The peer's EV ``ev``'s row in the received table (made if it has none): the receiver
        counts each DATA packet into it (``packets``, ``bytes``)."""
        t = self._recv
        if t is not None:
            found = t.find(ev)
            if found is not None:
                return cast(RecvRow, found)
        return self._new_recv_row(ev)

    def _new_recv_row(self, ev: int) -> RecvRow:
        """A row for the peer's EV ``ev``, which has none (apart: ``recv_row``, run per DATA
        packet, stays as short as it was). The peer's EVs come off the wire: past
        ``MAX_PEER_EV_ROWS`` rows a new EV gets none, its packet is counted in
        ``recv_ev_overflow`` and a spare row no reader sees takes its counts."""
        t = self._recv
        if t is not None and len(t) >= MAX_PEER_EV_ROWS:
            self.recv_ev_overflow += 1
            spill = self._spill
            if spill is None:
                spill = self._spill = RecvRow(-1)
            return spill
        row = RecvRow(ev)
        self._table(2).add(row)
        return row

    def ev(self, ev: int) -> EvCounters:
        """``ev``'s counters (a live view), counted from now on as an EV of ours if it is not
        counted yet: it is in ``per_ev`` from now on, as an EV any counter was added to."""
        if all(t.find(ev) is None for t in self.tables):
            self.sent_row(ev)
        return EvCounters(self, ev)

    def _counted(self) -> list[int]:
        """Every EV counted, ascending."""
        return sorted({row.ev for t in self.tables for row in t.rows()})

    @property
    def per_ev(self) -> dict[int, EvCounters]:
        """Every EV counted, by EV value in ascending order, as live views (the dict is made
        again only after a row is made). Read it, do not store into it."""
        views = self._views
        if views is None:
            views = self._views = {ev: EvCounters(self, ev) for ev in self._counted()}
        return views

    def _ev_row(self, ev: int, tables: tuple[EvRows, EvRows, EvRows]) -> dict[str, object]:
        return {name: tables[t].get(ev, a) for name, (t, a) in zip(EV_COUNTER_FIELDS, _WHERE, strict=True)}

    def as_dict(self) -> dict[str, object]:
        """Every counter in the order ``__init__`` sets them, the counters of reasons and EVs as
        plain dicts (a shallow walk: ``dataclasses.asdict`` copied ``per_ev`` twice and was a
        tenth of a short run's report)."""
        d: dict[str, object] = {name: getattr(self, name) for name in COUNTER_FIELDS}
        tables = self.tables
        d["per_ev"] = {f"{ev:08x}": self._ev_row(ev, tables) for ev in self._counted()}
        for key in (
            "retx_causes",
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
_EMPTY: Final = (EvRows(), EvRows(), EvRows())
