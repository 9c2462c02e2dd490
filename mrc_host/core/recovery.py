"""Loss detection and RTT estimation for one sender, apart from the sender itself (as aioquic
keeps ``recovery.py`` apart from its connection).

The sender pumps packets, ``SentPackets`` (sent.py) owns them from their first copy to the
cumulative ACK, and the acknowledgement book proves what the peer saw; this module decides
which of the packets in flight are lost, and when, and returns them (the sender asks
``SentPackets`` for the transition). Loss is found four ways:
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
  plane has been silent a round trip (``queue_floor``), nor before ``UNHEARD_SRTTS`` on a
  plane the sender has not heard of (``unheard_due``);
- a whole plane that stopped delivering, seen from the other planes (plane_watch.py), and a
  path silent past its own delay while its plane's other paths deliver (path_watch.py);
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
spurious (``on_delivered`` judges): the sender undoes what the guess did to the EV set and,
if the copy arrived late (its own SACK says so, not a later one covering it: that is a SACK
lost), the reorder window grows a step (RACK's reo_wnd_mult: reorder.py). The RTT estimate
is rtt.py's.
"""

from __future__ import annotations

from typing import Final

from mrc_host.wire.messages import Opcode

from .config import TransportConfig
from .nic_clock import NicClock, expired_since_left
from .path_watch import PathWatch
from .plane_watch import PlaneWatch
from .records import PATH_SHIFT, PLANE_SHIFT, TxRecord
from .reorder import ReorderWindow
from .rtt import RttEstimator
from .sent import SentPackets

__all__ = ["PATH_SHIFT", "PLANE_SHIFT", "Recovery", "RttEstimator"]

ROCE_TIMEOUT_UNIT_NS: Final = 4096  # RoCE/InfiniBand local ACK timeout unit: 4.096 us x 2**timeout
BACKOFF_MAX: Final = 64
_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)
RTO_SLACK_SHARE: Final = 8  # the RTO's slack is at least the RTO over this (``rto_slack``)
# SRTTs (and the reorder window, at most the RTO) that the tail probe and RACK wait for a
# packet on a plane not heard of yet (``Recovery.unheard_due``)
UNHEARD_SRTTS: Final = 4


class Recovery:
    """The rules that declare one sender's packets in flight lost, and its timers."""

    def __init__(self, cfg: TransportConfig, planes: int, packets: SentPackets, t1_count: int = 1) -> None:
        self.cfg = cfg
        self.planes = planes
        self.packets = packets  # (read: the packets in flight; their states are ``packets``' to change)
        self.rtt = RttEstimator(planes)
        self.reorder = ReorderWindow(cfg, planes, self.rtt)
        self.nic = NicClock(cfg, planes)  # when packets left the NIC (nic_clock.py)
        self.plane_watch = PlaneWatch(cfg, planes, packets, self.rtt, self.reorder, self.nic, t1_count)
        self.path_watch = PathWatch(cfg, packets, self.rtt)
        # (experimental: the gap rule also waits out each packet's own path's delay)
        self._own_delay = cfg.experimental.path_delay_losses and cfg.retires_paths
        self.backoff = 1
        self.retries = 0  # RTO expiries in a row without progress (OCP retry count)
        self._departures = cfg.nic_departures  # (and the NIC reports it)
        self._weigh = cfg.weigh_ports  # (each plane timed by when its packets are heard of)
        self.rack_order = -1  # transmission order of the newest copy known delivered
        self.rack_plane = [-1] * planes  # the same per plane: RACK's evidence (``rack_at``)
        self.tail_done = False  # the tail probe for the current tail was sent
        self.last_acked_ns = 0  # when a SACK last acknowledged something new
        self._last_acked_at_once = False  # the newest packet is one the peer SACKs at once
        self._tx_order = 0

    # ---- packets sent ---------------------------------------------------------------------
    def on_sent(self, rec: TxRecord, now_ns: int, idle: bool) -> None:
        """``rec``'s latest copy was sent now (``SentPackets.sent``; ``idle``: nothing else was
        in flight): the rules' evidence about it starts anew, the NIC model times it."""
        if rec.transmissions == 1:
            self.tail_done = False  # new data: a new tail (resends never re-arm the probe)
            if idle and now_ns - self.nic.last_left >= self.rto_ns():
                self.plane_watch.resume(now_ns)  # back from idle (TCP's restart after idle)
        self._tx_order += 1
        rec.tx_order = self._tx_order
        rec.later_delivered = rec.later_on_path = 0
        rec.overtaken_left = -1
        rec.overtaken_at = -1
        self.nic.on_sent(rec, rec.ev >> PLANE_SHIFT, len(rec.payload), now_ns)
        self._last_acked_at_once = rec.transmissions > 1 or rec.opcode in _LAST_OPCODES

    def on_twin(self, rec: TxRecord, ev: int) -> None:
        """A second copy of ``rec``'s latest left on ``ev`` with it (``SentPackets.twinned``):
        not in flight, only on its port."""
        self.nic.on_twin(rec, ev >> PLANE_SHIFT)

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
        if sending or self.cfg.go_back_n or srtt is None or not self.packets.in_flight or self.tail_done:
            return None
        wait = srtt + min(4 * rtt.rttvar_ns, srtt)
        if not self._last_acked_at_once:
            wait = max(wait, min(srtt + self.cfg.ack_delay_ns, 2 * srtt))
        # (while SACKs come the tail drains: on a shared port packets leave later than the model says)
        last = self.nic.last_left
        start = last if last >= self.last_acked_ns else self.last_acked_ns
        at = start + int(wait) + self.reorder_window()
        newest = next(reversed(self.packets.in_flight.values()))
        if self._departures:
            at = tail_due(rtt, newest, at, self.reorder_window(), self._last_acked_at_once)
        # (a slow port's plane not heard of yet: its packets' serialisation more, as the plane
        # watch waits; timed by the fast planes, an all-to-all's short writes probed every
        # tail sent on a 10 Gb/s plane beside 100 Gb/s ones, fuzz seed 5151, draw 1984)
        at += int(self.plane_watch.unheard_lag(newest.ev >> PLANE_SHIFT))
        unheard = self.unheard_due(newest)
        return unheard if unheard > at else at

    def unheard_due(self, rec: TxRecord) -> int:
        """No sooner than this is ``rec`` lost by the tail probe or RACK when its plane has not
        been heard of (no RTT sample of its own, no first copy acknowledged; 0 otherwise):
        ``UNHEARD_SRTTS`` and the reorder window after it left, at most the RTO, and a slow
        port's lag (``PlaneWatch.unheard_lag``). Nothing says how slow such a plane is, and
        timed by the planes heard of, its packets were resent whenever it was slower inside
        the fabric, where no port rate shows it: 471 of 660 tail probes and 211 of 902 RACK
        and gap losses in the fuzzer's resends with nothing dropped (seeds 4242 and 5151), on
        planes at 10-25 Gb/s beside 100. Seed 4242, draw 1542 (200 ns links, a plane at 10
        Gb/s inside): its first packets were heard of 2.4 SRTTs after they left at the median,
        and later as they queued behind each other, but probed at 1.3. Not longer: a dead
        path's EV must still go within the five RTTs the fuzzer allows (waiting for the RTO
        left a black-holed NIC link's EVs GOOD for 12-17 RTTs, seed 5151, draw 886). A dead
        plane is still failed as a whole by the plane watch, whose wait this leaves alone."""
        plane = rec.ev >> PLANE_SHIFT
        rtt = self.rtt
        srtt = rtt.srtt_ns
        if srtt is None or rtt.heard_of(plane):
            return 0
        wait = int(UNHEARD_SRTTS * srtt) + self.reorder_window()
        rto = self.rto_ns(backed_off=False)
        sent = rec.left_ns if self._departures else rec.sent_ns
        return sent + (wait if wait < rto else rto) + int(self.plane_watch.unheard_lag(plane))

    def tail_losses(self, now_ns: int) -> list[TxRecord]:
        """The tail probe fired: the newest packet sent an SRTT plus the reorder window ago is
        resent, one (RACK-TLP's probe): its SACK shows RACK which of the older ones are lost.
        Resending every one of them resent 14 packets for nothing in an all-to-all whose
        short writes waited behind the host's other queue pairs at its NIC port."""
        self.tail_done = True
        late = now_ns - int(self.rtt.srtt_ns or 0) - self.reorder_window()
        newest: list[TxRecord] = []
        for r in self.packets.in_flight.values():
            if r.left_ns <= late and not r.at_nic:
                newest = [r]
        return newest

    def deadline(self, sending: bool) -> int | None:
        """The earliest of the RTO, tail probe and RACK timers, for the oldest packet in flight."""
        for rec in self.packets.in_flight.values():
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
        """RACK's reordering window, adapted to jitter (``ReorderWindow.window``)."""
        return self.reorder.window()

    def on_delivered(self, rec: TxRecord, now_ns: int, earlier_copy: bool, own_sack: bool = True) -> bool:
        """``rec`` is being acknowledged (its state not yet ACKED); ``earlier_copy``: the SACK names
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
            self.reorder.on_clean_delivery()
        # the copy that arrived: the one before the latest if the guess was wrong (as the latest,
        # resent just now, the next packet measured an RTT of reordering); reordering only from a
        # first copy, not from a guess shown wrong by a later SACK alone (its own SACK was lost)
        if (spurious or earlier_copy) and rec.transmissions > 1:
            if earlier_copy or rec.prev_twin_ev < 0:  # (else it left twice: which copy arrived?)
                self._measure(rec.lost_ev, rec.prev_left_ns, rec.prev_sent_ns, earlier_copy, now_ns)
                # (the first copy: a plane failed falsely is heard of too)
                if self._weigh and rec.transmissions == 2:
                    self._heard(rec.lost_ev, rec.prev_left_ns, rec.prev_sent_ns, now_ns)
        else:
            known = rec.transmissions == 1 and own_sack  # (``measure``: a first copy's own SACK only)
            self._measure(rec.ev, rec.left_ns, rec.sent_ns, known, now_ns)
            if self._weigh and rec.transmissions == 1:
                self._heard(rec.ev, rec.left_ns, rec.sent_ns, now_ns)
        return spurious

    def _measure(self, ev: int, left_ns: int, sent_ns: int, known: bool, now_ns: int) -> None:
        """A copy that left on ``ev`` was delivered (``known``: surely that copy, and when):
        the reordering seen, and its plane and path alive as of when it was sent."""
        plane = ev >> PLANE_SHIFT
        self.reorder.measure(plane, left_ns, known)
        left = left_ns if self._departures else sent_ns
        self.plane_watch.delivered(plane, left, now_ns)
        self.path_watch.delivered(ev >> PATH_SHIFT, left, now_ns)

    def _heard(self, ev: int, left_ns: int, sent_ns: int, now_ns: int) -> None:
        """A first copy that left on ``ev`` is acknowledged now: how long its plane takes to be
        heard of (``RttEstimator.heard_plane``), with ``weigh_ports``."""
        self.rtt.heard_plane(
            ev >> PLANE_SHIFT,
            now_ns - (left_ns if self._departures else sent_ns),
            now_ns,
            bool(self.nic.slow),
        )

    def path_heard(self, ev: int, now_ns: int) -> None:
        """A trimmed header that took ``ev`` reached the peer (a trim NACK): its path delivers,
        congested, not failed (``PathWatch.heard``)."""
        self.path_watch.heard(ev >> PATH_SHIFT, now_ns)

    def look_at_paths(self, newly: list[TxRecord], now_ns: int) -> tuple[list[TxRecord], list[TxRecord]]:
        """The oldest packet in flight on each path silent past its own delay, and on each
        path only overdue by it (``PathWatch.look``). The silent ones are now marked judged,
        as the RTO's suspects are: the sender retires their paths, a delivery undoes that,
        and the packets stay with the loss rules. The overdue ones' paths are held to them."""
        silent, overdue = self.path_watch.look(newly, now_ns)
        for rec in silent:
            rec.suspect_sent = rec.sent_ns
        return silent, overdue

    # ---- loss rules -----------------------------------------------------------------------
    def gap_losses(self, newly: list[TxRecord], now_ns: int, weighed: int = 0) -> list[TxRecord]:
        """The SACK gap rule over the packets ``newly`` acknowledged (see module docstring);
        each packet they overtook on its plane notes when that was first seen (RACK's clock).
        With the experimental ``path_delay_losses`` the time guard also waits out the packet's
        own path's latest delay (``PathWatch.due``), except on the planes in ``weighed`` (a
        bit mask: those the sender's queue weights hold below their full share, which the
        late copies of guessed losses time)."""
        threshold = self.cfg.sack_gap_threshold
        # RACK-style: the reordering spraying causes scales with the RTT actually seen (a
        # software switch's queues can stretch it far beyond the configured base RTT).
        window = self.reorder_window()
        own_delay = self._own_delay
        watch = self.path_watch
        lost: list[TxRecord] = []
        for delivered in newly:
            order = delivered.tx_order
            left = delivered.left_ns
            plane = delivered.ev >> PLANE_SHIFT
            own_here = own_delay and not weighed >> plane & 1
            path_rule = (
                self.reorder.path_rule and delivered.twin_ev < 0 and self.rtt.flat(plane)
            )  # (path_overtaken)
            for rec in self.packets.in_flight.values():
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
                    if own_here:  # (timed as the watch times the path: ``_measure``)
                        sent = rec.left_ns if self._departures else rec.sent_ns
                        if now_ns < watch.due(rec.ev >> PATH_SHIFT, sent, now_ns) + window:
                            continue  # (its own path, queued deeper, may still deliver it)
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
        due = rack_due(self.rtt, rec, wait, own, self.reorder_window(), self._departures)
        unheard = self.unheard_due(rec)
        return unheard if unheard > due else due

    def plane_wait(self, plane: int) -> int:
        """How long after it left a packet on ``plane`` may still be delivered (``rack_due``)."""
        rtt = self.rtt
        window = self.reorder_window()
        wait = max(rtt.of_plane(plane), float(rtt.plane_last[plane]), rtt.heard_instead(plane, window))
        return int(wait + self.plane_watch.unheard_lag(plane)) + window

    def rack_at(self, sending: bool) -> int | None:
        """RACK timer: when the oldest packet in flight that a later one overtook is lost
        (``rack_due``)."""
        if sending or self.cfg.go_back_n or self.rtt.srtt_ns is None:
            return None
        at: int | None = None
        for rec in self.packets.in_flight.values():
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
        for rec in self.packets.in_flight.values():  # transmission order
            if rec.tx_order >= self.rack_order:
                break
            if now_ns >= self._rack_due(rec) and not rec.at_nic:
                lost.append(rec)
        return lost


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
        return expired_since_left(recovery.packets.in_flight, now_ns, rto, base)
    for rec in recovery.packets.in_flight.values():
        if rec.sent_ns + rto > now_ns:
            break
        out.append(rec)
    return out


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
    at = rtt.plane_at[plane]
    if rtt.heard_later(plane) > window:
        # (a plane with slower links is rarely sampled, its SACKs after the others' covers,
        # but heard of all the same: it still delivers)
        heard = rtt.plane_heard_at[plane]
        if heard > at:
            at = heard
    return at + last + window


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
