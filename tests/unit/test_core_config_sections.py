"""Product configuration and experiments apart, defaults in one place (issue 65, item 5).

A researcher's switches live in ``TransportConfig.experimental`` (``Experimental``), all off
by default -- what the product runs -- and are still named directly where scenario files,
``TransportConfig.for_rtt`` and the simulator's flow specs name them. What the drivers change
of the defaults (mrc-sim's ports and the agent's pacer report departures) is one function of
config.py, ``reported_departures``, with its backlog bound defined once. On main the switches
sat among the product's fields (TransportConfig, NsccParams) and both drivers forced
``nic_departures``/``nic_backlog`` with a ``NIC_BACKLOG_PER_PLANE`` of their own.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from mrc_host.core import NsccParams, TransportConfig
from mrc_host.core.config import (
    EXPERIMENTAL_KEYS,
    NIC_BACKLOG_PER_PLANE,
    Experimental,
    reported_departures,
    split_experimental,
)
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.scenario_file import ScenarioError, build, load_text, to_toml

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("mrc_fabric", "mrc_host", "controller", "linux_target", "topologies", "mrc_view", "mrc_p4rt")


def test_the_switches_are_off_by_default_and_apart_from_the_product_s_fields() -> None:
    off = Experimental()
    assert TransportConfig().experimental == off
    assert not off.share_path_health and off.lasthop_share_scale == 0.0 and off.lasthop_queue_share == 0.0
    assert not off.path_delay_losses
    product = {f.name for cls in (TransportConfig, NsccParams) for f in dataclasses.fields(cls)}
    assert {
        "share_path_health",
        "lasthop_share_scale",
        "lasthop_queue_share",
        "path_delay_losses",
    } == EXPERIMENTAL_KEYS
    assert not EXPERIMENTAL_KEYS & product


def test_for_rtt_and_flow_specs_route_a_switch_named_directly() -> None:
    cfg = TransportConfig.for_rtt(4_000, 50_000, share_path_health=True, sack_gap_threshold=4)
    assert cfg.experimental == Experimental(share_path_health=True) and cfg.sack_gap_threshold == 4
    assert split_experimental({"lasthop_queue_share": 1.0, "eta": 2.0}) == (
        {"eta": 2.0},
        {"lasthop_queue_share": 1.0},
    )
    net = Network(FabricShape(planes=2, t0=2, t1=2), 1)
    spec = FlowSpec(
        "f", 0, 1, nscc={"lasthop_queue_share": 1.0, "gamma": 0.5}, transport={"share_path_health": True}
    )
    conn = net.add_flow(spec, 4096)
    assert conn.tcfg.experimental == Experimental(share_path_health=True, lasthop_queue_share=1.0)
    assert conn.tcfg.nscc.gamma == 0.5
    assert conn.sender.sender.congestion.queue_share == 1.0  # (NSCC reads it from there)


SCENARIO = """
name = "x"
[fabric]
planes = 2
t0 = 2
t1 = 2
[transport.config]
share_path_health = true
[transport.nscc]
lasthop_share_scale = 0.35
[[traffic]]
pattern = "flow"
src = 0
dst = 1
size = "64KiB"
"""


def test_scenario_files_name_the_switches_as_before() -> None:
    sc = load_text(SCENARIO, "x.toml")
    assert load_text(to_toml(sc), "x.toml") == sc
    net, _ = build(sc, sc.runs[0])
    assert net.connections[0].tcfg.experimental == Experimental(
        share_path_health=True, lasthop_share_scale=0.35
    )
    with pytest.raises(ScenarioError, match="must be bool"):
        load_text(SCENARIO.replace("share_path_health = true", "share_path_health = 1"), "x.toml")
    with pytest.raises(ScenarioError, match="unknown parameter"):  # (not CC "window"'s)
        load_text(SCENARIO.replace("[transport.nscc]", "[transport.cc]"), "x.toml")


def test_what_the_drivers_change_is_one_function_and_the_backlog_bound_one_constant() -> None:
    assert reported_departures(3) == {"nic_departures": True, "nic_backlog": 3 * NIC_BACKLOG_PER_PLANE}
    net = Network(FabricShape(planes=2, t0=2, t1=2), 1)
    cfg = net.add_flow(FlowSpec("f", 0, 1), 4096).tcfg
    assert cfg.nic_departures and cfg.nic_backlog == 2 * NIC_BACKLOG_PER_PLANE
    defined, forced = [], []
    for f in (p for pkg in PRODUCT for p in (ROOT / pkg).rglob("*.py") if "_pb2" not in p.name):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "NIC_BACKLOG_PER_PLANE" for t in targets):
                    defined.append(f.relative_to(ROOT).as_posix())
            if isinstance(node, (ast.keyword, ast.Constant)):
                name = node.arg if isinstance(node, ast.keyword) else node.value
                if name in ("nic_departures", "nic_backlog"):
                    forced.append(f.relative_to(ROOT).as_posix())
    assert defined == ["mrc_host/core/config.py"]
    assert set(forced) <= {"mrc_host/core/config.py"}, forced
