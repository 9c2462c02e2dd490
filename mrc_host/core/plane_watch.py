"""Planes that stop delivering altogether (a T0 down, a NIC link black hole), seen from the
other planes' deliveries (``dead_planes``, on every SACK) or from the RTO (``rto_dead_planes``):
whole planes are flushed and retired at once, where the per-packet rules would find their
packets one by one.

The watch keeps, per plane, the send time of the newest packet it delivered, and the
deliveries elsewhere of packets sent well after it (its evidence); the sender's recovery
(recovery.py) tells it of each delivery (``delivered``) and of a return from idle
(``resume``), and the sender fails the planes it returns.
"""

from __future__ import annotations

from .config import TransportConfig
from .nic_clock import NicClock
from .records import PATH_SHIFT, PLANE_SHIFT, TxRecord
from .reorder import ReorderWindow
from .rtt import RttEstimator
from .sent import SentPackets
from .service_gap import widened_gap


class PlaneWatch:
    """Which planes of one sender have gone silent while the others deliver."""

    def __init__(
        self,
        cfg: TransportConfig,
        planes: int,
        packets: SentPackets,
        rtt: RttEstimator,
        reorder: ReorderWindow,
        nic: NicClock,
        t1_count: int = 1,
    ) -> None:
        self.cfg = cfg
        self.planes = planes
        # paths per plane: a plane is judged failed only with two of them silent (``silent_path``)
        self.t1_count = t1_count
        self.packets = packets  # (read: the packets in flight, per plane)
        self.rtt = rtt
        self.reorder = reorder
        self.departures = cfg.nic_departures  # (times from when packets left the NIC)
        # (read: how much later a slow NIC port's first packets may come, ``unheard_lag``)
        self.nic = nic
        # send time of the newest packet each plane delivered
        self.ok_sent = [-1] * planes
        self._evidence = [0] * planes  # later deliveries elsewhere since it last delivered
        # when each plane last delivered (the SACK's arrival), and the longest wait lately
        # between two of its deliveries while it had packets queued (its service gap: a queue
        # drained at the plane's own rate delivers at about that spacing)
        self.delivered_at = [0] * planes
        self.service_gap = [0.0] * planes
        # per plane, its latest delivery's send time (``ok_sent``) when one of its paths was
        # named silent (``one_path_silent``): silent again with nothing delivered since, the
        # plane is (-2: none)
        self._path_named = [-2] * planes
        # when the connection last came back from idle (nothing in flight for an RTO): a plane
        # that has delivered nothing sent since is judged as one that never delivered
        self.resumed_ns = 0

    def resume(self, now_ns: int) -> None:
        """The connection came back from idle now (TCP's restart after idle)."""
        self.resumed_ns = now_ns

    def delivered(self, plane: int, sent_ns: int, now_ns: int) -> None:
        """A copy sent on ``plane`` at ``sent_ns`` (when it left the NIC, with departures
        reported) was delivered, its SACK arriving at ``now_ns``: the plane is alive as of
        then. A copy that had left before the plane's previous delivery arrived waited behind
        it, so the time between the two is one sample of the plane's service gap
        (``widened_gap``)."""
        if sent_ns > self.ok_sent[plane]:
            self.ok_sent[plane] = sent_ns
            self._evidence[plane] = 0
        last = self.delivered_at[plane]
        if now_ns > last:
            self.service_gap[plane] = widened_gap(self.service_gap[plane], last, sent_ns, now_ns)
            self.delivered_at[plane] = now_ns

    def delivering(self, plane: int, now_ns: int, window: int) -> bool:
        """``plane`` delivered lately, within what its own rate explains: its latest delivery
        is no older than twice its service gap plus the reorder window. A plane slower than
        the others (a lower rate, a deeper queue) keeps delivering at its own spacing while the
        queue in front of its oldest packet grows past its latest round trip; one that died
        stops. Traced in the fuzzer's slow-plane draws: 113 of 115 silent-plane verdicts fell
        on planes still delivering, each flushing a plane of packets that then arrived. A slow
        NIC port's plane whose spacing is not measured yet spaces its deliveries by at least
        its ``port_lag`` (an all-to-all's connections queue behind each other at a peer's
        10 Gb/s port: two of twelve failed the plane 16 us after its first delivery)."""
        gap = self.service_gap[plane]
        if not gap and self.delivered_at[plane]:
            gap = self.nic.port_lag(plane)  # (0.0 but for a slow port)
        later = self.rtt.heard_later(plane)
        if later > gap:
            gap = later
        return now_ns - self.delivered_at[plane] < 2 * gap + window

    def unheard_lag(self, plane: int) -> float:
        """How much later than the fast planes' round trip ``plane``'s packets may come while
        it has not been heard of at all (no sample, no acknowledgement): its NIC port's
        ``port_lag``. 0.0 once heard of: its own delays say it then."""
        lag = self.nic.port_lag(plane)
        if not lag:
            return 0.0  # (not a slow port: the common case, before the estimator is read)
        return 0.0 if self.rtt.heard_of(plane) else lag

    def _overdue(self, plane: int, oldest_sent: int, now_ns: int, window: int) -> bool:
        """``plane``'s oldest packet in flight, sent at ``oldest_sent``, is later than the plane
        itself explains: older than the plane's latest delay plus ``window`` (as RACK's timer
        asks: a plane only queued deeper has not failed), and the plane no longer
        ``delivering`` at its own pace. Both silent-plane rules ask this last."""
        delay = self.rtt.plane_delay(plane)
        heard = self.rtt.heard_instead(plane, window)
        if heard > delay:
            delay = heard
        delay += self.unheard_lag(plane)
        if now_ns - oldest_sent < delay + window:
            return False
        return not self.delivering(plane, now_ns, window)

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
        dep = self.departures
        newest = -1
        for r in newly:  # (a loop: compiled, max() over a generator is a generic call)
            t = r.left_ns if dep else r.sent_ns
            if t > newest:
                newest = t
        load = self.packets.plane_load
        dead: list[int] = []
        # a plane's deliveries may lag another's by the longest stall seen lately (a software
        # switch descheduled for milliseconds): that is no failure. The part of the guard that
        # is the same for every plane, worked out once (this runs on every SACK); a plane that
        # delivered within it is passed over before its own part is worked out
        window = self.reorder.window()
        floor = max(window, self.cfg.plane_guard_min_ns)
        floor = max(floor, int(self.rtt.stall))
        for plane in range(self.planes):
            ok_sent = self.ok_sent[plane]
            if not load[plane] or newest - ok_sent < floor:
                continue
            ps = self.rtt.of_plane(plane)
            if not ps:
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
                if self.rtt.plane_srtt[plane] is None:
                    srtt = ps  # (never sampled: as slow as the NIC's other connections found it)
                guard = max(guard, int(srtt + var + self.unheard_lag(plane)))
            if newest - ok_sent < guard:
                continue
            others = sum(
                1
                for r in newly
                if r.ev >> PLANE_SHIFT != plane and (r.left_ns if dep else r.sent_ns) >= ok_sent + guard
            )
            self._evidence[plane] += others
            if self._evidence[plane] < self.cfg.sack_gap_threshold:
                continue
            oldest = next((r for r in self.packets.in_flight.values() if r.ev >> PLANE_SHIFT == plane), None)
            if oldest is None or oldest.at_nic:
                continue
            oldest_sent = oldest.left_ns if dep else oldest.sent_ns
            if oldest_sent <= ok_sent or newest - oldest_sent < guard:
                continue
            if not self._overdue(plane, oldest_sent, now_ns, window):
                continue  # slower, not silent
            self._evidence[plane] = 0
            dead.append(plane)
        return dead

    def rto_dead_planes(self, suspects: list[TxRecord], now_ns: int) -> list[int]:
        """Planes the RTO shows dead (``Recovery.suspects``, found for the sender to fail): two
        paths or more of the plane went silent past the RTO, while the other planes delivered
        ``sack_gap_threshold`` packets sent well after the plane's last delivery (the evidence
        ``dead_planes`` counts), the plane delivered nothing sent since its oldest packet left, and
        that packet is overdue by its plane's latest delay (as there). ``dead_planes`` runs only on
        a SACK: in an incast where a connection's SACKs had stopped for 31 us (fuzz seed 16) it
        judged a black-holed NIC link 46 us after the RTO had blamed its 9 paths, while 4 more
        packets went onto the plane's paths not yet blamed. The RTO stands in for the SACK; the
        evidence says the plane, not the paths, is silent."""
        if self.planes < 2:
            return []
        paths: dict[int, set[int]] = {}
        for rec in suspects:
            paths.setdefault(rec.ev >> PLANE_SHIFT, set()).add(rec.ev >> PATH_SHIFT)
        dead: list[int] = []
        dep = self.departures
        need = min(2, self.t1_count)  # (two silent paths; one is that path's failure)
        for plane, silent in paths.items():
            if len(silent) < need or self._evidence[plane] < self.cfg.sack_gap_threshold:
                continue
            oldest = next((r for r in self.packets.in_flight.values() if r.ev >> PLANE_SHIFT == plane), None)
            if oldest is None or oldest.at_nic:
                continue
            oldest_sent = oldest.left_ns if dep else oldest.sent_ns
            if oldest_sent <= self.ok_sent[plane]:
                continue
            if not self._overdue(plane, oldest_sent, now_ns, self.reorder.window()):
                continue  # (as ``dead_planes``)
            self._evidence[plane] = 0
            dead.append(plane)
        return dead

    def silent_path(self, plane: int, now_ns: int) -> int:
        """The one path (``ev >> PATH_SHIFT``) of a silent ``plane`` (``dead_planes``) whose
        packets are overdue, or -1 when the plane as a whole is silent: a single silent path
        is that path's failure, not yet the plane's.

        Overdue: sent since the plane's latest delivery and older than its delay plus the
        reorder window. The path is named with ``sack_gap_threshold`` packets overdue on it and
        none on another, or with every packet since on it; one overdue packet among packets
        sprayed path after path is as likely the first of a plane's to fall due. Packets the
        plane's other paths took since, not due yet, are not judged: the sender holds those
        paths to one packet each until one is delivered (``EvSet.prove_paths``), so a plane
        dead after all takes nothing more and is named when a second path's packets fall due.
        A flapping T0-T1 link, whose plane's other paths came back from ECN penalties while
        its packets were overdue, took the whole plane out in every down phase (51 EVs of one
        connection).

        A plane silent again before it delivered anything since one of its paths was named
        (``one_path_silent``) is silent as a whole: on a plane slowed at its NIC, whose queue
        outgrew the reorder window, its packets fell due one by one, each naming its own path,
        and were resent though never lost."""
        if self.t1_count < 2:
            return -1
        dep = self.departures
        ok_sent = self.ok_sent[plane]
        if self._path_named[plane] == ok_sent:
            return -1  # a path of it named already, nothing delivered since
        due = now_ns - (self.rtt.plane_delay(plane) + self.reorder.window())
        first = -1  # the path of the overdue packets
        overdue = 0
        newest_due = 0  # when the newest of them was sent
        later = -1  # the path of those not due yet (-2: two paths or more)
        next_sent = -1  # when the first of those was sent
        for r in self.packets.in_flight.values():
            sent = r.left_ns if dep else r.sent_ns
            if r.ev >> PLANE_SHIFT != plane or sent <= ok_sent:
                continue
            path = r.ev >> PATH_SHIFT
            if sent > due:
                later = path if later == -1 or later == path else -2
                if next_sent < 0 or sent < next_sent:
                    next_sent = sent
                continue
            if first >= 0 and path != first:
                return -1
            first = path
            overdue += 1
            if sent > newest_due:
                newest_due = sent
        # every packet since on that path, or the plane carried nothing else for a reorder
        # window after them: the packets on other paths began no spray with them (a plane fed
        # one packet now and then: weighed down by its queue, ``plane_queues.py``, or passed
        # over by a thin window at the tail while one packet of it was stuck)
        alone = later == -1 or later == first or next_sent - newest_due > self.reorder.window()
        if overdue < self.cfg.sack_gap_threshold and not alone:
            return -1  # one packet or two: as likely the first of a plane's to fall due
        return first

    def one_path_silent(self, plane: int) -> None:
        """The sender retired one silent path of ``plane`` (``silent_path``) and kept the rest."""
        self._path_named[plane] = self.ok_sent[plane]
