"""Counters of everything the core does, per connection and per EV."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields


@dataclass(slots=True)
class EvCounters:
    data_packets_sent: int = 0
    data_bytes_sent: int = 0
    control_packets_sent: int = 0
    packets_delivered: int = 0  # DATA sent on this EV that the peer acknowledged
    packets_lost: int = 0  # DATA sent on this EV declared lost (gap or timeout)
    ecn_echoes: int = 0
    trims: int = 0
    data_packets_received: int = 0  # DATA that arrived carrying this EV
    data_bytes_received: int = 0


@dataclass(slots=True)
class Counters:
    # sender
    messages_posted: int = 0
    messages_completed: int = 0
    messages_failed: int = 0
    messages_abandoned: int = 0  # given up by the application (Endpoint.abandon)
    data_packets_sent: int = 0
    data_bytes_sent: int = 0
    data_bytes_delivered: int = 0  # payload the peer acknowledged (SACK or cumulative), once each
    retransmissions: int = 0
    losses_gap: int = 0
    losses_rto: int = 0
    spurious_losses: int = 0  # gap losses whose original was SACKed after all (reordering)
    losses_trimmed_after_guess: int = 0  # guessed lost, then its trim NACK came: congestion
    losses_while_hot: int = 0  # guessed lost on a path marked/trimmed lately: no retirement
    rto_fired: int = 0
    rto_probes: int = 0  # timeouts before any RTT sample: the oldest packet resent, none declared lost
    dsacks_received: int = 0  # SACKs reporting a duplicate arrival (D-SACK)
    losses_tail: int = 0  # resent by the tail probe (nothing new left to send), no EV blamed
    tail_twins: int = 0  # second copies of resends at the tail, on another plane (MRC)
    tail_twin_duplicates: int = 0  # D-SACKs for the second of those two copies to arrive
    losses_port: int = 0  # in flight on a plane whose local or peer NIC port went down: resent
    losses_plane: int = 0  # in flight on a plane found silently failed: resent
    planes_failed: int = 0  # silent whole-plane failures detected from the other planes
    go_back_n_rewinds: int = 0
    sacks_received: int = 0
    ecn_echoes_received: int = 0
    nacks_received: Counter[str] = field(default_factory=Counter)
    stray_acks: int = 0  # SACK/NACK not believed (the total of acks_dropped)
    acks_dropped: Counter[str] = field(default_factory=Counter)  # by reason (peer safety)
    sack_echo_unmatched: int = 0  # SACKs whose echoed EV/time match no newly acked packet
    connection_failures: Counter[str] = field(default_factory=Counter)  # RETRY_EXCEEDED ...
    last_resort_sends: int = 0  # sent on an ASSUMED_BAD EV because nothing else was usable
    # receiver
    messages_received: int = 0
    data_packets_received: int = 0
    data_bytes_placed: int = 0
    duplicates_received: int = 0
    out_of_window: int = 0
    out_of_order_dropped: int = 0  # go-back-N only
    trimmed_received: int = 0
    ecn_ce_received: int = 0
    sacks_sent: int = 0
    nacks_sent: Counter[str] = field(default_factory=Counter)
    refused_writes: Counter[str] = field(default_factory=Counter)  # BAD_RKEY / BAD_ADDRESS
    # both
    malformed: Counter[str] = field(default_factory=Counter)  # codec reasons + core checks
    wrong_qp: int = 0
    probes_sent: int = 0
    probes_received: int = 0
    probe_acks_sent: int = 0
    probe_acks_received: int = 0
    probe_timeouts: int = 0
    ev_retired: int = 0
    ev_retired_by_loss: int = 0  # of those, retired by a data loss guess (with path siblings)
    ev_restored: int = 0
    ev_loss_undone: int = 0  # retirements undone: the "lost" packet arrived after all
    ev_undone: int = 0  # EVs those undos brought back (a path's siblings, a whole plane)
    ev_skipped: int = 0
    ev_retire_floor_holds: int = 0  # losses that retired no EV: ev_min_active reached
    reverse_ev_retired: int = 0  # ack paths retired after a duplicate retransmission
    reverse_paths_retired: int = 0  # ack paths retired: their SACKs went unechoed (ack_echo.py)
    reverse_retire_refused: int = 0  # ... not retired: the plane's last path
    ack_echo_unmatched: int = 0  # DATA echoing no SACK sent lately (forged or old): ignored
    per_ev: dict[int, EvCounters] = field(default_factory=dict)

    def ev(self, ev: int) -> EvCounters:
        c = self.per_ev.get(ev)
        if c is None:
            c = self.per_ev[ev] = EvCounters()
        return c

    def as_dict(self) -> dict[str, object]:
        """Every field in order, the counters of reasons and EVs as plain dicts (a shallow walk:
        ``dataclasses.asdict`` copied ``per_ev`` twice and was a tenth of a short run's report)."""
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


EV_COUNTER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(EvCounters))
COUNTER_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Counters))
