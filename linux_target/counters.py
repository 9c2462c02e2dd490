"""P4 counters read from the kernel.

- ``port_rx[p]`` / ``port_tx[p]``: packets and bytes received / sent by the
  interface of port ``p`` (netlink IFLA_STATS64); ports not on this switch read 0.
- ``drop_reason[i]`` (DROP_* below):
  0 no route  = Ip6InNoRoutes of the namespace (/proc/net/snmp6): table misses,
                including an unknown next uSID after the shift and an empty ECMP group;
  1 hop limit = Ip6InHdrErrors (the kernel counts hop-limit expiry there, along with
                other malformed IPv6 headers);
  2 fault     = sum of the nftables fault counters of every port and hook;
  3 trimmed   = frames the egress program trimmed, summed over the ports (bytes: the
                frames' lengths before the cut, as BMv2 counts them);
  5 queue full = frames the egress program tail-dropped (a Linux-target addition: BMv2
                does not count its own queue drops).
  The snmp6 counters count packets only: their byte counts read 0.
- ``ecn_marked[p]``: frames the egress program of port ``p`` marked CE.
The egress counters come from each port's ``mrc_state`` map (``egress.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from finsy.proto import p4r

from mrc_fabric.drop_reasons import DropReason
from mrc_fabric.p4info import CounterInfo
from mrc_fabric.p4names import Counter

from .egress import PortState
from .netlink_backend import LinkStats

DROP_NO_ROUTE = DropReason.NO_ROUTE.cell
DROP_HOP_LIMIT = DropReason.HOP_LIMIT.cell
DROP_FAULT = DropReason.FAULT.cell
DROP_TRIMMED = DropReason.TRIMMED.cell
DROP_QUEUE_FULL = DropReason.QUEUE_FULL.cell


class CounterReader:
    """One snapshot of every counter source, taken when a Read starts."""

    def __init__(
        self,
        ports: dict[int, str],
        links: dict[str, LinkStats],
        snmp6: dict[str, int],
        fault_counters: dict[str, tuple[int, int]],
        egress: dict[int, PortState] | Callable[[], dict[int, PortState]] | None = None,
    ) -> None:
        """``egress``: the ports' egress states, or how to read them (then read once, and
        only if the Read asks for a counter they feed: one bpftool call per port)."""
        self.ports = ports
        self.links = links
        self.snmp6 = snmp6
        self.faults = fault_counters
        self._egress = egress

    @property
    def egress(self) -> dict[int, PortState]:
        if callable(self._egress):
            self._egress = self._egress()
        return self._egress or {}

    def _port(self, index: int, pick: Callable[[LinkStats], tuple[int, int]]) -> tuple[int, int]:
        ifname = self.ports.get(index)
        if ifname is None or ifname not in self.links:
            return 0, 0
        return pick(self.links[ifname])

    def value(self, counter: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one counter cell."""
        if counter == Counter.PORT_RX:
            return self._port(index, lambda s: (s.rx_packets, s.rx_bytes))
        if counter == Counter.PORT_TX:
            return self._port(index, lambda s: (s.tx_packets, s.tx_bytes))
        if counter == Counter.DROP_REASON:
            if index == DROP_NO_ROUTE:
                return self.snmp6.get("Ip6InNoRoutes", 0), 0
            if index == DROP_HOP_LIMIT:
                return self.snmp6.get("Ip6InHdrErrors", 0), 0
            if index == DROP_FAULT:
                return sum(p for p, _b in self.faults.values()), sum(b for _p, b in self.faults.values())
            if index == DROP_TRIMMED:
                states = self.egress.values()
                return sum(s.trimmed_packets for s in states), sum(s.trimmed_bytes for s in states)
            if index == DROP_QUEUE_FULL:
                states = self.egress.values()
                return sum(s.dropped_packets for s in states), sum(s.dropped_bytes for s in states)
        if counter == Counter.ECN_MARKED:
            state = self.egress.get(index)
            return (state.marked_packets, state.marked_bytes) if state else (0, 0)
        return 0, 0  # unused drop reasons

    def entries(self, counter: CounterInfo, index: int | None) -> list[p4r.CounterEntry]:
        cells = range(counter.size) if index is None else [index]
        out = []
        for i in cells:
            packets, nbytes = self.value(counter.alias, i)
            entry = p4r.CounterEntry(counter_id=counter.id)
            entry.index.index = i
            entry.data.packet_count = packets
            entry.data.byte_count = nbytes
            out.append(entry)
        return out
