"""Scenario files: round trip, precise errors for bad files, determinism, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mrc_fabric.frames import DATA_OVERHEAD
from mrc_host.sim import scenario_file as sf
from mrc_host.sim.cli import main
from mrc_host.sim.network import START_NS

SMALL = """
name = "small-incast"
reproduces = "test"
seed = 5
modes = ["mrc", "single-path"]
faults = ["loss=0.01:p0-t0_0-t1_1@10%"]

[fabric]
planes = 2
t0 = 3
t1 = 2
hosts_per_t0 = 2
link_delay = "500ns"
buffer = "1MiB"

[transport]
evs = 16
cc = {md_gain = 0.4}
nscc = {max_md_jump = 0.3}

[[traffic]]
pattern = "incast"
name = "incast"
senders = [2, 3, 4]
dst = 0
size = "256KiB"

[[traffic]]
pattern = "flow"
name = "bystander"
src = 5
dst = 1
size = "512KiB"

[[traffic]]
pattern = "background"
name = "bg"
pairs = [[4, 2]]
size = "64KiB"
"""


def write(tmp_path: Path, text: str, name: str = "sc.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_round_trip(tmp_path: Path) -> None:
    sc = sf.load(write(tmp_path, SMALL))
    again = sf.load(write(tmp_path, sf.to_toml(sc), "again.toml"))
    assert again == sc
    assert [t.pattern for t in again.traffic] == ["incast", "flow", "background"]
    assert again.cc == {"md_gain": 0.4} and again.shape.link_delay_ns == 500
    assert again.nscc == {"max_md_jump": 0.3}
    assert "probe_bytes" not in sf.to_toml(sc)  # (the default is not written: files stay as they were)
    free_text = SMALL.replace("planes = 2", "planes = 2\nprobe_bytes = 0", 1)
    free = sf.load(write(tmp_path, free_text, "free.toml"))
    assert free.shape.probe_bytes == 0
    assert sf.load(write(tmp_path, sf.to_toml(free), "free2.toml")) == free


@pytest.mark.parametrize(
    ("patch", "key", "reason"),
    [
        (("planes = 2", "planes = 0"), "fabric.planes", "must be 1..16"),
        (("planes = 2", "planez = 2"), "fabric.planez", "unknown key"),
        (("planes = 2", "planes = 2\nprobe_bytes = -1"), "fabric.probe_bytes", "must be 0..9000, got -1"),
        (('link_delay = "500ns"', "link_delay = 500"), "fabric.link_delay", "needs a unit"),
        (('size = "256KiB"', 'size = "lots"'), "traffic[0].size", "use bytes or a unit"),
        (("dst = 0", "dst = 99"), "traffic[0].dst", "host 99 is not one of 0..5"),
        (('pattern = "incast"', 'pattern = "multicast"'), "traffic[0].pattern", "unknown pattern"),
        (('modes = ["mrc", "single-path"]', 'modes = ["mrc", "rdma"]'), "modes[1]", "unknown mode"),
        (("cc = {md_gain = 0.4}", "cc = {md_gian = 0.4}"), "transport.cc.md_gian", "unknown parameter"),
        (("cc = {md_gain = 0.4}", 'cc = {md_gain = "big"}'), "transport.cc.md_gain", "must be float"),
        (("max_md_jump = 0.3", "max_md_jmp = 0.3"), "transport.nscc.max_md_jmp", "unknown parameter"),
        (("@10%", "@10%-5%"), "faults[0]", "ends before it starts"),
        (("p0-t0_0-t1_1", "p0-t0_0-t1_9"), "faults[0]", "names no link or switch"),
        (("pairs = [[4, 2]]", "pairs = [[4, 4]]"), "traffic[2].pairs", "sends to itself"),
        (("seed = 5", "seed = 5\nseed = 6"), "-", "not valid TOML"),
        (('size = "256KiB"', 'size = "1000GiB"'), "traffic[0].size", "must be 1 B .. 1 GiB"),
        (("t0 = 3\nt1 = 2", "t0 = 1000\nt1 = 1000"), "fabric.t1", "4008000 ports"),
        (
            ("t0 = 3\nt1 = 2\nhosts_per_t0 = 2", "t0 = 8\nt1 = 2\nhosts_per_t0 = 1024"),
            "fabric.hosts_per_t0",
            "8192 hosts, at most 4096",
        ),
    ],
)
def test_bad_files_name_file_key_and_reason(
    tmp_path: Path, patch: tuple[str, str], key: str, reason: str
) -> None:
    assert patch[0] in SMALL
    path = write(tmp_path, SMALL.replace(patch[0], patch[1], 1))
    with pytest.raises(sf.ScenarioError) as exc:
        sf.load(path)
    assert exc.value.file == str(path) and exc.value.key == key
    assert reason in exc.value.reason
    assert str(path) in str(exc.value) and key in str(exc.value)


def test_too_many_connections(tmp_path: Path) -> None:
    text = SMALL.replace("hosts_per_t0 = 2", "hosts_per_t0 = 100") + (
        '\n[[traffic]]\npattern = "all-to-all"\nname = "a2a"\nsize = "4KiB"\n'
    )
    with pytest.raises(sf.ScenarioError, match="traffic: 89705 connections in all, at most 65536"):
        sf.load(write(tmp_path, text))


def test_missing_traffic_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(sf.ScenarioError, match="traffic: missing"):
        sf.load(write(tmp_path, 'name = "x"\n'))
    with pytest.raises(sf.ScenarioError, match="cannot read"):
        sf.load(tmp_path / "nope.toml")


def test_same_seed_same_json_and_another_seed_differs(tmp_path: Path) -> None:
    sc = sf.load(write(tmp_path, SMALL))
    a, b = sf.run_scenario(sc), sf.run_scenario(sc)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    for run in a["runs"].values():
        assert run["completed"] and run["data_ok"]
        assert run["jobs"]["bg"]["background"] and run["flows"][-1]["writes_done"] >= 1
    c = sf.run_scenario(sf.load(write(tmp_path, SMALL.replace("seed = 5", "seed = 6"), "c.toml")))
    assert json.dumps(a["runs"], sort_keys=True) != json.dumps(c["runs"], sort_keys=True)


def test_cli_scenario_mode_override_and_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, SMALL)
    out = tmp_path / "out"
    assert main(["--scenario", str(path), "--mode", "ecmp", "--json", "--out", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["runs"]) == ["ecmp"]
    assert {f["mode"] for f in result["runs"]["ecmp"]["flows"]} == {"ecmp"}
    assert json.loads((out / "small-incast.json").read_text()) == result
    assert (out / "small-incast.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(SystemExit):
        main(["--scenario", str(path), "--planes", "4"])
    assert "--planes: only for one connection" in capsys.readouterr().err
    bad = write(tmp_path, SMALL.replace("dst = 0", "dst = 99"), "bad.toml")
    with pytest.raises(SystemExit) as exc:
        main(["--scenario", str(bad)])
    assert exc.value.code == 2 and "traffic[0].dst" in capsys.readouterr().err


def test_every_shipped_scenario_loads_and_names_its_result() -> None:
    files = sf.shipped()
    assert len(files) >= 1
    for path in files:
        sc = sf.load(path)
        assert sc.name == path.stem and sc.reproduces
        assert sf.load_text(sf.to_toml(sc)) == sc


def test_shape_bench_writes_its_table(tmp_path: Path) -> None:
    from bench import sim_shapes

    args = ["--out", str(tmp_path), "--quick", "--seeds", "2", "--only", "two-flows-one-ev", "--no-progress"]
    assert sim_shapes.main(args) == 0
    summary = json.loads((tmp_path / "sim_shapes.json").read_text())
    (row,) = summary["rows"]
    assert row["scenario"] == "two-flows-one-ev" and row["paper"].startswith("Second flow")
    assert {"mrc", "single-path", "ecmp"} <= set(row["metrics"])
    assert row["seeds"] == [1, 2] and all(len(f["values"]) == 2 for f in row["figures"])
    assert (tmp_path / "sim_shapes.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "sim_shapes_seeds.png").read_bytes()[:4] == b"\x89PNG"
    assert "| paper's shape |" in (tmp_path / "sim_shapes.md").read_text()


def test_nscc_table_reaches_the_connections(tmp_path: Path) -> None:
    from mrc_host.sim.network import FlowSpec, Network

    sc = sf.load(write(tmp_path, SMALL))
    net = Network(sc.shape, sc.seed)
    conn = net.add_flow(FlowSpec("f", 0, 5, nscc=dict(sc.nscc)), 64 << 10)
    assert conn.tcfg.nscc.max_md_jump == 0.3 and conn.tcfg.cc_algorithm == "nscc"


ROCE = SMALL.replace(
    'modes = ["mrc", "single-path"]',
    'runs = [{name = "mrc", mode = "mrc"},\n'
    '  {name = "sp", mode = "single-path", qps_per_pair = 2, config = {cc_algorithm = "fixed"}}]',
).replace(
    'src = 5\ndst = 1\nsize = "512KiB"',
    'src = 5\ndst = 1\nsize = "512KiB"\nshare_ev_with = "incast"\nshare_ev_modes = ["single-path"]',
)


def test_roce_runs_spread_queue_pairs_over_planes_and_pin_the_bystander(tmp_path: Path) -> None:
    """A run's own transport config, an incast's queue pairs (one per plane in single-path),
    and a bystander pinned onto the incast's first path only in the modes named."""
    sc = sf.load(write(tmp_path, ROCE))
    assert sf.load(write(tmp_path, sf.to_toml(sc), "again.toml")) == sc
    mrc, sp = sc.runs
    net, jobs = sf.build(sc, sp)
    incast, bystander = jobs[0], jobs[1]
    assert len(incast.connections) == 6 and len(incast.rank_done_ns) == 3  # 3 senders x 2 QPs
    assert [c.spec.pin_path[0] for c in incast.connections if c.spec.pin_path] == [0, 1] * 3
    assert {c.tcfg.cc_algorithm for c in net.connections} == {"fixed"}
    assert bystander.connections[0].spec.pin_path == incast.connections[0].spec.pin_path
    net, jobs = sf.build(sc, mrc)
    assert len(jobs[0].connections) == 3 and jobs[1].connections[0].spec.pin_path is None
    assert {c.tcfg.cc_algorithm for c in net.connections} == {"nscc"}
    bad = ROCE.replace('share_ev_with = "incast"\n', "")
    with pytest.raises(sf.ScenarioError, match="share_ev_modes: only with share_ev_with"):
        sf.load(write(tmp_path, bad, "bad.toml"))


def test_stagger_starts_an_items_pairs_in_turn_and_round_trips() -> None:
    text = """
[fabric]
planes = 1
t0 = 4
[[traffic]]
pattern = "incast"
name = "in"
dst = 0
senders = [1, 2, 3]
size = "64KiB"
start = "5us"
stagger = "20us"
"""
    sc = sf.load_text(text)
    assert sc.traffic[0].stagger_ns == 20_000
    net, _jobs = sf.build(sc, sc.runs[0])
    net.run(sc.time_limit_ns)
    posted = [c.writes[0].posted_ns - net.connections[0].writes[0].posted_ns for c in net.connections]
    assert posted == [0, 20_000, 40_000]
    assert sf.load_text(sf.to_toml(sc)).traffic == sc.traffic
    with pytest.raises(sf.ScenarioError, match=r"traffic\[0\]\.stagger: only for"):
        sf.load_text(
            text.replace('"incast"', '"ring-allreduce"').replace("senders = [1, 2, 3]", "hosts = [0, 1]")
        )


SLOW_FROM_THE_START = """
name = "slow from the start"
seed = 3
faults = ["rate=10:h0-p1@0"]

[fabric]
planes = 2
t0 = 2
t1 = 2
hosts_per_t0 = 1

[[traffic]]
pattern = "flow"
name = "f"
src = 0
dst = 1
size = "64KiB"
"""


def test_a_fault_from_the_start_applies_to_the_first_packets() -> None:
    """Defect: ``build`` attached a scenario's faults after its traffic, whose first packets
    leave as the write is posted: a NIC port at 10 Gb/s from ``@0`` sent them at 100 (and its
    NIC said 100), so the slow plane's first window was fast at the NIC and slow after it."""
    sc = sf.load_text(SLOW_FROM_THE_START, "t")
    net, _ = sf.build(sc, sc.runs[0])
    port = net.fabric.nic_up[0][1]
    assert port.tx_packets >= 1  # (the first window has left already, before the run)
    frame_ns_at_10g = (4096 + DATA_OVERHEAD) * 8 / 10
    assert port.busy_until - START_NS >= frame_ns_at_10g  # serialised at 10 Gb/s, not 100
