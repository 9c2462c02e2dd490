"""The receiving half of a queue pair: placement by address, SACKs, NACKs.

Each DATA packet is placed at its own RETH address after checking the rkey names a
registered region and the bytes fit inside it (else NACK BAD_RKEY / BAD_ADDRESS, counted,
nothing written; the PSN is consumed so the connection does not stall on it).

Acknowledgement policy (coalescing): one SACK per ``ack_every`` in-order packets, or
``ack_delay_ns`` after the first unacknowledged one, whichever comes first; a SACK goes
out at once for a packet that is out of order or fills a hole, a duplicate, a
retransmission, ECN-CE marked, refused, the last of a message, or one whose BTH AckReq bit
is set (the sender sets it on a burst's last packet, ``Sender.pump``: held for coalescing,
that packet's RTT sample would carry ``ack_delay_ns`` as if it were queueing, and a flow
whose window is under ``ack_every`` packets would read every sample that way).
A SACK echoes the EV, the CE mark and the send timestamp of the packet that triggered it,
and flags it as a duplicate (D-SACK) when its PSN had already arrived: the sender's proof
that a loss it guessed was reordering. A trimmed packet gets a NACK at once:
TRIMMED when it also carries CE (it was cut inside the fabric, where ECN marking is on,
and a queue above the trim threshold is above the ECN threshold), TRIMMED_LASTHOP when
not (the last hop does not mark ECN, so the cut happened there: incast at this host). A
trimmed copy of a packet already held (a replay) draws nothing.
"""

from __future__ import annotations

from typing import Final

from mrc_fabric.ev import T1_SHIFT
from mrc_host.wire.messages import (
    SACK_BITMAP_BITS,
    DataFlag,
    DataPacket,
    Ecn,
    Nack,
    NackReason,
    Opcode,
    Sack,
)

from .ack_echo import AckEchoes, SackSent
from .actions import Action, MessageReceived
from .config import TransportConfig
from .control import ControlOut
from .counters import Counters
from .evset import EvSet
from .psn import psn_of, unwrap
from .rangeset import RangeSet
from .records import PLANE_SHIFT
from .region import RegionTable
from .sack_by_seq import SackBySeq

_RETX: Final = int(DataFlag.RETRANSMISSION)
_RETX_OR_LAST: Final = int(DataFlag.RETRANSMISSION | DataFlag.LAST_OF_MESSAGE)
_LAST: Final = int(DataFlag.LAST_OF_MESSAGE)
OWD_SPREAD_DECAY: Final = 1 - 1 / 256  # per packet: the jitter estimate forgets over a few windows
OWD_FLOOR_CREEP: Final = 4096  # per packet above the floor: the floor follows clock drift, slowly
_CE: Final = int(Ecn.CE)  # compiled, ``ecn == _CE`` is a native compare


class Receiver:
    def __init__(
        self,
        cfg: TransportConfig,
        counters: Counters,
        regions: RegionTable,
        evset: EvSet,
        peer_qp: int,
        control: ControlOut,
    ) -> None:
        self.cfg = cfg
        self._retire = cfg.retires_paths  # policy switches, read per packet
        self._gbn = cfg.go_back_n
        self.counters = counters
        self.regions = regions
        self.evset = evset
        self.peer_qp = peer_qp
        self.control = control  # sends our SACKs and NACKs on our reverse EVs
        self.expected = cfg.initial_psn  # cumulative: every seq below was received
        self.out_of_order = RangeSet()  # seqs received beyond ``expected``
        self.highest = cfg.initial_psn - 1
        self.unacked = 0
        self.ack_deadline: int | None = None
        self._trigger: DataPacket | None = None
        self._pending_seqs: list[int] = []
        self._ack_ev_of_seq = SackBySeq()  # seq -> (EV, time) of its ACK
        self._msg_last_seq: dict[int, int] = {}  # seq of a WRITE's last packet -> msg_id
        self._gbn_nacked: int | None = None
        # one-way delay of DATA (arrival minus the sender's timestamp: the clocks' offset
        # cancels in the spread): its floor, and how far above it packets arrive lately
        self._owd_min: int | None = None
        self.owd_spread = 0.0
        self._spread_cap = float(cfg.rto_max_ns // 8)
        self.echoes = AckEchoes(evset, counters)  # which of our SACKs' EVs deliver

    def _note_delay(self, owd: int) -> None:
        """Track the one-way delay variation of the data (jitter), as the sender tracks the
        RTT's: a decaying maximum above the floor; the floor creeps up slowly so clock drift
        between the hosts does not pass for jitter."""
        m = self._owd_min
        if m is None or owd < m:
            self._owd_min = m = owd
        else:
            self._owd_min = m = m + (owd - m) // OWD_FLOOR_CREEP
        # (capped: a forged timestamp must not switch the reverse-path checks off for long)
        self.owd_spread = min(max(float(owd - m), self.owd_spread * OWD_SPREAD_DECAY), self._spread_cap)
        self.evset.rx_delay_spread = 2 * self.owd_spread

    def ack_lost_guard_ns(self) -> int:
        """How long after our ACK a retransmission of the same packet must arrive to say the
        ACK was lost: the minimum RTO, plus the round-trip delay variation (twice the one-way
        variation measured here), which a slow ACK may have spent in the fabric."""
        return self.cfg.rto_min_ns + int(2 * self.owd_spread)

    def deadline(self) -> int | None:
        return self.ack_deadline

    def on_timer(self, now_ns: int, out: list[Action]) -> None:
        if self.ack_deadline is not None and now_ns >= self.ack_deadline and self._trigger is not None:
            self._send_ack(self._trigger, now_ns, out)

    def on_data(self, pkt: DataPacket, now_ns: int, out: list[Action]) -> None:
        c = self.counters
        ev = pkt.meta.ev
        seq = unwrap(pkt.psn, self.expected)
        row = c.recv_row(ev)
        self.control.seen_ns[ev >> T1_SHIFT] = now_ns  # (its path carries the peer's DATA)
        row.packets += 1
        c.data_packets_received += 1
        ce = pkt.meta.ecn == _CE
        flags: int = pkt.flags  # (typed, not int(): compiled, no call into int)
        if ce:
            c.ecn_ce_received += 1
        if self._retire and pkt.ack_echo:
            self.echoes.echoed(pkt.ack_echo, now_ns)
        if pkt.trimmed:
            c.trimmed_received += 1
            if seq < self.expected or seq in self.out_of_order:
                c.duplicates_received += 1  # we hold it (a replayed trim): nothing to resend
                return
            self._nack(seq, NackReason.TRIMMED if ce else NackReason.TRIMMED_LASTHOP, ev, now_ns, out)
            return
        self._note_delay(now_ns - pkt.send_ts)
        offset = seq - self.expected
        if offset < 0 or seq in self.out_of_order:
            c.duplicates_received += 1
            if flags & _RETX and self._retire:
                # the sender never saw our ACK for this packet: the path that ACK took failed
                # -- only if that ACK left long ago: a spurious fast retransmit arrives sooner,
                # and so does one the sender's timer sent while our ACK was merely delayed by
                # jitter (the round-trip variation is about twice the one-way one seen here)
                sent = self._ack_ev_of_seq.pop(seq)
                if (
                    sent is not None
                    and now_ns - sent.sent_ns >= self.ack_lost_guard_ns()
                    and self.evset.ack_lost(sent.ev, now_ns)
                ):
                    c.reverse_ev_retired += 1
            self._send_ack(pkt, now_ns, out, duplicate=True, on_path=True)
            return
        if offset >= self.cfg.rx_window:
            c.out_of_window += 1
            self._nack(self.expected, NackReason.OUT_OF_WINDOW, ev, now_ns, out)
            return
        if self._gbn and offset > 0:
            c.out_of_order_dropped += 1
            if self._gbn_nacked != self.expected:
                self._gbn_nacked = self.expected
                self._nack(self.expected, NackReason.OUT_OF_WINDOW, ev, now_ns, out)
            return
        refused = self.regions.write(pkt.vaddr, pkt.rkey, pkt.payload)
        if refused is not None:
            c.refused_writes[refused.name] += 1
            self._nack(seq, refused, ev, now_ns, out)
        else:
            n = len(pkt.payload)
            c.data_bytes_placed += n
            row.bytes += n
            if pkt.opcode in (Opcode.WRITE_LAST, Opcode.WRITE_ONLY):
                self._msg_last_seq[seq] = pkt.msg_id
        filled_hole = bool(self.out_of_order)
        self._mark(seq, out)
        self._pending_seqs.append(seq)
        self.unacked += 1
        if (
            refused is None
            and offset == 0
            and not ce
            and not flags & _RETX_OR_LAST
            and not pkt.ack_req
            and not filled_hole
            and self.unacked < self.cfg.ack_every
        ):
            self._trigger = pkt
            if self.ack_deadline is None:
                self.ack_deadline = now_ns + self.cfg.ack_delay_ns
            return
        self._send_ack(pkt, now_ns, out, on_path=bool(flags & _LAST))

    def _mark(self, seq: int, out: list[Action]) -> None:
        held = self.out_of_order
        if seq != self.expected:
            held.add(seq)
            if seq > self.highest:
                self.highest = seq
            return
        self.expected += 1
        if held and held.first_start() == self.expected:
            self.expected = held.pop_first()[1]
        if self.expected - 1 > self.highest:
            self.highest = self.expected - 1
        if self._msg_last_seq:
            for last in sorted(s for s in self._msg_last_seq if s < self.expected):  # in posting order
                self.counters.messages_received += 1
                out.append(MessageReceived(self._msg_last_seq.pop(last)))

    def _bitmap(self, trigger_seq: int) -> tuple[int, int]:
        """The 64-PSN window to report: from the cumulative point when it fits; else one that
        always holds the packet that triggered the ACK, so a retransmission filling an old hole
        is reported instead of being resent (and its path blamed) again and again."""
        base = self.expected
        if self.highest - base >= SACK_BITMAP_BITS:
            newest = self.highest - SACK_BITMAP_BITS + 1
            base = min(newest, max(self.expected, trigger_seq - SACK_BITMAP_BITS // 2))
        bitmap = 0
        if base < self.expected:
            bitmap = (1 << (min(self.expected, base + SACK_BITMAP_BITS) - base)) - 1
        if self.out_of_order:
            bitmap |= self.out_of_order.bitmap(base, SACK_BITMAP_BITS)
        return base, bitmap

    def _send_ack(
        self,
        trigger: DataPacket,
        now_ns: int,
        out: list[Action],
        duplicate: bool = False,
        on_path: bool = False,
    ) -> None:
        """The SACK for ``trigger``; ``on_path`` (a duplicate, a message's last packet: a SACK
        whose loss costs a timeout) on the path it came by, if we have an EV there, and for a
        message's last a spare on another path (``_send_spare``)."""
        base, bitmap = self._bitmap(unwrap(trigger.psn, self.expected))
        sack = Sack(
            self.peer_qp,
            psn_of(self.expected),
            psn_of(base),
            bitmap,
            trigger.meta.ev,
            ecn_echo=trigger.meta.ecn == _CE,
            echo_ts=trigger.send_ts,
            port_status=self.control.port_status(),
            duplicate=duplicate,
        )
        path_of = trigger.meta.ev if on_path else -1
        # (a resend's answer: not on a control EV of a path the peer's DATA has not taken for a
        # base RTT -- at 2 base RTTs or the ACK-lost guard, 2-3 of 10 seeds above still timed out)
        flags: int = trigger.flags  # (typed: compiled, native; ``&`` on the IntFlag runs enum.py)
        fresh = trigger.meta.ev if flags & _RETX and self._retire else -1
        quiet = self.cfg.cc.base_rtt_ns
        ev = self.control.send(
            sack, out, trigger.meta.ev >> PLANE_SHIFT, now_ns, path_of, fresh_of=fresh, quiet_ns=quiet
        )
        self.counters.sacks_sent += 1
        if on_path and not duplicate and ev is not None and self._retire:
            self._send_spare(sack, trigger, now_ns, out, ev)
        if ev is not None:
            sent = SackSent(ev, now_ns)  # one record for every PSN this SACK answers
            if self._retire:
                self.echoes.sack_sent(trigger.send_ts, trigger.meta.ev, sent)  # (and its echo)
            by_seq = self._ack_ev_of_seq
            by_seq.set_all(self._pending_seqs, sent)
            if len(by_seq) > 4 * self.cfg.rx_window:
                by_seq.keep_from(self.expected - self.cfg.rx_window)
        self._pending_seqs.clear()
        self.unacked = 0
        self.ack_deadline = None
        self._trigger = None

    def _send_spare(
        self, sack: Sack, trigger: DataPacket, now_ns: int, out: list[Action], sent_on: int
    ) -> None:
        """A copy of a message's last SACK (sent on ``sent_on``, the path its packet came by) on
        a control EV of another path of that plane: that path may die as the SACK rides back (three of four
        T1s of both planes dead at a 2 MiB transfer's tail: alone, its loss cost the tail
        probe's round trip, 1.44 x the fault-free time). Not for every resend's SACK: that cost
        a fault-free 8 -> 1 incast 1.7 % of its time on one seed of three."""
        copy = Sack(
            self.peer_qp,
            sack.cum_psn,
            sack.base_psn,
            sack.bitmap,
            trigger.meta.ev,
            ecn_echo=sack.ecn_echo,
            echo_ts=trigger.send_ts,
            port_status=sack.port_status,
        )
        if self.control.send(copy, out, sent_on >> PLANE_SHIFT, now_ns, avoid=sent_on) is not None:
            self.counters.sacks_sent += 1

    def _nack(self, seq: int, reason: NackReason, ev: int, now_ns: int, out: list[Action]) -> None:
        self.counters.nacks_sent[reason.name] += 1
        self.control.send(Nack(self.peer_qp, psn_of(seq), reason, ev), out, ev >> PLANE_SHIFT, now_ns)
