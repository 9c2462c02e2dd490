"""How an endpoint sends a control message (SACK, NACK, PROBE_ACK) on one of its own EVs.

Its own class, shared by the endpoint and its receiver, so that the receiver's SACKs and
NACKs (one per few DATA packets) are a native call when compiled: handed to the receiver as
a bound method, every SACK paid a generic Python call for it, and another for a closure that
read the port-status bitmap (``EvSet.local_ports``, read here directly).
"""

from __future__ import annotations

from typing import final

from mrc_fabric.ev import T1_SHIFT
from mrc_host.wire.messages import Dscp, Ecn, Message

from .actions import Action, Transmit
from .counters import MARK_CONTROL, Counters
from .evset import EvSet


@final
class ControlOut:
    """Sends control messages on the EV set's control EVs (``EvSet.next_control_ev``)."""

    def __init__(self, evset: EvSet, counters: Counters, retire: bool) -> None:
        self.evset = evset
        self.counters = counters
        self._retire = retire  # noted as sent for the liveness checks only where paths retire
        # per path (plane, T1: an EV's bits above the entropy) when the peer's DATA last came
        # by it (the receiver's note)
        self.seen_ns: dict[int, int] = {}

    def send(
        self,
        msg: Message,
        out: list[Action],
        plane: int | None,
        now_ns: int,
        path_of: int = -1,
        avoid: int = -1,
        fresh_of: int = -1,
        quiet_ns: int = 0,
    ) -> int | None:
        """Send ``msg`` on a control EV (of ``plane`` when it can), or on our EV of the path of
        the peer's EV ``path_of`` (the packet answered; ``EvSet.control_ev_on_path``) when we
        have one: the EV chosen, None when no EV is usable (nothing is sent). A control EV on
        the path of ``avoid`` (a copy just sent there) gives its turn to the next one; one on a
        path the peer's DATA has not come by for ``quiet_ns`` while ``fresh_of``'s just did
        gives it to our EV on that path (``stale``)."""
        ev = self.evset.control_ev_on_path(path_of) if path_of >= 0 else None
        if ev is None:
            ev = self.evset.next_control_ev(plane)
            if ev is not None and avoid >= 0 and ev >> T1_SHIFT == avoid >> T1_SHIFT:
                ev = self.evset.next_control_ev(plane)
            if ev is not None and fresh_of >= 0 and self.stale(ev, now_ns, quiet_ns):
                ev = self.evset.control_ev_on_path(fresh_of) or ev
        if ev is None:
            return None
        if self._retire:
            self.evset.note_sent(ev, now_ns)
        meta = msg.meta
        meta.ev = ev
        meta.dscp = Dscp.CONTROL
        meta.ecn = Ecn.NOT_ECT
        self.counters.mark(ev, MARK_CONTROL)
        out.append(Transmit(msg))
        return ev

    def stale(self, ev: int, now_ns: int, quiet_ns: int) -> bool:
        """No DATA of the peer's has come by ``ev``'s path for ``quiet_ns``: the peer stopped
        using it (it retired it, or it died under its last packets), and our answers there may
        die with it. Mid-transfer every path the peer sprays on is fresh, and this changes
        nothing; at a tail most of whose paths died, resends come on the live ones alone while
        the dead-reverse-path rule (``ack_echo``) waits for echoes in DATA that no longer comes
        (1 MiB, 6 of 8 paths dead at 50 us: 3 of 10 seeds fired an RTO)."""
        seen = self.seen_ns.get(ev >> T1_SHIFT)
        return seen is not None and now_ns - seen >= quiet_ns

    def port_status(self) -> int:
        """This host's NIC port-status bitmap, which SACKs carry."""
        return self.evset.local_ports
