"""Route compiler and table walker: every host pair x every EV reaches exactly the right host port."""

from __future__ import annotations

import itertools
from ipaddress import IPv6Address

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.compiler import ECMP_GROUP, compile_host_configs, compile_routes
from controller.entries import Exact, TableEntry
from controller.tablewalk import build_views, walk
from mrc_fabric.addressing import carrier, path_usids
from mrc_fabric.drop_reasons import DropReason
from mrc_fabric.ev import EV
from mrc_fabric.hostconfig import HostConfig
from mrc_fabric.topology import build_clos

SHAPES = [  # (planes, T0 per plane, T1 per plane, hosts per T0)
    (1, 1, 1, 1),
    (1, 2, 1, 2),
    (2, 2, 2, 2),
    (2, 3, 4, 1),
    (3, 4, 2, 3),
    (4, 2, 3, 2),
    (4, 4, 4, 3),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "P{}-L{}-S{}-H{}".format(*s))
def test_every_pair_and_ev_reaches_the_right_port(shape: tuple[int, int, int, int]) -> None:
    topo = build_clos(*shape)
    views = build_views(compile_routes(topo))
    configs = compile_host_configs(topo)
    walks = 0
    for src, dst in itertools.permutations(topo.hosts, 2):
        cfg = configs[src.name]
        for plane in range(topo.planes):
            for t1 in range(topo.t1_per_plane):
                ev = EV(plane, t1, entropy=12345)
                dest = cfg.destinations[dst.name]
                addr = cfg.carrier(dst.name, ev)
                # the template agrees with the addressing plan
                same_t0 = src.t0_index == dst.t0_index
                want = path_usids(plane, src.t0_index, dst.t0_index, dst.index, None if same_t0 else t1)
                assert addr == carrier(want)
                w = walk(topo, views, src.name, plane, addr, ev.value)
                assert w.delivered_to == (dst.name, plane), (src.name, dst.name, ev, w)
                assert w.survival == 1.0 and not w.faults
                expected_switches = 1 if same_t0 else 3
                assert len(w.hops) == expected_switches
                if not same_t0:
                    assert w.hops[1].node == topo.t1(plane, t1).name
                assert dest.addresses[plane] == src_nic_of(topo, dst.name, plane)
                walks += 1
                # ECMP baseline carrier also arrives, via the member picked by the hash
                ew = walk(topo, views, src.name, plane, cfg.carrier(dst.name, ev, ecmp=True), ev.value)
                assert ew.delivered_to == (dst.name, plane)
    n = len(topo.hosts)
    assert walks == n * (n - 1) * topo.planes * topo.t1_per_plane


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**18 - 1))
def test_random_shapes_deliver_every_ev(planes: int, t0s: int, t1s: int, hosts: int, entropy: int) -> None:
    topo = build_clos(planes, t0s, t1s, hosts)
    views = build_views(compile_routes(topo))
    configs = compile_host_configs(topo)
    for src, dst in itertools.permutations(topo.hosts, 2):
        for plane in range(planes):
            for t1 in range(t1s):
                ev = EV(plane, t1, entropy)
                for ecmp in (False, True):
                    addr = configs[src.name].carrier(dst.name, ev, ecmp)
                    w = walk(topo, views, src.name, plane, addr, ev.value)
                    assert w.delivered_to == (dst.name, plane)


def src_nic_of(topo, host: str, plane: int) -> str:
    return topo.host(host).port(plane).address


def test_entry_counts_and_last_hop_flags() -> None:
    topo = build_clos(2, 2, 2, 2)
    tables = compile_routes(topo)
    t0 = tables["t0p0n0"]
    assert len(t0.table("my_usid")) == 1
    # 2 T1 uplinks + 2 hosts + 1 remote T0 (ECMP)
    assert len(t0.table("usid_route")) == 5
    assert len(t0.table("ecmp_member")) == 2
    policies = {e.field("port").value: e.param("last_hop") for e in t0.table("port_policy")}
    assert policies == {1: 1, 2: 1, 3: 0, 4: 0}
    t1 = tables["t1p1n1"]
    assert len(t1.table("usid_route")) == 2 and not t1.table("ecmp_member")
    assert all(e.param("last_hop") == 0 for e in t1.table("port_policy"))
    ecmp = [e for e in t0.table("usid_route") if e.action == "set_ecmp"]
    assert ecmp[0].params == (("group_id", ECMP_GROUP), ("size", 2))


def _with(tables, switch: str, entry: TableEntry):
    views_input = {k: list(v.entries) for k, v in tables.items()}
    views_input[switch].append(entry)
    return build_views(views_input)


def test_carrier_through_a_faulted_link_is_dropped_there() -> None:
    topo = build_clos(2, 2, 2, 2)
    tables = compile_routes(topo)
    # h0 (T0 0) -> h2 (T0 1), plane 1 via T1 1: egress black hole on T0 p1n0's uplink to T1 1
    uplink = topo.find_link("t0p1n0-t1p1n1").a.port
    views = _with(tables, "t0p1n0", TableEntry("port_fault", (("port", Exact(uplink)),), "fault_drop"))
    addr = carrier(path_usids(1, 0, 1, 2, 1))
    w = walk(topo, views, "h0", 1, addr)
    assert w.dropped == DropReason.EGRESS_FAULT and w.dropped_at == f"t0p1n0:{uplink}"
    assert w.delivered_to is None
    # the other T1 of the plane is untouched
    assert walk(topo, views, "h0", 1, carrier(path_usids(1, 0, 1, 2, 0))).delivered_to == ("h2", 1)
    # an ingress fault at the far T1 side drops there, not before
    views = _with(tables, "t1p1n1", TableEntry("ingress_fault", (("port", Exact(1)),), "fault_drop"))
    w = walk(topo, views, "h0", 1, addr)
    assert (w.dropped, w.dropped_at, w.switches) == (
        DropReason.INGRESS_FAULT,
        "t1p1n1:1",
        ["t0p1n0", "t1p1n1"],
    )


def test_loss_fault_lets_the_packet_through_with_its_probability() -> None:
    topo = build_clos(1, 2, 1, 1)
    tables = compile_routes(topo)
    views = _with(
        tables, "t1p0n0", TableEntry("port_fault", (("port", Exact(2)),), "fault_loss", (("prob", 16384),))
    )
    w = walk(topo, views, "h0", 0, carrier(path_usids(0, 0, 1, 1, 0)))
    assert w.delivered_to == ("h1", 0)
    assert w.survival == pytest.approx(0.75)
    assert w.faults == ["t1p0n0:2 egress loss 0.250"]


def test_bad_carriers_are_dropped_with_a_reason() -> None:
    topo = build_clos(1, 2, 2, 1)
    views = build_views(compile_routes(topo))
    # unknown next uSID after the T0: no route
    w = walk(topo, views, "h0", 0, IPv6Address("fcbb:bb00:4000:8009::"))
    assert (w.dropped, w.dropped_at) == (DropReason.NO_ROUTE, "t0p0n0:1")
    # the hop limit runs out at the T1
    w = walk(topo, views, "h0", 0, carrier(path_usids(0, 0, 1, 1, 1)), hop_limit=2)
    assert (w.dropped, w.dropped_at) == (DropReason.HOP_LIMIT, "t1p0n1:1")
    # a carrier that bounces between T0 and T1 until the hop limit
    w = walk(topo, views, "h0", 0, carrier([0x4000, 0x8000, 0x4000, 0x8000, 0x4000, 0x8000]), hop_limit=4)
    assert w.dropped == DropReason.HOP_LIMIT


def test_host_config_file_round_trip(tmp_path) -> None:
    from mrc_fabric.hostconfig import write_host_configs

    topo = build_clos(2, 2, 2, 1, prefix="c")
    configs = compile_host_configs(topo)
    paths = write_host_configs(tmp_path, configs)
    assert sorted(p.name for p in paths) == ["ch0.json", "ch1.json"]
    cfg = HostConfig.load(tmp_path / "ch0.json")
    assert cfg.to_dict() == configs["ch0"].to_dict()
    assert cfg.ports[1].t0_mac == topo.host("ch0").port(1).t0_mac
    assert str(cfg.carrier("ch1", EV(1, 1))) == "fcbb:bb00:4400:8401:4401:c401::"
    with pytest.raises(ValueError, match="t1 index 2"):
        cfg.carrier("ch1", EV(0, 2))
