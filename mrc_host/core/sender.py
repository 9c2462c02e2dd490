"""The sending half of a queue pair: segmentation, spraying, loss recovery.

RDMA WRITEs are cut into MTU-sized DATA packets; every packet carries its own remote
address (RETH), so it can go on any EV and arrive in any order. Loss is found three ways:
- a trim NACK (the packet was cut by a congested switch): resend at once on another EV;
  the EV only goes to SKIP, since trimming means congestion, not failure;
- the SACK gap rule: ``sack_gap_threshold`` packets sent *after* it on the same plane
  were SACKed, one of them sent at least the reorder window after it. Counting per plane
  (each plane has its own NIC queue, whose depths differ) and the time guard keep the
  reordering that spraying and a jittery fabric cause from passing for loss; the guard
  adapts as RACK's does, to the reordering measured on deliveries and to spurious losses;
- at the tail (nothing new left to send), the RACK timer: a packet still unacknowledged its
  plane's SRTT plus the reorder window after it was sent, while a packet sent after it (on
  any plane) was delivered, is lost. The gap rule cannot see a loss among the last packets
  of a message (a few packets per plane, all sent in one burst), and the tail probe waits
  two SRTTs after the last send: the stall a ring collective pays on every lossy step. In
  bulk transfer the gap rule alone decides (it is the one that tolerates reordering);
- the retransmission timeout (RTO from SRTT, RTTVAR and the RTT spread, clamped, doubled
  per expiry; before any RTT sample it only resends the oldest packet, as a probe).
The last two mean the path failed: in MRC mode the EV that lost it is retired at once
(ASSUMED_BAD) and the packet is resent on another EV. Both are guesses: when the packet
turns out to have arrived (its original acknowledged, Eifel's echo, or a D-SACK) the loss
is spurious and the retirement is undone. In single-path mode the sender goes back N
from the first missing PSN, as RoCE does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from mrc_host.wire.messages import DataFlag, DataPacket, Dscp, Ecn, Nack, NackReason, Opcode, PathMeta, Sack

from .actions import Action, ConnectionFailed, MessageSent, Transmit
from .cc_base import create_cc
from .config import Mode, TransportConfig
from .counters import Counters
from .evset import EvSet
from .psn import PSN_HALF, psn_of, unwrap

ROCE_TIMEOUT_UNIT_NS: Final = 4096  # RoCE/InfiniBand local ACK timeout unit: 4.096 us x 2**timeout
REO_MULT_MAX: Final = 4  # the reordering window grows from SRTT/4 up to SRTT
REO_DECAY_DELIVERIES: Final = 1024  # clean deliveries before it shrinks by one step
GUESSES_MAX: Final = 4096  # guessed-lost, acked packets remembered for a D-SACK that proves them spurious
SPREAD_DECAY: Final = 1 - 1 / 256  # per RTT sample: the jitter estimate forgets over a few windows
REO_EXTENT_DECAY: Final = 1 - 1 / 1024  # per delivery: the reordering seen forgets over many windows
REO_EXTENT_MARGIN: Final = 1.5  # the largest reordering seen so far understates the largest to come

# flags built once: IntFlag arithmetic per packet costs more than the rest of _transmit
_FLAGS: Final = (
    (DataFlag.NONE, DataFlag.LAST_OF_MESSAGE),
    (DataFlag.RETRANSMISSION, DataFlag.RETRANSMISSION | DataFlag.LAST_OF_MESSAGE),
)
_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)


# ``init=False`` + a spelled-out ``__init__``: mypyc compiles it (see mrc_host/wire/messages.py)
@dataclass(slots=True, init=False)
class _Write:
    msg_id: int
    data: bytes
    vaddr: int
    rkey: int
    offset: int = 0
    remaining: int = 0  # packets not yet acknowledged
    failed: str = ""

    def __init__(
        self,
        msg_id: int,
        data: bytes,
        vaddr: int,
        rkey: int,
        offset: int = 0,
        remaining: int = 0,
        failed: str = "",
    ) -> None:
        self.msg_id = msg_id
        self.data = data
        self.vaddr = vaddr
        self.rkey = rkey
        self.offset = offset
        self.remaining = remaining
        self.failed = failed


@dataclass(slots=True, init=False)
class _TxRecord:
    seq: int
    write: _Write
    vaddr: int
    payload: bytes
    opcode: Opcode
    ev: int = 0
    sent_ns: int = 0
    tx_order: int = 0
    transmissions: int = 0
    later_delivered: int = 0
    reordered_past: bool = False  # a packet sent reorder_window after this one was delivered
    sacked: bool = False
    lost: bool = False  # waiting in the retransmit queue
    gap_lost: bool = False  # declared lost by the gap rule or the timer (a guess that can be wrong)
    lost_ev: int = -1  # the EV it was last declared lost on
    prev_sent_ns: int = -1  # send time of the copy before the latest

    def __init__(
        self,
        seq: int,
        write: _Write,
        vaddr: int,
        payload: bytes,
        opcode: Opcode,
        ev: int = 0,
        sent_ns: int = 0,
        tx_order: int = 0,
        transmissions: int = 0,
        later_delivered: int = 0,
        reordered_past: bool = False,
        sacked: bool = False,
        lost: bool = False,
        gap_lost: bool = False,
        lost_ev: int = -1,
        prev_sent_ns: int = -1,
    ) -> None:
        self.seq = seq
        self.write = write
        self.vaddr = vaddr
        self.payload = payload
        self.opcode = opcode
        self.ev = ev
        self.sent_ns = sent_ns
        self.tx_order = tx_order
        self.transmissions = transmissions
        self.later_delivered = later_delivered
        self.reordered_past = reordered_past
        self.sacked = sacked
        self.lost = lost
        self.gap_lost = gap_lost
        self.lost_ev = lost_ev
        self.prev_sent_ns = prev_sent_ns


class Sender:
    def __init__(
        self,
        cfg: TransportConfig,
        evset: EvSet,
        counters: Counters,
        peer_qp: int,
    ) -> None:
        self.cfg = cfg
        self._retire = cfg.retires_paths  # policy switches, read per packet
        self._gbn = cfg.go_back_n
        self.evset = evset
        self.c = counters
        self.peer_qp = peer_qp
        self.cc = create_cc(cfg)
        self.snd_una = cfg.initial_psn  # oldest seq not cumulatively acknowledged
        self.snd_nxt = cfg.initial_psn  # next new seq
        self.records: dict[int, _TxRecord] = {}
        self.in_flight: dict[int, _TxRecord] = {}  # seq -> record, in transmission order
        self.inflight_bytes = 0
        self.plane_load = evset.plane_load  # bytes in flight per plane (the rotation reads it)
        planes = evset.planes
        self.plane_srtt: list[float | None] = [None] * planes  # smoothed RTT of each plane
        # send time of the newest packet each plane delivered (whole-plane failure detection)
        self.plane_ok_sent: list[int] = [-1] * planes
        self._plane_evidence = [0] * planes  # later deliveries elsewhere since it last delivered
        self.retx: deque[int] = deque()
        self.writes: deque[_Write] = deque()  # writes with packets not yet segmented
        self._tx_order = 0
        self._next_msg_id = 1
        self.srtt_ns: float | None = None
        self.rttvar_ns = 0.0
        # RACK-style reordering window: SRTT/4 times this, raised by every spurious gap loss
        # (the "lost" packet was SACKed after all), lowered again after a clean stretch.
        self.reo_mult = 1
        self.min_rtt_ns: int | None = None
        self.rtt_spread = 0.0  # recent max RTT minus min RTT, decaying (jitter)
        # reordering actually seen, measured without waiting for a spurious loss: how much
        # earlier than the newest packet already delivered on its plane a delivered packet
        # was sent (decaying max); the gap rule's time guard never goes below it
        self.reo_extent = 0.0
        self._newest_sent = [-1] * planes  # send time of the newest delivered packet per plane
        self._lasthop_trim_ns = -(1 << 62)  # when the peer's last hop last trimmed one of ours
        self._clean_deliveries = 0
        # packets declared lost by a guess (gap rule, timer), resent once, acknowledged, and not
        # (yet) shown spurious: (send time, EV) of each of their two copies -> the EV the loss
        # was blamed on and the other copy's key. Both copies arrived iff the peer reports one
        # as a duplicate (D-SACK): then the loss was spurious. Bounded, oldest out first.
        self._guesses: dict[tuple[int, int], tuple[int, tuple[int, int]]] = {}
        self.backoff = 1
        self.retries = 0  # RTO expiries in a row without progress (OCP retry count)
        self.failed = ""  # why the connection ended in error ("" while it works)
        self.stalled_since: int | None = None  # work waiting, no EV to carry it, since then
        self._last_tx_ns = 0
        self._tail_done = False  # the tail probe for the current tail was sent
        self._rack_order = -1  # transmission order of the newest first-copy packet delivered (RACK)
        self.max_span = min(cfg.rx_window, PSN_HALF) - 1

    # ---- API ----------------------------------------------------------------------------
    def post_write(self, data: bytes, vaddr: int, rkey: int, out: list[Action] | None = None) -> int:
        msg_id = self._next_msg_id
        self._next_msg_id = (self._next_msg_id + 1) & 0xFFFFFFFF or 1
        if self.failed:  # the connection ended in error: refuse at once, same reason
            self.c.messages_failed += 1
            if out is not None:
                out.append(MessageSent(msg_id, False, self.failed))
            return msg_id
        w = _Write(msg_id, bytes(data), vaddr, rkey)
        w.remaining = max(1, -(-len(w.data) // self.cfg.mtu))
        self.writes.append(w)
        self.c.messages_posted += 1
        return msg_id

    @property
    def rto_ns(self) -> int:
        cfg = self.cfg
        if cfg.local_ack_timeout:
            # RoCE: a fixed per-QP timer of 4.096 us x 2**timeout, no RTT estimate, no backoff
            return ROCE_TIMEOUT_UNIT_NS << cfg.local_ack_timeout
        if self.srtt_ns is None:
            base = cfg.rto_initial_ns
        else:
            base = int(self.srtt_ns + max(4 * self.rttvar_ns, self.rtt_spread, cfg.cc.base_rtt_ns / 4))
        return min(max(base, cfg.rto_min_ns) * self.backoff, cfg.rto_max_ns)

    def _tail_at(self) -> int | None:
        """Tail loss probe time: with nothing new left to send, the SACK gap rule has no
        later packets to work with, so packets unacknowledged well past an RTT after the
        last transmission are resent then, not at the RTO (RACK-TLP's idea)."""
        if self.writes or self._gbn or self.srtt_ns is None or not self.in_flight or self._tail_done:
            return None
        return self._last_tx_ns + int(2 * self.srtt_ns) + self.reorder_window()

    def _rack_wait(self, rec: _TxRecord) -> int:
        """How long after its send a packet overtaken by a delivered one may still arrive:
        its plane's smoothed RTT (each plane has its own NIC queue) plus the reorder window."""
        rtt = self.plane_srtt[rec.ev >> 28] or self.srtt_ns or 0.0
        return int(rtt) + self.reorder_window()

    def _rack_at(self) -> int | None:
        """RACK timer: when the oldest packet in flight, if a later one was delivered, is lost."""
        if self.writes or self._gbn or self.srtt_ns is None:
            return None
        for rec in self.in_flight.values():
            return rec.sent_ns + self._rack_wait(rec) if rec.tx_order < self._rack_order else None
        return None

    def _rack_detect(self, now_ns: int) -> None:
        """Every packet in flight sent before a delivered one and overdue by the RACK rule."""
        lost = []
        for rec in self.in_flight.values():  # transmission order
            if rec.tx_order >= self._rack_order:
                break
            if now_ns >= rec.sent_ns + self._rack_wait(rec):
                lost.append(rec)
        for rec in lost:
            self._lose(rec, "gap", now_ns)

    def deadline(self) -> int | None:
        for rec in self.in_flight.values():
            rto_at = rec.sent_ns + self.rto_ns
            tail = self._tail_at()
            if tail is not None:
                rto_at = min(rto_at, tail)
            rack = self._rack_at()
            return rto_at if rack is None else min(rto_at, rack)
        if self.stalled_since is not None:
            return self.stalled_since + self.rto_ns * (self.cfg.retry_cnt + 1)
        return None

    def idle(self) -> bool:
        return not self.records and not self.writes

    def fail(self, reason: str, out: list[Action]) -> None:
        """Error completion: every write not yet completed ends with ``reason``; the
        connection sends nothing more (OCP: retry count exceeded, no usable path)."""
        if self.failed:
            return
        self.failed = reason
        self.c.connection_failures[reason] += 1
        pending = {rec.write.msg_id: rec.write for rec in self.records.values()}
        for w in self.writes:
            pending[w.msg_id] = w
        for w in pending.values():
            self.c.messages_failed += 1
            out.append(MessageSent(w.msg_id, False, reason))
        for rec in list(self.in_flight.values()):
            self._leave_flight(rec)
        self.records.clear()
        self.writes.clear()
        self.retx.clear()
        self.stalled_since = None
        out.append(ConnectionFailed(reason))

    # ---- transmission -------------------------------------------------------------------
    def pump(self, now_ns: int, out: list[Action]) -> None:
        """Send whatever the window and the EV set allow right now."""
        if self.failed:
            return
        cwnd = self.cc.cwnd
        while True:
            if self.retx:
                rec = self.records.get(self.retx[0])
                if rec is None or rec.sacked or not rec.lost:
                    self.retx.popleft()
                    continue
                if self.inflight_bytes and self.inflight_bytes + len(rec.payload) > cwnd:
                    return
                ev = self._choose_ev(exclude=rec.ev)
                if ev is None:
                    self._stall(now_ns)
                    return
                self.retx.popleft()
                self._transmit(rec, ev, now_ns, out)
                continue
            if not self.writes or self.snd_nxt - self.snd_una >= self.max_span:
                return
            w = self.writes[0]
            size = min(self.cfg.mtu, len(w.data) - w.offset)
            if self.inflight_bytes and self.inflight_bytes + size > cwnd:
                return
            ev = self._choose_ev(exclude=None)
            if ev is None:
                self._stall(now_ns)
                return
            first = w.offset == 0
            last = w.offset + size >= len(w.data)
            opcode = (
                (Opcode.WRITE_ONLY if last else Opcode.WRITE_FIRST)
                if first
                else (Opcode.WRITE_LAST if last else Opcode.WRITE_MIDDLE)
            )
            rec = _TxRecord(self.snd_nxt, w, w.vaddr + w.offset, w.data[w.offset : w.offset + size], opcode)
            w.offset += size
            if last:
                self.writes.popleft()
            self.records[rec.seq] = rec
            self.snd_nxt += 1
            self._transmit(rec, ev, now_ns, out)

    def _stall(self, now_ns: int) -> None:
        """Work is waiting and no EV can carry it (every one DENIED, every port down):
        after ``retry_cnt`` + 1 timeouts' worth of this the connection fails."""
        if self.stalled_since is None:
            self.stalled_since = now_ns

    def _choose_ev(self, exclude: int | None) -> int | None:
        ev = self.evset.next_data_ev(exclude if self.cfg.mode is not Mode.SINGLE_PATH else None)
        if ev is None and self._retire:
            ev = self.evset.last_resort_ev(exclude)
            if ev is not None:
                self.c.last_resort_sends += 1
        return ev

    def _transmit(self, rec: _TxRecord, ev: int, now_ns: int, out: list[Action]) -> None:
        self.stalled_since = None
        self._last_tx_ns = now_ns
        retx = rec.transmissions > 0
        if not retx:
            self._tail_done = False  # new data: a new tail (resends never re-arm the probe)
        rec.transmissions += 1
        rec.ev = ev
        rec.prev_sent_ns = rec.sent_ns
        rec.sent_ns = now_ns
        self._tx_order += 1
        rec.tx_order = self._tx_order
        rec.later_delivered = 0
        rec.reordered_past = False
        rec.lost = False
        self.in_flight[rec.seq] = rec
        if self._retire:
            self.evset.note_sent(ev, now_ns)
        size = len(rec.payload)
        self.inflight_bytes += size
        self.plane_load[ev >> 28] += size
        flags = _FLAGS[retx][rec.opcode in _LAST_OPCODES]
        if retx:
            self.c.retransmissions += 1
        c = self.c
        c.data_packets_sent += 1
        c.data_bytes_sent += size
        evc = c.ev(ev)
        evc.data_packets_sent += 1
        evc.data_bytes_sent += size
        meta = PathMeta(ev, Ecn.ECT0, Dscp.RETX if retx else Dscp.DATA)
        out.append(
            Transmit(
                DataPacket(
                    self.peer_qp,
                    psn_of(rec.seq),
                    rec.vaddr,
                    rec.write.rkey,
                    rec.payload,
                    msg_id=rec.write.msg_id,
                    send_ts=now_ns,
                    flags=flags,
                    opcode=rec.opcode,
                    meta=meta,
                )
            )
        )

    # ---- feedback -----------------------------------------------------------------------
    def _leave_flight(self, rec: _TxRecord) -> None:
        if self.in_flight.pop(rec.seq, None) is not None:
            size = len(rec.payload)
            self.inflight_bytes -= size
            self.plane_load[rec.ev >> 28] -= size

    def _finish_packet(self, rec: _TxRecord, out: list[Action], failure: str = "") -> None:
        w = rec.write
        if failure and not w.failed:
            w.failed = failure
        w.remaining -= 1
        if w.remaining == 0:
            if w.failed:
                self.c.messages_failed += 1
            else:
                self.c.messages_completed += 1
            out.append(MessageSent(w.msg_id, not w.failed, w.failed))

    def _deliver(self, rec: _TxRecord, newly: list[_TxRecord], now_ns: int, sack: Sack | None = None) -> None:
        self._leave_flight(rec)
        # the SACK echoes the send time and EV of the copy that arrived: the earlier one
        # (Eifel's test) -- decisive where the RTT is too unsettled for the time test
        earlier_copy = sack is not None and sack.echo_ts == rec.prev_sent_ns and sack.echo_ev == rec.lost_ev
        if rec.gap_lost and (rec.lost or earlier_copy or now_ns - rec.sent_ns < (self.srtt_ns or 0) / 2):
            # the original arrived: it was reordering, not loss (still queued for resending,
            # or resent too recently for the copy to be the one acknowledged)
            self._spurious(rec.lost_ev, now_ns)
        else:
            if rec.gap_lost and rec.transmissions == 2:
                # nothing shows yet which copy arrived (the resent one may have overtaken the
                # original, or a coalesced SACK named another packet): if the other copy
                # arrives too, the receiver reports it as a duplicate and the loss is undone
                # then. (With three copies or more a duplicate proves nothing.)
                first, second = (rec.prev_sent_ns, rec.lost_ev), (rec.sent_ns, rec.ev)
                guesses = self._guesses
                guesses[first] = (rec.lost_ev, second)
                guesses[second] = (rec.lost_ev, first)
                while len(guesses) > GUESSES_MAX:
                    del guesses[next(iter(guesses))]
            self._clean_deliveries += 1
            if self.reo_mult > 1 and self._clean_deliveries >= REO_DECAY_DELIVERIES:
                self.reo_mult -= 1
                self._clean_deliveries = 0
        rec.gap_lost = False
        rec.lost = False
        rec.sacked = True
        plane = rec.ev >> 28
        newest = self._newest_sent[plane]
        if rec.sent_ns >= newest:
            self._newest_sent[plane] = rec.sent_ns
        elif rec.transmissions == 1:
            self.reo_extent = max(float(newest - rec.sent_ns), self.reo_extent * REO_EXTENT_DECAY)
        if rec.sent_ns > self.plane_ok_sent[plane]:
            self.plane_ok_sent[plane] = rec.sent_ns
            self._plane_evidence[plane] = 0
        self.c.ev(rec.ev).packets_delivered += 1
        self.c.data_bytes_delivered += len(rec.payload)
        self.evset.note_ok(rec.ev, now_ns)
        newly.append(rec)

    def _spurious(self, lost_ev: int, now_ns: int) -> None:
        """A loss declared by the gap rule or a timer was reordering after all: the reorder
        window grows a step (RACK's reo_wnd_mult), and the EVs it retired come back."""
        self.c.spurious_losses += 1
        self.reo_mult = min(self.reo_mult + 1, REO_MULT_MAX)
        self._clean_deliveries = 0
        if self._retire and self.evset.undo_loss(lost_ev, now_ns):
            self.c.ev_loss_undone += 1

    def _trim_proves_congestion(self, rec: _TxRecord, now_ns: int) -> None:
        c = self.c
        rec.gap_lost = False  # answered: neither a later SACK nor another NACK undoes it again
        c.losses_trimmed_after_guess += 1
        if self._retire and self.evset.undo_loss(rec.lost_ev, now_ns):
            c.ev_loss_undone += 1

    def _on_duplicate_report(self, s: Sack, now_ns: int) -> bool:
        """D-SACK: the packet copy named by the echoed send time and EV reached the peer
        after another copy of the same PSN. If it is a copy of a packet resent once on a
        guess, both copies arrived, so the loss was spurious: undone here, however late
        (the resent copy may have won the race). The echo must match a copy this sender
        remembers exactly, so a forged report undoes nothing; its round trip is a true RTT
        sample (an original's is the very spike that caused the guess), and its CE echo a
        true mark of the EV it took."""
        self.c.dsacks_received += 1
        guess = self._guesses.pop((s.echo_ts, s.echo_ev), None)
        if guess is None:
            return False
        lost_ev, other = guess
        self._guesses.pop(other, None)
        rtt = now_ns - s.echo_ts
        if 0 <= rtt < self.cfg.rto_max_ns:
            self._rtt_sample(rtt)
        self._spurious(lost_ev, now_ns)
        if s.ecn_echo:
            # the late copy met a marking queue on its way: the very congestion that delayed
            # it past the reorder window, and the echo names the EV it took exactly
            c = self.c
            c.ecn_echoes_received += 1
            c.ev(s.echo_ev).ecn_echoes += 1
            if self._retire:
                self.evset.ecn_echo(s.echo_ev, now_ns)
        return True

    def _drop_ack(self, reason: str) -> None:
        """A SACK/NACK the sender does not believe: counted by reason, nothing else happens."""
        self.c.acks_dropped[reason] += 1
        self.c.stray_acks += 1

    def on_sack(self, s: Sack, now_ns: int, out: list[Action]) -> None:
        """Believe a SACK only for PSNs this sender sent and has not yet seen acknowledged.

        Everything is checked before any state changes: a cumulative PSN or a bitmap bit
        beyond ``snd_nxt`` drops the whole SACK, and so does a SACK that acknowledges
        nothing new (a replay or a duplicate). The ECN echo and the RTT sample are taken
        only from the packet that triggered the SACK, recognised by its echoed EV *and*
        send time among the packets this SACK newly acknowledges.
        """
        c = self.c
        c.sacks_received += 1
        cum = unwrap(s.cum_psn, self.snd_una)
        if cum > self.snd_nxt:
            self._drop_ack("sack_cum_beyond_sent")
            return
        cum = max(cum, self.snd_una)  # an old cumulative ACK arriving late: its bitmap may be news
        bitmap = s.bitmap & ((1 << 64) - 1)
        base = unwrap(s.base_psn, self.snd_una)
        if bitmap and base + bitmap.bit_length() - 1 >= self.snd_nxt:
            self._drop_ack("sack_bitmap_beyond_sent")
            return
        records = self.records
        undone = s.duplicate and self._on_duplicate_report(s, now_ns)
        news = cum > self.snd_una
        if not news and bitmap:
            b = bitmap
            while b:
                low = b & -b
                b ^= low
                rec = records.get(base + low.bit_length() - 1)
                if rec is not None and not rec.sacked:
                    news = True
                    break
        if not news:
            if not undone:  # (a D-SACK that proved a loss spurious was news enough)
                self._drop_ack("sack_nothing_new")
            return
        newly: list[_TxRecord] = []
        for seq in range(self.snd_una, cum):
            rec = records.pop(seq, None)
            if rec is not None:
                if not rec.sacked:
                    self._deliver(rec, newly, now_ns, s)
                self._finish_packet(rec, out)
        self.snd_una = cum
        while bitmap:
            low = bitmap & -bitmap
            seq = base + low.bit_length() - 1
            bitmap ^= low
            rec = records.get(seq)
            if rec is not None and not rec.sacked:
                self._deliver(rec, newly, now_ns, s)
        self.backoff = 1
        self.retries = 0
        self._tail_done = False  # progress: the tail probe may fire again for what is left
        trigger = None
        for rec in newly:
            if rec.sent_ns == s.echo_ts and rec.ev == s.echo_ev:
                trigger = rec
                break
        if trigger is None:
            # the copy acknowledged was the earlier one of a packet resent since (a spurious
            # timeout or gap loss): its echoed send time still names that copy exactly, so the
            # sample is sound (no Karn ambiguity) -- and it is the very delay spike the RTO and
            # the reorder window must learn from, so it must not be thrown away
            for rec in newly:
                if rec.prev_sent_ns == s.echo_ts and rec.lost_ev == s.echo_ev:
                    trigger = rec
                    break
        rtt = None
        ecn = False
        if trigger is None:
            c.sack_echo_unmatched += 1  # the acks are believed; the echo (ECN, RTT) is not
        else:
            rtt = now_ns - s.echo_ts
            if 0 <= rtt < self.cfg.rto_max_ns:
                self._rtt_sample(rtt)
                plane = s.echo_ev >> 28
                ps = self.plane_srtt[plane]
                self.plane_srtt[plane] = float(rtt) if ps is None else ps + 0.125 * (rtt - ps)
            else:
                rtt = None
            ecn = s.ecn_echo
            if ecn:
                c.ecn_echoes_received += 1
                c.ev(s.echo_ev).ecn_echoes += 1
                if self._retire:
                    self.evset.ecn_echo(s.echo_ev, now_ns)
        self.cc.on_ack(sum(len(r.payload) for r in newly), rtt, ecn, now_ns)
        down = self.evset.set_peer_ports(s.port_status)
        if down:
            self.ports_down(down)
        if not self._gbn:
            for rec in newly:
                if rec.transmissions == 1 and rec.tx_order > self._rack_order:
                    self._rack_order = rec.tx_order
            self._gap_detect(newly, now_ns)
            if self._retire and newly and self.evset.planes > 1:
                self._plane_detect(newly, now_ns)
            if not self._gbn and not self.writes and self.srtt_ns is not None:
                self._rack_detect(now_ns)  # after the plane check: a dead plane is flushed whole

    # ---- whole planes -------------------------------------------------------------------
    def flush_plane(self, plane: int, cause: str) -> int:
        """Every packet in flight on ``plane`` is resent elsewhere now (its port is down,
        or the plane stopped delivering): no timer, no SACK gap needed."""
        n = 0
        for rec in [r for r in self.in_flight.values() if r.ev >> 28 == plane]:
            self._leave_flight(rec)
            rec.lost = True
            self.retx.append(rec.seq)
            n += 1
        if cause == "port":
            self.c.losses_port += n
        else:
            self.c.losses_plane += n
        return n

    def ports_down(self, bitmap: int) -> None:
        """Planes whose local or peer NIC port just went down (port-status bitmap)."""
        for plane in range(self.evset.planes):
            if bitmap >> plane & 1:
                self.flush_plane(plane, "port")

    def _plane_detect(self, newly: list[_TxRecord], now_ns: int) -> None:
        """A plane that fails silently (a T0 down, a NIC link black hole) is seen from the
        *other* planes: packets sent on them well after a packet still in flight on the
        plane were delivered, while the plane delivered nothing sent since. "Well after"
        is the plane's own smoothed RTT x 3/4 (at least the reorder window and the configured
        ``plane_guard_min_ns``, the base RTT), so a plane that is merely slower (deeper queue,
        lower rate) has a longer guard, and delay spikes shorter than a base RTT (a software
        fabric, a busy host) are never taken for a dead plane."""
        newest = max(r.sent_ns for r in newly)
        load = self.plane_load
        for plane in range(self.evset.planes):
            if not load[plane]:
                continue
            ok_sent = self.plane_ok_sent[plane]
            ps = self.plane_srtt[plane] or self.srtt_ns
            if ps is None:
                continue
            guard = max(int(ps * 3 / 4), self.reorder_window(), self.cfg.plane_guard_min_ns)
            if newest - ok_sent < guard:
                continue
            others = sum(1 for r in newly if r.ev >> 28 != plane and r.sent_ns >= ok_sent + guard)
            self._plane_evidence[plane] += others
            if self._plane_evidence[plane] < self.cfg.sack_gap_threshold:
                continue
            oldest = next((r for r in self.in_flight.values() if r.ev >> 28 == plane), None)
            if oldest is None or oldest.sent_ns <= ok_sent or newest - oldest.sent_ns < guard:
                continue
            self._plane_evidence[plane] = 0
            self.c.planes_failed += 1
            self.evset.fail_plane(plane, now_ns)
            self.flush_plane(plane, "plane")

    def _rtt_sample(self, rtt: int) -> None:
        if self.min_rtt_ns is None:
            self.min_rtt_ns = rtt
        elif rtt < self.min_rtt_ns:
            # a new floor: the slow samples seen so far sit that much further above it
            self.rtt_spread += self.min_rtt_ns - rtt
            self.min_rtt_ns = rtt
        spread = rtt - self.min_rtt_ns
        self.rtt_spread = max(float(spread), self.rtt_spread * SPREAD_DECAY)
        self.evset.tx_delay_spread = self.rtt_spread
        if self.srtt_ns is None:
            self.srtt_ns = float(rtt)
            self.rttvar_ns = rtt / 2
        else:
            self.rttvar_ns += 0.25 * (abs(self.srtt_ns - rtt) - self.rttvar_ns)
            self.srtt_ns += 0.125 * (rtt - self.srtt_ns)

    def reorder_window(self) -> int:
        """How much later a packet must have been sent than an outstanding one for its
        delivery to count against it (RACK's reordering window, adapted to jitter):
        the configured floor; SRTT/4, raised up to SRTT by spurious losses; and, once a
        spurious loss has shown reordering, half the RTT spread recently seen (max sample
        minus min, decaying), which is the one-way delay variation a jittery fabric (a
        software switch) adds."""
        window = max(self.cfg.reorder_window_ns, int(self.reo_extent * REO_EXTENT_MARGIN))
        if self.srtt_ns is not None:
            window = max(window, int(self.srtt_ns) * self.reo_mult // REO_MULT_MAX)
            if self.reo_mult > 1:  # only once reordering has been seen: it costs loss latency
                window = max(window, int(self.rtt_spread) // 2)
        return window

    def _gap_detect(self, newly: list[_TxRecord], now_ns: int) -> None:
        threshold = self.cfg.sack_gap_threshold
        # RACK-style: the reordering spraying causes scales with the RTT actually seen (a
        # software switch's queues can stretch it far beyond the configured base RTT).
        window = self.reorder_window()
        lost: list[_TxRecord] = []
        for delivered in newly:
            order = delivered.tx_order
            sent = delivered.sent_ns
            plane = delivered.ev >> 28
            for rec in self.in_flight.values():
                if rec.tx_order >= order:
                    break
                if rec.ev >> 28 != plane:
                    continue
                rec.later_delivered += 1
                if sent - rec.sent_ns >= window:
                    rec.reordered_past = True
                if rec.later_delivered >= threshold and rec.reordered_past:
                    lost.append(rec)
        for rec in lost:
            self._lose(rec, "gap", now_ns)  # no-op for a record already lost

    def _lose(self, rec: _TxRecord, cause: str, now_ns: int = 0) -> None:
        if rec.sacked or rec.lost:
            return
        self._leave_flight(rec)
        rec.lost = True
        c = self.c
        rec.lost_ev = rec.ev
        rec.gap_lost = True  # a guess (gap rule or timer) that the delivery may prove wrong
        if cause == "gap":
            c.losses_gap += 1
        else:
            c.losses_rto += 1
        c.ev(rec.ev).packets_lost += 1
        self.cc.on_loss(len(rec.payload), now_ns)
        if self._retire and not (cause == "rto" and self.srtt_ns is None):
            # (a timeout before any RTT sample says the RTT is unknown, not that a path died)
            # (judged as of when the packet left: a timer fires long after the marks it met)
            cfg = self.cfg
            if self.evset.is_hot(rec.ev, rec.sent_ns):
                # the path is queueing (marked or trimmed lately): trimming is what tells
                # congestion from failure, so its NACK, not this guess, gets the last word
                c.losses_while_hot += 1
                self.evset.lost_while_hot(rec.ev, now_ns)
            elif cfg.hot_path_heat > 0 and self._lasthop_trim_ns >= rec.sent_ns - cfg.penalty_halflife_ns:
                # the peer's last hop is trimming (incast): every path ends in that queue, so a
                # gap says it is deep, not that this path failed; no path is to blame either
                c.losses_while_hot += 1
            else:
                self.evset.retire(rec.ev, f"loss ({cause}) of psn {psn_of(rec.seq)}", now_ns)
        self.retx.append(rec.seq)

    def on_nack(self, n: Nack, now_ns: int, out: list[Action]) -> None:
        """Believe a NACK only for a PSN sent and not yet acknowledged, echoing one of our EVs.

        A trim NACK for the copy currently in flight (echoed EV = the EV it left on) resends
        it at once; one for an earlier copy (the packet was resent since) only penalises the
        echoed EV -- the EV the trimmed copy really took -- and the window. A trim NACK for
        a packet already queued for resending or acknowledged is stale and changes nothing.
        """
        c = self.c
        try:
            reason = NackReason(n.reason)
        except ValueError:
            c.malformed["nack_reason"] += 1
            return
        c.nacks_received[reason.name] += 1
        seq = unwrap(n.psn, self.snd_una)
        rec = self.records.get(seq) if self.snd_una <= seq < self.snd_nxt else None
        if rec is None or rec.sacked:
            self._drop_ack("nack_not_outstanding")
            return
        if self.evset.state(n.echo_ev) is None:
            self._drop_ack("nack_unknown_ev")
            return
        if reason in (NackReason.TRIMMED, NackReason.TRIMMED_LASTHOP):
            if reason is NackReason.TRIMMED_LASTHOP:
                self._lasthop_trim_ns = now_ns
            if rec.gap_lost and n.echo_ev == rec.lost_ev:
                # the copy the gap rule or a timer guessed lost was trimmed by a congested
                # switch: congestion, not a failed path -- the retirement it caused is undone
                # and the EV takes the trim penalty instead (a trimmed header, queued in the
                # high class, can arrive after packets sent later on an idle path made the guess)
                self._trim_proves_congestion(rec, now_ns)
                if rec.lost:  # still queued for resending: only the penalty is new
                    c.ev(n.echo_ev).trims += 1
                    if reason is NackReason.TRIMMED and self._retire:
                        self.evset.trimmed(n.echo_ev, now_ns)
            if rec.lost:
                self._drop_ack("nack_stale")
                return
            c.ev(n.echo_ev).trims += 1
            self.cc.on_trim(now_ns)
            if reason is NackReason.TRIMMED and self._retire:
                self.evset.trimmed(n.echo_ev, now_ns)
            if n.echo_ev != rec.ev:
                c.acks_dropped["nack_earlier_copy"] += 1  # penalty taken, current copy flies on
                return
            self._leave_flight(rec)
            rec.lost = True
            self.retx.appendleft(seq)  # at once, ahead of new data
        elif reason is NackReason.OUT_OF_WINDOW:
            if self._gbn:
                self.rewind(seq)
        else:  # BAD_RKEY / BAD_ADDRESS: the peer refused, complete with error
            self.records.pop(seq)
            self._leave_flight(rec)
            rec.lost = False
            self._finish_packet(rec, out, failure=reason.name)

    def rewind(self, seq: int) -> None:
        """Go-back-N: everything from ``seq`` on is resent in order."""
        seq = max(seq, self.snd_una)
        self.c.go_back_n_rewinds += 1
        for s in range(seq, self.snd_nxt):
            rec = self.records.get(s)
            if rec is not None and not rec.sacked:
                self._leave_flight(rec)
                rec.lost = True
        recs = self.records
        self.retx = deque(s for s in range(self.snd_una, self.snd_nxt) if s in recs and recs[s].lost)

    def on_timer(self, now_ns: int, out: list[Action]) -> None:
        if self.failed:
            return
        if self.stalled_since is not None and not self.in_flight:
            if now_ns >= self.stalled_since + self.rto_ns * (self.cfg.retry_cnt + 1):
                self.fail("NO_USABLE_PATH", out)
            return
        if not self._gbn and not self.writes and self.srtt_ns is not None:
            self._rack_detect(now_ns)
        tail = self._tail_at()
        if tail is not None and now_ns >= tail:
            self._tail_done = True
            late = now_ns - int(self.srtt_ns or 0) - self.reorder_window()
            for rec in [r for r in self.in_flight.values() if r.sent_ns <= late]:
                self._leave_flight(rec)
                rec.lost = True
                rec.gap_lost = True  # a guess: a late delivery makes it spurious
                rec.lost_ev = rec.ev
                self.c.losses_tail += 1
                self.retx.append(rec.seq)  # no retirement: nothing says the path failed
        rto = self.rto_ns
        expired = []
        for rec in self.in_flight.values():  # transmission order = send-time order
            if rec.sent_ns + rto > now_ns:
                break
            expired.append(rec)
        if not expired:
            return
        self.c.rto_fired += 1
        self.retries += 1
        if self.retries > self.cfg.retry_cnt:  # OCP retry count: the peer is gone
            self.fail("RETRY_EXCEEDED", out)
            return
        if not self.cfg.local_ack_timeout:
            self.backoff = min(self.backoff * 2, 64)
        self.cc.on_timeout(now_ns)
        if self._gbn:
            self.c.losses_rto += len(expired)
            self.rewind(self.snd_una)
            return
        if self.srtt_ns is None:
            # no RTT sample yet: the timer was a guess, and its expiry says the RTT is
            # unknown, not that every packet sent died. Resend the oldest one as a probe
            # (RFC 6298 resends one segment; RACK-TLP's probe elicits feedback) with the
            # timer backed off; its SACK -- or the original's -- gives the first sample.
            rec = expired[0]
            self._leave_flight(rec)
            rec.lost = True
            rec.gap_lost = True  # a guess: the original's delivery proves it spurious
            rec.lost_ev = rec.ev
            self.c.rto_probes += 1
            self.retx.append(rec.seq)
            return
        for rec in expired:
            self._lose(rec, "rto", now_ns)
