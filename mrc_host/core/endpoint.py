"""One end of an MRC queue pair: sender + receiver + EV set, driven h11-style.

Nothing here reads a clock, opens a socket, starts a thread or draws randomness
except from the seeded ``random.Random`` it is given. Inputs are messages (or frames),
timer expiries and operator calls, each with the current time ``now_ns``; every input
returns the list of actions to carry out (``Transmit``, ``MessageSent``,
``MessageReceived``, ``EvStateChanged``) ending with one ``SetTimer``.

Both directions share one EV set: DATA, PROBEs and PROBE_ACKs, SACKs and NACKs all leave
on this endpoint's own EVs, so the receiver's reverse EVs follow the same retire/probe
rules as the sender's forward ones.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Final

from mrc_fabric.ev import ENTROPY_BITS, ENTROPY_MASK, ev_plane, ev_t1
from mrc_host.wire.messages import (
    CREDIT_MASK,
    DATA_OPCODES,
    PSN_MASK,
    Credit,
    CreditRequest,
    DataPacket,
    Dscp,
    Ecn,
    MalformedPacket,
    Message,
    Nack,
    Probe,
    ProbeAck,
    Sack,
)
from mrc_host.wire.virtual_payload import VirtualPayload

from .actions import Action, PathHealthChanged, SetTimer, Transmit
from .config import TransportConfig
from .control import ControlOut
from .counters import MARK_CONTROL, Counters
from .credit_rx import CreditGrants, NicCredits, nic_credits_for
from .ev_draw import PathSpace
from .ev_probe import EvProber
from .ev_state import EvEvent, EvState
from .evset import EvSet
from .path_health import NicPathHealth
from .plane_delays import NicPlaneDelays
from .receiver import Receiver
from .records import Segment
from .region import MemoryRegion, RegionTable
from .sender import Sender

MAX_PAYLOAD: Final = 9000
U32: Final = 0xFFFFFFFF


def _u64(value: int) -> bool:
    """``0 <= value < 2**64``, by a shift: compiled, a comparison with 2**64 - 1 (no small int)
    takes the big-integer path, three times per packet."""
    return value >= 0 and not value >> 64


def _check(msg: object) -> str | None:
    """Why a decoded message cannot be processed (a counter key), or None."""
    # a tuple, not ``A | B``: compiled (mypyc) it is a few type compares, the union would be
    # built anew on every call
    if not isinstance(msg, (DataPacket, Sack, Nack, Probe, ProbeAck, Credit, CreditRequest)):
        return "unknown_message"
    if not 0 <= msg.qp <= PSN_MASK:
        return "bad_qp"
    if not 0 <= msg.meta.ev <= U32:
        return "bad_ev"
    if isinstance(msg, DataPacket):
        if not 0 <= msg.psn <= PSN_MASK:
            return "bad_psn"
        if msg.opcode not in DATA_OPCODES:
            return "unknown_opcode"
        payload = msg.payload  # (bytes first: compiled, the tuple would be built per packet)
        if not isinstance(payload, bytes) and not isinstance(
            payload, (bytearray, memoryview, VirtualPayload)
        ):
            return "bad_payload"
        if len(msg.payload) > MAX_PAYLOAD:
            return "oversized"
        if not (_u64(msg.vaddr) and 0 <= msg.rkey <= U32 and _u64(msg.send_ts)):
            return "bad_reth"
    elif isinstance(msg, Sack):
        if not (0 <= msg.cum_psn <= PSN_MASK and 0 <= msg.base_psn <= PSN_MASK):
            return "bad_psn"
        if not (_u64(msg.bitmap) and 0 <= msg.echo_ev <= U32 and _u64(msg.echo_ts)):
            return "bad_sack"
        if not 0 <= msg.port_status <= 0xFFFF:
            return "bad_sack"
    elif isinstance(msg, Nack):
        if not 0 <= msg.psn <= PSN_MASK or not 0 <= msg.echo_ev <= U32:
            return "bad_psn"
    elif isinstance(msg, Credit):
        if not 0 <= msg.granted <= CREDIT_MASK:
            return "bad_credit"
    elif isinstance(msg, CreditRequest):
        if not 0 <= msg.target <= CREDIT_MASK:
            return "bad_credit"
    elif not (0 <= msg.probe_id <= U32 and 0 <= msg.ev_under_test <= U32) or (
        isinstance(msg, ProbeAck) and not 0 <= msg.port_status <= 0xFFFF
    ):
        return "bad_probe"
    return None


class Endpoint:
    """A queue pair endpoint. ``local_qp`` is the QP packets to us carry; ``peer_qp`` ours carry."""

    def __init__(
        self,
        *,
        local_qp: int,
        peer_qp: int,
        config: TransportConfig,
        paths: PathSpace,
        rng: random.Random,
        port_status: int | None = None,
        nic: NicPathHealth | None = None,
        nic_group: int | None = None,
        credit_line: NicCredits | None = None,
    ) -> None:
        """``nic``: the path verdicts of the NIC this endpoint is on, shared with its other
        endpoints (``path_health.py``); ``nic_group``: the peer's T0 (any key naming it; None:
        under our own T0, no T1 crossed: nothing to share). Used in MRC mode with
        ``experimental.share_path_health``. ``credit_line``: that NIC's receiver-credit line,
        shared by its endpoints (``credit_rx.py``; None: one of its own, made when a sender
        first asks)."""
        self.cfg = config
        self._retire = config.retires_paths  # policy switches, read per packet
        self._gbn = config.go_back_n
        self.local_qp = local_qp
        self.peer_qp = peer_qp
        self.counters = Counters()
        self.evset = EvSet(config, paths, rng, port_status)
        self.prober = EvProber(self.evset)
        self.regions = RegionTable()
        self._entropy = rng.getrandbits(ENTROPY_BITS)  # entropy bits of our probe replies
        self._now = 0  # time of the input being processed (for callbacks that need it)
        self._closed = False  # the failed connection's probes and timers are dropped
        self.sender = Sender(config, self.evset, self.counters, peer_qp)
        self.control = ControlOut(self.evset, self.counters, config.retires_paths)
        self.receiver = Receiver(config, self.counters, self.regions, self.evset, peer_qp, self.control)
        self._credit_line = credit_line
        self.grants: CreditGrants | None = None  # our grants to the peer (at its first CREDIT_REQUEST)
        self._nic: NicPathHealth | None = None
        if nic is not None:
            self.share_path_health(nic, nic_group)

    def share_path_health(self, nic: NicPathHealth, group: int | None) -> None:
        """Share path verdicts with the NIC's other endpoints (``path_health.py``), in ``group``
        (the peer's T0; None: under our own T0, nothing to share). Only in MRC mode with
        ``experimental.share_path_health``; call before the first input."""
        cfg = self.cfg
        if group is not None and cfg.experimental.share_path_health and cfg.retires_paths:
            self._nic = nic
            self.evset.join_nic(nic, group)

    def share_plane_delays(self, nic: NicPlaneDelays) -> None:
        """Time a plane this connection has no sample of by how slow the NIC's other
        connections found it (``plane_delays.py``), and report ours to them; unless the
        config's ``share_plane_delays`` is off. Call before the first input."""
        if self.cfg.share_plane_delays:
            self.sender.recovery.rtt.share(nic)

    def share_credit_line(self, line: NicCredits) -> None:
        """Grant receiver credits on ``line``, the NIC's, shared with its other endpoints
        (``credit_rx.py``); call before the first input."""
        if self.grants is None:
            self._credit_line = line

    # ---- operator / application API -----------------------------------------------------
    def register_region(self, base: int, length: int, rkey: int, lazy: bool = False) -> MemoryRegion:
        """``lazy``: the region's memory is allocated whole when the first write lands in it."""
        return self.regions.register(base, length, rkey, lazy)

    def post_write(
        self, data: Segment | bytearray | Sequence[Segment], remote_vaddr: int, rkey: int, now_ns: int
    ) -> tuple[int, list[Action]]:
        """Post an RDMA WRITE of ``data``: bytes, a byte view or a bytearray, or a gather list
        of them (``records.held`` says which are kept uncopied): (its message id, actions)."""
        out: list[Action] = []
        msg_id = self.sender.post_write(data, remote_vaddr, rkey, out)
        return msg_id, self._finish(now_ns, out)

    def abandon(self, msg_id: int, now_ns: int) -> tuple[int | None, list[Action]]:
        """Stop a posted write at once (``Sender.abandon``): (its end sequence, actions)."""
        end = self.sender.abandon(msg_id)
        return end, self._finish(now_ns, [])

    def deny(self, ev: int, now_ns: int) -> list[Action]:
        self.evset.deny(ev)
        return self._finish(now_ns, [])

    def allow(self, ev: int, now_ns: int) -> list[Action]:
        self.evset.allow(ev)
        return self._finish(now_ns, [])

    def set_port_status(self, bitmap: int, now_ns: int) -> list[Action]:
        """This host's NIC port-status bitmap (bit p: plane p's port is up)."""
        down = self.evset.set_local_ports(bitmap)
        if down:
            self.sender.ports_down(down)
        return self._finish(now_ns, [])

    # ---- inputs ---------------------------------------------------------------------------
    def receive_frame(self, frame: bytes, now_ns: int) -> list[Action]:
        """Bytes entry point: decode with the wire codec, count refusals by reason."""
        from mrc_host.wire.codec import decode  # imported here: the codec is optional for the sim

        try:
            msg = decode(frame)
        except MalformedPacket as exc:
            self.counters.malformed[exc.reason] += 1
            return self._finish(now_ns, [])
        return self.receive(msg, now_ns)

    def receive(self, msg: Message, now_ns: int) -> list[Action]:
        self._now = now_ns
        out: list[Action] = []
        self._take(msg, now_ns, out)
        return self._finish(now_ns, out)

    def receive_many(self, msgs: list[Message], start: int, now_ns: int) -> tuple[int, list[Action]]:
        """``receive`` for the messages from ``msgs[start]`` on, read together (a batch of an
        agent's packet ring), all at ``now_ns``: the same actions as one ``receive`` per
        message in turn (the sender pumps after each), with the end-of-event work done once,
        after the last (EV state changes after the frames, one ``SetTimer``: the last call's).
        It stops after a message that completes, fails or delivers a WRITE or fails the
        connection, so that its caller hands that on before the next message, as it would
        have. Returns the index after the last message taken, and the actions."""
        self._now = now_ns
        out: list[Action] = []
        c = self.counters
        sender = self.sender
        ends = c.messages_completed + c.messages_failed + c.messages_received
        i = start
        n = len(msgs)
        while i < n:
            self._take(msgs[i], now_ns, out)
            i += 1
            sender.pump(now_ns, out)
            if sender.failed or c.messages_completed + c.messages_failed + c.messages_received != ends:
                break
        return i, self._end(now_ns, out)

    def _take(self, msg: Message, now_ns: int, out: list[Action]) -> None:
        """One message's own work (``receive`` without the end-of-event work)."""
        reason = _check(msg)
        if reason is not None:
            self.counters.malformed[reason] += 1
            return
        if msg.qp != self.local_qp:
            self.counters.wrong_qp += 1
            return
        if self.finished:
            self.counters.malformed["after_error"] += 1  # the connection is finished
            return
        if isinstance(msg, DataPacket):
            self.receiver.on_data(msg, now_ns, out)
        elif isinstance(msg, Sack):
            self.evset.heard_on(msg.meta.ev, now_ns)  # (its path delivers: ``EvTable.fresh_ev``)
            self.sender.on_sack(msg, now_ns, out)
        elif isinstance(msg, Nack):
            self.sender.on_nack(msg, now_ns, out)
        elif isinstance(msg, Credit):
            self.sender.on_credit(msg, now_ns)
        elif isinstance(msg, CreditRequest):
            self._credit_grants().on_request(msg, now_ns, out)
        elif isinstance(msg, Probe):
            self.counters.probes_received += 1
            ack = ProbeAck(
                self.peer_qp,
                msg.probe_id,
                msg.ev_under_test,
                echo_ts=msg.send_ts,
                port_status=self.evset.local_ports,
            )
            if self._send_probe_ack(ack, out) is not None:
                self.counters.probe_acks_sent += 1
        else:
            self.counters.probe_acks_received += 1
            if self.prober.probe_acked(msg.ev_under_test, msg.probe_id, now_ns) is not None:
                if 0 < msg.echo_ts <= now_ns:
                    self.prober.note_probe_rtt(now_ns - msg.echo_ts)
                down = self.evset.set_peer_ports(msg.port_status)  # only from a reply we asked for
                if down:
                    self.sender.ports_down(down)

    @property
    def finished(self) -> bool:
        """The connection ended in error (``Sender.failed``): it sends nothing more, not
        even probes, and asks for no timer."""
        return bool(self.sender.failed)

    def _close(self) -> None:
        """Drop what would keep a finished connection busy: probes, liveness, timers."""
        ev = self.evset
        ev.next_liveness_ns = None
        for e in ev.entries.values():
            e.probe_id = None
            e.live_probe_id = None
            e.late_probe_id = None
            e.in_use = False
        ev.retired.clear()
        ev.probes_changed()

    def on_timer(self, now_ns: int) -> list[Action]:
        self._now = now_ns
        out: list[Action] = []
        if self.finished:
            return self._finish(now_ns, out)
        self.receiver.on_timer(now_ns, out)
        if self.grants is not None:
            self.grants.on_timer(now_ns, out)
        self.sender.on_timer(now_ns, out)
        if self._retire:
            due = self.prober.due_probes(now_ns) + self.prober.liveness_tick(now_ns)
            for ev, probe_id in due:
                probe = Probe(self.peer_qp, probe_id, ev, send_ts=now_ns)
                probe.meta.ev = ev
                probe.meta.dscp = Dscp.CONTROL
                self.counters.probes_sent += 1
                self.counters.mark(ev, MARK_CONTROL)
                out.append(Transmit(probe))
        return self._finish(now_ns, out)

    def departed(self, psn: int, send_ts: int, at_ns: int, plane: int = -1, port_gbps: float = 0.0) -> bool:
        """Our DATA packet ``psn``, sent at ``send_ts``, left the NIC's port of ``plane`` (-1:
        not said) at ``at_ns``, the port running at ``port_gbps`` (0: not said; a port slower
        than the others holds only its part of ``nic_backlog``) -- a NIC that reports it:
        ``TransportConfig.nic_departures``. No actions, no timer change: it only moves a
        packet's departure later than the deadlines already armed assumed. True when
        ``nic_backlog`` held packets back that may go now: call ``nic_ready``."""
        return self.sender.departed(psn, send_ts, at_ns, plane, port_gbps)

    def nic_ready(self, now_ns: int) -> list[Action]:
        """The NIC has room for more of our packets (``departed`` said so): send them."""
        self._now = now_ns
        out: list[Action] = []
        self.sender.pump(now_ns, out)
        return self._end(now_ns, out) if out else out

    def on_path_health(self, now_ns: int) -> list[Action]:
        """The NIC's shared path verdicts changed (another endpoint's ``PathHealthChanged``):
        apply them. Nothing to do (an empty list, no timer change) when this endpoint does not
        share them, has read this version already, or has failed."""
        nic = self._nic
        if nic is None or nic.version == self.evset.nic_version or self.finished:
            return []
        self._now = now_ns
        return self._finish(now_ns, [])

    def next_deadline(self) -> int | None:
        """The earliest of the sender's, the receiver's and the next probe's deadline (after
        every event: written without temporary lists); None once the connection failed."""
        if self.sender.failed:
            return None
        best = self.sender.deadline()
        t = self.receiver.deadline()
        if t is not None and (best is None or t < best):
            best = t
        if self.grants is not None:
            t = self.grants.deadline()
            if t is not None and (best is None or t < best):
                best = t
        if self._retire:
            t = self.prober.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
        return best

    # ---- internals ------------------------------------------------------------------------
    def _send_control(self, msg: Message, out: list[Action], plane: int | None = None) -> int | None:
        return self.control.send(msg, out, plane, self._now)

    def _send_probe_ack(self, ack: ProbeAck, out: list[Action]) -> int | None:
        """A PROBE_ACK goes back on the reverse of the path under test (same plane, same T1:
        the prober chose it by choosing the EV it tests), so a probe answers for one round
        trip on one path and never depends on one of our rotating control EVs, which may
        be dead. Falls back to a control EV when that path is not ours to use."""
        tested = ack.ev_under_test
        plane, t1 = ev_plane(tested), ev_t1(tested)
        paths = self.evset.paths
        if plane < paths.planes and t1 < paths.t1_count and self.evset.plane_up(plane):
            ev = (tested & ~ENTROPY_MASK) | (self._entropy & ENTROPY_MASK)
            if self.evset.state(ev) is not EvState.DENIED:
                ack.meta.ev = ev
                ack.meta.dscp = Dscp.CONTROL
                ack.meta.ecn = Ecn.NOT_ECT
                self.counters.mark(ev, MARK_CONTROL)
                out.append(Transmit(ack))
                return ev
        return self._send_control(ack, out, plane if plane < paths.planes else None)

    def _credit_grants(self) -> CreditGrants:
        """Our grants to the peer's sender (made at its first CREDIT_REQUEST), on the NIC's
        credit line, or on one of our own."""
        grants = self.grants
        if grants is None:
            line = self._credit_line or nic_credits_for(self.cfg, self.evset.paths.planes)
            grants = self.grants = CreditGrants(self.cfg, line, self.control, self.peer_qp, self.counters)
        return grants

    def _finish(self, now_ns: int, out: list[Action]) -> list[Action]:
        self._now = now_ns
        nic = self._nic
        if nic is not None and nic.version != self.evset.nic_version and not self.finished:
            dead = self.evset.nic_sync(now_ns)
            if dead:
                self.counters.nic_paths_dead += len(dead)
                # their packets in flight: resent once overdue, from the timer (``LossBlame.nic_dead``)
                self.sender.blame.nic_dead(dead, now_ns)
        self.sender.pump(now_ns, out)
        return self._end(now_ns, out)

    def _end(self, now_ns: int, out: list[Action]) -> list[Action]:
        """The end-of-event work: credit asked for, EV changes tallied and reported, a failed
        connection closed, the next timer."""
        sender = self.sender
        if sender.credit is not None:
            target = sender.credit_request(now_ns)
            if target is not None:
                ask = CreditRequest(self.peer_qp, target & CREDIT_MASK)
                if self._send_control(ask, out) is not None:
                    sender.credit_request_sent(target, now_ns)
        changes = self.evset.take_changes()
        if changes:
            c = self.counters
            for ch in changes:  # EV counters are tallied here, from the transitions themselves
                ev_event = ch.event
                if ev_event is EvEvent.PROBE_TIMEOUT:
                    c.probe_timeouts += 1
                elif ev_event is EvEvent.PROBES_ANSWERED:
                    c.ev_restored += 1
                elif ch.new is EvState.ASSUMED_BAD:
                    c.ev_retired += 1
                    if ev_event is EvEvent.LOSS:
                        c.ev_retired_by_loss += 1
                elif ch.new is EvState.SKIP and ch.old is EvState.GOOD:
                    c.ev_skipped += 1
            out.extend(changes)
        self.counters.ev_retire_floor_holds = self.evset.floor_holds
        if self.evset.nic_changed:
            self.evset.nic_changed = False
            out.append(PathHealthChanged())
        if self.sender.failed and not self._closed:
            self._closed = True
            self._close()
        deadline = self.next_deadline()
        if deadline is not None and deadline < now_ns:
            deadline = now_ns
        out.append(SetTimer(deadline))
        return out
