"""Trimming in a live Linux-target fabric: trimmed headers reach the receiver, its agent NACKs
them, and the sender resends (on the paths it still uses: most data goes around the slow one),
with the switch's counters read over P4Runtime.

A testbed of the default shape (prefix ``lq``, Linux target, controller and agents). One
uplink of the sender's T0 in plane 0 is slowed and given a low trim threshold behind the
controller's back (the egress program's map, as E9 does), so the data the sender sprays onto
that path meets a queue and is trimmed. "Slow" is relative to the sender: the path gets at
most an eighth of its share of what this machine's agents move (10 Mbit/s where they move
hundreds; far less in a slow VM), measured by the same transfer without the slowing.

The steering is judged against the path's nominal share, the fraction of the sender's EVs
that cross it: what a sprayer that ignores trims keeps sending there. The share the unslowed
transfer happens to give the path is no yardstick: the fabric's own congestion control moves
it from a quarter of the nominal share to a little over it from one run to the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from live_fabric import running_testbed

from linux_target.egress import QUEUE_CELL_BYTES, missing_tools
from linux_target.p4rt_client import P4RuntimeTestClient

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(bool(missing_tools()), reason=f"egress program cannot be built: {missing_tools()}"),
]

DROP_TRIMMED = 3
NEVER = (1 << 19) - 1
SIZE = 4 << 20
SLOW_MBIT = 10.0  # the slowed path's rate where the agents are fast
SLOWER = 8.0  # the slowed path carries at most this fraction of its share of the sender's rate


@pytest.fixture(scope="module")
def tb() -> Iterator[Any]:
    with running_testbed("lq", "linux") as bed:
        yield bed


def test_trimmed_frames_are_nacked_and_resent_on_other_evs(tb: Any) -> None:
    topo = tb.topology
    src = next(h.name for h in topo.hosts if h.t0_index == 0)
    dst = next(h.name for h in topo.hosts if h.t0_index == 1)
    t0, t1 = topo.t0(0, 0), topo.t1(0, 0)
    link = topo.find_link(f"{t0.name}-{t1.name}")
    port = link.a.port if link.a.node == t0.name else link.b.port
    sw = tb.net.get(t0.name)
    client = tb.agent(src).client

    def send_evs() -> dict[str, dict[str, Any]]:
        return {r["ev"]: r for r in client.evs() if r["peer"] == dst and r["conn"] == "send"}

    def sent(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> tuple[int, int]:
        """DATA sent between two looks at the EVs: on the slowed path's, on the others'."""
        by_ev = {ev: int(r["data_sent"]) - int(old.get(ev, {}).get("data_sent", 0)) for ev, r in new.items()}
        on = sum(n for ev, n in by_ev.items() if (new[ev]["plane"], new[ev]["t1"]) == (0, 0))
        return on, sum(by_ev.values()) - on

    tb.send(src, dst, 64 << 10)  # open the connection
    # the same transfer with nothing slowed: this machine's rate, and the path's usual share
    start = send_evs()
    unslowed = tb.send(src, dst, SIZE)
    assert unslowed["ok"] and unslowed["verified"] is True, unslowed
    before = send_evs()
    base_slow, base_other = sent(start, before)
    paths = len({(r["plane"], r["t1"]) for r in before.values()})
    rate = min(SLOW_MBIT, float(unslowed["goodput_mbit_s"]) / paths / SLOWER)
    p4rt = P4RuntimeTestClient(sw.p4rt_address, sw.device_id, election_id=0)  # reads only
    try:
        trimmed_before = p4rt.read_counter("drop_reason", DROP_TRIMMED)[0]
        sw.set_port_rate(port, rate, 16 * QUEUE_CELL_BYTES)
        sw.set_port_policy(port, NEVER, 2, False)
        try:
            summary = tb.send(src, dst, SIZE)
            state = sw.port_egress(port)["state"]
        finally:
            sw.set_port_rate(port, 0)
        trimmed = p4rt.read_counter("drop_reason", DROP_TRIMMED)[0] - trimmed_before
    finally:
        p4rt.close()
    assert summary["ok"] and summary["verified"] is True, summary
    after = send_evs()

    def delta(ev: str, key: str) -> int:
        return int(after[ev][key]) - int(before.get(ev, {}).get(key, 0))

    slowed = [ev for ev, r in after.items() if (r["plane"], r["t1"]) == (0, 0)]
    others = [ev for ev in after if ev not in slowed]
    trims_seen = sum(delta(ev, "trims") for ev in slowed)
    # the switch trimmed, and the counter over P4Runtime is the program's own count
    assert 0 < trimmed <= state["trimmed_packets"]
    # the receiver NACKed trimmed headers, and the sender heard them on the slowed path's EVs only
    assert trims_seen > 0, "no trim NACK reached the sender"
    assert trims_seen <= trimmed
    assert sum(delta(ev, "trims") for ev in others) == 0
    # the trimmed data was resent (retransmissions, DSCP RETX, are never trimmed: the ones that
    # queue behind the slow port can still be declared lost and retire an EV; not asserted here)
    assert int(summary.get("retransmissions", 0)) >= trims_seen, summary
    # most of the data went around the slow path (the resends included): its share of DATA is
    # at most half its nominal share (a sprayer that ignores trims keeps all of it)
    sent_slow, sent_other = sent(before, after)
    share, nominal = sent_slow / (sent_slow + sent_other), len(slowed) / len(after)
    figures = (rate, base_slow, base_other, sent_slow, sent_other)
    assert share < nominal / 2, f"slowed path's share {share:.3f} of nominal {nominal:.3f}: {figures}"
