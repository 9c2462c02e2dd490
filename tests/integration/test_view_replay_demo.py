"""``mrc view runs/<demo run>`` replays the live demo with the EV states its results.json reports.

The demo (``python -m topologies.demo``, Linux target, prefix ``vd``) records the fabric
with the view's collector while it runs (``recording.jsonl``: the agents' EV states every
poll and their exact change times) and, independently, reads the sender's EVs itself just
before it injects each fault (``ev_states_at_injection`` in results.json, with the time
of that read). The replay, asked through the view's HTTP API for the frame at that time,
must show every EV through the fault in the state results.json gives.

It runs twice: on this machine as it is (no bpffs), and with a bpffs mounted at /sys/fs/bpf as
systemd mounts it on every Debian and Ubuntu host (in a private mount namespace).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from live_fabric import skip_without_agent

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root

REPO = Path(__file__).resolve().parents[2]
PREFIX = "vd"


# The demo as a user on a systemd host runs it: systemd mounts a bpffs at /sys/fs/bpf at boot,
# which a Mininet node still lists in /proc/mounts after mnexec put a fresh sysfs over /sys. The
# mount is made in a private mount namespace of the demo's own, so it never reaches the machine.
BPFFS_STATES = {
    "no bpffs": [],
    "systemd's bpffs": ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                        'mount -t bpf bpf /sys/fs/bpf && exec "$@"', "sh"],
}  # fmt: skip


def root_mounts() -> list[str]:
    return Path("/proc/1/mountinfo").read_text().splitlines()


@pytest.mark.parametrize("bpffs", list(BPFFS_STATES))
def test_the_replay_of_a_demo_run_shows_the_ev_states_of_results_json(bpffs: str) -> None:
    skip_without_agent()
    runs = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-runs-"))
    mounts = root_mounts()
    try:
        proc = subprocess.run(
            [
                *BPFFS_STATES[bpffs],
                sys.executable,
                "-m",
                "topologies.demo",
                "--target",
                "linux",
                "--prefix",
                PREFIX,
                "--runs",
                str(runs),
                "--size",
                "256M",
                "--link-rate",
                "0",  # unlimited, as this test was timed for; the monitor judges it all the same
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(600),
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert root_mounts() == mounts  # the demo's bpffs stayed in its own mount namespace
        (run,) = [p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()]
        check_fidelity(run, proc.stdout)
        check_replay(run)
    finally:
        subprocess.run(["rm", "-rf", str(runs)], check=False)


def check_fidelity(run: Path, stdout: str) -> None:
    """The demo says whether the run was faithful, in its summary, results.json and recording."""
    from mrc_fabric import recording

    result = json.loads((run / "results.json").read_text())
    verdict = result["fidelity"]
    assert "links: unlimited (asked for with --link-rate 0)" in stdout
    flat = " ".join(stdout.split())  # the demo wraps its lines at 120 columns
    assert all(f"- {' '.join(reason.split())}" in flat for reason in verdict["reasons"])  # each named
    said = [ln for ln in stdout.splitlines() if ln.startswith("fidelity: ")]
    assert said and said[0].startswith("fidelity: " + ("faithful" if verdict["faithful"] else "NOT FAITHFUL"))
    assert verdict["faithful"] == (verdict["reasons"] == [])
    _head, records = recording.read(run / "recording.jsonl")
    seen = [r for r in records if r["k"] == "fidelity"]
    assert seen and all(r["verdict"].startswith(("faithful", "not faithful: ")) for r in seen)


def check_replay(run: Path) -> None:
    from mrc_view.replay import load
    from mrc_view.server import ViewServer

    result = json.loads((run / "results.json").read_text())
    replays = load(run)
    assert replays[0].name == "recording.jsonl" and replays[0].head["source"] == "demo"
    started = replays[0].head["started_unix"]
    conn_id = f"{result['src']}>{result['dst']}/{result['mode']}"
    server = ViewServer(replays=replays)
    server.start()
    try:
        faults = [f for f in result["faulted"]["faults"] if f["injected_at"] is not None]
        assert len(faults) == 2, result["faulted"]["faults"]
        for f in faults:
            t = f["ev_states_read_unix"] - started
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=scaled(30))
            conn.request(
                "GET", f"/api/frame?t={t}&token={server.token}", headers={"Host": f"127.0.0.1:{server.port}"}
            )
            resp = conn.getresponse()
            assert resp.status == 200
            frame = json.loads(resp.read())
            conn.close()
            (shown,) = [c for c in frame["conns"] if c["id"] == conn_id]
            states = {e[0]: e[3] for e in shown["evs"]}
            expected = f["ev_states_at_injection"]
            assert expected, f
            assert {ev: states.get(ev) for ev in expected} == expected, f["label"]
            # and the fault itself: not on the page before its injection, on it soon after
            assert f["id"] not in {i for ids in frame["faults_on"].values() for i in ids}, f["label"]
            injected = replays[0].fault_times()[faults.index(f)]
            shown_at = [
                k
                for k in range(1, 41)
                if f["id"] in str(replays[0].frame_at(injected + k * 0.025)["faults_on"])
            ]
            assert shown_at, f"{f['label']}: not marked within 1 s of its injection"
    finally:
        server.stop()
