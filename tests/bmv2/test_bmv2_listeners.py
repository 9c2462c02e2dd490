"""Every listener of a BMv2 switch is for root only (issue 44: as an unprivileged user, an
arbitration with election id 2^60 won primary and read the tables, and ``simple_switch_CLI
--thrift-port N`` listed them, because Thrift listened on 0.0.0.0 and P4Runtime on 127.0.0.1).

P4Runtime is a unix socket in the run directory, created under umask 077; Thrift, which BMv2
binds to every address, sits behind an nftables guard that resets every connection from a
socket not owned by root. The probes run as ``nobody`` (a child that drops root); root, the
testbed's user, still reaches both.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from topologies import listener_guard
from topologies.bmv2_switch import LOOPBACK, Bmv2Process, cli_command

pytestmark = [pytest.mark.bmv2, pytest.mark.root]

NOBODY = 65534
PROBE = """
import os, socket, sys
os.setgid(65534); os.setuid(65534)
kind, where = sys.argv[1], sys.argv[2]
try:
    if kind == "tcp":
        socket.create_connection(("127.0.0.1", int(where)), timeout=3).recv(1)
    elif kind == "unix":
        s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(where)
    else:
        import grpc
        from finsy.proto import p4r, p4r_grpc
        stub = p4r_grpc.P4RuntimeStub(grpc.insecure_channel(where))
        try:
            n = sum(1 for _ in stub.Read(p4r.ReadRequest(device_id=1, entities=[p4r.Entity(
                table_entry=p4r.TableEntry())]), timeout=3))
            print("read", n)
        except grpc.RpcError as exc:
            raise PermissionError(exc.code().name) from None
    print("reached")
except (OSError, TimeoutError) as exc:
    print("refused", type(exc).__name__, str(exc)[:120])
"""


def as_nobody(kind: str, where: str) -> str:
    res = subprocess.run([sys.executable, "-c", PROBE, kind, where], capture_output=True, text=True,
                         timeout=30, cwd=Path(__file__).resolve().parents[2])  # fmt: skip
    return res.stdout + res.stderr


@pytest.fixture
def switch(tmp_path: Path) -> Bmv2Process:
    run = tmp_path / "run"
    run.mkdir()
    os.chmod(tmp_path, 0o755)  # traversable by anyone: the socket's own mode must refuse
    os.chmod(run, 0o755)
    sw = Bmv2Process(name="lgsw", device_id=1, ports={}, run_dir=run, pcap=False, realtime_priority=0)
    sw.start()
    try:
        yield sw
    finally:
        sw.stop()


def test_a_non_root_user_reaches_neither_thrift_nor_p4runtime(switch: Bmv2Process) -> None:
    assert (
        listener_guard.table_name(switch.thrift_port)
        in subprocess.run(["nft", "list", "tables"], capture_output=True, text=True, check=True).stdout
    )
    out = as_nobody("tcp", str(switch.thrift_port))
    assert out.startswith("refused ConnectionRefusedError") or "Reset" in out, out
    assert "refused PermissionError" in as_nobody("unix", str(switch.socket_path)), switch.socket_path
    assert as_nobody("grpc", switch.p4rt_address).startswith("refused PermissionError UNAVAILABLE")
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cli_command(),
                          "--thrift-port", str(switch.thrift_port), "--thrift-ip", LOOPBACK],
                         input="show_ports\n", capture_output=True, text=True, timeout=30)  # fmt: skip
    assert "port" not in res.stdout.lower() or res.returncode != 0, res.stdout
    # root, the testbed's user, reaches both
    with socket.create_connection((LOOPBACK, switch.thrift_port), timeout=3):
        pass
    assert "Error" not in switch.cli("show_ports")
    assert (os.stat(switch.socket_path).st_mode & 0o777) == 0o700


def test_the_guard_goes_with_the_switch(switch: Bmv2Process) -> None:
    port = switch.thrift_port
    switch.stop()
    assert port not in listener_guard.guarded_ports()
    assert not switch.socket_path.exists()
