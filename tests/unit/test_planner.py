"""Planner against the public MRC figures (docs/mrc-facts.md)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from controller.planner import PlanError, compare, plan_fabric


def test_two_tier_multi_plane_reaches_131072_gpus() -> None:
    p = plan_fabric(131072, 800, 8, 51.2, 2)
    assert p.switch_ports == 512 and p.port_gbps == 100
    t0, t1 = p.tier_counts
    assert (t0.ports_down, t0.ports_up) == (256, 256)
    assert t1.ports_down == 512  # each T1 connects 512 T0s
    assert t0.switches == 512 * 8 and t1.switches == 256 * 8
    assert p.max_gpus_strict == 131072 and p.fits_strict
    assert p.longest_path_switches == 3
    assert p.link_loss_fraction == pytest.approx(0.004, abs=0.0002)  # 0.4 %
    assert p.nic_port_loss_fraction == Fraction(1, 8)


def test_paper_ratios_two_thirds_optics_three_fifths_switches() -> None:
    c = compare()
    assert (c.multi_plane.optics_modules, c.single_plane.optics_modules) == (524288, 786432)
    assert c.optics_ratio == pytest.approx(2 / 3)
    assert Fraction(c.multi_plane.switches, c.single_plane.switches) == Fraction(3, 5)
    assert c.single_plane.longest_path_switches == 5
    assert c.single_plane.link_loss_fraction == pytest.approx(0.03, abs=0.002)  # 3 % in an 800G plane
    assert not c.single_plane.fits_strict  # 64-port switches: 65,536 GPUs in a strict 3-tier fat tree


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(PlanError, match="switch_tbps"):
        plan_fabric(1024, 800, 8, 51.3, 2)
    with pytest.raises(PlanError, match="gpus"):
        plan_fabric(0, 800, 8, 51.2, 2)
