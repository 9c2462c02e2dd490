"""Scenario files written out for the simulator's end-to-end tests: one job on a fabric of a
given shape, as the fuzzer draws them (``mrc_host.sim.scenario_file`` reads the text)."""

from __future__ import annotations


def one_job(
    name: str, seed: int, faults: list[str], shape: tuple[int, int, int, int, int], traffic: str
) -> str:
    """A scenario of one job: ``shape`` is (planes, T0s, T1s, hosts a T0, link delay in ns),
    ``traffic`` the job's TOML lines."""
    planes, t0, t1, per_t0, link_ns = shape
    listed = ", ".join(f'"{f}"' for f in faults)
    return f"""
name = "{name}"
seed = {seed}
modes = ["mrc"]
faults = [{listed}]

[fabric]
planes = {planes}
t0 = {t0}
t1 = {t1}
hosts_per_t0 = {per_t0}
link_delay = "{link_ns}ns"

[[traffic]]
name = "t0"
{traffic}
"""
