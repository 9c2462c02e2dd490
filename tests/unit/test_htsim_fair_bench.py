"""bench.htsim_fair: staggered equal flows into one host, judged by their finish times in both simulators."""

from __future__ import annotations

import pytest

from bench import htsim_fair
from bench.xcheck_sim import XFabric


def test_equal_finishes_read_fair_and_a_late_finish_reads_unfair() -> None:
    fair = htsim_fair.finish_proxy([0.0, 300.0], [600.0, 600.0])
    assert fair["proxy_jain"] == pytest.approx(1.0)
    assert fair["spread_us"] == 0.0
    assert fair["span_us"] == 300.0
    # one flow took three times as long from the last start: rates 3:1, Jain 16 / (2 x 10)
    late = htsim_fair.finish_proxy([0.0, 300.0], [400.0, 600.0])
    assert late["proxy_jain"] == pytest.approx(0.8)
    assert late["spread_us"] == 200.0


def test_the_htsim_matrix_starts_flows_as_sim_fair_does_each_from_its_own_leaf() -> None:
    fab = XFabric()
    starts = htsim_fair.starts_ns(8, 3)
    assert starts == sorted(starts) and all(0 <= s < htsim_fair.STAGGER_NS for s in starts)
    lines = htsim_fair.htsim_matrix(fab, starts).splitlines()
    assert lines[:2] == [f"Nodes {fab.hosts}", "Connections 8"]
    flows = [line.split() for line in lines[2:]]
    srcs = [int(f[0].split("->")[0]) for f in flows]
    assert all(f[0].endswith("->0") for f in flows)
    assert len(set(srcs)) == 8 and all(s >= fab.hosts_per_t0 for s in srcs)  # none under host 0's leaf
    # start in us; the first flow carries its fair share of the time before the last start
    assert [float(f[4]) for f in flows] == pytest.approx([s / 1e3 for s in starts], abs=1e-3)
    assert int(flows[-1][6]) == htsim_fair.SIZE
    assert int(flows[0][6]) > htsim_fair.SIZE
