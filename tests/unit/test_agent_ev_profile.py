"""The agent's EV profile file: every key, its bounds, and errors that name file and key."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mrc_fabric.ev import EV
from mrc_host.core import EvSet, EvState, PathSpace, TransportConfig
from mrc_host.ev_profile import AgentEvProfile, ProfileError, load, parse

PROFILE = """
format = "flowlabel+udp_sport"
evs = 16
backups_per_plane = 2
min_active = 8
cc = "window"
entropy_mask = 0x000ff
entropy_base = 0x2a000

[[deny]]
plane = 1
t1 = 0
[[deny]]
ev = "00000007"
"""


def test_a_profile_shapes_the_connections_ev_set(tmp_path: Path) -> None:
    f = tmp_path / "evs.toml"
    f.write_text(PROFILE)
    prof = load(f)
    cfg = TransportConfig(**prof.transport_overrides())
    assert (cfg.max_evs, cfg.backup_evs_per_plane, cfg.ev_min_active, cfg.cc_algorithm) == (
        16,
        2,
        8,
        "window",
    )
    evs = EvSet(cfg, PathSpace(2, 4), random.Random(3))
    values = sorted(evs.entries)
    assert len(values) == 16 + 4  # drawn: 16 active, 2 backups per plane
    assert all(EV.decode(v).entropy & ~0xFF == 0x2A000 for v in values)
    denied = prof.denied(values)
    assert denied and all((EV.decode(v).plane, EV.decode(v).t1) == (1, 0) for v in denied)
    # the core starts the connection with them DENIED, backups in their place
    assert all(evs.state(v) is EvState.DENIED for v in denied) and not set(denied) & set(evs.active_evs())
    assert prof.denied([7, EV(0, 1, 7).value]) == [7]
    assert parse(prof.as_dict()) == prof  # the file's keys round-trip


def test_an_empty_profile_changes_nothing() -> None:
    prof = parse({})
    assert prof == AgentEvProfile()
    assert TransportConfig(**prof.transport_overrides()) == TransportConfig()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('format = "dscp"', "format: 'flowlabel+udp_sport' or a list of field widths"),
        ("format = [16, 17]", "format: the widths add up to 33 bits"),
        ("evs = 0", "evs: must be an integer in 1..65536, got 0"),
        ("evs = 65537", "evs: must be an integer in 1..65536"),
        ("evs = true", "evs: must be an integer"),
        ('cc = "cubic"', "cc: 'cubic' is not one of fixed, nscc, nscc+rccc, rccc, window"),
        ("colour = 1", "unknown key 'colour'"),
        ("entropy_mask = 0x40000", "entropy_mask: must be an integer in 0..262143"),
        ("entropy_mask = 0xff\nentropy_base = 0x1", "entropy_base 0x1 must be 18 bits outside entropy_mask"),
        ('explicit = ["zz"]', "explicit[0]: 'zz' is not an EV in hex"),
        ('explicit = ["5", "5"]', "an EV is listed twice"),
        ("[[deny]]\ncolour = 2", "deny[0]: a table with some of ev, field, mask, max, min, plane, t1, value"),
        ("[[deny]]\nmin = 3", "deny[0]: min/max need a field"),
        ("[[deny]]\nfield = 3", "deny[0].field: must be an integer in 0..2"),
        ("[[deny]]\nfield = 1\nmin = 5\nmax = 4", "deny[0].max: must be an integer in 5..1023"),
        ("[[deny]]\nvalue = 3", "deny[0].value: needs a mask"),
        ("[generated]\nfields = [{width = 4, mask = 0x1f}]", "fields[0].mask: 0x1f has bits outside"),
        ("[generated]\nfields = [{width = 4, init = 16}]", "fields[0].init: 0x10 is wider than 4"),
        ("[generated]\nfields = [{width = 4, max = 4, mask = 0x3}]", "fit the mask's 2 bits"),
        (
            "[generated]\nfields = [{width = 5}]",
            "generated.fields[0].width: 5, wider than format[0] (4 bits)",
        ),
        ('explicit = ["1"]\n[generated]\nfields = [{width = 4}]', "lists its EVs or generates them"),
        ("[[deny]]\nplane = 16", "deny[0].plane: must be an integer in 0..15"),
        ("evs = [", "evs.toml"),  # not TOML: the parser's own message, with the file
    ],
)
def test_bad_profiles_name_file_key_and_reason(tmp_path: Path, body: str, message: str) -> None:
    f = tmp_path / "evs.toml"
    f.write_text(body + "\n")
    with pytest.raises(ProfileError, match=str(f)) as err:
        load(f)
    assert message in str(err.value)


def test_a_missing_file_is_a_profile_error(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="No such file"):
        load(tmp_path / "nope.toml")
