"""simple_switch_CLI and p4runtime-shell on a run's switches, found through ``switches.json``.

The same three commands in the Mininet CLI (``topologies.cli_switches``) and on the command
line, for the newest run or any other (``--run-dir``)::

    mrc-testbed switches                          # each switch: device id, P4Runtime, Thrift port
    mrc-testbed p4 t0p0n0 table_dump MrcIngress.usid_route   # simple_switch_CLI (BMv2's Thrift)
    mrc-testbed p4 t0p0n0                         # its interactive prompt (a terminal), or its command line
    mrc-testbed p4rt-shell t0p0n0                 # p4runtime-shell as a backup client (reads only)

BMv2's Thrift runtime (simple_switch_CLI) answers whoever holds P4Runtime, so it reads and
writes any table -- the way to fill a user program's own tables while the controller holds
the switches. p4runtime-shell connects with election id (1, N): below the controller's (2, 0),
so it may read everything and write nothing, and the controller never notices it
(docs/mininet-p4.md). Both need root: the sockets are in the run directory (mode 0700) and
Thrift is guarded for root (``topologies.listener_guard``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from topologies.switch_records import (
    P4RT_SHELL_VENV,
    SwitchRecord,
    SwitchRecordError,
    SwitchRecords,
    load_switch_records,
)

THRIFT_TIMEOUT_S = 30.0
PROMPT = "RuntimeCmd: "
INSTALL_HINT = "make p4rt-shell (p4runtime-shell in its own venv, .venv-p4rt-shell: it pins an old protobuf)"


class SwitchToolError(RuntimeError):
    """The tool cannot run on that switch; the message says why and what to do."""


def switches_table(rec: SwitchRecords) -> Table:
    """One row per switch: what simple_switch_CLI and a P4Runtime client need."""
    t = Table(
        "switch", "role", "plane", "device id", "P4Runtime", "Thrift port", title=f"switches of {rec.run_dir}"
    )
    for s in rec.switches:
        t.add_row(s.name, s.role, str(s.plane), str(s.device_id), s.p4runtime, str(s.thrift_port or "-"))
    source = rec.p4_source or "p4src/mrc_switch.p4"
    t.caption = (
        f"{rec.target.upper()} switches running {source}; P4Info {rec.p4info}. The controller holds every "
        f"switch with election id ({rec.controller_election_id}): connect with a lower one, e.g. (1,1). "
        "`p4 SWITCH CMD` runs simple_switch_CLI, `p4rt SWITCH` p4runtime-shell"
    )
    return t


def _bmv2(sw: SwitchRecord) -> None:
    if sw.thrift_port is None or not sw.cli_argv:
        raise SwitchToolError(
            f"{sw.name} is a {sw.target} switch: no Thrift runtime (simple_switch_CLI is BMv2's); "
            f"its P4Runtime is at {sw.p4runtime} (p4rt {sw.name})"
        )


def thrift(sw: SwitchRecord, commands: list[str], timeout_s: float = THRIFT_TIMEOUT_S) -> tuple[bool, str]:
    """Run simple_switch_CLI commands on ``sw``; (every command went through, its output without
    the prompts). A failed command is BMv2's own message ("Error: ...", "Invalid ...")."""
    _bmv2(sw)
    try:
        res = subprocess.run(
            sw.cli_argv,
            input="\n".join(commands) + "\n",
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env={**os.environ, **sw.cli_env},
            check=False,
        )
    except FileNotFoundError:
        raise SwitchToolError(f"{sw.cli_argv[0]} not found: BMv2's tools are not on this machine") from None
    except subprocess.TimeoutExpired:
        raise SwitchToolError(f"{sw.name}: simple_switch_CLI got no answer in {timeout_s:g} s") from None
    lines = []
    for line in (res.stdout + res.stderr).splitlines():
        while line.startswith(PROMPT):
            line = line[len(PROMPT) :]
        if line.strip() and not line.startswith(("Obtaining JSON", "Control utility for runtime")):
            lines.append(line)
    text = "\n".join(lines)
    # BMv2's own errors, and Python cmd's "*** Unknown syntax" (table_dump draws rows of '*')
    bad = [ln for ln in lines if ln.startswith(("Error", "Invalid", "*** ")) or "Traceback" in ln]
    if res.returncode == 0 and "Could not connect" in text:
        bad.append(text)
    return res.returncode == 0 and not bad, text


def thrift_ok(sw: SwitchRecord, command: str) -> str:
    """One simple_switch_CLI command that must succeed; its output (SwitchToolError if it failed)."""
    ok, text = thrift(sw, [command])
    if not ok:
        raise SwitchToolError(
            f"{sw.name}: {command}: {text.strip().splitlines()[-1] if text.strip() else 'failed'}"
        )
    return text


def table_add(
    sw: SwitchRecord, table: str, action: str, keys: Sequence[object], params: Sequence[object] = ()
) -> int:
    """``table_add TABLE ACTION KEYS => PARAMS`` over Thrift; the new entry's handle."""
    text = thrift_ok(sw, " ".join([f"table_add {table} {action}", *map(str, keys), "=>", *map(str, params)]))
    m = re.search(r"added with handle (\d+)", text)
    if m is None:
        raise SwitchToolError(f"{sw.name}: table_add {table}: no entry handle in {text!r}")
    return int(m.group(1))


def counter_read(sw: SwitchRecord, counter: str, index: int) -> tuple[int, int]:
    """(packets, bytes) of one cell of a counter; of a direct counter, ``index`` is the entry handle."""
    text = thrift_ok(sw, f"counter_read {counter} {index}")
    m = re.search(r"\((\d+) bytes, (\d+) packets\)", text)
    if m is None:
        raise SwitchToolError(f"{sw.name}: counter_read {counter} {index}: no value in {text!r}")
    return int(m.group(2)), int(m.group(1))


def interactive(argv: list[str], env: dict[str, str]) -> int:
    """Hand the terminal to a tool until it exits (its exit status)."""
    return subprocess.call(argv, env={**os.environ, **env})


def p4rt_shell_argv(rec: SwitchRecords, sw: SwitchRecord) -> list[str]:
    """p4runtime-shell for ``sw`` as a backup client with an election id of its own (1, pid)."""
    return rec.p4runtime_shell(sw, election_low=os.getpid())


def p4rt_shell_missing() -> str:
    """Why p4runtime-shell cannot start here ('' when it can)."""
    if not (P4RT_SHELL_VENV / "bin" / "python").exists():
        return f"p4runtime-shell is not installed: {INSTALL_HINT}"
    return ""


def main(argv: list[str]) -> int:
    """``mrc-testbed switches|p4|p4rt-shell ...`` (argv starts with the subcommand)."""
    ap = argparse.ArgumentParser(prog=f"mrc-testbed {argv[0]}", description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", type=Path, default=Path("runs/latest"), help="the run (default runs/latest)")
    if argv[0] != "switches":
        ap.add_argument("switch")
    if argv[0] == "p4":
        ap.add_argument(
            "command", nargs=argparse.REMAINDER, help="a simple_switch_CLI command (none: its prompt)"
        )
    args = ap.parse_args(argv[1:])
    out = Console() if sys.stdout.isatty() else Console(width=200)
    try:
        rec = load_switch_records(args.run_dir)
        if argv[0] == "switches":
            out.print(switches_table(rec))
            return 0
        sw = rec.switch(args.switch)
        if argv[0] == "p4":
            if args.command:
                ok, text = thrift(sw, [" ".join(args.command)])
                print(text)
                return 0 if ok else 1
            _bmv2(sw)
            return interactive(sw.cli_argv, sw.cli_env)
        missing = p4rt_shell_missing()
        if missing:
            print(f"mrc-testbed p4rt-shell: {missing}", file=sys.stderr)
            return 2
        return interactive(p4rt_shell_argv(rec, sw), {})
    except (SwitchRecordError, SwitchToolError) as exc:
        print(f"mrc-testbed {argv[0]}: {exc}", file=sys.stderr)
        return 2
