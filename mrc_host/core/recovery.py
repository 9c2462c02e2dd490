"""Loss detection and RTT estimation for one sender, apart from the sender itself (as aioquic
keeps ``recovery.py`` apart from its connection).

The sender pumps packets and keeps the acknowledgement books; this module owns the packets
in flight and decides which of them are lost, and when. Loss is found four ways:
- the SACK gap rule: ``sack_gap_threshold`` packets sent *after* it on the same plane
  were SACKed, one of them leaving at least the reorder window after it. Counting per plane
  (each plane has its own NIC queue, whose depths differ) and the time guard keep the
  reordering that spraying and a jittery fabric cause from passing for loss; the guard
  adapts as RACK's does, to the reordering measured on deliveries, to the fabric's delay
  spread and to spurious losses. MRC knows each packet's path, one FIFO: later packets of
  its own path SACKed prove it lost without the time guard (``path_overtaken``);
- at the tail (nothing new left to send), the RACK timer: a packet still unacknowledged its
  plane's SRTT plus the reorder window after it left, while a copy sent after it (on any
  plane, a resend too) was delivered, is lost. The gap rule cannot see a loss among the last packets
  of a message (a few packets per plane, all sent in one burst), and the tail probe waits
  two SRTTs after the last send: the stall a ring collective pays on every lossy step. In
  bulk transfer the gap rule alone decides (it is the one that tolerates reordering). While
  delays rise, neither the probe nor RACK on other planes' evidence fires before the packet's
  plane has been silent a round trip (``queue_floor``);
- a whole plane that stopped delivering, seen from the other planes (``dead_planes``);
- the retransmission timeout (RTO from SRTT, RTTVAR and the RTT spread, clamped, doubled
  per expiry; before any RTT sample it only resends the oldest packet, as a probe).
With ``port_gbps`` the times are those a packet left its port (a FIFO per plane at that
rate): the core hands a whole window over at once, and the last of it leaves a window's
serialisation later -- timed from the hand-over it would look overtaken by packets that in
truth left just after it. With ``nic_departures`` the NIC itself reports when each packet
left (``nic_clock.py``), which also counts the turns the port gives the host's other queue
pairs: the RTT samples, the RTO and the reorder window are then the fabric's, and a packet
still waiting at the NIC is never declared lost. (Timed from the hand-over, 15 connections
of a host sharing its ports made the RTT samples 10-17 times the fabric's, and a packet lost
to a failed switch waited ~300 us, a whole inflated RTO, to be resent.)

Every one of these is a guess. When the packet turns out to have arrived (its original
acknowledged, Eifel's echo, or a D-SACK naming a copy resent on a guess) the loss was
spurious: the sender undoes what the guess did to the EV set and, if the copy arrived late
(its own SACK says so, not a later one covering it: that is a SACK lost), the reorder window
grows a step (RACK's reo_wnd_mult).
"""

from __future__ import annotations

from typing import Final

from mrc_host.wire.messages import Opcode

from .config import TransportConfig
from .nic_clock import NicClock, expired_since_left
from .plane_rates import PlaneRates
from .records import TxRecord

ROCE_TIMEOUT_UNIT_NS: Final = 4096  # RoCE/InfiniBand local ACK timeout unit: 4.096 us x 2**timeout
REO_MULT_MAX: Final = 4  # the reordering window grows from SRTT/4 up to SRTT
REO_DECAY_DELIVERIES: Final = 1024  # clean deliveries before it shrinks by one step
GUESSES_MAX: Final = 4096  # guessed-lost, acked packets remembered for a D-SACK that proves them spurious
SPREAD_DECAY: Final = 1 - 1 / 256  # per RTT sample: the jitter estimate forgets over a few windows
# per RTT sample: the largest stall seen forgets over thousands of samples (a software switch
# descheduled for milliseconds does it again, seconds later)
STALL_DECAY: Final = 1 - 1 / 8192
FABRIC_SPREAD_HALFLIFE: Final = 2  # SRTTs (see ``RttEstimator.sample_fabric``)
REO_EXTENT_DECAY: Final = 1 - 1 / 1024  # per delivery: the reordering seen forgets over many windows
REO_EXTENT_MARGIN: Final = 1.5  # the largest reordering seen so far understates the largest to come
# mrc_fabric.ev.PLANE_SHIFT as a literal: compiled, a literal shift is one instruction, a name
# read per packet costs a static load and a check (tests/unit/test_core_recovery.py ties them)
PLANE_SHIFT: Final = 28
PATH_SHIFT: Final = 18  # mrc_fabric.ev.T1_SHIFT: above it an EV's plane and T1, its path
BACKOFF_MAX: Final = 64
# delays within 1/32 of the minimum RTT are flat (``RttEstimator.flat``): 1 % loss on the
# 2 x 4 and production shapes stayed within 1/2000 (10-25 ns), an incast's first RTT rose 1/5
FLAT_SHARE: Final = 32
_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)
RTO_SLACK_SHARE: Final = 8  # the RTO's slack is at least the RTO over this (``rto_slack``)


class RttEstimator:
    """Smoothed RTT and variation (RFC 6298), the minimum, the recent spread above it
    (jitter), and one smoothed RTT per plane (each plane has its own NIC queue)."""

    def __init__(self, planes: int) -> None:
        self.srtt_ns: float | None = None
        self.rttvar_ns = 0.0
        self.min_rtt_ns: int | None = None
        self.spread = 0.0  # recent max RTT minus min RTT, decaying (jitter)
        self.stall = 0.0  # the same, forgetting far more slowly: the longest stall lately
        self.plane_srtt: list[float | None] = [None] * planes
        self.plane_last = [0] * planes  # each plane's latest sample (RACK's RTT: a queue building)
        self.plane_at = [0] * planes  # when it came: a plane still SACKing is draining (``queue_floor``)
        # how much later one path may deliver than another: the largest difference lately
        # between successive samples of a plane, each less the time its packet waited for its
        # NIC port (its paths' queues differ; a queue they all end in, at the peer's port,
        # moves little from one sample to the next and reorders nothing)
        self._fabric_last = [-1] * planes
        self.fabric_spread = 0.0
        self._fabric_at = 0

    def sample(self, rtt: int) -> None:
        if self.min_rtt_ns is None:
            self.min_rtt_ns = rtt
        elif rtt < self.min_rtt_ns:
            # a new floor: the slow samples seen so far sit that much further above it
            self.spread += self.min_rtt_ns - rtt
            self.min_rtt_ns = rtt
        self.spread = max(float(rtt - self.min_rtt_ns), self.spread * SPREAD_DECAY)
        self.stall = max(self.spread, self.stall * STALL_DECAY)
        if self.srtt_ns is None:
            self.srtt_ns = float(rtt)
            self.rttvar_ns = rtt / 2
        else:
            self.rttvar_ns += 0.25 * (abs(self.srtt_ns - rtt) - self.rttvar_ns)
            self.srtt_ns += 0.125 * (rtt - self.srtt_ns)

    def sample_fabric(self, rtt: int, plane: int = 0, now_ns: int = 0) -> None:
        """A round trip on ``plane`` less the time its packet waited for its port (the NIC
        model). The spread forgets by time, by half every ``FABRIC_SPREAD_HALFLIFE`` SRTTs:
        by samples, a slow flow kept the swing of an incast's first round trips (60 us) for a
        thousand of them, and its gap rule waited that long behind a path that had died."""
        last = self._fabric_last[plane]
        self._fabric_last[plane] = rtt
        jump = float(abs(rtt - last)) if last >= 0 else 0.0
        spread = self.fabric_spread
        srtt = self.srtt_ns
        if spread and srtt and now_ns > self._fabric_at:
            spread *= 0.5 ** ((now_ns - self._fabric_at) / (FABRIC_SPREAD_HALFLIFE * srtt))
        self._fabric_at = now_ns
        self.fabric_spread = max(jump, spread)

    def sample_plane(self, plane: int, rtt: int, now_ns: int) -> None:
        self.plane_last[plane] = rtt
        self.plane_at[plane] = now_ns
        ps = self.plane_srtt[plane]
        self.plane_srtt[plane] = float(rtt) if ps is None else ps + 0.125 * (rtt - ps)

    def of_plane(self, plane: int) -> float:
        """The plane's smoothed RTT, else the connection's (0 before any sample)."""
        return self.plane_srtt[plane] or self.srtt_ns or 0.0

    def flat(self, plane: int) -> bool:
        """No queue builds: ``plane`` has its own samples and the round trips lately, and their
        variation, stay within 1/``FLAT_SHARE`` of the minimum (no queue but the propagation
        and a packet's serialisation: the delay of uniform random loss's fabric). An incast's
        first round trips fail it: its last hop queues (the RTT rose 22 % in 4 us), and a plane
        not yet sampled, or an estimate a few samples old, says nothing of its queue."""
        low = self.min_rtt_ns
        if low is None or self.plane_srtt[plane] is None:
            return False
        return self.spread * FLAT_SHARE <= low and self.rttvar_ns * FLAT_SHARE <= low


class Recovery:
    """The packets in flight of one sender and the rules that declare them lost."""

    def __init__(
        self,
        cfg: TransportConfig,
        planes: int,
        plane_load: list[int],
        plane_rates: PlaneRates | None = None,
        t1_count: int = 1,
    ) -> None:
        self.cfg = cfg
        self.planes = planes
        # paths per plane: a plane is judged failed only with two of them silent (``_silent_paths``)
        self.t1_count = t1_count
        self.rtt = RttEstimator(planes)
        self.in_flight: dict[int, TxRecord] = {}  # seq -> record, in transmission order
        self.inflight_bytes = 0
        self.plane_load = plane_load  # bytes in flight per plane (the EV rotation reads it)
        # what each plane delivers (the EV set's; the rotation reads it)
        self.rates = plane_rates if plane_rates is not None else PlaneRates(planes)
        self.backoff = 1
        self.retries = 0  # RTO expiries in a row without progress (OCP retry count)
        # RACK's reordering window: SRTT/4 times this, up per spurious loss, down after a clean stretch
        self.reo_mult = 1
        self._path_rule = cfg.path_order_losses and cfg.retires_paths  # (off for good: ``on_spurious``)
        # reordering actually seen, measured without waiting for a spurious loss: how much
        # earlier than the newest packet already delivered on its plane a delivered packet
        # was sent (decaying max); the gap rule's time guard never goes below it
        self.reo_extent = 0.0
        self._clean_deliveries = 0
        self._newest_left = [-1] * planes  # departure time of the newest delivered packet per plane
        self.nic = NicClock(cfg, planes)  # when packets left the NIC (nic_clock.py)
        self._departures = cfg.nic_departures  # (and the NIC reports it)
        # send time of the newest packet each plane delivered (whole-plane failure detection)
        self.plane_ok_sent = [-1] * planes
        self._plane_evidence = [0] * planes  # later deliveries elsewhere since it last delivered
        # when the connection last came back from idle (nothing in flight for an RTO): a plane
        # that has delivered nothing sent since is judged as one that never delivered
        self.resumed_ns = 0
        self.rack_order = -1  # transmission order of the newest copy known delivered
        self.rack_plane = [-1] * planes  # the same per plane: RACK's evidence (``rack_at``)
        self.tail_done = False  # the tail probe for the current tail was sent
        self.last_acked_ns = 0  # when a SACK last acknowledged something new
        self._last_acked_at_once = False  # the newest packet is one the peer SACKs at once
        self._tx_order = 0
        # packets declared lost by a guess, resent once, acknowledged, and not (yet) shown
        # spurious: (send time, EV) of each of their two copies -> the EV the loss was
        # blamed on and the other copy's key. Both copies arrived iff the peer reports one
        # as a duplicate (D-SACK): then the loss was spurious. Bounded, oldest out first.
        self._guesses: dict[tuple[int, int], tuple[int, tuple[int, int]]] = {}

    # ---- packets in flight --------------------------------------------------------------
    def on_sent(self, rec: TxRecord, ev: int, now_ns: int) -> None:
        """``rec`` leaves on ``ev`` now (a first copy or a resend)."""
        if not rec.transmissions:
            self.tail_done = False  # new data: a new tail (resends never re-arm the probe)
            if not self.in_flight and now_ns - self.nic.last_left >= self.rto_ns():
                self.resumed_ns = now_ns  # back from idle (TCP's restart after idle)
        rec.transmissions += 1
        rec.ev = ev
        rec.prev_sent_ns = rec.sent_ns
        rec.prev_left_ns = rec.left_ns
        rec.sent_ns = now_ns
        self._tx_order += 1
        rec.tx_order = self._tx_order
        rec.later_delivered = rec.later_on_path = 0
        rec.prev_twin_ev = rec.twin_ev
        rec.twin_ev = -1
        rec.overtaken_left = -1
        rec.overtaken_at = -1
        rec.lost = False
        self.in_flight[rec.seq] = rec
        size = len(rec.payload)
        self.inflight_bytes += size
        plane = ev >> PLANE_SHIFT
        self.plane_load[plane] += size
        self.nic.on_sent(rec, plane, size, now_ns)
        self._last_acked_at_once = rec.transmissions > 1 or rec.opcode in _LAST_OPCODES

    def on_twin(self, rec: TxRecord, ev: int) -> None:
        """A second copy of ``rec``'s latest leaves on ``ev`` with it (same send time); it is not
        counted in flight (the window had room for it), only on its port."""
        rec.twin_ev = ev
        self.nic.on_twin(rec, ev >> PLANE_SHIFT)

    def remove(self, rec: TxRecord) -> None:
        """``rec`` is no longer in flight (delivered, declared lost, or given up)."""
        in_flight = self.in_flight
        seq = rec.seq
        if seq in in_flight:  # (compiled, ``in`` and ``del`` are native; ``pop(k, None)`` is not)
            del in_flight[seq]
            size = len(rec.payload)
            self.inflight_bytes -= size
            self.plane_load[rec.ev >> PLANE_SHIFT] -= size

    def shed(self, rec: TxRecord) -> None:
        """``rec`` stays in flight but carries no payload from now on (its write was abandoned):
        its bytes leave the window's and its plane's count."""
        if rec.seq in self.in_flight:
            size = len(rec.payload)
            self.inflight_bytes -= size
            self.plane_load[rec.ev >> PLANE_SHIFT] -= size

    def on_plane(self, plane: int) -> list[TxRecord]:
        return [r for r in self.in_flight.values() if r.ev >> PLANE_SHIFT == plane]

    # ---- timers ---------------------------------------------------------------------------
    def rto_ns(self, backed_off: bool = True) -> int:
        cfg = self.cfg
        if cfg.local_ack_timeout:
            # RoCE: a fixed per-QP timer of 4.096 us x 2**timeout, no RTT estimate, no backoff
            return ROCE_TIMEOUT_UNIT_NS << cfg.local_ack_timeout
        rtt = self.rtt
        if rtt.srtt_ns is None:
            base = cfg.rto_initial_ns
        else:
            # max() of three, spelled out: compiled, a three-argument max() is a generic call
            var = 4 * rtt.rttvar_ns
            if rtt.spread > var:
                var = rtt.spread
            floor = cfg.cc.base_rtt_ns / 4
            base = int(rtt.srtt_ns + (var if var >= floor else floor))
        return min(max(base, cfg.rto_min_ns) * (self.backoff if backed_off else 1), cfg.rto_max_ns)

    def on_progress(self, now_ns: int, acked: bool) -> None:
        """A SACK was believed (``acked``: it acknowledged something new): the RTO backs off no
        more, the tail may be probed again, and the tail probe waits from now (RACK-TLP re-arms
        its probe timer on every ACK of new data)."""
        self.backoff = 1
        self.retries = 0
        self.tail_done = False
        if acked:
            self.last_acked_ns = now_ns

    def on_rto(self) -> None:
        self.retries += 1
        if not self.cfg.local_ack_timeout:
            self.backoff = min(self.backoff * 2, BACKOFF_MAX)

    def suspects(self, now_ns: int) -> list[TxRecord]:
        """Packets in flight past the RTO not judged yet, now marked judged: the sender blames
        their paths (a guess their delivery undoes); the timeout proper waits ``rto_slack`` more."""
        out = [r for r in past_rto(self, now_ns, self.rto_ns()) if r.suspect_sent != r.sent_ns]
        for rec in out:
            rec.suspect_sent = rec.sent_ns
        return out

    def expired(self, now_ns: int) -> list[TxRecord]:
        """Packets in flight past the RTO and its slack (``rto_slack``)."""
        return past_rto(self, now_ns, self.rto_ns() + rto_slack(self))

    def tail_at(self, sending: bool) -> int | None:
        """Tail loss probe time (RACK-TLP's idea): with nothing new to send (``sending`` False) the
        gap rule has no later packets to work with. The newest packet's SACK is due an SRTT (with
        its variation, at most another SRTT: a lone 32 KiB flow's first window waits at its NIC
        port), the reorder window and, unless SACKed at once (a resend, a message's last), the
        peer's ack delay (2 SRTT at most) after it left or the newest SACK of new data; with
        departures reported, as ``tail_due`` says."""
        rtt = self.rtt
        srtt = rtt.srtt_ns
        if sending or self.cfg.go_back_n or srtt is None or not self.in_flight or self.tail_done:
            return None
        wait = srtt + min(4 * rtt.rttvar_ns, srtt)
        if not self._last_acked_at_once:
            wait = max(wait, min(srtt + self.cfg.ack_delay_ns, 2 * srtt))
        # (while SACKs come the tail drains: on a shared port packets leave later than the model says)
        last = self.nic.last_left
        start = last if last >= self.last_acked_ns else self.last_acked_ns
        at = start + int(wait) + self.reorder_window()
        if self._departures:
            newest = next(reversed(self.in_flight.values()))
            at = tail_due(rtt, newest, at, self.reorder_window(), self._last_acked_at_once)
        return at

    def tail_losses(self, now_ns: int) -> list[TxRecord]:
        """The tail probe fired: the newest packet sent an SRTT plus the reorder window ago is
        resent, one (RACK-TLP's probe): its SACK shows RACK which of the older ones are lost.
        Resending every one of them resent 14 packets for nothing in an all-to-all whose
        short writes waited behind the host's other queue pairs at its NIC port."""
        self.tail_done = True
        late = now_ns - int(self.rtt.srtt_ns or 0) - self.reorder_window()
        newest: list[TxRecord] = []
        for r in self.in_flight.values():
            if r.left_ns <= late and not r.at_nic:
                newest = [r]
        return newest

    def deadline(self, sending: bool) -> int | None:
        """The earliest of the RTO, tail probe and RACK timers, for the oldest packet in flight."""
        for rec in self.in_flight.values():
            at = (rec.left_ns if self._departures else rec.sent_ns) + self.rto_ns()
            at += rto_slack(self) if rec.suspect_sent == rec.sent_ns else 0
            tail = self.tail_at(sending)
            if tail is not None and tail < at:
                at = tail
            rack = self.rack_at(sending)
            return at if rack is None or at < rack else rack
        return None

    # ---- reordering -----------------------------------------------------------------------
    def reorder_window(self) -> int:
        """How much later a packet must have been sent than an outstanding one for its
        delivery to count against it (RACK's reordering window, adapted to jitter):
        the configured floor; 1.5 x the reordering measured on deliveries; SRTT/4, raised up
        to SRTT by spurious losses; the fabric's delay spread, 1.5 x while those last (once
        reordering fooled the gap rule, the spread seen understates the next: PFC pauses)."""
        # (asked several times per SACK: two-argument max() compiles to a compare, a longer
        # one to a generic call)
        window = max(self.cfg.reorder_window_ns, int(self.reo_extent * REO_EXTENT_MARGIN))
        srtt = self.rtt.srtt_ns
        if srtt is not None:
            window = max(window, int(srtt) * self.reo_mult // REO_MULT_MAX)
            margin = REO_EXTENT_MARGIN if self.reo_mult > 1 else 1.0
            window = max(window, int(self.rtt.fabric_spread * margin))
        return window

    def on_spurious(self) -> None:
        """A loss guess was reordering after all: the reorder window grows a step."""
        self.reo_mult = min(self.reo_mult + 1, REO_MULT_MAX)
        self._path_rule = False
        self._clean_deliveries = 0

    def on_delivered(self, rec: TxRecord, now_ns: int, earlier_copy: bool, own_sack: bool = True) -> bool:
        """``rec`` was acknowledged (and taken out of flight); ``earlier_copy``: the SACK names
        its copy before the latest (Eifel); ``own_sack``: one of its copies (not a later SACK's
        cover). True when its loss guess proves spurious. A resend acknowledged sooner than 3/4
        of the shortest round trip (seen, or the base RTT; not half the SRTT, which queues
        elsewhere had raised six-fold, bringing back a dead path) cannot have arrived."""
        spurious = False
        # (the base RTT too: a flow may never see an idle fabric)
        fastest = min(self.rtt.min_rtt_ns or 0, self.cfg.nscc.base_rtt)
        if self._departures:
            soon = rec.at_nic or now_ns - rec.left_ns < 3 * fastest // 4
        else:
            soon = now_ns - rec.sent_ns < 3 * fastest // 4
        if rec.gap_lost and (rec.lost or earlier_copy or soon):
            # the original arrived: it was reordering, not loss (still queued for resending,
            # or resent too recently for the copy to be the one acknowledged)
            spurious = True
        else:
            if rec.gap_lost and rec.transmissions == 2 and rec.twin_ev < 0:
                # (with a twin in flight, a duplicate report proves nothing)
                self._remember_guess(rec)
            self._clean_deliveries += 1
            if self.reo_mult > 1 and self._clean_deliveries >= REO_DECAY_DELIVERIES:
                self.reo_mult -= 1
                self._clean_deliveries = 0
        # the copy that arrived: the one before the latest if the guess was wrong (as the latest,
        # resent just now, the next packet measured an RTT of reordering); reordering only from a
        # first copy, not from a guess shown wrong by a later SACK alone (its own SACK was lost)
        if (spurious or earlier_copy) and rec.transmissions > 1:
            if earlier_copy or rec.prev_twin_ev < 0:  # (else it left twice: which copy arrived?)
                self._measure(rec.lost_ev >> PLANE_SHIFT, rec.prev_left_ns, rec.prev_sent_ns, earlier_copy)
        else:
            known = rec.transmissions == 1 and own_sack  # (``_measure``: a first copy's own SACK only)
            self._measure(rec.ev >> PLANE_SHIFT, rec.left_ns, rec.sent_ns, known)
            interval = self.rtt.srtt_ns or self.cfg.nscc.base_rtt
            plane = rec.ev >> PLANE_SHIFT
            self.rates.delivered(plane, len(rec.payload), now_ns, interval)
            if rec.transmissions == 1:
                # (covered by another SACK or not: a slow plane's own SACKs come after the
                # cumulative point others carry, and it would never be sampled)
                self.rates.sampled(plane, now_ns - rec.sent_ns)
        return spurious

    def _measure(self, plane: int, left_ns: int, sent_ns: int, known: bool) -> None:
        """A copy that left on ``plane`` was delivered (``known``: surely that copy, and when: by
        its own SACK, as a late copy is SACKed at once; covered by a later one, its own was lost)."""
        newest = self._newest_left[plane]
        if left_ns >= newest:
            self._newest_left[plane] = left_ns
            srtt = self.rtt.srtt_ns
            if srtt is not None and self.reo_extent > srtt:
                # a reordering longer than a round trip is a stall, not jitter: in-order
                # deliveries forget it too (one 0.3 s stall kept the window above the RTO)
                self.reo_extent *= REO_EXTENT_DECAY
        elif known:
            self.reo_extent = max(float(newest - left_ns), self.reo_extent * REO_EXTENT_DECAY)
        sent = left_ns if self._departures else sent_ns
        if sent > self.plane_ok_sent[plane]:
            self.plane_ok_sent[plane] = sent
            self._plane_evidence[plane] = 0

    def _remember_guess(self, rec: TxRecord) -> None:
        """Nothing shows yet which copy arrived: if the other one arrives too, the receiver
        reports it as a duplicate and the loss is undone then (with three copies or more a
        duplicate proves nothing)."""
        first, second = (rec.prev_sent_ns, rec.lost_ev), (rec.sent_ns, rec.ev)
        guesses = self._guesses
        guesses[first] = (rec.lost_ev, second)
        guesses[second] = (rec.lost_ev, first)
        while len(guesses) > GUESSES_MAX:
            del guesses[next(iter(guesses))]

    def on_duplicate(self, echo_ts: int, echo_ev: int) -> tuple[int, int] | None:
        """D-SACK: the copy (send time, EV) arrived after another. If the packet was resent
        once on a guess, the guess was spurious: returns the EV it blamed and that copy's send
        time, else None. Only an exact match counts: a forged report undoes nothing."""
        guess = self._guesses.pop((echo_ts, echo_ev), None)
        if guess is None:
            return None
        lost_ev, other = guess
        self._guesses.pop(other, None)
        lost_sent = echo_ts if echo_ev == lost_ev else other[0]
        return lost_ev, lost_sent

    # ---- loss rules -----------------------------------------------------------------------
    def gap_losses(self, newly: list[TxRecord], now_ns: int) -> list[TxRecord]:
        """The SACK gap rule over the packets ``newly`` acknowledged (see module docstring);
        each packet they overtook on its plane notes when that was first seen (RACK's clock)."""
        threshold = self.cfg.sack_gap_threshold
        # RACK-style: the reordering spraying causes scales with the RTT actually seen (a
        # software switch's queues can stretch it far beyond the configured base RTT).
        window = self.reorder_window()
        lost: list[TxRecord] = []
        for delivered in newly:
            order = delivered.tx_order
            left = delivered.left_ns
            plane = delivered.ev >> PLANE_SHIFT
            path_rule = self._path_rule and delivered.twin_ev < 0 and self.rtt.flat(plane)  # (path_overtaken)
            for rec in self.in_flight.values():
                if rec.tx_order >= order:
                    break
                if rec.ev >> PLANE_SHIFT != plane:
                    continue
                rec.later_delivered += 1
                if path_rule and path_overtaken(rec, delivered, threshold):
                    lost.append(rec)
                    continue
                if rec.overtaken_at < 0:
                    rec.overtaken_at = now_ns
                if left > rec.overtaken_left:
                    rec.overtaken_left = left
                # against the window now, not the one when it was overtaken: a spurious loss
                # in between widened it, and that reordering must not pass for loss again
                if (
                    rec.later_delivered >= threshold
                    and rec.overtaken_left - rec.left_ns >= window
                    and not rec.at_nic  # (a trimmed header leaves before the data queued)
                ):
                    lost.append(rec)
        return lost

    def note_rack(self, evidence: list[TxRecord]) -> None:
        """The newest transmission delivered: ``evidence`` holds the packets whose latest copy
        arrived (a first copy, or a resend not shown to be beaten by its original). A resend
        counts: without it a lost resend at the tail waits for the tail probe or the RTO."""
        rack_plane = self.rack_plane
        for rec in evidence:
            order = rec.tx_order
            if order > self.rack_order:
                self.rack_order = order
            plane = rec.ev >> PLANE_SHIFT
            if order > rack_plane[plane]:
                rack_plane[plane] = order

    def _rack_due(self, rec: TxRecord) -> int:
        """When ``rec``, overtaken by a delivered packet, is lost (``rack_due``)."""
        plane = rec.ev >> PLANE_SHIFT
        own = rec.tx_order < self.rack_plane[plane]
        wait = self.plane_wait(plane)
        return rack_due(self.rtt, rec, wait, own, self.reorder_window(), self._departures)

    def plane_wait(self, plane: int) -> int:
        """How long after it left a packet on ``plane`` may still be delivered (``rack_due``)."""
        rtt = self.rtt
        return int(max(rtt.of_plane(plane), float(rtt.plane_last[plane]))) + self.reorder_window()

    def rack_at(self, sending: bool) -> int | None:
        """RACK timer: when the oldest packet in flight that a later one overtook is lost
        (``rack_due``)."""
        if sending or self.cfg.go_back_n or self.rtt.srtt_ns is None:
            return None
        at: int | None = None
        for rec in self.in_flight.values():
            if rec.tx_order >= self.rack_order:
                break
            due = self._rack_due(rec)
            if at is None or due < at:
                at = due
        return at

    def rack_losses(self, now_ns: int, sending: bool) -> list[TxRecord]:
        """Every packet in flight sent before a delivered one and overdue by the RACK rule."""
        if sending or self.cfg.go_back_n or self.rtt.srtt_ns is None:
            return []
        lost = []
        for rec in self.in_flight.values():  # transmission order
            if rec.tx_order >= self.rack_order:
                break
            if now_ns >= self._rack_due(rec) and not rec.at_nic:
                lost.append(rec)
        return lost

    def dead_planes(self, newly: list[TxRecord], now_ns: int) -> list[int]:
        """Planes that fail silently (a T0 down, a NIC link black hole), seen from the *other*
        planes: packets sent on them well after a packet still in flight on the plane were
        delivered, while the plane delivered nothing sent since. "Well after" is the plane's
        own smoothed RTT x 3/4 (at least the reorder window and the configured
        ``plane_guard_min_ns``, the base RTT), so a plane that is merely slower (deeper queue,
        lower rate) has a longer guard, and delay spikes shorter than a base RTT (a software
        fabric, a busy host) are never taken for a dead plane. And, as RACK's timer asks, that
        packet is older (at ``now_ns``) than its plane's latest delay plus the reorder window:
        the send-time guard alone took planes whose queues had grown 2.5 us past an idle
        plane's for dead (an incast on 8 planes beside a failed switch: 14 planes flushed,
        119 of 152 resends spurious). Not the guard's floor: its longest stall lately, 18 us
        in an incast, held a plane whose host link flapped down 13 us longer."""
        dep = self._departures  # (times from when packets left the NIC: ``on_departed``)
        newest = -1
        for r in newly:  # (a loop: compiled, max() over a generator is a generic call)
            t = r.left_ns if dep else r.sent_ns
            if t > newest:
                newest = t
        load = self.plane_load
        dead: list[int] = []
        # a plane's deliveries may lag another's by the longest stall seen lately (a software
        # switch descheduled for milliseconds): that is no failure. The part of the guard that
        # is the same for every plane, worked out once (this runs on every SACK); a plane that
        # delivered within it is passed over before its own part is worked out
        window = self.reorder_window()
        floor = max(window, self.cfg.plane_guard_min_ns)
        floor = max(floor, int(self.rtt.stall))
        for plane in range(self.planes):
            ok_sent = self.plane_ok_sent[plane]
            if not load[plane] or newest - ok_sent < floor:
                continue
            ps = self.rtt.plane_srtt[plane] or self.rtt.srtt_ns
            if ps is None:
                continue
            guard = max(int(ps * 3 / 4), floor)
            if ok_sent < self.resumed_ns:
                # it has delivered nothing yet, or nothing since the connection came back from
                # idle (what it did before says nothing of how fast it is now): nothing says
                # its packets take as long as the other planes' (on BMv2 a plane's first
                # packets after other traffic trailed the other plane's by 70 ms; the guard
                # was 55), so it gets the wait of a timeout: the SRTT and its variation
                # (RFC 6298's RTO without its floor, which would leave a plane dead from the
                # start GOOD for 6 RTT in mrc-sim)
                var = max(4 * self.rtt.rttvar_ns, self.rtt.spread)
                srtt = self.rtt.srtt_ns or 0.0
                if dep and var < srtt:
                    # timed from departures the samples lack the NIC queue's scatter, and the
                    # variation can be ~0: at least RACK-TLP's probe wait, 2 SRTT (a 5 us stall
                    # on a 3 us fabric passed for a dead plane)
                    var = srtt
                guard = max(guard, int(srtt + var))
            if newest - ok_sent < guard:
                continue
            others = sum(
                1
                for r in newly
                if r.ev >> PLANE_SHIFT != plane and (r.left_ns if dep else r.sent_ns) >= ok_sent + guard
            )
            self._plane_evidence[plane] += others
            if self._plane_evidence[plane] < self.cfg.sack_gap_threshold:
                continue
            oldest = next((r for r in self.in_flight.values() if r.ev >> PLANE_SHIFT == plane), None)
            if oldest is None or oldest.at_nic:
                continue
            oldest_sent = oldest.left_ns if dep else oldest.sent_ns
            if oldest_sent <= ok_sent or newest - oldest_sent < guard:
                continue
            if now_ns - oldest_sent < _plane_delay(self.rtt, plane) + window:
                continue  # not overdue by its own plane's latest delay: slower, not silent
            if now_ns - self.rates.last_ns[plane] < guard:
                continue  # it delivered lately: slower (a plane at a quarter rate), not silent
            self._plane_evidence[plane] = 0
            dead.append(plane)
        return dead

    def silent_path(self, plane: int) -> int:
        """The one path (``ev >> PATH_SHIFT``) of a silent ``plane`` (``dead_planes``) its
        packets sent since its latest delivery are all in flight on, or -1 when they are on
        two paths or more (or it has but one): a single silent path is that path's failure,
        not the plane's. A flapping T0-T1 link, whose plane's other paths sat out ECN
        penalties, took the whole plane out in every down phase (51 EVs of one connection)."""
        if self.t1_count < 2:
            return -1
        dep = self._departures
        ok_sent = self.plane_ok_sent[plane]
        first = -1
        for r in self.in_flight.values():
            if r.ev >> PLANE_SHIFT != plane or (r.left_ns if dep else r.sent_ns) <= ok_sent:
                continue
            path = r.ev >> PATH_SHIFT
            if first >= 0 and path != first:
                return -1
            first = path
        return first


def path_overtaken(rec: TxRecord, delivered: TxRecord, threshold: int) -> bool:
    """Whether ``rec`` is lost now that ``delivered``, sent after it, was acknowledged: MRC
    knows each EV's path (plane and T1), and a path is one FIFO from the sender's port to the
    peer's, so ``threshold`` later packets of its own path delivered before it prove it lost,
    with no time guard (RFC 8985's reorder window of 0 while no reordering is seen). The guard
    exists for the reordering between paths that spraying causes; within a path there is none
    to wait for. At 1 % loss on every link (2 planes x 4 T1, 41 us RTT) that guard held every
    lost packet the reorder window (SRTT/4, 10 us) past the evidence, and the message's tail
    with it. Only while the delays are flat (``RttEstimator.flat``: what varies them, link
    jitter or a software switch, may reorder a path too; 3 us of jitter per link took 4 gap
    losses where the time guard takes at most 1), and never again once a loss guess of the
    connection proved to be reordering. Not while it waits at the NIC (the caller skips a
    ``delivered`` tail resend sent twice: which of its two paths delivered it is not known)."""
    if (rec.ev ^ delivered.ev) >> PATH_SHIFT:
        return False
    rec.later_on_path += 1
    return rec.later_on_path >= threshold and not rec.at_nic


def past_rto(recovery: Recovery, now_ns: int, rto: int) -> list[TxRecord]:
    """Packets in flight for longer than ``rto`` (transmission order = send-time order)."""
    out = []
    if recovery.cfg.nic_departures:
        base = recovery.rto_ns(backed_off=False) // 2
        return expired_since_left(recovery.in_flight, now_ns, rto, base)
    for rec in recovery.in_flight.values():
        if rec.sent_ns + rto > now_ns:
            break
        out.append(rec)
    return out


def rto_dead_planes(recovery: Recovery, suspects: list[TxRecord], now_ns: int) -> list[int]:
    """Planes the RTO shows dead (``Recovery.suspects``, found for the sender to fail): two
    paths or more of the plane went silent past the RTO, while the other planes delivered
    ``sack_gap_threshold`` packets sent well after the plane's last delivery (the evidence
    ``dead_planes`` counts), the plane delivered nothing sent since its oldest packet left, and
    that packet is overdue by its plane's latest delay (as there). ``dead_planes`` runs only on
    a SACK: in an incast where a connection's SACKs had stopped for 31 us (fuzz seed 16) it
    judged a black-holed NIC link 46 us after the RTO had blamed its 9 paths, while 4 more
    packets went onto the plane's paths not yet blamed. The RTO stands in for the SACK; the
    evidence says the plane, not the paths, is silent."""
    if recovery.planes < 2:
        return []
    paths: dict[int, set[int]] = {}
    for rec in suspects:
        paths.setdefault(rec.ev >> PLANE_SHIFT, set()).add(rec.ev >> PATH_SHIFT)
    dead: list[int] = []
    dep = recovery.cfg.nic_departures
    for plane, silent in paths.items():
        if (
            len(silent) < min(2, recovery.t1_count)
            or recovery._plane_evidence[plane] < recovery.cfg.sack_gap_threshold
        ):
            continue
        oldest = next((r for r in recovery.in_flight.values() if r.ev >> PLANE_SHIFT == plane), None)
        if oldest is None or oldest.at_nic:
            continue
        oldest_sent = oldest.left_ns if dep else oldest.sent_ns
        if oldest_sent <= recovery.plane_ok_sent[plane]:
            continue
        if now_ns - oldest_sent < _plane_delay(recovery.rtt, plane) + recovery.reorder_window():
            continue  # (as ``dead_planes``: not overdue by its own plane's latest delay)
        recovery._plane_evidence[plane] = 0
        dead.append(plane)
    return dead


def rto_slack(recovery: Recovery) -> int:
    """How much longer than the RTO the timeout proper waits (the resend, the backoff, the
    window cut, ``rto_fired``). The RTO blames the path of a silent packet at once
    (``Recovery.suspects``): a path that died stops carrying data as soon as before. Only
    the resend waits -- and a packet that arrives meanwhile undoes the blame as any late
    packet does. In a fault-free all-to-all the connections sample their RTT rarely (7-13
    samples in a life) and never see the queue that builds at its end: thin windows whose
    packet crossed three queues full to the trim threshold took 12.0-12.7 us against an RTO
    at its floor, 12.0 us. The slack is the RTT spread the connection saw lately, at least
    ``1/RTO_SLACK_SHARE`` of the RTO before its backoff (a connection that never saw the
    queue: its packet came 29 ns past the RTO). None where the RTO blames no path (ECMP, the
    RoCE fixed timer: one job, no split) or before any RTT sample (the RTO is only a probe)."""
    rtt = recovery.rtt
    cfg = recovery.cfg
    if rtt.srtt_ns is None or not cfg.retires_paths or cfg.local_ack_timeout:
        return 0
    least = recovery.rto_ns(backed_off=False) // RTO_SLACK_SHARE
    return int(rtt.spread) if rtt.spread > least else least


def _plane_delay(rtt: RttEstimator, plane: int) -> float:
    """``plane``'s round trip now: its smoothed RTT, or its latest sample if longer (a queue
    building), else the connection's SRTT."""
    last = float(rtt.plane_last[plane])
    ps = rtt.of_plane(plane)
    return last if last > ps else ps


def probe_due(rtt: RttEstimator, rec: TxRecord, window: int) -> int:
    """When the SACK of ``rec``, the newest packet, is overdue (``Recovery.tail_at``): the peer
    SACKs it at once, so a round trip -- the SRTT, its plane's, or the latest sample of any
    plane if longer (a queue building at the peer's ports shows there first) -- plus the
    reorder window after it left, however many SACKs of older packets still come; never while
    it waits at the NIC."""
    if rec.at_nic:
        return 1 << 62
    wait = max(rtt.srtt_ns or 0.0, rtt.of_plane(rec.ev >> PLANE_SHIFT))
    for last in rtt.plane_last:
        if last > wait:
            wait = float(last)
    return rec.left_ns + int(wait) + window


def tail_due(rtt: RttEstimator, rec: TxRecord, at: int, window: int, at_once: bool) -> int:
    """When the tail probe for ``rec``, the newest packet, fires (departures reported), given
    ``at`` from the SRTT: at ``probe_due`` if sooner, when the peer SACKs it at once (no ack
    delay); never before ``queue_floor`` while its plane's delays are not flat."""
    if at_once:
        at = min(at, probe_due(rtt, rec, window))
    plane = rec.ev >> PLANE_SHIFT
    if not rtt.flat(plane):
        floor = queue_floor(rtt, plane, window)
        if floor > at:
            at = floor
    return at


def queue_floor(rtt: RttEstimator, plane: int, window: int) -> int:
    """While a queue builds (delays not flat), the tail probe and RACK on other planes'
    evidence take no packet of ``plane`` for lost before the longest latest round trip of any
    plane plus the reorder window after ``plane``'s latest SACK. An incast's queue at the
    peer's host port (which marks nothing and trims only when full: 21 us at 100 Gb/s) keeps
    every packet of the plane waiting behind those of the other senders, but the plane's
    SACKs keep coming, each one pushing this floor on; a plane that died SACKs nothing more,
    and the floor stays behind. Fuzz seed 16, draw 3: 7 x 32 KiB into one host, a packet
    SACKed 6.3 us after it left, the round trips 1.5-2.9 us, the probe fired at 3.5 us. The
    connection's latest SACK instead of the plane's held a dead plane's packets as long as
    the live planes kept SACKing (dead_ev 523 -> 571 violations on that seed's 130 draws
    failing resend or dead_ev)."""
    last = 0
    for x in rtt.plane_last:
        if x > last:
            last = x
    return rtt.plane_at[plane] + last + window


def rack_due(rtt: RttEstimator, rec: TxRecord, wait: int, own: bool, window: int, departures: bool) -> int:
    """When a packet overtaken by a delivered one (``own``: one of its plane) is lost:
    ``wait`` (``Recovery.plane_wait``: its plane's smoothed RTT, or its latest sample if
    longer -- RACK's RTT: while a queue builds the smoothed RTT lags it -- plus the reorder
    window) after it left. Two guards follow, for queues the sender cannot see; where the NIC
    reports departures and the delays are flat (``RttEstimator.flat``) there are none, and
    neither is needed: a packet not delivered a flat round trip and the window after it left
    is lost (at 1 % loss a guard held a lost packet 2.5 us past ECMP's own-plane evidence).
    - Overtaken on its own plane, no sooner than the window after the first such packet was
      acknowledged: when it left is the NIC model's guess, which knows this queue pair's
      packets only; on a port whose turns are shared with other queue pairs it leaves later
      than that, but before the packet of its plane that overtook it, so that packet's SACK
      is the surer clock.
    - Overtaken on other planes only, ¾ SRTT more: their queues are not its own (an
      all-to-all's short writes were resent for it, 466 of 16k packets, 8 planes; an incast's
      first window, 15 fuzz draws of 200; a whole SRTT left a dead plane after 5.05 RTT in two
      fuzz draws). On its own plane it is never later than this (more evidence: a lost tail
      resend at 1 % loss waited for the next resend).
    - Overtaken on other planes only, with departures reported, never before ``queue_floor``
      either: while its plane still SACKs, its queue is draining. Not on its own plane's
      evidence: the last hop is one FIFO per plane, so a later packet of the plane delivered
      first says this one is not waiting there (a fabric link or a T1 down inside a live
      plane: the plane kept SACKing on its other paths, and the floor held the dead path's
      packets 9.4 us longer, fuzz seed 18, draws 32 and 154, one more connection over the
      floor invariant each)."""
    plane = rec.ev >> PLANE_SHIFT
    due = rec.left_ns + wait
    if departures and rtt.flat(plane):
        return due
    others = due + int(rtt.of_plane(plane)) * 3 // 4
    if not own:
        if departures:
            floor = queue_floor(rtt, plane, window)  # (a queue builds: it drains while its plane SACKs)
            if floor > others:
                return floor
        return others
    if rec.overtaken_at >= 0:
        seen = rec.overtaken_at + window
        if seen > due:
            due = min(seen, others)
    return due
