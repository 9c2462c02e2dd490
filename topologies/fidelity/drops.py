"""Frames lost where the design loses none, from counters read at the start and end of a window.

Pure. The design drops frames only in the switches' P4 program (no route, hop limit, an
injected fault, a full queue on the Linux target's egress program), each counted in
``drop_reason``. Everything else is the emulation failing: a link's qdisc overflowing, an
interface or a CPU's input backlog dropping, BMv2 never seeing a frame that reached its port
(its capture ring or input buffer was full) or losing one in a full egress queue (a frame
its ingress counted that its egress never sent nor any reason dropped), or an agent's socket
buffer or packet ring overflowing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from mrc_fabric.drop_reasons import COUNTED, DropReason
from mrc_fabric.p4names import Counter
from topologies.fidelity.figures import RawSample
from topologies.fidelity.judge import Drops

# drop_reason cells that lose the frame (TRIMMED forwards its headers: port_tx counts it)
DESIGN_DROPS = {r.cell for r in COUNTED if r != DropReason.TRIMMED}
# an agent's refused sends (tx_errors) are not here: the qdisc that refused them counts them
AGENT_DROP_FIELDS = {"socket_drops": "agent_socket", "ring_drops": "agent_socket"}


def _delta(after: int, before: int) -> int:
    return max(0, after - before)  # a counter that went back (a restarted switch) counts from zero


def kernel_drops(first: RawSample, last: RawSample, out: Drops) -> None:
    """qdisc, interface and input-backlog drops, and the frames the links carried."""
    for name, now in last.ifstats.items():
        was = first.ifstats.get(name)
        if was is None:
            continue
        out.frames += _delta(now.tx_packets, was.tx_packets)
        out.add(
            "interface", name, _delta(now.rx_dropped, was.rx_dropped) + _delta(now.tx_dropped, was.tx_dropped)
        )
    for name, q in last.qdiscs.items():
        was_q = first.qdiscs.get(name)
        if was_q is not None:
            out.add("qdisc", name, _delta(q.drops, was_q.drops))
    out.add("backlog", "softnet", _delta(last.softnet_drops, first.softnet_drops))


def counter_table(cells: Iterable[Any]) -> dict[tuple[str, str, int], int]:
    """(switch, counter, index) -> packets, from GetCounters cells."""
    return {(c.switch, c.counter, int(c.index)): int(c.packets) for c in cells}


def bmv2_drops(
    before: dict[tuple[str, str, int], int],
    after: dict[tuple[str, str, int], int],
    ports: dict[tuple[str, int], str],
    first: RawSample,
    last: RawSample,
    out: Drops,
    slowed: frozenset[str] | set[str] = frozenset(),
) -> None:
    """Frames BMv2 lost outside its program: before its ingress counted them (port by port,
    the kernel's received frames against ``port_rx``), and between ingress and egress (per
    switch, received minus sent minus dropped for a reason: a full egress queue).

    ``ports``: (switch, P4 port) -> the interface it reads. ``slowed``: switches with an
    egress queue slowed on purpose (``FidelityMonitor.queue_slowed``): their full queues are the
    congestion an experiment made, by design (BMv2 counts no reason for them, and cannot say
    which port's queue lost a frame, so the whole switch's count goes there).
    """

    def d(key: tuple[str, str, int]) -> int:
        return _delta(after.get(key, 0), before.get(key, 0))

    # a switch restarted meanwhile counts from zero again: nothing to compare for it
    restarted = {k[0] for k, v in before.items() if after.get(k, v) < v}
    totals: dict[str, int] = defaultdict(int)
    for (switch, port), ifname in ports.items():
        if switch in restarted:
            continue
        rx = d((switch, Counter.PORT_RX, port))
        totals[switch] += rx - d((switch, Counter.PORT_TX, port))
        now, was = last.ifstats.get(ifname), first.ifstats.get(ifname)
        if now is not None and was is not None:
            out.add("switch_ingress", f"{switch}:{port}", _delta(now.rx_packets, was.rx_packets) - rx)
    for switch, net in totals.items():
        dropped = sum(d((switch, Counter.DROP_REASON, i)) for i in DESIGN_DROPS)
        (out.add_by_design if switch in slowed else out.add)("switch_queue", switch, net - dropped)


def agent_drops(
    before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]], out: Drops
) -> None:
    """Socket-buffer drops and refused sends of every agent port (cumulative counters)."""
    for host, rows in after.items():
        old = {r.get("ifname"): r for r in before.get(host, [])}
        for row in rows:
            was = old.get(row.get("ifname"), {})
            for field, kind in AGENT_DROP_FIELDS.items():
                if field in row:
                    out.add(
                        kind, str(row.get("ifname", host)), _delta(int(row[field]), int(was.get(field, 0)))
                    )


def pacer_figures(
    before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]
) -> dict[str, dict[str, float]]:
    """Where paced agents' DATA waited (mrc_host/agent/pacer.py), per host port: frames paced
    in the window, the most that ever waited at once, the mean wait. The host link's qdisc
    holds a frame or two then; this is the queue a real NIC's queue pair would have."""
    out: dict[str, dict[str, float]] = {}
    for host, rows in after.items():
        old = {r.get("ifname"): r for r in before.get(host, [])}
        for row in rows:
            if "pacer_paced" not in row:
                continue
            was = old.get(row.get("ifname"), {})
            n = _delta(int(row["pacer_paced"]), int(was.get("pacer_paced", 0)))
            wait = _delta(int(row["pacer_wait_ns"]), int(was.get("pacer_wait_ns", 0)))
            out[str(row.get("ifname", host))] = {
                "paced": n,
                "max_queued": int(row["pacer_max_queued"]),
                "mean_wait_ms": round(wait / n / 1e6, 3) if n else 0.0,
            }
    return out
