"""The BMv2 switch process wrapper without BMv2: command line, ports, queue commands, stop by PID."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from topologies import bmv2_switch
from topologies.bmv2_switch import CPU_PORT, Bmv2Error, Bmv2Process, _queue_command


def make(tmp_path: Path, **kw) -> Bmv2Process:
    return Bmv2Process(name="s1", device_id=3, ports={2: "s1-eth2", 1: "s1-eth1"}, run_dir=tmp_path, **kw)


def option(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_command_line_binds_ports_in_order_and_serves_p4runtime_on_a_unix_socket(tmp_path: Path) -> None:
    p = make(tmp_path, thrift_port=50124, realtime_priority=0)
    cmd = p.command()
    assert Path(cmd[0]).name == "simple_switch_grpc" and "--no-p4" in cmd  # debug or fast build
    assert [cmd[i + 1] for i, a in enumerate(cmd) if a == "-i"] == ["1@s1-eth1", "2@s1-eth2"]
    assert option(cmd, "--device-id") == "3"
    assert option(cmd, "--thrift-port") == "50124"
    assert option(cmd, "--pcap") == str(tmp_path.resolve() / "pcap" / "s1")
    assert option(cmd, "--log-file") == str(tmp_path.resolve() / "s1.bmv2")  # bmv2 appends .txt
    assert p.log_path == tmp_path.resolve() / "s1.bmv2.txt"
    target = cmd[cmd.index("--") + 1 :]  # options of simple_switch_grpc itself
    sock = f"unix:{tmp_path.resolve() / 's1.p4rt.sock'}"
    assert option(target, "--grpc-server-addr") == sock == p.p4rt_address  # in the 0700 run directory
    assert option(target, "--cpu-port") == str(CPU_PORT)
    assert option(target, "--priority-queues") == "8"


def test_switch_threads_run_real_time_where_permitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """chrt --rr <priority> before the binary where a trial chrt succeeds; nothing where it fails
    (no CAP_SYS_NICE, no RT budget) or the priority is 0: the switch then runs unprivileged."""
    trials: list[list[str]] = []

    def trial(ok: bool):  # type: ignore[no-untyped-def]
        def run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[bytes]:
            trials.append(cmd)
            return subprocess.CompletedProcess(cmd, 0 if ok else 1)

        return run

    for ok, want in ((True, ["chrt", "--rr", "7", "simple_switch_grpc"]), (False, ["simple_switch_grpc"])):
        bmv2_switch.realtime_prefix.cache_clear()
        monkeypatch.setattr(bmv2_switch.shutil, "which", lambda name: f"/usr/bin/{name}")
        monkeypatch.setattr(bmv2_switch.subprocess, "run", trial(ok))
        cmd = make(tmp_path, realtime_priority=7).command()
        assert cmd[: len(want)] == want and trials[-1] == ["chrt", "--rr", "7", "true"]
    trials.clear()
    assert make(tmp_path, realtime_priority=0).command()[0] == "simple_switch_grpc" and not trials
    bmv2_switch.realtime_prefix.cache_clear()


def test_free_ports_are_picked_and_distinct(tmp_path: Path) -> None:
    a, b = make(tmp_path), make(tmp_path)
    ports = {a.thrift_port, b.thrift_port}
    assert len(ports) == 2 and all(1024 < x < 65536 for x in ports)


def test_cpu_port_cannot_be_a_data_port(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CPU port"):
        Bmv2Process(name="s1", device_id=1, ports={CPU_PORT: "x"}, run_dir=tmp_path)


def test_pcap_can_be_turned_off(tmp_path: Path) -> None:
    assert "--pcap" not in make(tmp_path, pcap=False).command()


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (("set_queue_rate", 100, 2, None), "set_queue_rate 100 2"),
        (("set_queue_rate", 100, 2, 7), "set_queue_rate 100 2 7"),
        (("set_queue_depth", 16, None, None), "set_queue_depth 16"),
    ],
)
def test_queue_commands(args: tuple, want: str) -> None:
    assert _queue_command(*args) == want


def test_queue_commands_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        _queue_command("set_queue_rate", -1, 2, None)
    with pytest.raises(ValueError, match="priority needs a port"):
        _queue_command("set_queue_depth", 4, None, 3)


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Bmv2Error, match="not found"):
        make(tmp_path, binary="no-such-simple-switch").start()


def test_start_fails_fast_when_the_process_dies(tmp_path: Path) -> None:
    """A switch binary that exits at once: start() raises with the log, no process is left."""
    fake = tmp_path / "fake_switch"
    fake.write_text(f"#!{sys.executable}\nimport sys\nprint('bad option', sys.argv[1:3])\nsys.exit(3)\n")
    fake.chmod(0o755)
    p = make(tmp_path, binary=str(fake), start_timeout=10)
    with pytest.raises(Bmv2Error, match="exited"):
        p.start()
    assert p.proc is None
    assert "bad option" in p.stdout_path.read_text()


def test_stop_kills_the_whole_process_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """stop() takes down the switch and a child it started (same process group)."""
    script = tmp_path / "parent.sh"
    pidfile = tmp_path / "child.pid"
    script.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\ntrap '' TERM\nwait\n")
    script.chmod(0o755)
    p = make(tmp_path)
    p.proc = subprocess.Popen([str(script)], start_new_session=True)
    assert _wait_file(pidfile)
    child = int(pidfile.read_text())
    monkeypatch.setattr(bmv2_switch, "STOP_TIMEOUT", 0.5)  # the parent ignores SIGTERM: SIGKILL must follow
    p.stop()
    assert p.proc is None
    assert not Path(f"/proc/{child}").exists() or _is_zombie(child)


def _wait_file(path: Path, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return True
        time.sleep(0.02)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True
