"""Drops outside the design, from counters at the start and end of a window (fidelity/drops.py)."""

from __future__ import annotations

from topologies.fidelity import drops
from topologies.fidelity.figures import RawSample
from topologies.fidelity.judge import Drops
from topologies.fidelity.procfs import IfStats, MachineTimes
from topologies.fidelity.qdiscs import QdiscStats


def sample(rx: int, tx: int, qdrops: int = 0, softnet: int = 0, if_drops: int = 0) -> RawSample:
    ifs = {"s1-eth1": IfStats(0, rx, if_drops, 0, tx, 0)}
    q = {"s1-eth1": QdiscStats("htb", 0, 0, qdrops, 0, 0, 0)}
    return RawSample(0.0, {}, MachineTimes(0, 0, 1, 2), softnet, None, ifs, q, {})


def test_kernel_drops_count_qdiscs_interfaces_and_backlogs_and_the_frames_carried() -> None:
    out = Drops()
    drops.kernel_drops(sample(0, 0), sample(100, 1000, qdrops=3, softnet=2, if_drops=1), out)
    assert out.frames == 1000
    assert out.by_kind == {"qdisc": 3, "backlog": 2, "interface": 1}
    assert out.where["qdisc s1-eth1"] == 3


def test_bmv2_loses_what_it_received_but_neither_sent_nor_dropped_for_a_reason() -> None:
    ports = {("s1", 1): "s1-eth1", ("s1", 2): "s1-eth2"}
    before = {("s1", "port_rx", 1): 0, ("s1", "port_tx", 2): 0}
    after = {
        ("s1", "port_rx", 1): 1000,  # ingress counted 1000 frames
        ("s1", "port_tx", 2): 950,  # egress sent 950
        ("s1", "drop_reason", 2): 30,  # 30 dropped by an injected fault: by design
        ("s1", "drop_reason", 3): 99,  # trimmed: forwarded, not lost
    }
    out = Drops()
    # the kernel handed 1004 frames to port 1: 4 never reached the program (ring, input buffer)
    drops.bmv2_drops(before, after, ports, sample(0, 0), sample(1004, 0), out)
    assert out.by_kind == {"switch_queue": 20, "switch_ingress": 4}
    assert out.where == {"switch_queue s1": 20, "switch_ingress s1:1": 4}


def test_a_queue_slowed_on_purpose_loses_by_design() -> None:
    """E9 slows a BMv2 queue to make congestion; its tail drops are the design's, not BMv2's
    CPU running out, and are figures only; another switch's full queue still counts."""
    ports = {("s1", 1): "s1-eth1", ("s2", 1): "s2-eth1"}
    after = {("s1", "port_rx", 1): 1000, ("s1", "port_tx", 1): 900, ("s2", "port_rx", 1): 100}
    out = Drops()
    drops.bmv2_drops({}, after, ports, sample(0, 0), sample(0, 0), out, slowed={"s1"})
    assert out.by_design == {"switch_queue s1": 100}
    assert out.by_kind == {"switch_queue": 100} and out.where == {"switch_queue s2": 100}
    assert out.total == 100


def test_a_restarted_switch_is_not_compared() -> None:
    ports = {("s1", 1): "s1-eth1"}
    before, after = {("s1", "port_rx", 1): 500}, {("s1", "port_rx", 1): 10}
    out = Drops()
    drops.bmv2_drops(before, after, ports, sample(0, 0), sample(600, 0), out)
    assert out.total == 0


def test_agent_socket_drops_count_and_refused_sends_do_not() -> None:
    before = {"h0": [{"ifname": "h0-eth0", "socket_drops": 2, "tx_errors": 5}]}
    after = {"h0": [{"ifname": "h0-eth0", "socket_drops": 9, "tx_errors": 50}]}
    out = Drops()
    drops.agent_drops(before, after, out)
    assert out.by_kind == {"agent_socket": 7}  # a refused send is its qdisc's drop, counted there


def test_paced_agents_say_where_their_data_waited() -> None:
    """A paced agent's DATA waits in its pacer (the host link holds a frame or two): the window's
    frames, the most ever waiting, the mean wait -- and the verdict's line says so."""
    from topologies.fidelity.report import figures_line

    row = {
        "ifname": "h0-eth0",
        "pacer_paced": 100,
        "pacer_waited": 80,
        "pacer_wait_ns": 10**8,
        "pacer_max_queued": 4,
    }
    before = {"h0": [row], "h1": [{"ifname": "h1-eth0"}]}  # (h1: an agent without a pacer)
    after = {"h0": [row | {"pacer_paced": 300, "pacer_wait_ns": 5 * 10**8}], "h1": [{"ifname": "h1-eth0"}]}
    figs = drops.pacer_figures(before, after)
    assert figs == {"h0-eth0": {"paced": 200, "max_queued": 4, "mean_wait_ms": 2.0}}
    line = figures_line({"figures": {"agent_pacers": figs}})
    assert "agent pacers: at most 4 frames waiting, mean wait up to 2 ms" in line
