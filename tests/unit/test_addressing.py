from ipaddress import IPv6Address

import pytest

from mrc_fabric.addressing import (
    AddressingError,
    Tier,
    Usid,
    carrier,
    carrier_usids,
    host_usid,
    nic_address,
    path_usids,
    shift,
    t0_usid,
    t1_usid,
    top48,
    usid_prefix,
)
from mrc_fabric.ev import EV, ev_from_wire


def test_usid_examples_from_design() -> None:
    assert t0_usid(0, 1) == 0x4001
    assert t1_usid(1, 0) == 0x8400
    assert host_usid(1, 3) == 0xC403
    assert Usid.decode(0xC403) == Usid(Tier.HOST, 1, 3)


def test_carrier_and_shift_walk_the_path() -> None:
    usids = path_usids(plane=0, src_t0=0, dst_t0=1, dst_host=1, t1=0)
    addr = carrier(usids)
    assert addr == IPv6Address("fcbb:bb00:4000:8000:4001:c001::")
    assert carrier_usids(addr) == usids
    hops = []
    while carrier_usids(addr):
        hops.append(carrier_usids(addr)[0])
        addr = shift(addr)
    assert hops == usids
    assert addr == IPv6Address("fcbb:bb00::")


def test_shift_keeps_block_and_fills_zeros() -> None:
    addr = carrier([0x4000, 0x8000, 0x4001, 0xC001, 0x4002, 0x8001])
    assert shift(addr) == IPv6Address("fcbb:bb00:8000:4001:c001:4002:8001:0")
    assert top48(shift(addr)) == int(IPv6Address("fcbb:bb00:8000::")) >> 80


def test_prefixes_and_nic_addresses() -> None:
    assert str(usid_prefix(0x4001)) == "fcbb:bb00:4001::/48"
    assert nic_address(1, 3) == IPv6Address("fcbb:bb00:c403::1")
    assert path_usids(0, 2, 2, 5, t1=3) == [t0_usid(0, 2), host_usid(0, 5)]
    assert path_usids(0, 0, 1, 5, t1=None) == [t0_usid(0, 0), t0_usid(0, 1), host_usid(0, 5)]


@pytest.mark.parametrize("bad", [dict(plane=16, index=0), dict(plane=0, index=1024), dict(plane=-1, index=0)])
def test_bad_usid_fields_are_refused(bad: dict) -> None:
    with pytest.raises(AddressingError):
        Usid(Tier.T0, **bad)


def test_too_many_usids_refused() -> None:
    with pytest.raises(AddressingError):
        carrier([0x4000] * 7)


def test_ev_layout_round_trip() -> None:
    ev = EV(plane=3, t1=517, entropy=0x2ABCD)
    assert EV.decode(ev.value) == ev
    assert ev.value >> 28 == 3
    assert ev_from_wire(ev.udp_sport, ev.flow_label) == ev.value
    with pytest.raises(AddressingError):
        EV(plane=0, t1=0, entropy=1 << 18)
