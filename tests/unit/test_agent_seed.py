"""Agents of one run share its ``--seed``; each must still draw its own EVs and ids, or every
host of an all-to-all sprays over the same EV sequence and reuses the same transfer ids."""

from __future__ import annotations

from pathlib import Path

from agent_duo import Host

from controller.compiler import compile_host_configs
from mrc_fabric.topology import build_clos
from mrc_host.agent.options import AgentOptions
from mrc_host.agent.paths import HostPaths
from mrc_host.wire.codec import decode_frame

CFGS = compile_host_configs(build_clos(2, 2, 2, 2, prefix="uc"))


def _first_draws(name: str, seed: int) -> tuple[list[int], int]:
    """The EVs of the CONNECTs ``name`` sends to uch3 and its first transfer's id."""
    opts = AgentOptions(Path("/nonexistent.json"), Path("/nonexistent.sock"), seed=seed)
    host = Host(HostPaths(CFGS[name]), opts)
    transfer = host.send("uch3", 1 << 20, 1_000_000_000)
    evs = [decode_frame(f, verify_icrc=True).meta.ev for _plane, f in host.out]
    assert evs, "the first send opens a connection"
    return evs, transfer.transfer_id


def test_one_seed_gives_each_host_its_own_draws() -> None:
    evs0, id0 = _first_draws("uch0", 7)
    evs1, id1 = _first_draws("uch1", 7)
    assert evs0 != evs1
    assert id0 != id1


def test_one_seed_and_host_draw_the_same_again() -> None:
    assert _first_draws("uch0", 7) == _first_draws("uch0", 7)
