"""mrc-sim's side of ``bench.htsim_xcheck``: the shared fabric, a case, one mrc-sim run.

Why a module of its own: ``bench.htsim_xcheck`` times each mrc-sim run as a process of its
own (``python -m bench.xcheck_sim SPEC``), and that process should pay for what a run needs
and no more. Started as ``bench.htsim_xcheck --child``, it compiled the whole bench (its
tables, plots and htsim's side, ~700 lines) wherever no bytecode cache is written
(``PYTHONDONTWRITEBYTECODE``): ~10 ms of the 8->1 incast's ~0.12 s of CPU.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mrc_host.core import DEFAULT_MAX_EVS
from mrc_host.sim.fabric import DATA_OVERHEAD, FabricShape
from mrc_host.sim.gc_pause import collector_paused
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.traffic import Job, point_to_point

HTSIM_HEADER = 64  # htsim's UEC data header: its -mtu is payload + this


@dataclass(frozen=True)
class XFabric:
    """The one fabric both simulators build: a single plane, two tiers, full bisection."""

    t0: int = 8
    t1: int = 16
    hosts_per_t0: int = 16
    gbps: float = 100.0
    link_ns: int = 1000
    payload: int = 4096

    @property
    def hosts(self) -> int:
        return self.t0 * self.hosts_per_t0

    @property
    def htsim_packet(self) -> int:
        return self.payload + HTSIM_HEADER

    @property
    def htsim_rtt_ns(self) -> float:
        """htsim's network RTT: 4 links each way plus a data and an ACK packet on each."""
        ser = (self.htsim_packet + HTSIM_HEADER) * 8 / self.gbps
        return 8 * self.link_ns + 4 * ser

    @property
    def queue_pkts(self) -> int:
        """htsim's own default: a queue of one BDP (in its packets), trimming when full."""
        return math.ceil(self.htsim_rtt_ns * self.gbps / 8 / self.htsim_packet)

    @property
    def ecn_pkts(self) -> int:
        """One step threshold at half the queue (htsim's default ramp runs from 0.2 to 0.8)."""
        return max(1, self.queue_pkts // 2)

    @property
    def pfc_pkts(self) -> tuple[int, int]:
        """(XON, XOFF) per ingress in packets, for both simulators: XOFF at half the queue,
        XON at a quarter."""
        return self.queue_pkts // 4, self.queue_pkts // 2

    @property
    def buffer_pkts(self) -> int:
        """A port's whole buffer in mrc-sim (four queues), and htsim's ``-q`` in lossless runs:
        with ``lossless_input`` that ``-q`` bounds no queue (nothing is dropped) but sets the
        minimum RTO, which at one queue's drain time (~73 us) is shorter than the wait behind
        a paused incast and fires spurious timeouts."""
        return 4 * self.queue_pkts

    def shape(self) -> FabricShape:
        """The mrc-sim fabric: its queues hold as many (larger) packets as htsim's."""
        pkt = self.payload + DATA_OVERHEAD
        return FabricShape(
            planes=1,
            t0=self.t0,
            t1=self.t1,
            hosts_per_t0=self.hosts_per_t0,
            link_gbps=self.gbps,
            link_delay_ns=self.link_ns,
            ecn_bytes=self.ecn_pkts * pkt,
            trim_bytes=(self.queue_pkts - 1) * pkt,
            buffer_bytes=self.buffer_pkts * pkt,
        )

    def htsim_topo(self) -> str:
        tier = "Downlink_speed_Gbps {g}\nRadix_Down {d}\n{up}Downlink_Latency_ns {l}\nSwitch_Latency_ns 0\n"
        g = int(self.gbps)
        return (
            f"Nodes {self.hosts}\nTiers 2\nPodsize {self.hosts}\n\nTier 0\n"
            + tier.format(g=g, d=self.hosts_per_t0, up=f"Radix_Up {self.t1}\n", l=self.link_ns)
            + "\nTier 1\n"
            + tier.format(g=g, d=self.t0, up="", l=self.link_ns)
        )


@dataclass(frozen=True)
class Case:
    name: str
    pairs: tuple[tuple[int, int], ...]
    size: int
    evs: int = 0  # mrc-sim's EVs per connection (0: the core's default)

    def bottleneck_bytes(self) -> int:
        """Payload bytes through the busiest host port (a host's downlink or its uplink)."""
        ins: dict[int, int] = {}
        outs: dict[int, int] = {}
        for s, d in self.pairs:
            outs[s] = outs.get(s, 0) + self.size
            ins[d] = ins.get(d, 0) + self.size
        return max([*ins.values(), *outs.values()])


def ideal_us(case: Case, wire: int, payload: int, gbps: float) -> float:
    """Serialisation of the busiest host port's packets at line rate (that simulator's headers)."""
    packets = math.ceil(case.size / payload) * (case.bottleneck_bytes() // case.size)
    return packets * wire * 8 / gbps / 1e3


def lossless_shape(fab: XFabric) -> FabricShape:
    """mrc-sim's PFC fabric: XOFF at half the queue, XON at a quarter, a queue of headroom."""
    pkt = fab.payload + DATA_OVERHEAD
    xon, xoff = fab.pfc_pkts
    return replace(
        fab.shape(), pfc=True, pfc_xoff_bytes=xoff * pkt, pfc_xon_bytes=xon * pkt,
        pfc_headroom_bytes=fab.queue_pkts * pkt,
    )  # fmt: skip


def run_mrcsim(
    fab: XFabric, case: Case, seed: int, lossless: bool = False, payload: str = "real"
) -> dict[str, Any]:
    started = time.monotonic()
    with collector_paused():  # (as mrc-sim builds a scenario's network: gc_pause.py)
        net = Network(lossless_shape(fab) if lossless else fab.shape(), seed, payload)
        # no per-packet goodput series: nothing here reads it (~1.1 MB of the 128-host permutation)
        net.keep_goodput = False
        job = point_to_point(
            net,
            Job(case.name, "xcheck", 0),
            FlowSpec("x", 0, 1, mtu=fab.payload, max_evs=case.evs or DEFAULT_MAX_EVS),
            list(case.pairs),
            case.size,
        )
    ideal_ns = int(ideal_us(case, fab.payload + DATA_OVERHEAD, fab.payload, fab.gbps) * 1e3)
    ports = net.fabric.ports.values()
    # the windows at the start and halfway through the ideal time, and the trims until then
    cwnd_pkts = [
        sum(c.sender.sender.congestion.cwnd for c in job.connections) / (fab.payload + DATA_OVERHEAD)
    ]
    net.run(ideal_ns // 2)
    cwnd_pkts.append(
        sum(c.sender.sender.congestion.cwnd for c in job.connections) / (fab.payload + DATA_OVERHEAD)
    )
    trims_half = sum(p.trimmed for p in ports)
    net.run(200 * ideal_ns + 10_000_000)
    completion = job.completion_ns
    return {
        "windows_start_pkts": round(cwnd_pkts[0], 1),
        "windows_half_pkts": round(cwnd_pkts[1], 1),
        "trims_second_half": sum(p.trimmed for p in ports) - trims_half,
        "completed": completion is not None and all(c.data_ok for c in job.connections),
        "flows_finished": sum(1 for t in job.rank_done_ns.values() if t is not None),
        "completion_us": None if completion is None else completion / 1e3,
        "data_packets": sum(c.sender.counters.data_packets_sent for c in job.connections),
        "retransmissions": sum(c.sender.counters.retransmissions for c in job.connections),
        "trims": sum(p.trimmed for p in ports),
        "drops": sum(p.drops_congestion for p in ports),
        "pauses": sum(p.pauses for p in ports),
        "events": net.loop.events,
        "payload": net.payload,
        "seconds": round(time.monotonic() - started, 2),
        "ideal_us": ideal_us(case, fab.payload + DATA_OVERHEAD, fab.payload, fab.gbps),
    }


def child(spec_file: str) -> int:
    """The child's side of ``run_mrcsim_process``: one run, its result as JSON on stdout."""
    spec = json.loads(Path(spec_file).read_text())
    fab = XFabric(**spec["fabric"])
    c = spec["case"]
    case = Case(c["name"], tuple((int(a), int(b)) for a, b in c["pairs"]), int(c["size"]), int(c["evs"]))
    out = run_mrcsim(fab, case, int(spec["seed"]), bool(spec["lossless"]), str(spec["payload"]))
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # (the interpreter's teardown is no part of the run: mrc-sim's CLI skips it too)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bench.xcheck_sim SPEC.json (bench.htsim_xcheck writes it)")
    sys.exit(child(sys.argv[1]))
