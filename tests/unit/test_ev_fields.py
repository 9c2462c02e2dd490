"""OCP EV profiles: format fields, generated profiles with per-field init/min/max/mask,
deny rules over field ranges, up to 65,536 EVs, and their use by the agent and mrc-sim."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mrc_fabric.ev import EV
from mrc_host.agent.ev_profile import load, parse
from mrc_host.core import EvProfile, EvSet, PathSpace, TransportConfig
from mrc_host.core.ev_fields import FieldDeny, GenField, GenProfile, field_values, scatter
from mrc_host.sim.scenario_file import ScenarioError, build, load_text, to_toml


def test_the_ocp_expansion_example_field_for_field() -> None:
    """The OCP repository's EV-expansion example ("generated with fixed" and "fixed and weird
    mask"): two 16-bit fields; field i starts from init (i+1) << 8 (or << 12) and a counter
    from min 1 to max fills the bits of its mask, lowest mask bit first; the 32-bit EV is
    the fields one after the other, first field most significant."""
    fixed = GenProfile(
        format=(16, 16), fields=tuple(GenField(16, (i + 1) << 8, 1, 0xF, 0x000F) for i in range(2))
    )
    evs = list(fixed.generate())
    assert fixed.count == len(evs) == 15 * 15
    assert evs[0] == 0x0101_0201 and evs[-1] == 0x010F_020F
    # counters 3 and 0xc: fld0 = 0x0103, fld1 = 0x020c
    assert 0x0103_020C in evs and field_values(0x0103_020C, (16, 16)) == [0x0103, 0x020C]
    assert all(v >> 24 == 0x01 and (v >> 8) & 0xFF == 0x02 for v in evs)
    assert all(1 <= (v >> 16) & 0xF <= 15 and 1 <= v & 0xF <= 15 for v in evs)

    weird = GenProfile(
        format=(16, 16), fields=tuple(GenField(16, (i + 1) << 12, 1, 0xFF, 0x0F0F) for i in range(2))
    )
    # a counter of 0xab goes to mask bits 0-3 (b) and 8-11 (a), over init 0x1000 / 0x2000
    assert scatter(0xAB, 0x0F0F) == 0x0A0B
    values = set(weird.generate())
    assert weird.count == len(values) == 255 * 255
    assert 0x1A0B_2A0B in values and 0x1000_2001 not in values  # counter 0 is below min 1
    assert all((v >> 16) & 0xF0F0 == 0x1000 and v & 0xF0F0 == 0x2000 for v in values)


def test_the_ocp_controller_example_65536_evs_deny_a_field_range() -> None:
    """The OCP controller example: fields of 8, 4 and 4 bits, every bit generated (256 x 16 x
    16 = 65,536 EVs); the first tier has only 180 links, so its values 180-255 are denied."""
    fields = (GenField(8, 0, 0, 255, 0xFF), GenField(4, 0, 0, 15, 0xF), GenField(4, 0, 0, 15, 0xF))
    full = GenProfile(format=(8, 4, 4), fields=fields)
    assert full.count == 65_536 and len(set(full.generate())) == 65_536
    denied = GenProfile(format=(8, 4, 4), fields=fields, deny=(FieldDeny(0, 180, 255),))
    kept = list(denied.generate())
    assert len(kept) == 180 * 16 * 16
    assert max(field_values(v, (8, 4, 4))[0] for v in kept) == 179
    # the example's min_active (a quarter of the EVs) is a valid transport setting
    TransportConfig(max_evs=65_536, ev_min_active=65_536 // 4)
    with pytest.raises(ValueError, match="more than 65536"):
        GenProfile(format=(9, 8), fields=(GenField(9, 0, 0, 511, 0x1FF), GenField(8, 0, 0, 255, 0xFF)))


def test_a_connection_draws_65536_evs_from_a_generated_profile() -> None:
    gen = GenProfile(
        fields=(GenField(4, 0, 0, 7, 0xF), GenField(10, 0, 0, 15, 0x3FF), GenField(18, 0, 0, 511, 0x1FF))
    )
    cfg = TransportConfig(max_evs=65_536, ev_profile=EvProfile(generated=gen))
    s = EvSet(cfg, PathSpace(8, 16), random.Random(1))
    assert len(s.active_evs()) == 65_536 and set(s.entries) == set(gen.generate())


def test_a_generated_draw_spreads_over_paths_and_skips_denied_and_absent_ones() -> None:
    """T1 values 0-7 generated on a 4-T1 fabric, T1 3 denied: the draw uses T1 0-2 only,
    evenly, and entropy keeps its fixed high bits (init 0x100 under mask 0xff)."""
    gen = GenProfile(
        fields=(GenField(4, 0, 0, 1, 0xF), GenField(10, 0, 0, 7, 0x3FF), GenField(18, 0x100, 0, 255, 0xFF)),
        deny=(FieldDeny(1, 3, 3),),
    )
    s = EvSet(
        TransportConfig(max_evs=24, backup_evs_per_plane=2, ev_profile=EvProfile(generated=gen)),
        PathSpace(2, 4),
        random.Random(5),
    )
    active = [EV.decode(v) for v in s.active_evs()]
    assert len(active) == 24
    for plane in (0, 1):
        per_t1 = sorted(sum(1 for e in active if e.plane == plane and e.t1 == t1) for t1 in range(4))
        assert per_t1 == [0, 4, 4, 4]
    assert all(e.t1 != 3 and e.entropy >> 8 == 1 for e in active)
    assert {EV.decode(v).plane for v in s.backup_evs()} == {0, 1}
    with pytest.raises(ValueError, match="no EV of the profile names plane 1"):
        only_plane0 = GenProfile(
            fields=(GenField(4), GenField(10, 0, 0, 3, 0x3FF), GenField(18, 0, 0, 7, 0x7))
        )
        EvSet(TransportConfig(ev_profile=EvProfile(generated=only_plane0)), PathSpace(2, 4), random.Random(1))


PROFILE = """
format = [4, 10, 18]
evs = 32
min_active = 8
[generated]
fields = [{width = 4, max = 1, mask = 0xf}, {width = 10, max = 3, mask = 0x3ff},
          {width = 18, init = 0x2a000, max = 63, mask = 0x3f}]
[[deny]]
field = 1
min = 2
max = 3
[[deny]]
mask = 0xf0000000
value = 0x10000000
"""


def test_the_agent_file_takes_a_generated_profile_and_round_trips(tmp_path: Path) -> None:
    f = tmp_path / "evs.toml"
    f.write_text(PROFILE)
    prof = load(f)
    assert parse(prof.as_dict()) == prof
    cfg = TransportConfig(**prof.transport_overrides())
    assert cfg.ev_min_active == 8 and cfg.ev_profile.generated is not None
    s = EvSet(cfg, PathSpace(2, 4), random.Random(2))
    drawn = [EV.decode(v) for v in s.entries]
    assert {e.t1 for e in drawn} == {0, 1}  # the field-range rule keeps T1 2-3 out of the draw
    # the mask/value rule denies plane 1 at connection set-up (the agent marks them DENIED)
    assert {EV.decode(v).plane for v in prof.denied(sorted(s.entries))} == {1}


def test_mrc_sim_scenarios_take_the_same_profile() -> None:
    body = """
name = "gen"
[fabric]
planes = 2
t0 = 2
t1 = 4
[transport]
evs = 16
[transport.ev_profile]
min_active = 4
[transport.ev_profile.generated]
fields = [
  {width = 4, max = 1, mask = 0xf},
  {width = 10, max = 1, mask = 0x3ff},
  {width = 18, max = 15, mask = 0xf},
]
[[traffic]]
pattern = "flow"
src = 0
dst = 1
size = "256KiB"
"""
    sc = load_text(body, "gen.toml")
    assert load_text(to_toml(sc), "gen.toml") == sc  # the profile survives the round trip
    net, _ = build(sc, sc.runs[0])
    conn = net.connections[0]
    assert conn.tcfg.ev_min_active == 4
    assert {EV.decode(v).t1 for v in conn.sender.evset.entries} == {0, 1}
    assert all(EV.decode(v).entropy < 16 for v in conn.sender.evset.entries)
    with pytest.raises(ScenarioError, match=r"transport.ev_profile: ev_profile: generated.fields\[0\].mask"):
        load_text(body.replace("max = 1, mask = 0xf}", "max = 1, mask = 0x1f}"), "gen.toml")
