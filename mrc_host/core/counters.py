"""Counters of everything the core does, per connection and per EV.

Plain classes, each counter declared once, in its ``__init__``: as dataclasses their 70
fields cost every ``mrc-sim`` start about 2 ms to build, and nothing needs their methods.
``as_dict`` lists the counters in that order.
"""

from __future__ import annotations

from collections import Counter


def _attribute_names(obj: object) -> tuple[str, ...]:
    """``obj``'s attributes in the order its ``__init__`` sets them, read from its pickle state:
    the instance ``__dict__`` as Python runs it; compiled (mypyc objects have none), the
    attributes the class declares, in that order."""
    state = obj.__getstate__()
    assert isinstance(state, dict)
    return tuple(state)


class EvCounters:
    """What one EV carried, both ways."""

    def __init__(self) -> None:
        self.data_packets_sent = 0
        self.data_bytes_sent = 0
        self.control_packets_sent = 0
        self.packets_delivered = 0  # DATA sent on this EV that the peer acknowledged
        self.packets_lost = 0  # DATA sent on this EV declared lost (gap or timeout)
        self.ecn_echoes = 0
        self.trims = 0
        self.data_packets_received = 0  # DATA that arrived carrying this EV
        self.data_bytes_received = 0


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
        self.per_ev: dict[int, EvCounters] = {}

    def ev(self, ev: int) -> EvCounters:
        c = self.per_ev.get(ev)
        if c is None:
            c = self.per_ev[ev] = EvCounters()
        return c

    def as_dict(self) -> dict[str, object]:
        """Every counter in the order ``__init__`` sets them, the counters of reasons and EVs as
        plain dicts (a shallow walk: ``dataclasses.asdict`` copied ``per_ev`` twice and was a
        tenth of a short run's report)."""
        d: dict[str, object] = {name: getattr(self, name) for name in COUNTER_FIELDS}
        d["per_ev"] = {
            f"{ev:08x}": {name: getattr(c, name) for name in EV_COUNTER_FIELDS}
            for ev, c in sorted(self.per_ev.items())
        }
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


EV_COUNTER_FIELDS: tuple[str, ...] = _attribute_names(EvCounters())
COUNTER_FIELDS: tuple[str, ...] = _attribute_names(Counters())
