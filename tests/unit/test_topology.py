"""Topology model: builder numbering, JSON round trip, validation errors that name the field."""

from __future__ import annotations

import json

import pytest

from mrc_fabric.addressing import nic_address
from mrc_fabric.topology import Role, Topology, TopologyError, build_clos, port_mac


def test_default_fabric_shape_and_numbering() -> None:
    t = build_clos(2, 2, 2, 2, prefix="c")
    assert len(t.switches) == 8 and len(t.hosts) == 4
    assert len(t.links) == 4 * 2 + 2 * 2 * 2  # host ports + T0-T1 mesh
    t0 = t.switch("ct0p1n1")
    assert (t0.role, t0.plane, t0.index, t0.usid) == (Role.T0, 1, 1, 0x4401)
    assert [s.device_id for s in t.switches] == list(range(1, 9))
    # host 3 sits under T0 1, on its port 2 (1 + 3 % 2); uplink to T1 s is port 2 + 1 + s
    h3 = t.host("ch3")
    assert h3.t0_index == 1
    nic = h3.port(1)
    assert (nic.t0, nic.t0_port, nic.ifname) == ("ct0p1n1", 2, "ch3-eth1")
    assert nic.address == str(nic_address(1, 3))
    assert nic.mac == "02:00:c4:03:00:00" and nic.t0_mac == port_mac(0x4401, 2)
    up = t.peer("ct0p1n1", 2 + 1 + 1)
    assert up is not None and (up.node, up.port) == ("ct1p1n1", 2)
    assert t.find_link("ct0p0n0-ct1p0n1").b.node == "ct1p0n1"
    assert t.find_link("ct1p0n1-ct0p0n0").a.node == "ct0p0n0"
    assert t.find_link("ct1p0n1:1").a.node == "ct0p0n0"


def test_json_round_trip_is_exact() -> None:
    t = build_clos(3, 2, 4, 3, prefix="x", p4rt_address_format="unix:/tmp/{name}.sock")
    again = Topology.from_json(t.to_json())
    assert again.to_json() == t.to_json()
    assert again.switch("xt1p2n3").p4rt_address == "unix:/tmp/xt1p2n3.sock"


def _mutated(mutate) -> str:
    d = json.loads(build_clos(2, 2, 2, 2).to_json())
    mutate(d)
    return json.dumps(d)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["links"][9]["a"].__setitem__("port", 0), r"links\[9\]\.a\.port: port 0 is reserved"),
        (
            lambda d: d["links"][10]["b"].__setitem__("port", 1),
            r"links\[10\]\.b\.port: t1p0n0 port 1 is already cabled",
        ),
        (lambda d: d["switches"][2].__setitem__("usid", "4001"), r"switches\[2\]\.usid"),
        (
            lambda d: d["switches"][1].__setitem__("device_id", 1),
            r"switches\[1\]\.device_id: 1 is already used",
        ),
        (lambda d: d["switches"][0].__setitem__("role", "t9"), r"switches\[0\]\.role"),
        (
            lambda d: d["hosts"][1]["ports"][0].__setitem__("address", "fcbb:bb00:c009::1"),
            r"hosts\[1\]\.ports\[0\]\.address",
        ),
        (lambda d: d["hosts"][0]["ports"][1].__setitem__("mac", "02:00:C4"), r"hosts\[0\]\.ports\[1\]\.mac"),
        (lambda d: d["links"][0]["a"].__setitem__("ifname", "a-very-long-ifname"), r"links\[0\]\.a\.ifname"),
        (lambda d: d.__setitem__("block", "fcbb::/16"), r"block: .* must be a /32"),
        (lambda d: d.__setitem__("planes", "two"), r"planes: expected an integer"),
        (lambda d: d["links"].pop(), r"links: T0 t0p1n1 is not linked to T1 indices \[1\]"),
        (lambda d: d["switches"][0].pop("plane"), r"switches\[0\]\.plane: missing"),
    ],
)
def test_validation_names_the_bad_field(mutate, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        Topology.from_json(_mutated(mutate))


def test_bad_json_is_a_topology_error() -> None:
    with pytest.raises(TopologyError, match="<json>"):
        Topology.from_json("{not json")


def test_unknown_names_raise_key_error() -> None:
    t = build_clos(1, 1, 1, 1)
    with pytest.raises(KeyError, match="no switch named 'nope'"):
        t.switch("nope")
    with pytest.raises(KeyError, match="no link"):
        t.find_link("t0p0n0-h9")
