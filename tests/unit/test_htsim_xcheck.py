"""bench.htsim_xcheck: htsim_uec's output is read right, both simulators get the same fabric,
and (where the shared htsim_uec is installed) an 8->1 incast agrees with htsim's."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import htsim_xcheck as hx

HTSIM = hx.find_htsim()

_OUT = """\
Flow Uec_8_0 flowId 1 uecSrc 0 starting at 0
Flow Uec_8_0 flowId 1 uecSrc 0 finished at 690.5 total messages 1 total packets 256 RTS 0 total bytes 1048576
Flow Uec_9_0 flowId 2 uecSrc 1 finished at 701.25 total messages 1 total packets 256 RTS 0 total bytes 1048576
Done
New: 512 Rtx: 31 RTS: 0 Bounced: 0 ACKs: 400 NACKs: 29 Pulls: 0 sleek_pkts: 0
"""


def test_htsim_output_gives_the_last_finish_and_trims_as_nacks() -> None:
    r = hx.parse_htsim(_OUT, flows=2)
    assert r["completed"] and r["completion_us"] == 701.25
    assert (r["data_packets"], r["retransmissions"], r["trims"]) == (512, 31, 29)
    # htsim counts no drops; the 2 resends no NACK explains came from timeouts
    assert r["drops"] is None and r["timeout_resends"] == 2
    unfinished = hx.parse_htsim(_OUT, flows=3)
    assert not unfinished["completed"] and unfinished["completion_us"] is None
    with pytest.raises(RuntimeError, match="totals"):
        hx.parse_htsim("Flow x flowId 1 finished at 3.0\n", flows=1)


def test_both_simulators_get_the_same_queues_in_packets() -> None:
    fab = hx.XFabric(t0=2, t1=8, hosts_per_t0=8)
    shape = fab.shape()
    pkt = fab.payload + hx.DATA_OVERHEAD
    # htsim trims a packet that does not fit a queue of queue_pkts; mrc-sim one that meets
    # more than trim_bytes queued: both hold queue_pkts packets
    assert shape.trim_bytes // pkt + 1 == fab.queue_pkts
    assert shape.ecn_bytes // pkt == fab.ecn_pkts
    topo = fab.htsim_topo()
    assert "Nodes 16" in topo and "Radix_Down 8\nRadix_Up 8" in topo and "Downlink_Latency_ns 1000" in topo
    matrix = hx.htsim_matrix(fab, hx.Case("c", ((8, 0), (9, 0)), 4096))
    assert matrix.splitlines()[1:] == [
        "Connections 2",
        "8->0 id 1 start 0 size 4096",
        "9->0 id 2 start 0 size 4096",
    ]


def test_the_lossless_pair_pauses_at_the_same_packet_counts_in_both_simulators() -> None:
    fab = hx.XFabric(t0=2, t1=8, hosts_per_t0=8)
    pkt = fab.payload + hx.DATA_OVERHEAD
    xon, xoff = fab.pfc_pkts
    shape = hx.lossless_shape(fab)
    assert shape.pfc and 0 < xon < xoff < fab.queue_pkts
    assert (shape.pfc_xon_bytes, shape.pfc_xoff_bytes) == (xon * pkt, xoff * pkt)
    cmd = hx.htsim_command(Path("htsim_uec"), fab, hx.REFERENCE, 1000, lossless=True)
    at = cmd.index("-queue_type")
    assert cmd[at : at + 5] == ["-queue_type", "lossless_input", "-pfc_thresholds", str(xon), str(xoff)]
    # -q sets only htsim's minimum RTO there: mrc-sim's whole port buffer, not one queue
    assert cmd[cmd.index("-q") + 1] == str(shape.buffer_bytes // pkt) == str(4 * fab.queue_pkts)
    lossy = hx.htsim_command(Path("htsim_uec"), fab, hx.REFERENCE, 1000)
    assert "-queue_type" not in lossy and lossy[lossy.index("-q") + 1] == str(fab.queue_pkts)


@pytest.mark.skipif(HTSIM is None, reason="needs htsim_uec ($HTSIM_UEC or ../shared/htsim/htsim_uec)")
def test_incast_completes_within_5pct_of_htsim() -> None:
    assert HTSIM is not None
    fab = hx.XFabric(t0=2, t1=8, hosts_per_t0=8)
    case = hx.Case("incast-8to1", tuple((8 + i, 0) for i in range(8)), 1 << 20)
    row = hx.run_case(HTSIM, fab, case, seed=1)
    assert row["mrc_sim"]["completed"] and row["htsim"][hx.REFERENCE]["completed"]
    v = row["verdict"]
    assert v["completion_within"], v


@pytest.mark.skipif(HTSIM is None, reason="needs htsim_uec ($HTSIM_UEC or ../shared/htsim/htsim_uec)")
def test_lossless_incast_pfc_against_htsims_lossless_queues() -> None:
    assert HTSIM is not None
    fab = hx.XFabric(t0=2, t1=8, hosts_per_t0=8)
    case = hx.Case("incast-8to1", tuple((8 + i, 0) for i in range(8)), 1 << 20)
    mrc = hx.run_mrcsim(fab, case, seed=1, lossless=True)
    assert mrc["completed"] and mrc["trims"] == 0 and mrc["drops"] == 0 and mrc["pauses"] > 0
    try:
        row = hx.run_lossless_case(HTSIM, fab, case, seed=1)
    except hx.HtsimUnsupported as exc:
        pytest.skip(str(exc))
    mrc, ht = row["mrc_sim"], row["htsim"][hx.REFERENCE]
    assert mrc["completed"] and ht["completed"], row
    assert mrc["trims"] == 0 and mrc["drops"] == 0 and mrc["pauses"] > 0  # lossless: paused, not trimmed
    assert row["verdict"]["completion_within"], row["verdict"]
