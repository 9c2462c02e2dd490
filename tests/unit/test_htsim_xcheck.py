"""bench.htsim_xcheck: htsim_uec's output is read right, both simulators get the same fabric,
and (where the shared htsim_uec is installed) an 8->1 incast agrees with htsim's."""

from __future__ import annotations

import sys
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


def test_a_measured_process_reports_its_own_cpu_and_peak_memory(tmp_path: Path) -> None:
    grow = "import time; b = bytearray(64 << 20); t = time.process_time()\n"
    grow += "while time.process_time() - t < 0.2: pass"
    code, out, err, cost = hx.measured([sys.executable, "-c", grow + "\nprint('done')"], tmp_path, timeout=60)
    assert code == 0 and out.strip() == "done", err
    assert cost["cpu_s"] >= 0.2 and cost["wall_s"] >= cost["cpu_s"] * 0.5
    assert 64 <= cost["peak_mb"] < 200  # its 64 MiB, not this process's memory
    small = hx.measured([sys.executable, "-S", "-c", "pass"], tmp_path, timeout=60)[3]
    if hx.GNU_TIME.is_file():  # started from GNU time: this (larger) process's pages are not counted
        assert small["peak_mb"] < 40 and "peak_includes_launcher" not in small
    assert hx.measured([sys.executable, "-c", "raise SystemExit(3)"], tmp_path, timeout=60)[0] == 3


def test_cost_rounds_give_medians_ranges_and_ratios_to_htsim() -> None:
    def c(wall: float, peak: float) -> dict[str, float]:
        return {"wall_s": wall, "cpu_s": wall, "peak_mb": peak}

    row = {
        "case": "permutation",
        "hosts": 128,
        "mrc_sim_cost": {"virtual": [c(3.0, 40), c(2.0, 40), c(9.0, 41)]},
        "htsim_cost": [c(1.0, 10), c(1.0, 10), c(2.0, 10)],
    }
    row["cost"] = summary = hx.cost_summary(row)
    m = summary["mrc_sim_virtual"]
    assert m["wall_s"] == {"median": 3.0, "min": 2.0, "max": 9.0} and m["rounds"] == 3
    assert m["over_htsim"] == {"wall_s": 3.0, "cpu_s": 3.0, "peak_mb": 4.0}
    text = hx.cost_table([row], c(0.1, 19))
    assert "| permutation | 128 | mrc-sim-virtual | 3 | 3 (2 to 9) |" in text and "Floor" in text


def test_the_scale_cases_are_a_1024_host_permutation_and_a_256_host_all_to_all() -> None:
    (big, perm), (small, a2a) = hx.scale_cases(quick=True, seed=1)
    assert big.hosts == 1024 and sorted(d for _, d in perm.pairs) == list(range(1024))
    assert all(s != d for s, d in perm.pairs) and small.hosts == 256 and len(a2a.pairs) == 256 * 255
    assert "Radix_Up 32" in big.htsim_topo() and big.shape().hosts == 1024
