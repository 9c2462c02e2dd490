# ruff: noqa: F811 (the fabric fixture is imported from test_controller)
"""Health: dead switches and agents are noticed, reported and (switches) re-synced.

Without root: the fake fabric of test_controller.py (the shim's P4Runtime service, no
kernel) and agent control sockets that are plain unix listeners in the run directory.
"""

from __future__ import annotations

import socket
from pathlib import Path

import grpc
import pytest
from test_controller import Fabric, _inject, fabric, read_back, wait_for  # noqa: F401 (the fixture)

from controller.health import ABSENT, ALIVE, DEAD, AgentWatch, probe_socket
from controller.northbound import ControllerClient
from controller.proto.mrc.controller.v1 import controller_pb2 as pb


def test_agent_watch_states_and_transitions(tmp_path: Path) -> None:
    answers = {"h0": (False, "no control socket"), "h1": (True, "")}
    watch = AgentWatch(["h0", "h1"], tmp_path, probe=lambda p: answers[p.stem])
    assert [(a.host, a.state) for a in watch.check()] == [("h1", ALIVE)]  # h0 never seen: absent
    assert watch.agents["h0"].state == ABSENT and watch.check() == []
    answers["h1"] = (False, "Connection refused")
    assert [(a.host, a.state, a.detail) for a in watch.check()] == [("h1", DEAD, "Connection refused")]
    answers["h1"] = (True, "")
    assert [(a.host, a.state) for a in watch.check()] == [("h1", ALIVE)]


def test_probe_socket_tells_a_listener_from_a_leftover_file(tmp_path: Path) -> None:
    path = tmp_path / "a.sock"
    assert probe_socket(path) == (False, "no control socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    assert probe_socket(path) == (True, "")
    listener.close()  # like a kill -9: the file stays, nobody accepts
    up, why = probe_socket(path)
    assert not up and why


def test_dead_switch_is_reported_marked_on_paths_and_resynced(fabric: Fabric, tmp_path: Path) -> None:
    client = ControllerClient(f"unix:{tmp_path}/controller.sock")
    events = fabric.core.events.subscribe()
    try:
        fabric.stub.InstallRoutes(pb.InstallRoutesRequest())
        name = "cut0p0n0"  # cuh0's plane-0 T0
        want = set(fabric.core.desired(name))
        session = fabric.core.pool[name]
        assert all(p.status == "ok" for p in client.paths("cuh0", "cuh3"))
        fabric.switches[name].stop()
        kinds: list[str] = []

        def seen() -> bool:  # (the session marks itself unreachable a moment before the event)
            while not events.empty():
                e = events.get_nowait()
                if e is not None and e.switch == name:
                    kinds.append(e.kind)
            return bool(kinds) and not session.reachable

        wait_for(seen, "the controller to see the switch gone")
        assert kinds == ["switch_disconnected"]
        paths = client.paths("cuh0", "cuh3")
        through = [p for p in paths if any(h.node == name for h in p.hops)]
        assert through and all(p.status == "unreachable" and list(p.unreachable) == [name] for p in through)
        assert all(p.status == "ok" for p in paths if p not in through)
        with pytest.raises(grpc.RpcError) as err:
            client.inject("blackhole", f"{name}:3")
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE and name in (err.value.details() or "")
        health = {s.switch: s for s in client.health().switches}
        assert not health[name].reachable and not health[name].primary and health[name].last_error
        assert all(s.reachable and s.primary for n, s in health.items() if n != name)
        fabric.switches[name].start()  # restarted (by the testbed's supervisor): empty tables
        wait_for(lambda: session.ready, "the controller to re-sync the switch")
        assert read_back(fabric, name) == want
        assert all(p.status == "ok" for p in client.paths("cuh0", "cuh3"))
        assert {s.switch: s.reachable for s in client.health().switches}[name]
    finally:
        fabric.core.events.unsubscribe(events)
        client.close()


def test_dead_agent_is_an_event_and_shows_in_health(fabric: Fabric, tmp_path: Path) -> None:
    client = ControllerClient(f"unix:{tmp_path}/controller.sock")
    events = fabric.core.events.subscribe()
    (tmp_path / "agents").mkdir(exist_ok=True)
    path = tmp_path / "agents" / "cuh2.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen()

        def state() -> str:
            return {a.host: a.state for a in client.health().agents}["cuh2"]

        wait_for(lambda: state() == ALIVE, "the agent to be seen alive")
        listener.close()  # killed: the socket file stays behind
        wait_for(lambda: state() == DEAD, "the agent to be reported dead")
        seen = []
        while not events.empty():
            e = events.get_nowait()
            if e is not None:
                seen.append((e.kind, e.message.split(":")[0]))
        assert ("agent_alive", "cuh2") in seen and ("agent_dead", "cuh2") in seen
        assert {a.host: a.state for a in client.health().agents}["cuh0"] == ABSENT
    finally:
        listener.close()
        fabric.core.events.unsubscribe(events)
        client.close()
