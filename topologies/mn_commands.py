"""Mininet's own CLI commands on this fabric: which run as they are, which run our way, which cannot.

Most of Mininet's commands work unchanged, because every host has addresses its kernel routes
over the fabric (``topologies.kernel_routes``): ``pingall``, ``h0 ping h3``, ``h0 iperf3 ...``,
``net``, ``links``, ``link a b down``. Two run our way:

- ``iperf`` / ``iperfudp``: Mininet's start with ``killall -9 iperf``, which on a machine shared
  with other Mininet users ends *their* iperf too (every node shares the PID namespace); here
  the server is started in the server host and ended by its PID. The output and the result
  list are Mininet's.

Three cannot work on P4 switches, and say why instead of failing half-way (:data:`REFUSED`):
``dpctl`` (OpenFlow), ``wait`` (for an OpenFlow controller), ``switch NAME start|stop`` (a
Mininet switch stop removes the ports; the controller's ``switch_down`` fault is the way).
"""

from __future__ import annotations

import re
import selectors
import subprocess
import time
from collections.abc import Callable
from typing import Any

from mininet.log import error, output

from topologies.procs import terminate

IPERF_PORT = 5001
IPERF_SECONDS = 5
LISTEN_TIMEOUT_S = 10.0
CONNECT_GRACE_S = 15  # the client's run may take this much longer than -t (connect, last report)

REFUSED = {
    "dpctl": "the switches are P4 switches (BMv2, or Linux SRv6 behind a P4Runtime shim), not OpenFlow: "
    "`counters`, `paths` and `faults` show their state, p4runtime-shell reads their tables",
    "wait": "there is no OpenFlow controller to wait for: mrc-controller programmed every switch over "
    "P4Runtime before this prompt (`health` shows the sessions)",
    "switch": "a Mininet switch stop takes the switch's ports away and leaves the fabric broken: "
    "`fault switch_down NAME` makes it stop forwarding, `clear` brings it back",
}


def parse_rate(text: str) -> str:
    """The last ``<n> <unit>/sec`` in iperf's output (Mininet's ``_parseIperf``), '' if none."""
    found = re.findall(r"([\d\.]+ \w+/sec)", text)
    return str(found[-1]) if found else ""


def _listening(node: Any, port: int, udp: bool) -> bool:
    return f":{port} " in str(node.cmd(f"ss -Hl{'u' if udp else 't'}n 'sport = :{port}'"))


def iperf(
    client: Any,
    server: Any,
    l4: str = "TCP",
    udp_bw: str = "10M",
    seconds: int = IPERF_SECONDS,
    port: int = IPERF_PORT,
    on_start: Callable[[int], None] | None = None,
) -> list[str]:
    """Mininet's ``net.iperf([client, server])``, without its machine-wide ``killall -9 iperf``.

    Returns ``[server rate, client rate]`` (UDP: ``[udp_bw, server rate, client rate]``) as
    Mininet does; an empty string where iperf reported no rate. ``on_start(pid)`` learns the
    server's PID (the testbed records it, so a cleanup after a crash finds it)."""
    udp = l4 == "UDP"
    if l4 not in ("TCP", "UDP"):
        raise ValueError(f"l4: {l4!r} is neither TCP nor UDP")
    output(f"*** Iperf: testing {l4} bandwidth between {client.name} and {server.name}\n")
    if _listening(server, port, udp):
        raise ValueError(f"{server.name} already listens on {l4} port {port}: stop that server first")
    args = ["iperf", "-p", str(port), *(["-u"] if udp else [])]
    # line-buffered, so the report is in the pipe before the server is stopped
    srv = server.popen(["stdbuf", "-oL", *args, "-s"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if on_start is not None:
        on_start(srv.pid)
    try:
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while not _listening(server, port, udp):
            if srv.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the iperf server in {server.name} did not start listening on {port}")
            time.sleep(0.05)  # poll; the deadline bounds the wait
        bw = f" -b {udp_bw}" if udp else ""
        limit = seconds + CONNECT_GRACE_S
        cli_out = str(client.cmd(f"timeout {limit} {' '.join(args)} -t {seconds} -c {server.IP()}{bw}"))
        serv_out = _server_report(srv)
    finally:
        terminate(srv, 2.0)
    result = [parse_rate(serv_out), parse_rate(cli_out)]
    if not result[1]:
        error(f"iperf: no rate from the client: {cli_out.strip()[-300:]}\n")
    if udp:
        result.insert(0, udp_bw)
    output(f"*** Results: {result}\n")
    return result


def _server_report(srv: subprocess.Popen[bytes], timeout: float = 3.0) -> str:
    """What the server printed, once its report is out (it prints it when the client is done)."""
    assert srv.stdout is not None
    text = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(srv.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline and not re.search(rb"/sec", text):
            if sel.select(max(0.0, deadline - time.monotonic())):
                chunk = srv.stdout.read1(65536)  # type: ignore[attr-defined]
                if not chunk:
                    break
                text += chunk
    return text.decode(errors="replace")
