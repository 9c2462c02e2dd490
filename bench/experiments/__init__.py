"""MRC's published results, reproduced in shape on the live testbed (``make bench``).

Each experiment is a module with ``main(argv) -> int`` (``--out DIR --quick --target
--seed``) that writes ``<out>/<id>.json`` (schema in ``common.Result``) and PNG plots.
``bench.run_all`` runs them after the micro-benchmarks, and ``bench.report`` turns every
JSON into one ``REPORT.md``. docs/experiments.md describes each one.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Experiment:
    id: str
    module: str
    summary: str
    claim: bool = True  # it stands for a published result: run --runs times per data plane
    targets: tuple[str, ...] = ("linux", "bmv2")


EXPERIMENTS = [
    Experiment("e1", "bench.experiments.e1_blackhole", "black hole on one T0-T1 link mid-transfer"),
    Experiment("e2", "bench.experiments.e2_flaps", "flapping T0-T1 links, goodput timeline"),
    Experiment("e3", "bench.experiments.e3_t1_down", "T1 silently stops forwarding, then recovers"),
    Experiment("e4", "bench.experiments.e4_t0_down", "T0 down: one plane lost"),
    Experiment("e5", "bench.experiments.e5_random_loss", "1 % random loss on every link"),
    Experiment("e6", "bench.experiments.e6_ev_loss", "20 % drop on one EV's path"),
    Experiment("e7", "bench.experiments.e7_balance", "spray balance over T1 uplinks, MRC vs ECMP"),
    Experiment("e8", "bench.experiments.e8_patterns", "all-to-all and ring, with and without a fault"),
    Experiment(
        "e9",
        "bench.experiments.e9_congestion",
        "BMv2: incast with a bystander (trimming), ECN on a shared EV",
    ),
    Experiment(
        "e10",
        "bench.experiments.e10_kernel_tcp",
        "Linux TCP over kernel ECMP routes, same faults",
        claim=False,
    ),
    Experiment(
        "e11",
        "bench.experiments.e11_scale",
        "fabric setup time and memory up to 16x8x8",
        claim=False,
        targets=("linux",),
    ),
    Experiment("e12", "bench.experiments.e12_compound", "a black hole, then a T1 down, in one transfer"),
    Experiment("e13", "bench.experiments.e13_shared_ev", "a second flow forced onto one of a flow's EVs"),
]
