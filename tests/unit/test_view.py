"""The web view without a fabric: recordings, replay, the security checks of its server."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from mrc_fabric import recording
from mrc_host.sim.cli import main as sim_main
from mrc_host.sim.network import START_NS
from mrc_view.replay import Replay, load
from mrc_view.server import ViewServer

START_US = START_NS / 1e3
FAULTS = ["--fault", "blackhole:p0-t0_0-t1_1@30%", "--fault", "switch-down:p1-t1_2@55%-80%"]


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim-run")
    rc = sim_main(
        ["--planes", "2", "--t1", "4", "--size", "8MiB", *FAULTS, "--record", str(out), "--no-progress"]
    )
    assert rc == 0
    return out


def test_the_simulator_records_what_the_replay_needs(sim_run: Path) -> None:
    head, records = recording.read(sim_run / "recording.jsonl")
    assert head["source"] == "mrc-sim" and head["link_mbps"] == 100_000
    kinds = {r["k"] for r in records}
    assert kinds == {"sample", "ev", "faults", "event"}
    links = {lk["name"] for lk in head["graph"]["links"]}
    assert {"p0-t0_0-t1_1", "h0-p0", "h1-p1"} <= links and len(links) == 2 * (2 + 2 * 4)
    result = json.loads((sim_run / "result.json").read_text())
    sender_changes = [e for e in result["ev_timeline"] if e["side"] == "sender"]
    assert len([r for r in records if r["k"] == "ev"]) == len(sender_changes)


def states_at(replay: Replay, t: float, plane: int, t1: int) -> set[str]:
    frame = replay.frame_at(t)
    (conn,) = frame["conns"]
    return {e[3] for e in conn["evs"] if (e[1], e[2]) == (plane, t1)}


def test_replay_shows_each_fault_and_the_evs_it_retired_at_the_right_times(sim_run: Path) -> None:
    (replay,) = load(sim_run)
    result = json.loads((sim_run / "result.json").read_text())
    hole, down = sorted(result["faults"], key=lambda f: f["start_us"])
    # the result's times count from the loop's clock, the recording's from the run's start
    t_hole, t_down = (hole["start_us"] - START_US) / 1e6, (down["start_us"] - START_US) / 1e6
    assert replay.fault_times() == pytest.approx([t_hole, t_down])
    before, after = replay.frame_at(t_hole * 0.99), replay.frame_at(t_hole + 1e-9)
    assert before["faults_on"] == {} and after["faults_on"] == {"p0-t0_0-t1_1": ["f1"]}
    assert states_at(replay, t_hole * 0.99, 0, 1) == {"GOOD"}
    # the EVs via plane 0 / T1 1 are ASSUMED_BAD at the first time the simulator retired one
    retired = min(
        e["t_us"]
        for e in result["ev_timeline"]
        if e["side"] == "sender" and e["new"] == "ASSUMED_BAD" and int(e["ev"], 16) >> 28 == 0
    )
    assert "ASSUMED_BAD" in states_at(replay, retired / 1e6, 0, 1)
    # the switch is marked down while its fault lasts, and not after
    assert "p1-t1_2" in replay.frame_at(t_down + 1e-9)["down"]
    assert "p1-t1_2" not in replay.frame_at((down["end_us"] - START_US) / 1e6 + 1e-9)["down"]
    # seeking backwards gives the same frame as seeking forwards
    first = json.dumps(replay.frame_at(t_down))
    replay.frame_at(0.0)
    assert json.dumps(replay.frame_at(t_down)) == first


def test_a_bad_recording_is_named_by_file_and_line(tmp_path: Path) -> None:
    head = recording.header("test", "t", 0.0, recording.graph(1, [], []))
    path = tmp_path / "recording.jsonl"
    good = json.dumps(head) + "\n" + json.dumps({"k": "event", "t": 1.0, "kind": "x", "text": "y"}) + "\n"
    path.write_text(good + '{"k": "event", "t": 2')  # torn last line: skipped
    assert len(recording.read(path)[1]) == 1
    for bad, why in (
        ('{"k": "warp", "t": 1}\n', "k: 'warp'"),
        ('{"k": "event", "t": -1}\n', "t: '-1'"),
        ("[1, 2]\n", "a JSON object"),
        ("not json\n", "not JSON"),
    ):
        path.write_text(good + bad)
        with pytest.raises(recording.RecordingError, match=f"recording.jsonl:3: .*{why}"):
            recording.read(path)
    path.write_text(json.dumps({**head, "version": 99}) + "\n")
    with pytest.raises(recording.RecordingError, match="version 99"):
        recording.read(path)


def test_a_demo_results_json_replays_its_ev_states(tmp_path: Path) -> None:
    from mrc_fabric.topology import build_clos

    build_clos(2, 2, 2, 2).save(tmp_path / "topology.json")
    evs = [
        {"ev": f"{(p << 28) | (t << 18) | i:08x}", "plane": p, "t1": t, "initial_state": "GOOD"}
        for p in (0, 1)
        for t in (0, 1)
        for i in range(4)
    ]
    hit = [e["ev"] for e in evs if (e["plane"], e["t1"]) == (0, 0)]
    changes = [{"t": 1.05, "ev": ev, "old": "GOOD", "new": "ASSUMED_BAD"} for ev in hit]
    fault = {
        "kind": "blackhole",
        "target": "t0p0n0-t1p0n0",
        "id": "f1",
        "injected_at": 1.0,
        "evs_through_it": hit,
        "ev_states_at_injection": dict.fromkeys(hit, "GOOD"),
    }
    run = {
        "evs": evs,
        "ev_changes": changes,
        "faults": [fault],
        "goodput_mbit_s": [[0, 0], [1, 100], [2, 80]],
    }
    result = {"src": "h0", "dst": "h3", "mode": "mrc", "faulted": run}
    (tmp_path / "results.json").write_text(json.dumps(result))
    (replay,) = load(tmp_path)
    assert replay.fault_times() == [1.0]
    assert states_at(replay, 1.0, 0, 0) == {"GOOD"} and states_at(replay, 1.1, 0, 0) == {"ASSUMED_BAD"}
    assert replay.frame_at(1.1)["faults_on"] == {"t0p0n0-t1p0n0": ["f1"]}
    assert replay.frame_at(2.0)["conns"][0]["goodput"][-1][1] == pytest.approx(80, rel=0.01)


# -- the server's checks ---------------------------------------------------------------------------
@contextmanager
def replay_server(run: Path) -> Iterator[ViewServer]:
    """The view serving ``run``'s replay while the block runs (the view tests' one server)."""
    srv = ViewServer(replays=load(run))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def server(sim_run: Path) -> Iterator[ViewServer]:
    with replay_server(sim_run) as srv:
        yield srv


def request(
    srv: ViewServer,
    path: str,
    host: str | None = None,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes | None = None,
) -> tuple[int, Any, bytes]:
    """(status, headers, body) of one request, with the Host header given (default: the server's)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        hdrs = {"Host": f"127.0.0.1:{srv.port}" if host is None else host, **(headers or {})}
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, resp, resp.read()
    finally:
        conn.close()


def test_the_server_listens_on_loopback_only_and_prints_a_tokened_url(server: ViewServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/?token={server.token}"
    assert len(server.token) >= 40
    assert ViewServer(replays=server.replays).token != server.token


def test_without_the_token_or_under_another_host_name_everything_is_403(server: ViewServer) -> None:
    tok = server.token
    status, resp, _ = request(server, f"/?token={tok}")
    assert status == 200
    cookie = resp.getheader("Set-Cookie")
    assert f"mrc_view_{server.port}={tok}" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert request(server, f"/api/frame?t=0&token={tok}")[0] == 200
    assert request(server, f"/static/app.js?token={tok}")[0] == 200
    assert request(server, "/static/app.js", headers={"Cookie": f"mrc_view_{server.port}={tok}"})[0] == 200
    for path in ("/", "/api/info", "/api/frame?t=0", "/static/app.js", f"/?token={tok[:-2]}", "/?token="):
        assert request(server, path)[0] == 403, path
    for host in ("evil.example", f"evil.example:{server.port}", f"127.0.0.1:{server.port + 1}", ""):
        assert request(server, f"/?token={tok}", host=host)[0] == 403, host
    body = json.dumps({"kind": "blackhole", "target": "p0-t0_0-t1_1"}).encode()
    jar = {"Cookie": f"mrc_view_{server.port}={tok}", "Content-Type": "application/json"}
    assert request(server, "/api/fault", method="POST", headers=jar, body=body)[0] == 403
    assert request(server, f"/api/fault?token={tok}", method="POST", body=body)[0] == 403
    cross = {"X-MRC-Token": tok, "Origin": "http://evil.example"}
    assert request(server, "/api/fault", method="POST", headers=cross, body=body)[0] == 403
    # with the token in the header the request reaches the handler: a replay injects nothing
    assert request(server, "/api/fault", method="POST", headers={"X-MRC-Token": tok}, body=body)[0] == 409


def test_bad_parameters_are_clear_errors(server: ViewServer) -> None:
    tok = server.token
    for path in ("/api/frame?t=x", "/api/frame?t=nan", "/api/frame?t=0&rec=7", "/api/frame?t=0&rec=-1"):
        assert request(server, f"{path}&token={tok}")[0] == 400, path
    assert request(server, f"/static/..%2fcli.py?token={tok}")[0] == 404
    assert request(server, f"/static/nothing.js?token={tok}")[0] == 404
    status, _, data = request(server, f"/api/frame?t=1e300&token={tok}")
    assert status == 200 and json.loads(data)["t"] == server.replays[0].duration
