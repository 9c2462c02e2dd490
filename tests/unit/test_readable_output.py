"""What the testbed prints is read by a person: lines that fit, every phrase explained, every
subcommand listed, progress lines in a log, files where the docs say they are."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mrc_fabric.ev import EV
from topologies.demo import WIDTH, _line, print_summary

EVS = [str(EV(plane=0, t1=0, entropy=i)) for i in range(64)]


def faulted_run(undone: int = 0) -> dict[str, Any]:
    """A demo result with 64 EVs through each fault and 16 T1s: the lists that ran to 598 columns."""
    summary = {"ok": True, "verified": True, "seconds": 14.2, "goodput_mbit_s": 9.4, "retransmissions": 8,
               "evs_retired": 68, "evs_undone": undone, "srtt_us": 7280.0, "min_rtt_us": 650.0}  # fmt: skip
    changes = [{"t": 4.7 + i / 1000, "ev": ev, "plane": 0, "t1": 0, "old": "GOOD", "new": "ASSUMED_BAD",
                "reason": "loss of psn 7"} for i, ev in enumerate(EVS)]  # fmt: skip
    fault = {"label": "black hole t0p0n0-t1p0n0", "kind": "blackhole", "injected_at": 4.6, "landed_at": 4.62,
             "acked_at_injection": 5 << 20, "data_packets_lost": 4, "switch_fault_drops": 246,
             "evs_through_it": EVS, "ev_states_at_injection": dict.fromkeys(EVS, "GOOD"),
             "error": ""}  # fmt: skip
    t1s = {f"t1p{p}n{i}": 10_000_000 + i for p in range(2) for i in range(8)}
    run = {"summary": summary, "wall_s": 14.3, "bytes_per_plane": {"0": 8_800_000, "1": 8_800_000},
           "bytes_per_t1": t1s}  # fmt: skip
    clean = {**run, "summary": {**summary, "seconds": 14.15, "retransmissions": 0, "evs_retired": 0}}
    stray = {"t": 9.0, "ev": str(EV(plane=1, t1=3, entropy=9)), "plane": 1, "t1": 3, "old": "GOOD",
             "new": "ASSUMED_BAD", "reason": "timeout"}  # fmt: skip
    return {
        "target": "bmv2",
        "target_reason": "auto: simple_switch_grpc and mrc_switch.json found",
        "link_rate_mbit_s": 5,
        "link_rate_source": "not calibrated here for bmv2/2x2x2x2 (mrc-testbed calibrate); BMv2's default",
        "departure_clock": "pacer",
        "src": "h0",
        "dst": "h3",
        "size": 16 << 20,
        "mode": "mrc",
        "t1": 8,
        "clean": {**clean, "faults": [], "ev_changes": [], "evs": []},
        "faulted": {
            **run,
            "faults": [fault],
            "ev_changes": [*changes, stray],
            "evs": [{"ev": ev, "final_state": "ASSUMED_BAD"} for ev in EVS],
        },
        "recovery_after_clear_s": 0.11,
        "ev_states_after_clear": dict.fromkeys(EVS, "GOOD"),
        "fidelity": {
            "faithful": False,
            "reasons": ["agent h0 starved: " + "waited 40 % " * 20],
            "figures": {},
        },
    }


def test_every_line_of_the_demo_summary_fits(capsys: pytest.CaptureFixture[str]) -> None:
    print_summary(faulted_run())
    out = capsys.readouterr().out
    long = [line for line in out.splitlines() if len(line) > WIDTH]
    assert long == [], long
    assert "64 EVs cross it (64 GOOD then)" in out  # the list of 64 summarised
    assert "... 60 more, the last at 4.76 s" in out
    assert "retransmissions" in out and "EVs" in out


def test_each_phrase_says_what_it_means(capsys: pytest.CaptureFixture[str]) -> None:
    r = faulted_run()
    assert "back at once" not in _line(r["faulted"])  # nothing put back: no riddle about it
    undone = _line(faulted_run(undone=3)["faulted"])
    assert "3 put back at once (a packet taken for lost came late)" in undone
    print_summary(r)
    out = " ".join(capsys.readouterr().out.split())  # wrapped lines read as one text
    assert "1.00x: the hosts' links set the pace; the T1 uplinks left in a plane carry" in out
    assert "acknowledgements and probe replies return on the receiver's own EVs" in out


def test_mrc_testbed_help_lists_every_subcommand() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "topologies.testbed_main", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    for sub in ("calibrate", "switches", "p4 SWITCH", "p4rt-shell SWITCH"):
        assert f"\n  {sub}" in out, out


def test_the_summary_names_no_empty_reason(tmp_path: Path) -> None:
    from mrc_fabric.topology import build_clos
    from topologies.target import TargetChoice
    from topologies.testbed import summary

    tb = SimpleNamespace(
        topology=build_clos(2, 2, 2, 2),
        run=SimpleNamespace(path=tmp_path, controller_socket=tmp_path / "controller.sock"),
        choice=TargetChoice(build_clos(1, 1, 1, 1).switches[0].target, "mn"),
        config=SimpleNamespace(link_rate=None),
        rate_source="",
        pipeline=None,
        agents_note="",
        plain_note="",
    )
    text = summary(tb)  # type: ignore[arg-type]
    assert "links: unlimited\n" in text + "\n" and "()" not in text
    assert f"switches: {tmp_path / 'switches.json'}" in text


def test_events_jsonl_is_there_from_the_start(tmp_path: Path) -> None:
    from topologies.rundir import RunDir
    from topologies.supervisor import Supervisor

    run = RunDir.create(tmp_path, latest=False)
    sup = Supervisor(run, say=lambda _m: None)
    sup.start()
    try:
        assert (run.path / "events.jsonl").read_text() == ""
    finally:
        sup.stop()


class FakeNet:
    """Runs in three slices, as a long simulation does between progress updates."""

    def __init__(self) -> None:
        self.slices = 0
        self.progress = 0.0
        self.elapsed_ns = 0

    def run(self, limit_ns: int, max_events: int | None = None) -> bool:
        self.slices += 1
        self.progress, self.elapsed_ns = self.slices / 3, self.slices * 1000
        return self.slices >= 3


def test_progress_without_a_terminal_is_lines_not_blanks(monkeypatch: pytest.MonkeyPatch) -> None:
    from mrc_host.sim import progress

    err = io.StringIO()  # no terminal
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.0)
    progress.run_with_progress(FakeNet(), 10**9, "mrc-sim test", show=True)  # type: ignore[arg-type]
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith("mrc-sim test: ") for line in lines), lines
    assert "100.0% of the bytes placed, 3.0 us simulated" in lines[-1]


def test_a_sweep_without_a_terminal_says_each_point(monkeypatch: pytest.MonkeyPatch) -> None:
    from mrc_host.sim.sweep import _Bar

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with _Bar(2, "sweep x", True) as bar:
        bar.console.file = err
        bar.advance(True)
        bar.advance(False)
    assert "sweep x: 1/2 points, 1 ok, 0 failed" in err.getvalue()
    assert "sweep x: 2/2 points, 1 ok, 1 failed" in err.getvalue()


def test_switch_records_read_back_are_checked(tmp_path: Path) -> None:
    from topologies.switch_records import SwitchRecordError, load_switch_records

    with pytest.raises(SwitchRecordError, match="missing"):
        load_switch_records(tmp_path)
    (tmp_path / "switches.json").write_text("{")
    with pytest.raises(SwitchRecordError, match=r"switches\.json"):
        load_switch_records(tmp_path)
    good = {"target": "bmv2", "p4info": "x", "controller_election_id": "2,0", "switches": [
        {"name": "t0p0n0", "role": "t0", "plane": 0, "index": 0, "target": "bmv2", "device_id": 1,
         "p4runtime": "unix:/r/t0p0n0.p4rt.sock", "thrift_port": 9090, "cli_argv": ["simple_switch_CLI"],
         "cli_env": {"PYTHONPATH": "/opt/x"}}]}  # fmt: skip
    (tmp_path / "switches.json").write_text(json.dumps(good))
    rec = load_switch_records(tmp_path)
    assert rec.switch("t0p0n0").cli_shell == "PYTHONPATH=/opt/x simple_switch_CLI"
    with pytest.raises(SwitchRecordError, match="no switch 'nope'"):
        rec.switch("nope")
    for key, bad in (("thrift_port", 70000), ("device_id", "1"), ("cli_argv", "rm -rf /")):
        broken = json.loads(json.dumps(good))
        broken["switches"][0][key] = bad
        (tmp_path / "switches.json").write_text(json.dumps(broken))
        with pytest.raises(SwitchRecordError, match=rf"switches\[0\]\.{key}"):
            load_switch_records(tmp_path)


def test_typed_results_and_faults_at_fractions() -> None:
    from topologies.experiment import FaultAt, Progress, TransferResult

    with pytest.raises(ValueError, match=r"FaultAt\.at"):
        FaultAt(1.0, "blackhole", "a-b")
    s = {"ok": True, "verified": True, "bytes": 8, "bytes_acked": 8, "seconds": 0.5, "goodput_mbit_s": 1e-4}
    r = TransferResult.from_summary("h0", "h3", "mrc", s, 0.6)
    assert (r.ok, r.goodput_mbit_s, r.retransmissions, r.summary["bytes"]) == (True, 1e-4, 0, 8)
    p = Progress.from_line({"event": "progress", "bytes": 8, "bytes_acked": 4, "bytes_delivered": 6})
    assert (p.bytes_acked, p.bytes_delivered, p.queued) == (4, 6, False)
