"""docs/design.md §3: the EV's low 14 bits in the UDP source port (always 0xC000-0xFFFF), the high 18
in the flow label; both halves reassemble to the EV, and pairs no EV produces are refused."""

from __future__ import annotations

import random

import pytest

from mrc_fabric.ev import EV, EvWireError, check_wire, ev_from_wire, ev_plane, ev_t1, flow_label, udp_sport

WELL_KNOWN = {547, 4789, 4791, 53, 443, 6081}  # DHCPv6, VXLAN, RoCEv2, DNS, HTTPS, Geneve


@pytest.mark.parametrize("value", [0, 1, 0x3FFF, 0x4000, 0xFFFFFFFF, 0x9ABCDEF0, 0x10040001])
def test_halves_reassemble_and_ports_stay_in_the_roce_range(value: int) -> None:
    sport, fl = udp_sport(value), flow_label(value)
    assert 0xC000 <= sport <= 0xFFFF and sport not in WELL_KNOWN
    assert 0 <= fl < 1 << 18
    check_wire(sport, fl)
    assert ev_from_wire(sport, fl) == value
    e = EV.decode(value)
    assert (e.udp_sport, e.flow_label) == (sport, fl)
    assert (ev_plane(value), ev_t1(value)) == (e.plane, e.t1)


def test_every_low_half_maps_to_a_distinct_port() -> None:
    ports = {udp_sport(low) for low in range(1 << 14)}
    assert len(ports) == 1 << 14 and min(ports) == 0xC000 and max(ports) == 0xFFFF
    rng = random.Random(7)
    for _ in range(2000):
        v = rng.getrandbits(32)
        assert ev_from_wire(udp_sport(v), flow_label(v)) == v


@pytest.mark.parametrize(("sport", "fl"), [(4789, 0), (0xBFFF, 0), (0xC000, 1 << 18), (0xC000, 0xFFFFF)])
def test_pairs_no_ev_produces_are_refused(sport: int, fl: int) -> None:
    with pytest.raises(EvWireError):
        check_wire(sport, fl)
