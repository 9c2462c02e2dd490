"""A TCP port on this machine that only root may reach: BMv2's Thrift runtime server.

Why: simple_switch_grpc always serves Thrift, on every address (it has no option to bind
loopback), and whoever connects can read and rewrite the switch's tables
(``simple_switch_CLI``). BMv2 runs in the root network namespace, beside every local user. So
while a switch runs, an nftables table of its own (``inet mrc_thrift_<port>``) refuses, with a
TCP reset, every connection to its Thrift port from a socket not owned by root, and drops any
that arrives on an interface other than loopback. Its P4Runtime server needs none of this: it
listens on a unix socket in the run directory (mode 0700), which only root reaches.

Where nftables is missing or refuses (no CAP_NET_ADMIN), the guard says so once and the switch
runs unguarded. ``sweep`` removes the tables of ports nobody listens on any more (a run killed
before its switches were stopped); ``python -m topologies.cleanup`` calls it.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess

log = logging.getLogger(__name__)

TABLE_PREFIX = "mrc_thrift_"


def table_name(port: int) -> str:
    return f"{TABLE_PREFIX}{port}"


def ruleset(port: int) -> str:
    return f"""table inet {table_name(port)} {{
  chain output {{
    type filter hook output priority filter; policy accept;
    tcp dport {port} meta skuid != 0 counter reject with tcp reset comment "BMv2 Thrift: root only"
  }}
  chain input {{
    type filter hook input priority filter; policy accept;
    tcp dport {port} iifname != "lo" counter drop comment "BMv2 Thrift: loopback only"
  }}
}}
"""


def _nft(args: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nft", *args], input=stdin, capture_output=True, text=True, check=False)


def guard(port: int) -> str:
    """Install the guard of ``port``; "" when it is in place, else why not (the caller says it)."""
    if shutil.which("nft") is None:
        return "nft not found: BMv2's Thrift port is open to every local user"
    _nft(["delete", "table", "inet", table_name(port)])  # one left by a killed run on this port
    res = _nft(["-f", "-"], ruleset(port))
    if res.returncode != 0:
        why = res.stderr.strip()[:200]
        return f"nft refused the Thrift guard ({why}): port {port} is open to local users"
    return ""


def unguard(port: int) -> None:
    if shutil.which("nft") is not None:
        _nft(["delete", "table", "inet", table_name(port)])


def guarded_ports() -> list[int]:
    res = _nft(["list", "tables", "inet"]) if shutil.which("nft") else None
    if res is None or res.returncode != 0:
        return []
    return [int(m) for m in re.findall(rf"table inet {TABLE_PREFIX}(\d+)", res.stdout)]


def listening_ports() -> set[int]:
    res = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=False)
    return {int(m) for m in re.findall(r":(\d+)\s", res.stdout)}


def sweep(dry_run: bool = False) -> list[int]:
    """Remove the guards of ports nothing listens on; the ports whose guard went."""
    stale = [p for p in guarded_ports() if p not in listening_ports()]
    for port in stale:
        if not dry_run:
            unguard(port)
    return stale
