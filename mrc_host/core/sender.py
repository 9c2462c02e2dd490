"""The sending half of a queue pair: segmentation, spraying, and what a loss does.

RDMA WRITEs are cut into MTU-sized DATA packets; every packet carries its own remote
address (RETH), so it can go on any EV and arrive in any order. The sender pumps packets
as the congestion window and the EV set allow (resends first), keeps one record per packet
until it is cumulatively acknowledged, and runs the timers. What the peer's SACKs and NACKs
prove is worked out in ``acks.py`` and applied here; which packets in flight are lost, and
when, in ``recovery.py``. A loss guessed there means the path failed: in MRC mode the EV that lost
the packet is retired at once (ASSUMED_BAD) and the packet is resent on another EV; when
the packet turns out to have arrived, the loss was spurious and the retirement is undone.
In single-path mode the sender goes back N from the first missing PSN, as RoCE does.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Final

from mrc_host.wire.messages import (
    DataFlag,
    DataPacket,
    Dscp,
    Ecn,
    Nack,
    Opcode,
    PathMeta,
    Sack,
)
from mrc_host.wire.virtual_payload import VirtualPayload

from .ack_echo import EchoQueue
from .acks import AckBook, SackProof
from .actions import Action, ConnectionFailed, MessageSent, Transmit
from .blame import LossBlame
from .cc_base import create_cc
from .config import Mode, TransportConfig
from .counters import MARK_LOST, Counters, SentRow
from .evset import EvSet
from .psn import PSN_HALF, psn_of
from .records import PendingWrite, Segment, TxRecord, held
from .recovery import Recovery, rto_dead_planes

# flags built once: IntFlag arithmetic per packet costs more than the rest of _transmit. Four
# names, not a table: compiled, indexing a Final tuple of tuples builds the tuples anew each time
_NEW: Final = DataFlag.NONE
_NEW_LAST: Final = DataFlag.LAST_OF_MESSAGE
_RETX: Final = DataFlag.RETRANSMISSION
_RETX_LAST: Final = DataFlag.RETRANSMISSION | DataFlag.LAST_OF_MESSAGE
_LAST_OPCODES: Final = (Opcode.WRITE_LAST, Opcode.WRITE_ONLY)
# A Sender's two queues start as these shared empty stand-ins (never added to: maxlen 0), its own
# made at the first entry (``_own_retx``, ``_own_writes``): an endpoint that only receives, or sends
# without loss, makes no deque for them (~0.4 MB of the 128-host permutation)
_NO_RETX: Final[deque[int]] = deque(maxlen=0)
_NO_WRITES: Final[deque[PendingWrite]] = deque(maxlen=0)


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
        self._twins = cfg.retires_paths and cfg.twin_tail_resends
        self.evset = evset
        self.c = counters
        self.peer_qp = peer_qp
        self.cc = create_cc(cfg)
        self.recovery = Recovery(cfg, evset.planes, evset.plane_load)
        self.snd_una = cfg.initial_psn  # oldest seq not cumulatively acknowledged
        self.snd_nxt = cfg.initial_psn  # next new seq
        self.records: dict[int, TxRecord] = {}
        self.retx: deque[int] = _NO_RETX  # resends due
        self.writes: deque[PendingWrite] = _NO_WRITES  # writes with packets not yet segmented
        self._next_msg_id = 1
        self.blame = LossBlame(cfg, evset, counters, self.recovery)  # what a loss guess does to the EV set
        self.failed = ""  # why the connection ended in error ("" while it works)
        self.stalled_since: int | None = None  # work waiting, no EV to carry it, since then
        self._app_limited = False  # the last fill ran out of data with room in the window
        self.max_span = min(cfg.rx_window, PSN_HALF) - 1
        self.acks = AckBook(cfg, counters, self.recovery, evset, self.records)  # what SACKs/NACKs prove
        self.echo = EchoQueue()  # which SACK our next DATA echoes (ack_echo.py)

    # ---- what others read ---------------------------------------------------------------
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
        return self.recovery.inflight_bytes

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
        (``held``)."""
        msg_id = self._next_msg_id
        self._next_msg_id = (self._next_msg_id + 1) & 0xFFFFFFFF or 1
        if self.failed:  # the connection ended in error: refuse at once, same reason
            self.c.messages_failed += 1
            if out is not None:
                out.append(MessageSent(msg_id, False, self.failed))
            return msg_id
        if isinstance(data, (bytes, bytearray, memoryview, VirtualPayload)):
            segments = [held(data)]
        else:
            segments = [held(d) for d in data]
        w = PendingWrite(msg_id, [s for s in segments if len(s)], vaddr, rkey)
        w.remaining = max(1, -(-w.length // self.cfg.mtu))
        _own_writes(self).append(w)
        self.c.messages_posted += 1
        return msg_id

    def deadline(self) -> int | None:
        at = self.blame.deadline(self.recovery.deadline(self.blame.sending(bool(self.writes))))
        if at is not None:
            return at
        if self.stalled_since is not None:
            return self.stalled_since + self.recovery.rto_ns() * (self.cfg.retry_cnt + 1)
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
        pending.update((w.msg_id, w) for w in self.writes)
        for w in pending.values():
            self.c.messages_failed += 1
            out.append(MessageSent(w.msg_id, False, reason))
        for rec in list(self.recovery.in_flight.values()):
            self.recovery.remove(rec)
        self.records.clear()
        self.writes.clear()
        self.retx.clear()
        self.stalled_since = None
        out.append(ConnectionFailed(reason))

    @property
    def next_msg_id(self) -> int:
        """The id the next ``post_write`` returns (a caller can place a write by its id)."""
        return self._next_msg_id

    def abandon(self, msg_id: int) -> int | None:
        """Give up a posted write at once: its bytes not yet sent are dropped; its packets sent
        and not yet acknowledged keep their PSNs (the receiver's cumulative ACK must pass them)
        but are resent, if lost, as empty fillers of message 0, which complete no message. No
        MessageSent follows. Returns the sequence number after its last packet (all of it is
        acknowledged once ``snd_una`` reaches it), ``snd_una`` if none was sent, None if unknown."""
        target = next((w for w in self.writes if w.msg_id == msg_id), None)
        if target is not None:
            self.writes.remove(target)
        end = self.snd_una
        filler: PendingWrite | None = None
        flight = self.recovery
        for rec in self.records.values():
            if rec.write.msg_id != msg_id or (target is not None and rec.write is not target):
                continue
            target = rec.write
            if filler is None:
                filler = PendingWrite(0, [], 0, target.rkey, remaining=1 << 62)  # never completes
            end = max(end, rec.seq + 1)
            rec.write = filler
            rec.opcode = Opcode.WRITE_MIDDLE
            flight.shed(rec)  # its bytes leave the window's count now
            rec.payload = b""
        if target is None:
            return None
        self.c.messages_abandoned += 1
        return end

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
            sent >= self.cfg.ack_every or len(self.recovery.in_flight) < self.cfg.ack_each_below
        ):
            last.ack_req = True

    def _fill(self, now_ns: int, out: list[Action]) -> None:
        cwnd = self.cc.cwnd
        recovery = self.recovery
        while not recovery.nic.full():  # (``nic_backlog``: more go as they leave: ``departed``)
            if self.retx:
                rec = self.records.get(self.retx[0])
                if rec is None or rec.sacked or not rec.lost:
                    self.retx.popleft()
                    continue
                if recovery.inflight_bytes and recovery.inflight_bytes + len(rec.payload) > cwnd:
                    return
                ev = self._choose_ev(rec.ev, rec.sent_ns)
                if ev is None:
                    self._stall(now_ns)
                    return
                self.retx.popleft()
                self._transmit(rec, ev, now_ns, out)
                if self._twins and not self.writes:
                    self._twin(rec, cwnd, now_ns, out)
                continue
            if not self.writes or self.snd_nxt - self.snd_una >= self.max_span:
                if not self.writes and recovery.inflight_bytes + self.cfg.mtu <= max(cwnd, self.cfg.mtu):
                    self._app_limited = True  # out of data with room to send: the CC is told
                    self.cc.on_app_limited(now_ns)
                return
            if self._app_limited:  # new data ends the app-limited span now
                self._app_limited = False
                self.cc.on_app_limited(now_ns)
            w = self.writes[0]
            size = min(self.cfg.mtu, w.length - w.offset)
            if recovery.inflight_bytes and recovery.inflight_bytes + size > cwnd:
                return
            ev = self._choose_ev(exclude=None)
            if ev is None:
                self._stall(now_ns)
                return
            self._transmit(self._segment(w, size), ev, now_ns, out)

    def _segment(self, w: PendingWrite, size: int) -> TxRecord:
        """The next packet of ``w`` (``size`` payload bytes), recorded under the next PSN."""
        first = w.offset == 0
        last = w.offset + size >= w.length
        opcode = (
            (Opcode.WRITE_ONLY if last else Opcode.WRITE_FIRST)
            if first
            else (Opcode.WRITE_LAST if last else Opcode.WRITE_MIDDLE)
        )
        vaddr = w.vaddr + w.offset
        rec = TxRecord(self.snd_nxt, w, vaddr, w.take(size), opcode)
        if last:
            self.writes.popleft()
        self.records[rec.seq] = rec
        self.snd_nxt += 1
        return rec

    def _stall(self, now_ns: int) -> None:
        """Work waits, no EV can carry it (all DENIED, ports down): ``retry_cnt`` + 1 RTOs of it fail us."""
        if self.stalled_since is None:
            self.stalled_since = now_ns

    def _choose_ev(self, exclude: int | None, since: int = -1) -> int | None:
        silent = self._retire and not self.writes and (self.recovery.tail_done or self.recovery.retries)
        ev = self.evset.fresh_ev(since, -1, exclude) if silent else None  # (a tail gone silent: fresh_ev)
        if ev is None:  # (a resend: not on a path whose loss the ev_min_active floor holds)
            avoid = exclude if self.cfg.mode is not Mode.SINGLE_PATH else None
            ev = self.blame.unheld_ev(self.evset.next_data_ev(avoid), exclude)
        if ev is None and self._retire:
            ev = self.evset.last_resort_ev(exclude)
            if ev is not None:
                self.c.last_resort_sends += 1
        return ev

    def _twin(self, rec: TxRecord, cwnd: float, now_ns: int, out: list[Action]) -> None:
        """At the tail a resend goes twice, the second on another plane (``EvTable.fresh_ev``) if the
        window has room. Not before an RTT sample, nor where ``LossBlame.twin_ev`` sees congestion."""
        recovery = self.recovery
        if not rec.gap_lost or recovery.rtt.srtt_ns is None:
            return
        if recovery.inflight_bytes + len(rec.payload) > cwnd:
            return
        ev = self.blame.twin_ev(rec, now_ns)
        if ev is None:
            return
        recovery.on_twin(rec, ev)
        self.acks.note_twins(rec)
        self.evset.note_sent(ev, now_ns)
        self.c.tail_twins += 1
        self._emit(rec, ev, True, now_ns, out)

    def _transmit(self, rec: TxRecord, ev: int, now_ns: int, out: list[Action]) -> None:
        self.stalled_since = None
        retx = rec.transmissions > 0
        self.recovery.on_sent(rec, ev, now_ns)
        if self._retire:
            self.evset.note_sent(ev, now_ns)
        if retx:
            _count_resend(self.c, rec)
        rec.ev_row = self._emit(rec, ev, retx, now_ns, out)

    def _emit(self, rec: TxRecord, ev: int, retx: bool, now_ns: int, out: list[Action]) -> SentRow:
        """The DATA packet carrying ``rec`` on ``ev``, counted: the counters' row of ``ev``."""
        size = len(rec.payload)
        self.c.data_packets_sent += 1
        self.c.data_bytes_sent += size
        row = self.c.sent_on(ev, size)
        out.append(Transmit(data_packet(rec, ev, retx, now_ns, self.peer_qp, self.echo.next_echo(ev))))
        return row

    # ---- what the peer's SACKs and NACKs proved (acks.py), applied -----------------------
    def on_sack(self, s: Sack, now_ns: int, out: list[Action]) -> None:
        """Apply what a SACK proved: completions up to its cumulative point, the window, the
        peer's port status, and the losses its evidence reveals (gap rule, a dead plane, RACK)."""
        # it arrived, believed or not: the peer learns its EV works
        self.echo.sack_received(s.echo_ts, s.echo_ev, s.meta.ev)
        proof = self.acks.on_sack(s, self.snd_una, self.snd_nxt, now_ns)
        if proof is None:
            return
        records = self.records
        for seq in range(self.snd_una, proof.cum):
            if (done := records.get(seq)) is not None:  # (get and del: native; ``pop(k, None)`` is not)
                del records[seq]
                self._finish_packet(done, out)
        self.snd_una = proof.cum
        recovery = self.recovery
        recovery.on_progress(now_ns, bool(proof.newly))
        self.cc.on_ack(proof.acked_bytes, proof.rtt, proof.ecn, now_ns, proof.port_wait)
        down = self.evset.set_peer_ports(s.port_status)
        if down:
            self.ports_down(down)
        if not self._gbn:
            self._losses_shown(proof, now_ns)

    def _losses_shown(self, proof: SackProof, now_ns: int) -> None:
        recovery = self.recovery
        recovery.note_rack(proof.evidence)
        for rec in recovery.gap_losses(proof.evidence, now_ns):
            self.lose(rec, "gap", now_ns)  # no-op for a record already lost
        if self._retire and self.evset.planes > 1:
            for plane in recovery.dead_planes(proof.newly, now_ns):
                self.c.planes_failed += 1
                self.evset.fail_plane(plane, now_ns)
                self.flush_plane(plane, "plane")
        # after the plane check: a dead plane is flushed whole
        for rec in recovery.rack_losses(now_ns, self.blame.sending(bool(self.writes))):
            self.lose(rec, "gap", now_ns)
        self._recheck(now_ns)

    def on_nack(self, n: Nack, now_ns: int, out: list[Action]) -> None:
        """Apply what a NACK proved: a trimmed copy resent at once (ahead of new data), a write
        the peer refused completed in error, or (single path) go back N."""
        proof = self.acks.on_nack(n, self.snd_una, self.snd_nxt, now_ns)
        if proof is None:
            return
        rec = proof.rec
        if proof.lasthop:
            self.blame.lasthop_trimmed(now_ns)
        if proof.window:
            self.cc.on_trim(now_ns, proof.lasthop)
        if proof.resend:
            self.recovery.remove(rec)
            _queued(rec, "trim_nack")
            _own_retx(self).appendleft(rec.seq)
        elif proof.out_of_window and self._gbn:
            self.rewind(rec.seq, "go_back_n")
        elif proof.refused:
            self.records.pop(rec.seq)
            self.recovery.remove(rec)
            rec.lost = False
            self._finish_packet(rec, out, failure=proof.refused)

    def _finish_packet(self, rec: TxRecord, out: list[Action], failure: str = "") -> None:
        done = packet_done(rec.write, self.c, failure)
        if done is not None:
            out.append(done)

    # ---- losses -------------------------------------------------------------------------
    def flush_plane(self, plane: int, cause: str) -> int:
        """Every packet in flight on ``plane`` is resent elsewhere now (its port is down,
        or the plane stopped delivering): no timer, no SACK gap needed."""
        n = 0
        guess = cause != "port"  # a port-status report is a fact; a silent plane is inferred
        for rec in self.recovery.on_plane(plane):
            # a guess: its delivery after all proves the plane stalled, not failed (undo_loss)
            self._requeue(rec, guess, "port_down" if cause == "port" else "plane_dead")
            n += 1
        if cause == "port":
            self.c.losses_port += n
        else:
            self.c.losses_plane += n
        return n

    def _requeue(self, rec: TxRecord, guess: bool, cause: str) -> None:
        """``rec`` leaves the flight for the retransmit queue (``guess``: a loss its delivery
        may yet prove spurious; ``cause``: the loss kind its resend counts under)."""
        self.recovery.remove(rec)
        _queued(rec, cause)
        if guess:
            rec.gap_lost = True
            rec.lost_ev = rec.ev
        _own_retx(self).append(rec.seq)

    def ports_down(self, bitmap: int) -> None:
        """Planes whose local or peer NIC port just went down (port-status bitmap)."""
        for plane in range(self.evset.planes):
            if bitmap >> plane & 1:
                self.flush_plane(plane, "port")

    def lose(self, rec: TxRecord, cause: str, now_ns: int = 0) -> None:
        if rec.sacked or rec.lost:
            return
        self._requeue(rec, True, "gap" if cause == "gap" else "timeout")  # a guess a delivery may prove wrong
        c = self.c
        if cause == "gap":
            c.losses_gap += 1
        else:
            c.losses_rto += 1
        c.mark(rec.ev, MARK_LOST)
        self.cc.on_loss(len(rec.payload), now_ns)
        if self._retire and cause != "rto":  # (the RTO blamed its path already: _blame_suspects)
            self.blame.blame(rec, cause, now_ns)

    def _recheck(self, now_ns: int, stranded: bool = False) -> None:
        """Excused loss guesses judged again: overdue packets on a path they retire go again now."""
        for rec in self.blame.recheck(now_ns, stranded):
            self.c.losses_path += 1
            self._requeue(rec, True, "path")

    def rewind(self, seq: int, cause: str) -> None:
        """Go-back-N: everything from ``seq`` on is resent in order (counted under ``cause``)."""
        seq = max(seq, self.snd_una)
        self.c.go_back_n_rewinds += 1
        for s in range(seq, self.snd_nxt):
            rec = self.records.get(s)
            if rec is not None and not rec.sacked:
                self.recovery.remove(rec)
                _queued(rec, cause)
        recs = self.records
        self.retx = deque(s for s in range(self.snd_una, self.snd_nxt) if s in recs and recs[s].lost)

    def on_timer(self, now_ns: int, out: list[Action]) -> None:
        if self.failed:
            return
        recovery = self.recovery
        if self.stalled_since is not None and not recovery.in_flight:
            if now_ns >= self.stalled_since + recovery.rto_ns() * (self.cfg.retry_cnt + 1):
                self.fail("NO_USABLE_PATH", out)
            return
        sending = self.blame.sending(bool(self.writes))
        for rec in recovery.rack_losses(now_ns, sending):
            self.lose(rec, "gap", now_ns)
        tail = recovery.tail_at(sending)
        if tail is not None and now_ns >= tail:
            for rec in recovery.tail_losses(now_ns):
                self._requeue(rec, True, "tail_probe")
                self.blame.probed(rec, bool(self.writes) and self._retire, now_ns)
        suspects = recovery.suspects(now_ns)
        self._recheck(now_ns, stranded=bool(suspects))  # (before the RTO retires more)
        _blame_suspects(self, suspects, now_ns)
        expired = recovery.expired(now_ns)
        if expired:
            self._on_rto(expired, now_ns, out)

    def _on_rto(self, expired: list[TxRecord], now_ns: int, out: list[Action]) -> None:
        self.c.rto_fired += 1
        self.recovery.on_rto()
        if self.recovery.retries > self.cfg.retry_cnt:  # OCP retry count: the peer is gone
            self.fail("RETRY_EXCEEDED", out)
            return
        self.cc.on_timeout(now_ns)
        if self._gbn:
            self.c.losses_rto += len(expired)
            self.rewind(self.snd_una, "timeout")
            return
        if self.recovery.rtt.srtt_ns is None:
            # no RTT sample yet: the timer was a guess, and its expiry says the RTT is
            # unknown, not that every packet sent died. Resend the oldest one as a probe
            # (RFC 6298 resends one segment; RACK-TLP's probe elicits feedback) with the
            # timer backed off; its SACK -- or the original's -- gives the first sample.
            self.c.rto_probes += 1
            self._requeue(expired[0], True, "timeout_probe")  # a guess: its delivery proves it spurious
            return
        for rec in expired:
            self.lose(rec, "rto", now_ns)


def _blame_suspects(s: Sender, suspects: list[TxRecord], now_ns: int) -> None:
    """The RTO ran out on ``suspects`` (``Recovery.suspects``): their paths are blamed now, the
    packets resent only a slack later (``rto_slack``); one that arrives meanwhile undoes the
    blame (``AckBook._deliver``). Not before any RTT sample: a timeout then says the RTT is
    unknown, not that a path died."""
    if s._retire and s.recovery.rtt.srtt_ns is not None:
        for rec in suspects:
            s.blame.blame(rec, "rto", now_ns)
        for plane in rto_dead_planes(s.recovery, suspects, now_ns):  # (a plane's paths not yet blamed go too)
            s.c.planes_failed += 1
            s.evset.fail_plane(plane, now_ns)
            s.flush_plane(plane, "plane")


def _queued(rec: TxRecord, cause: str) -> None:
    """``rec`` waits in the retransmit queue, to be resent (and counted) for ``cause``, a loss
    kind of ``RETX_CAUSES``: the last one to queue it names it."""
    rec.lost = True
    rec.retx_cause = cause


def _count_resend(c: Counters, rec: TxRecord) -> None:
    """One more retransmission, counted under the loss kind that queued it as well: the kinds
    sum to ``retransmissions`` (a transfer's summary prints both)."""
    c.retransmissions += 1
    c.retx_causes[rec.retx_cause or "unattributed"] += 1


def _own_retx(s: Sender) -> deque[int]:
    """``s``'s retransmit queue, made at its first resend (the Sender's own helper: outside the
    class for its size)."""
    if s.retx is _NO_RETX:
        s.retx = deque()
    return s.retx


def _own_writes(s: Sender) -> deque[PendingWrite]:
    """``s``'s queue of writes, made at its first write."""
    if s.writes is _NO_WRITES:
        s.writes = deque()
    return s.writes


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


def packet_done(w: PendingWrite, c: Counters, failure: str = "") -> MessageSent | None:
    """One more packet of ``w`` is acknowledged (or refused: ``failure``): its completion,
    once it was the last."""
    if failure and not w.failed:
        w.failed = failure
    w.remaining -= 1
    if w.remaining:
        return None
    if w.failed:
        c.messages_failed += 1
    else:
        c.messages_completed += 1
    return MessageSent(w.msg_id, not w.failed, w.failed)
