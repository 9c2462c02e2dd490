"""The sending half of a queue pair: segmentation, spraying, and the owners of what follows.

RDMA WRITEs are cut into MTU-sized DATA packets; every packet carries its own remote
address (RETH), so it can go on any EV and arrive in any order. The sender pumps packets
as the congestion window and the EV set allow (resends first). Each piece of its state has
one owner, which the sender asks and whose results it applies (as aioquic's connection calls
its recovery): the writes not yet cut (writes.py), every packet's life from its first copy to
the cumulative ACK (sent.py, through packet_state.py's table), what the peer's SACKs and
NACKs prove (acks.py) and what that does (ack_effects.py), which packets in flight are lost,
and when (recovery.py), what a loss says of its path (blame.py), and what a loss does
(loss_response.py), and, under a congestion control that uses receiver credits, what the
receiver granted (credit_tx.py). In MRC mode a guessed loss means the path failed: the EV that lost the
packet is retired at once (ASSUMED_BAD) and the packet resent on another EV; when the packet
turns out to have arrived, the loss was spurious and the retirement is undone. In
single-path mode the sender goes back N from the first missing PSN, as RoCE does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mrc_host.wire.messages import (
    Credit,
    DataFlag,
    DataPacket,
    Dscp,
    Ecn,
    Nack,
    Opcode,
    PathMeta,
    Sack,
)

from .ack_echo import EchoQueue
from .ack_effects import AckEffects
from .acks import AckBook
from .actions import Action, ConnectionFailed, MessageSent, Transmit
from .blame import LossBlame
from .cc_base import create_cc
from .config import Mode, TransportConfig
from .counters import Counters, SentRow
from .credit_tx import SenderCredit
from .evset import EvSet
from .loss_response import LossResponse
from .plane_passing import PlanePassing
from .plane_queues import PlaneQueueWeights
from .psn import PSN_HALF, psn_of, unwrap
from .records import Segment, TxRecord
from .recovery import Recovery
from .sent import SentPackets
from .writes import WriteQueue, packet_done

# flags built once: IntFlag arithmetic per packet costs more than the rest of _transmit. Four
# names, not a table: compiled, indexing a Final tuple of tuples builds the tuples anew each time
_NEW: Final = DataFlag.NONE
_NEW_LAST: Final = DataFlag.LAST_OF_MESSAGE
_RETX: Final = DataFlag.RETRANSMISSION
_RETX_LAST: Final = DataFlag.RETRANSMISSION | DataFlag.LAST_OF_MESSAGE
_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)


class Sender:
    """The sending half of one queue pair: the owners of its state, and the pump."""

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
        self._twins = cfg.retires_paths and cfg.twin_tail_resends
        self.evset = evset
        self.counters = counters
        self.peer_qp = peer_qp
        self.congestion = create_cc(cfg)
        self.packets = SentPackets(cfg, evset.plane_load)  # the packets' life (sent.py)
        # which are lost, and when
        self.recovery = Recovery(cfg, evset.planes, self.packets, evset.paths.t1_count)
        self.writes = WriteQueue()  # writes with packets not yet cut
        self.blame = LossBlame(cfg, evset, counters, self.recovery, self.packets)  # a guess's path
        self.failed = ""  # why the connection ended in error ("" while it works)
        self.stalled_since: int | None = None  # work waiting, no EV to carry it, since then
        self._app_limited = False  # the last fill ran out of data with room in the window
        self.max_span = min(cfg.rx_window, PSN_HALF) - 1
        self.acks = AckBook(cfg, counters, self.packets, evset)  # what SACKs/NACKs prove
        self.effects = AckEffects(cfg, counters, self.packets, self.recovery, evset)  # ... applied
        self.losses = LossResponse(  # what a loss does
            cfg, counters, self.packets, self.recovery, self.blame, evset, self.congestion
        )
        self.echo = EchoQueue()  # which SACK our next DATA echoes (ack_echo.py)
        # receiver credit: every new packet needs some (credit_tx.py; None: the CC uses none)
        self.credit = SenderCredit(cfg) if self.congestion.uses_credits else None
        # each plane's share of the rotation while a queue stands on it (None: not weighed)
        self.queues = PlaneQueueWeights(evset.planes) if cfg.weigh_queues and evset.planes > 1 else None
        # which planes the rotation passes over, and when new data waits for them (plane_passing.py)
        self.passing = PlanePassing(
            self.recovery.nic, self.recovery.rtt, self.queues, evset, self.writes, self.congestion
        )

    # ---- what others read ---------------------------------------------------------------
    @property
    def snd_una(self) -> int:
        """The oldest sequence number not cumulatively acknowledged."""
        return self.packets.una

    @property
    def snd_nxt(self) -> int:
        """The next new sequence number."""
        return self.packets.nxt

    @property
    def srtt_ns(self) -> float | None:
        return self.recovery.rtt.srtt_ns

    @property
    def min_rtt_ns(self) -> int | None:
        return self.recovery.rtt.min_rtt_ns

    @property
    def rto_ns(self) -> int:
        return self.recovery.rto_ns()

    @property
    def inflight_bytes(self) -> int:
        return self.packets.inflight_bytes

    @property
    def next_msg_id(self) -> int:
        """The id the next ``post_write`` returns (a caller can place a write by its id)."""
        return self.writes.next_msg_id

    # ---- API ----------------------------------------------------------------------------
    def post_write(
        self,
        data: Segment | bytearray | Sequence[Segment],
        vaddr: int,
        rkey: int,
        out: list[Action] | None = None,
    ) -> int:
        """Queue an RDMA WRITE of ``data`` (bytes, a byte view or a bytearray, or a gather
        list of them, read in order): its message id. Read-only views are not copied
        (``records.held``)."""
        msg_id = self.writes.new_id()
        if self.failed:  # the connection ended in error: refuse at once, same reason
            self.counters.messages_failed += 1
            if out is not None:
                out.append(MessageSent(msg_id, False, self.failed))
            return msg_id
        if self.credit is not None and self.idle():
            self.credit.restart()  # an idle sender speculates again (credit_tx.py)
        self.writes.post(msg_id, data, vaddr, rkey, self.cfg.mtu)
        self.counters.messages_posted += 1
        return msg_id

    def deadline(self) -> int | None:
        at = self.blame.deadline(self.recovery.deadline(self.blame.sending(bool(self.writes.queue))))
        if at is None and self.stalled_since is not None:
            at = self.stalled_since + self.recovery.rto_ns() * (self.cfg.retry_cnt + 1)
        credit = self.credit
        if credit is not None:
            ask = credit.deadline()  # (a wait for credit asks again)
            if ask is not None and (at is None or ask < at):
                at = ask
        return at

    def idle(self) -> bool:
        return not self.packets.records and not self.writes.queue

    def fail(self, reason: str, out: list[Action]) -> None:
        """Error completion: every write not yet completed ends with ``reason``; the
        connection sends nothing more (OCP: retry count exceeded, no usable path)."""
        if self.failed:
            return
        self.failed = reason
        self.counters.connection_failures[reason] += 1
        pending = {rec.write.msg_id: rec.write for rec in self.packets.records.values()}
        pending.update((w.msg_id, w) for w in self.writes.pending())
        for w in pending.values():
            self.counters.messages_failed += 1
            out.append(MessageSent(w.msg_id, False, reason))
        self.packets.failed()
        self.writes.clear()
        self.stalled_since = None
        out.append(ConnectionFailed(reason))

    def abandon(self, msg_id: int) -> int | None:
        """Give up a posted write at once: its bytes not yet sent are dropped; its packets sent
        and not yet acknowledged keep their PSNs (the receiver's cumulative ACK must pass them)
        but are resent, if lost, as empty fillers of message 0, which complete no message. No
        MessageSent follows. Returns the sequence number after its last packet (all of it is
        acknowledged once ``snd_una`` reaches it), ``snd_una`` if none was sent, None if unknown."""
        target, end = self.packets.empty(msg_id, self.writes.withdraw(msg_id))
        if target is None:
            return None
        self.counters.messages_abandoned += 1
        return end

    def ports_down(self, bitmap: int) -> None:
        """Planes whose local or peer NIC port just went down (port-status bitmap)."""
        self.losses.ports_down(bitmap)

    def departed(self, psn: int, send_ts: int, at_ns: int, plane: int = -1, port_gbps: float = 0.0) -> bool:
        """Our DATA packet ``psn``, sent at ``send_ts``, left ``plane``'s NIC port at ``at_ns``
        (``Endpoint.departed``): True when the NIC's backlog bound held packets back that may
        go now."""
        packets = self.packets
        rec = packets.records.get(unwrap(psn, packets.una))
        ok = rec is not None and rec.sent_ns == send_ts  # (not a copy resent since)
        nic = self.recovery.nic
        slow = nic.slow
        ready = nic.on_departed(rec if ok else None, at_ns, plane, port_gbps)
        if nic.slow != slow:
            self._weigh()
        return ready and not self.failed

    def _weigh(self) -> None:
        """The rotation's plane weights, from the NIC's port rates and the planes' queues."""
        nic = self.recovery.nic
        queues = self.queues
        held = queues.weights if queues is not None and queues.held else None
        self.evset.weigh_planes(nic.port_gbps if nic.slow else [], held)

    # ---- transmission -------------------------------------------------------------------
    def pump(self, now_ns: int, out: list[Action]) -> None:
        """Send whatever the window and the EV set allow right now: resends first.

        The last DATA packet sent asks for its SACK at once (BTH AckReq): nothing more leaves
        until one comes back. Not when this pump sent fewer than ``ack_every`` packets and
        ``ack_each_below`` or more are in flight: the next arrival releases a held SACK anyway,
        and asking there makes the ACK clock one SACK per packet for good (each SACK frees one
        packet, whose AckReq brings the next), twice the SACK work; held, it goes back to
        ``ack_every``."""
        if self.failed:
            return
        start = len(out)
        self._fill(now_ns, out)
        last: DataPacket | None = None
        sent = 0
        for k in range(start, len(out)):
            a = out[k]
            if isinstance(a, Transmit) and isinstance(a.msg, DataPacket):
                last = a.msg
                sent += 1
        if last is not None and (
            sent >= self.cfg.ack_every or len(self.packets.in_flight) < self.cfg.ack_each_below
        ):
            last.ack_req = True

    def _fill(self, now_ns: int, out: list[Action]) -> None:
        cwnd = self.congestion.cwnd
        packets = self.packets
        writes = self.writes
        nic = self.recovery.nic
        credit = self.credit
        while not nic.full():  # (``nic_backlog``: more go as they leave: ``departed``)
            rec = packets.next_resend()
            if rec is not None:
                if packets.inflight_bytes and packets.inflight_bytes + len(rec.payload) > cwnd:
                    return
                ev = self._choose_ev(rec.ev, rec.sent_ns, now_ns)
                if ev is None:
                    self._stall(now_ns)
                    return
                packets.take_resend()
                self._transmit(rec, ev, now_ns, out)
                if self._twins and not writes.queue:
                    self._twin(rec, cwnd, now_ns, out)
                continue
            if not writes.queue or packets.nxt - packets.una >= self.max_span:
                if not writes.queue and packets.inflight_bytes + self.cfg.mtu <= max(cwnd, self.cfg.mtu):
                    self._app_limited = True  # out of data with room to send: the CC is told
                    self.congestion.on_app_limited(now_ns)
                return
            if self._app_limited:  # new data ends the app-limited span now
                self._app_limited = False
                self.congestion.on_app_limited(now_ns)
            if credit is not None and not credit.may_send():
                self.congestion.on_app_limited(now_ns)  # (the receiver, not the network, holds it back)
                return  # (a CREDIT lets more go)
            if self.passing.full():
                return  # (more go as the slow ports' backlogs leave or the held planes drain)
            w = writes.head()
            size = min(self.cfg.mtu, w.length - w.offset)
            if packets.inflight_bytes and packets.inflight_bytes + size > cwnd:
                return
            ev = self._choose_ev(None, -1, now_ns)
            if ev is None:
                self._stall(now_ns)
                return
            self._transmit(writes.cut(w, size, packets), ev, now_ns, out)

    def _stall(self, now_ns: int) -> None:
        """Work waits, no EV can carry it (all DENIED, ports down): ``retry_cnt`` + 1 RTOs of it fail us."""
        if self.stalled_since is None:
            self.stalled_since = now_ns

    def _choose_ev(self, exclude: int | None, since: int, now_ns: int) -> int | None:
        recovery = self.recovery
        silent = self._retire and not self.writes.queue and (recovery.tail_done or recovery.retries)
        ev = self.evset.fresh_ev(since, -1, exclude) if silent else None  # (a tail gone silent: fresh_ev)
        if ev is None:  # (a resend: not on a path whose loss the ev_min_active floor holds)
            avoid = exclude if self.cfg.mode is not Mode.SINGLE_PATH else None
            passed, late = self.passing.passed()
            ev = self.blame.unheld_ev(self.evset.next_data_ev(avoid, now_ns, passed, late), exclude, now_ns)
        if ev is None and self._retire:
            ev = self.evset.last_resort_ev(exclude)
            if ev is not None:
                self.counters.last_resort_sends += 1
        return ev

    def _twin(self, rec: TxRecord, cwnd: float, now_ns: int, out: list[Action]) -> None:
        """At the tail a resend goes twice, the second on another plane (``EvTable.fresh_ev``) if the
        window has room. Not before an RTT sample, nor where ``LossBlame.twin_ev`` sees congestion."""
        if not rec.gap_lost or self.recovery.rtt.srtt_ns is None:
            return
        if self.packets.inflight_bytes + len(rec.payload) > cwnd:
            return
        ev = self.blame.twin_ev(rec, now_ns)
        if ev is None:
            return
        self.packets.twinned(rec, ev)
        self.recovery.on_twin(rec, ev)
        self.acks.note_twins(rec)
        self.evset.note_sent(ev, now_ns)
        self.counters.tail_twins += 1
        self._emit(rec, ev, True, now_ns, out)

    def _transmit(self, rec: TxRecord, ev: int, now_ns: int, out: list[Action]) -> None:
        self.stalled_since = None
        retx = rec.transmissions > 0
        idle = self.packets.sent(rec, ev, now_ns)
        self.recovery.on_sent(rec, now_ns, idle)
        if self._retire:
            self.evset.note_sent(ev, now_ns)
        if retx:
            self.counters.retransmissions += 1
            self.counters.retx_causes[rec.retx_cause or "unattributed"] += 1  # the kinds add up
        rec.ev_row = self._emit(rec, ev, retx, now_ns, out)

    def _emit(self, rec: TxRecord, ev: int, retx: bool, now_ns: int, out: list[Action]) -> SentRow:
        """The DATA packet carrying ``rec`` on ``ev``, counted: the counters' row of ``ev``."""
        size = len(rec.payload)
        if self.credit is not None and not retx:
            self.credit.spend(size)  # (a resend's credit was spent by the copy it replaces)
        counters = self.counters
        counters.data_packets_sent += 1
        counters.data_bytes_sent += size
        row = counters.sent_on(ev, size)
        out.append(Transmit(data_packet(rec, ev, retx, now_ns, self.peer_qp, self.echo.next_echo(ev))))
        return row

    # ---- what the peer's SACKs and NACKs proved (acks.py), applied -----------------------
    def on_sack(self, s: Sack, now_ns: int, out: list[Action]) -> None:
        """Apply what a SACK proved: completions up to its cumulative point, the window, the
        peer's port status, and the losses its evidence reveals (gap rule, a dead plane, RACK)."""
        # it arrived, believed or not: the peer learns its EV works
        self.echo.sack_received(s.echo_ts, s.echo_ev, s.meta.ev)
        packets = self.packets
        proof = self.acks.on_sack(s, packets.una, packets.nxt, now_ns)
        if proof is None:
            return
        queues = self.queues  # (the planes' queues time them: ``PlaneQueueWeights``)
        nic = self.recovery.nic
        if (
            proof.undone
            and queues is not None
            and queues.heard_late_copy(proof.echo_ev, proof.undo_rtt, now_ns, nic.slow)
        ):
            self._weigh()
        if not self.effects.apply_sack(proof, now_ns):
            return
        for done in packets.passed(proof.cum):
            self._finish_packet(done, out)
        self.recovery.on_progress(now_ns, bool(proof.newly))
        if queues is not None and queues.heard_first_copies(proof.newly, now_ns, nic.slow):
            self._weigh()
        self.congestion.on_ack(proof.acked_bytes, proof.rtt, proof.ecn, now_ns, proof.port_wait)
        down = self.evset.set_peer_ports(s.port_status)
        if down:
            self.losses.ports_down(down)
        if not self._gbn:
            weighed = queues.held if queues is not None else 0  # (planes its queue holds back)
            self.losses.shown(proof, now_ns, bool(self.writes.queue), weighed)

    def on_nack(self, n: Nack, now_ns: int, out: list[Action]) -> None:
        """Apply what a NACK proved: a trimmed copy resent at once (ahead of new data), a write
        the peer refused completed in error, or (single path) go back N."""
        packets = self.packets
        proof = self.acks.on_nack(n, packets.una, packets.nxt, now_ns)
        if proof is None:
            return
        self.effects.apply_nack(proof, now_ns)
        rec = proof.rec
        if self.credit is not None:
            self.credit.heard()  # (the receiver answered: speculation is over)
        if proof.lasthop:
            self.blame.lasthop_trimmed(now_ns)
            if self.credit is not None and proof.resend:
                self.credit.spend(len(rec.payload))  # (the receiver's port was full: charged again)
        if proof.window:
            self.congestion.on_trim(now_ns, proof.lasthop)
        if proof.resend:
            packets.known_lost(rec, "trim_nack", first=True)
        elif proof.out_of_window and self._gbn:
            self.losses.rewind(rec.seq, "go_back_n")
        elif proof.refused:
            packets.refused(rec)
            self._finish_packet(rec, out, failure=proof.refused)

    # ---- receiver credits (credit_tx.py) --------------------------------------------------
    def on_credit(self, msg: Credit, now_ns: int) -> None:
        """The receiver's CREDIT: its grant so far (ignored by a sender that uses no credits)."""
        self.counters.credits_received += 1
        if self.credit is not None:
            if not self.credit.on_credit(msg.granted, now_ns):
                self.counters.malformed["credit_beyond_request"] += 1
            self.counters.credit_bytes_dropped = self.credit.dropped

    def credit_request(self, now_ns: int) -> int | None:
        """The target of the CREDIT_REQUEST to send now (not wrapped), if any: it grew with
        what is left to send, or a wait for credit ran long (``SenderCredit.request``). The
        caller sends it and reports it with :meth:`credit_request_sent`."""
        credit = self.credit
        if credit is None or self.failed:
            return None
        return credit.request(self.writes.unsent(), now_ns)

    def credit_request_sent(self, target: int, now_ns: int) -> None:
        """The CREDIT_REQUEST for ``target`` left: booked (the retry's clock) and counted."""
        assert self.credit is not None
        self.credit.sent(target, now_ns)
        self.counters.credit_requests_sent += 1
        self.counters.credit_request_retries = self.credit.retries

    def _finish_packet(self, rec: TxRecord, out: list[Action], failure: str = "") -> None:
        done = packet_done(rec.write, self.counters, failure)
        if done is not None:
            out.append(done)

    # ---- timers -------------------------------------------------------------------------
    def on_timer(self, now_ns: int, out: list[Action]) -> None:
        if self.failed:
            return
        recovery = self.recovery
        recovery.nic.hold(self.packets.in_flight, now_ns)  # (what waits at the NIC is not late)
        if self.stalled_since is not None and not self.packets.in_flight:
            if now_ns >= self.stalled_since + recovery.rto_ns() * (self.cfg.retry_cnt + 1):
                self.fail("NO_USABLE_PATH", out)
            return
        if self.losses.on_timer(now_ns, bool(self.writes.queue)):
            self.fail("RETRY_EXCEEDED", out)


def data_packet(rec: TxRecord, ev: int, retx: bool, now_ns: int, peer_qp: int, echo: int) -> DataPacket:
    """The DATA packet carrying ``rec``'s payload on ``ev`` (a resend if ``retx``), echoing ``echo``."""
    last = rec.opcode in _LAST_OPCODES
    flags = (_RETX_LAST if retx else _NEW_LAST) if last else (_RETX if retx else _NEW)
    return DataPacket(
        peer_qp,
        psn_of(rec.seq),
        rec.vaddr,
        rec.write.rkey,
        rec.payload,
        msg_id=rec.write.msg_id,
        send_ts=now_ns,
        flags=flags,
        opcode=rec.opcode,
        meta=PathMeta(ev, Ecn.ECT0, Dscp.RETX if retx else Dscp.DATA),
        ack_req=False,
        ack_echo=echo,
    )
