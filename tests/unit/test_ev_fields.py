"""OCP EV profiles: format fields, generated and explicit(-range) profiles with per-field
init/min/max/mask, deny rules over field ranges, up to 65,536 EVs, ev_min_active, and their
use by the agent, `mrc profile` and mrc-sim."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from mrc_fabric.ev import EV
from mrc_host.core import EvProfile, EvSet, EvState, PathSpace, TransportConfig
from mrc_host.core.ev_fields import ExpProfile, FieldDeny, GenField, GenProfile, field_values, scatter
from mrc_host.ev_profile import ProfileError, load, parse
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


# The OCP repository's examples/ev_expansion/ev_expansion.c, built with gcc and run on glibc
# (it seeds random() with srandom(0), so its output is fixed): per example, the compact EVs
# it prints (the EV bits, first field first) and the fields it expands each one to.
OCP_EXPANSION = {
    "Structured EV Explicit": (
        (16, 0, 0xFFFF),
        32,
        [0xF3B04256, 0xA6FCA7AE, 0x03514976, 0x33BF42BB, 0xB842B6C3, 0xD6952B28, 0xA470B360, 0xC7238D56],
        [(0xF3B0, 0x4256), (0xA6FC, 0xA7AE), (0x0351, 0x4976), (0x33BF, 0x42BB), (0xB842, 0xB6C3),
         (0xD695, 0x2B28), (0xA470, 0xB360), (0xC723, 0x8D56)],
    ),
    "Structured EV Generated w/ Fixed": (
        (16, 0x100, 0x000F),  # field 1: init 0x200
        8,
        [0xA4, 0x7F, 0xF8, 0x9F, 0x61, 0x92, 0x26, 0xC4],
        [(0x010A, 0x0204), (0x0107, 0x020F), (0x010F, 0x0208), (0x0109, 0x020F), (0x0106, 0x0201),
         (0x0109, 0x0202), (0x0102, 0x0206), (0x010C, 0x0204)],
    ),
    "Structured EV Generated w/ Fixed & Weird Mask": (
        (16, 0x1000, 0x0F0F),  # field 1: init 0x2000
        16,
        [0x3312, 0xE33E, 0xB5B5, 0xD05A, 0x24CF, 0x283E, 0xA8E0, 0x97FA],
        [(0x1303, 0x2102), (0x1E03, 0x230E), (0x1B05, 0x2B05), (0x1D00, 0x250A), (0x1204, 0x2C0F),
         (0x1208, 0x230E), (0x1A08, 0x2E00), (0x1907, 0x2F0A)],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(OCP_EXPANSION))
def test_the_ocp_ev_expansion_program_field_for_field(name: str) -> None:
    """Our expansion of the example's compact EVs gives every field it prints; a generated
    example's EVs are all among what our generated profile of the same fields enumerates."""
    (width, init0, mask), bits, compact, expected = OCP_EXPANSION[name]
    init1 = init0 * 2  # the example's field i starts from (i + 1) << 8 or << 12
    lo, hi = (1, (1 << mask.bit_count()) - 1) if init0 else (0, 0)
    fields = (GenField(width, init0, lo, hi, mask), GenField(width, init1, lo, hi, mask))
    wire = [(a << 16) | b for a, b in expected]
    if "Explicit" in name:
        exp = ExpProfile(format=(16, 16), fields=fields, values=tuple(compact))
        assert exp.bits == bits and list(exp.generate()) == wire
        return
    gen = GenProfile(format=(16, 16), fields=fields)
    assert gen.bits == bits
    assert [gen.expand(c) for c in compact] == wire
    assert [field_values(v, (16, 16)) for v in wire] == [list(f) for f in expected]
    assert set(wire) <= set(gen.generate())


def test_an_explicit_range_expands_through_the_fields_and_is_drawn_over_the_paths() -> None:
    """OCP's explicit range: compact EVs base .. base + count - 1, each expanded through the
    fields' init and mask; a connection draws its EVs from them, spread over the paths, and a
    deny rule over a field range keeps the ones it names out of the draw."""
    fields = (GenField(4, 0, 0, 0, 0x1), GenField(10, 0, 0, 0, 0x3), GenField(18, 0x2A000, 0, 0, 0xFF))
    exp = ExpProfile(fields=fields, base=0x100, count=0x700, deny=(FieldDeny(1, 3, 3),))
    assert exp.bits == 1 + 2 + 8 and exp.ev_count == 0x700
    # compact 0x1a5 = plane bit 0, T1 bits 0b01, entropy bits 0xa5 (over init 0x2a000)
    assert exp.expand(0x1A5) == EV(0, 1, 0x2A0A5).value
    assert exp.expand(0x4FF) == EV(1, 0, 0x2A0FF).value
    values = list(exp.generate())
    assert len(values) == 0x700 - 2 * 0x100  # T1 3 (compacts 0x300..0x3ff, 0x700..0x7ff) denied
    assert all(EV.decode(v).entropy >> 8 == 0x2A0 and EV.decode(v).t1 != 3 for v in values)
    s = EvSet(
        TransportConfig(max_evs=24, backup_evs_per_plane=0, ev_profile=EvProfile(fielded=exp)),
        PathSpace(2, 4),
        random.Random(3),
    )
    # plane 0 has T1 1-2 only (the range starts at compact 0x100), plane 1 T1 0-2
    assert s.evs_per_path() == {(0, 1): 6, (0, 2): 6, (1, 0): 4, (1, 1): 4, (1, 2): 4}
    assert set(s.entries) <= set(values)


def test_a_profile_field_narrower_than_its_format_field_is_zero_filled() -> None:
    """OCP: where a format field is wider than the profile's field, the extra high bits are 0."""
    exp = ExpProfile(format=(8, 8), fields=(GenField(4, 0xA, 0, 0, 0), GenField(8, 0, 0, 0, 0xFF)), count=2)
    assert [field_values(v, (8, 8)) for v in exp.generate()] == [[0x0A, 0x00], [0x0A, 0x01]]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"values": (0x800,)}, r"explicit.values\[0\]: 0x800 is wider than the 11 EV bits"),
        ({"values": (1, 1)}, "explicit.values: an EV is listed twice"),
        ({"base": 0x700, "count": 0x101}, "explicit.base: 0x700 \\+ count 257 runs past"),
        ({"count": 65_537}, "explicit.count: 1..65536"),
        ({}, "either values"),
        ({"values": (1,), "count": 1}, "either values"),
    ],
)
def test_bad_explicit_profiles_name_the_key(kwargs: dict[str, object], message: str) -> None:
    fields = (GenField(4, 0, 0, 0, 0x1), GenField(10, 0, 0, 0, 0x3), GenField(18, 0, 0, 0, 0xFF))
    with pytest.raises(ValueError, match=message):
        ExpProfile(fields=fields, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"explicit.fields\[1\].width: 11, wider than format\[1\]"):
        ExpProfile(fields=(GenField(4), GenField(11, 0, 0, 0, 1)), count=1)


def test_ev_counts_are_bounded_as_ocp_bounds_them() -> None:
    """At most 65,536 EVs (the OCP example's profile); ev_min_active at most the EV count."""
    with pytest.raises(ValueError, match=r"max_evs: 1\.\.65536"):
        TransportConfig(max_evs=65_537)
    with pytest.raises(ValueError, match=r"ev_min_active: 0..max_evs \(16"):
        TransportConfig(max_evs=16, ev_min_active=17)
    with pytest.raises(ProfileError, match="min_active: 200 is more than the 128 EVs"):
        parse({"min_active": 200})
    assert parse({"evs": 256, "min_active": 200}).min_active == 200


EXPLICIT_FILE = """
format = [4, 10, 18]
evs = 8
[explicit]
fields = [{width = 4, mask = 0x1}, {width = 10, mask = 0x3}, {width = 18, init = 0x2a000, mask = 0xff}]
base = 0
count = 2048
[[deny]]
field = 1
min = 3
max = 3
[[deny]]
plane = 1
t1 = 0
"""


def test_the_agent_file_takes_an_explicit_range_and_round_trips(tmp_path: Path) -> None:
    f = tmp_path / "evs.toml"
    f.write_text(EXPLICIT_FILE)
    prof = load(f)
    assert parse(prof.as_dict()) == prof
    exp = prof.values.fielded
    assert exp is not None and (exp.base, exp.count, exp.deny) == (0, 2048, (FieldDeny(1, 3, 3),))
    # the field-range rule is the profile's (never drawn); plane 1 / T1 0 is DENIED at the start
    assert [(r.plane, r.t1) for r in prof.values.deny] == [(1, 0)]
    s = EvSet(TransportConfig(**prof.transport_overrides()), PathSpace(2, 4), random.Random(2))
    assert all(EV.decode(v).t1 != 3 for v in s.entries)
    denied = [v for v, e in s.entries.items() if e.state is EvState.DENIED]
    assert denied and {(EV.decode(v).plane, EV.decode(v).t1) for v in denied} == {(1, 0)}
    listed = parse({"explicit": {"values": ["1a5", 0x4FF]}})
    assert listed.values.fielded is not None
    assert list(listed.values.fielded.generate()) == [0x1A5, 0x4FF]  # no fields: the EV itself


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[explicit]\ncount = 4\nvalues = [1]", "explicit: values = [compact EVs] or a range"),
        ("[explicit]\nbase = 4", "explicit: values = [compact EVs] or a range"),
        ("[explicit]\nvalues = []", "explicit.values: a non-empty list"),
        ('[explicit]\nvalues = ["xyz"]', "explicit.values[0]: 'xyz' is not a compact EV in hex"),
        ("[explicit]\ncount = 0", "explicit.count: must be an integer in 1..65536"),
        ("[explicit]\ncount = 2\ncolour = 1", "explicit.colour: unknown key"),
        ("[explicit]\ncount = 2\nfields = [{width = 4, mask = 0x10}]", "explicit.fields[0].mask: 0x10"),
        ("evs = 8\nmin_active = 9", "min_active: 9 is more than the 8 EVs"),
    ],
)
def test_bad_explicit_tables_name_the_key(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "evs.toml"
    f.write_text(body + "\n")
    with pytest.raises(ProfileError, match=str(f)) as err:
        load(f)
    assert message in str(err.value)


def test_a_connection_and_a_simulated_transfer_take_65536_evs() -> None:
    """The largest OCP profile end to end: 65,536 EVs drawn at random over 2 x 4 paths (8,192
    per path), a transfer that completes on them, and mrc-sim's report of their spread."""
    from mrc_host.sim.fabric import FabricShape
    from mrc_host.sim.report import summarise
    from mrc_host.sim.scenario import SimConfig, Simulation

    sim = Simulation(SimConfig(shape=FabricShape(planes=2, t1=4), size=256 << 10, max_evs=65_536))
    sim.run()
    r = summarise(sim)
    assert r["completed"] and r["data_ok"]
    assert r["ev_spread"] == {"evs": 65_536, "paths": 8, "evs_per_path": 8192.0}
    assert len(sim.sender.evset.entries) == 65_536 + 2 * 4  # and 4 backups per plane


SCENARIO = """
name = "profiles"
[fabric]
planes = 2
t0 = 2
t1 = 4
hosts_per_t0 = 2
[transport]
evs = 16
[transport.ev_profile]
min_active = 4
[[transport.ev_profile.deny]]
plane = 1
t1 = 2
[[traffic]]
pattern = "flow"
name = "a"
src = 0
dst = 2
size = "128KiB"
[[traffic]]
pattern = "flow"
name = "b"
src = 1
dst = 3
size = "128KiB"
evs = 8
ev_profile = {min_active = 2, explicit = {values = [0x400, 0x401, 0x402, 0x403, 0x1400, 0x1401, 0x1402,
  0x1403], fields = [{width = 4, mask = 0x1}, {width = 10, mask = 0x3}, {width = 18, mask = 0x3ff}]}}
"""


def test_scenario_profiles_deny_and_per_item_profiles() -> None:
    """A scenario's deny rules hold in mrc-sim (they were dropped unless folded into a
    generated profile), a traffic item may bring its own profile (its own min_active), and
    the JSON reports each connection's EVs, paths and EVs per path."""
    from mrc_host.sim.network import START_NS
    from mrc_host.sim.report import summarise_network

    sc = load_text(SCENARIO, "p.toml")
    assert load_text(to_toml(sc), "p.toml") == sc
    net, jobs = build(sc, sc.runs[0])
    a, b = net.connections
    denied_a = [v for v, e in a.sender.evset.entries.items() if e.state is EvState.DENIED]
    assert denied_a and {(EV.decode(v).plane, EV.decode(v).t1) for v in denied_a} == {(1, 2)}
    assert (1, 2) not in a.sender.evset.evs_per_path()
    assert (a.tcfg.ev_min_active, b.tcfg.ev_min_active) == (4, 2)
    assert b.tcfg.ev_profile.deny == () and b.tcfg.ev_profile.fielded is not None
    assert b.sender.evset.evs_per_path() == {(0, 1): 4, (1, 1): 4}  # the values name T1 1 only
    net.run(START_NS + 50_000_000)
    flows = {f["name"]: f for f in summarise_network(net, jobs, "mrc")["flows"]}
    assert flows["a"]["ev_spread"] == {"evs": 16, "paths": 7, "evs_per_path": round(16 / 7, 3)}
    assert flows["b"]["ev_spread"] == {"evs": 8, "paths": 2, "evs_per_path": 4.0}


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (
            ("min_active = 4", "min_active = 17"),
            "transport.ev_profile: ev_profile: min_active: 17 is more than the 16",
        ),
        (
            ("min_active = 2,", "min_active = 9,"),
            "traffic[1].ev_profile: ev_profile: min_active: 9 is more than the 8",
        ),
        (("[0x400,", "[0x4000,"), "traffic[1].ev_profile: ev_profile: explicit.values[0]: 0x4000 is wider"),
        (("evs = 16", "evs = 65537"), "transport.evs: must be 1..65536"),
    ],
)
def test_bad_scenario_profiles_name_the_key(edit: tuple[str, str], where: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(where)):
        load_text(SCENARIO.replace(*edit), "p.toml")


def test_mrc_profile_shows_a_files_evs_and_names_a_bad_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mrc_host.agent.cli import main

    f = tmp_path / "evs.toml"
    f.write_text(EXPLICIT_FILE)
    assert main(["profile", str(f), "--planes", "2", "--t1", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "explicit range" and d["profile_evs"] == 2048 and d["evs"] == 8
    states = {(r["plane"], r["t1"]): r["state"] for r in d["drawn"] if r["state"] == "DENIED"}
    assert set(states) == {(1, 0)}
    assert all(r["fields"][1] != 3 for r in d["drawn"])
    assert main(["profile", str(f), "--all"]) == 0 and "explicit range profile" in capsys.readouterr().out
    f.write_text(EXPLICIT_FILE.replace("count = 2048", "count = 4096"))
    assert main(["profile", str(f)]) == 2
    assert f"{f}: explicit.base: 0x0 + count 4096 runs past" in capsys.readouterr().err


def test_the_shipped_scenarios_and_the_agent_take_the_one_default_ev_count(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Scenario files that spelled the default out (evs = 128) would not follow it; the
    agent's flag help and its empty profile read it from the core."""
    import tomllib

    from mrc_host.agent.cli import main
    from mrc_host.core import DEFAULT_MAX_EVS
    from mrc_host.sim.scenario_file import load, shipped

    for path in shipped():
        raw = tomllib.loads(path.read_text()).get("transport", {})
        assert raw.get("evs") != DEFAULT_MAX_EVS, (
            f"{path.name}: drop evs = {DEFAULT_MAX_EVS}, it is the default"
        )
        if "evs" not in raw:
            assert load(path).evs == DEFAULT_MAX_EVS
    assert TransportConfig(**parse({}).transport_overrides()).max_evs == DEFAULT_MAX_EVS
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert f"planes (default {DEFAULT_MAX_EVS})" in " ".join(capsys.readouterr().out.split())
