"""A simulation run makes no cyclic garbage, so running it with the cycle collector off
(``mrc_host/sim/gc_pause.py``) leaks nothing: what a run drops, reference counting frees."""

from __future__ import annotations

import gc

import pytest

from mrc_host.sim import scenario_file as sf
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.gc_pause import collector_paused
from mrc_host.sim.network import Network
from mrc_host.sim.scenario import SimConfig, Simulation

FAULTS = [
    ["loss=0.01:all", "blackhole:p0-t0_0-t1_1@30%", "trim=0.05:p1-t0_0-t1_0", "ecn:p1-t0_0-t1_1@0"],
    ["flap=20us:p1-t0_0-t1_2@10%-60%", "switch-down:p0-t1_3@40%", "down:p0-t0_0-t1_0@20%"],
    ["rate=25:p0-t0_0-t1_1", "jitter=2us:p1-t0_1-t1_2", "stall:p0-t1_3@20%-40%", "nic-down:h1-p1@30%-70%"],
]


def _cyclic_garbage_of(net: Network, limit_ns: int) -> int:
    """Objects only cycles keep alive after ``net`` ran (``net`` itself still held)."""
    gc.collect()
    with collector_paused():  # as Network.run does; here whatever Network.run does
        net.run(limit_ns)
    return gc.collect()


@pytest.mark.parametrize("faults", FAULTS, ids=["loss-blackhole-trim-ecn", "flap-down", "passive-nic"])
def test_a_faulted_run_leaves_no_cyclic_garbage(faults: list[str]) -> None:
    sim = Simulation(SimConfig(shape=FabricShape(planes=2, t1=4), size=2 << 20, faults=faults, seed=2))
    sim.net.start()
    sim.write = sim.net.post(sim.conn, sim.cfg.size)
    assert _cyclic_garbage_of(sim.net, sim.time_limit_ns) == 0
    assert sim.write.done


@pytest.mark.parametrize("name", ["compound-faults", "incast-bystander"])
def test_scenario_runs_leave_no_cyclic_garbage(name: str) -> None:
    """Every mode, collectives and incast, lossless (PFC) runs included."""
    sc = sf.load(sf.SCENARIO_DIR / f"{name}.toml")
    for run in sc.runs:
        net, jobs = sf.build(sc, run)
        assert _cyclic_garbage_of(net, sc.time_limit_ns) == 0, run.name
        assert all(job.done for job in jobs if not job.background), run.name
