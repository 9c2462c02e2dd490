"""The oracle of a fault under an incast (``bench.fault_oracle``): what no endpoint saves."""

from __future__ import annotations

from bench import sim_incast_fault
from bench.sim_transport import link_delay_for_rtt
from mrc_host.sim.fabric import DATA_OVERHEAD

HOP_NS = int((4096 + DATA_OVERHEAD) * 8 / 100) + link_delay_for_rtt(21.0)  # one data packet, one link


def test_the_oracle_sits_between_the_first_overdue_packet_and_the_loss() -> None:
    """The first lost packet is due at the receiver no sooner than two links after the fault
    (the dead one and the last) and no later than that plus a full last-hop queue's wait (the
    trim threshold, 256 KiB at 100 Gb/s: 21 us); what entered before it is due is at most what
    was sent before news of it could reach a sender, and that at most the loss."""
    r = sim_incast_fault.run(1, size=1 << 20)
    assert r["completed"]
    (f,) = r["faults"]
    assert 2 * HOP_NS / 1e3 - 0.1 <= f["due_us"] <= 2 * HOP_NS / 1e3 + 21.1, f
    assert 1 <= f["oracle"] <= f["oracle_sent"] <= f["lost"], f


def test_watching_for_the_oracle_changes_nothing_in_the_run() -> None:
    """The samples only read ports: the same seed loses the same packets with and without them."""
    a = sim_incast_fault.run(2, size=1 << 20)
    b = sim_incast_fault.run(2, size=1 << 20, watch=False)
    assert a["faults"][0]["lost"] == b["faults"][0]["lost"]
    assert a["completion_us"] == b["completion_us"]
