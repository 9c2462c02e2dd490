"""The CLI verbs that hand a switch to the usual P4 tools: ``switches``, ``p4``, ``p4rt``.

Each is a plain function ``(cli, line)`` whose docstring is its ``help`` text, bound into
:class:`topologies.cli.MrcCLI` as ``do_<verb>``. They read the run's ``switches.json``
(``topologies.switch_records``), the same file ``mrc-testbed switches`` and scripts read, and
run the tools through ``topologies.switch_tools``.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from topologies.switch_records import SwitchRecordError, SwitchRecords, load_switch_records
from topologies.switch_tools import (
    SwitchToolError,
    interactive,
    p4rt_shell_argv,
    p4rt_shell_missing,
    switches_table,
    thrift,
)


def _records(cli: Any) -> SwitchRecords:
    return load_switch_records(cli.commands.tb.run.path)


def _say(cli: Any, text: str, style: str = "") -> None:
    cli.commands.out.print(
        f"[{style}]{text}[/{style}]" if style else text, highlight=False, markup=bool(style)
    )


def _guarded(cli: Any, verb: str, fn: Any) -> None:
    try:
        fn()
    except (SwitchRecordError, SwitchToolError) as exc:
        cli.commands.out.print(f"{verb}: {exc}", style="red", highlight=False, markup=False)


def do_switches(cli: Any, line: str) -> None:
    """switches
    Every switch of this run: role, plane, P4Runtime device id and address (a unix socket in
    the run directory), BMv2 Thrift port; the program they run and the controller's election
    id. The same as <run>/switches.json and `mrc-testbed switches`."""
    if line.strip():
        _say(cli, "usage: switches", "red")
        return
    _guarded(cli, "switches", lambda: cli.commands.out.print(switches_table(_records(cli))))


def do_p4(cli: Any, line: str) -> None:
    """p4 SWITCH [COMMAND]
    BMv2's runtime CLI (simple_switch_CLI over Thrift) on SWITCH: one command, or, with none,
    its prompt (on a terminal; quit with EOF/Ctrl-D). It reads and writes every table whoever
    holds P4Runtime: the way to fill your own program's tables (mrc-testbed --p4).
    Examples: p4 t0p0n0 table_dump MrcIngress.usid_route
              p4 t1p0n0 counter_read MrcIngress.drop_reason 2
              p4 t0p0n0 table_add MrcIngress.user_ingress.ev_path count_path 1 =>"""
    name, _, command = line.strip().partition(" ")
    if not name:
        _say(cli, "usage: p4 SWITCH [simple_switch_CLI command]   (e.g. p4 t0p0n0 help)", "red")
        return

    def run() -> None:
        sw = _records(cli).switch(name)
        if command.strip():
            ok, text = thrift(sw, [command.strip()])
            cli.commands.out.print(text, style=None if ok else "red", highlight=False, markup=False)
        elif sys.stdin.isatty():
            interactive(sw.cli_argv, sw.cli_env)
        else:
            thrift(sw, ["help"])  # raises for a switch without Thrift
            _say(cli, f"simple_switch_CLI for {sw.name}: {sw.cli_shell}")

    _guarded(cli, "p4", run)


def do_p4rt(cli: Any, line: str) -> None:
    """p4rt SWITCH
    p4runtime-shell on SWITCH's P4Runtime socket as a backup client (election id (1, this
    process's id), below the controller's (2,0)): it reads tables, counters and the P4Info and
    never takes the switch from the controller. Installed by `make p4rt-shell`. Without a
    terminal it prints the command line."""
    args = shlex.split(line)
    if len(args) != 1:
        _say(cli, "usage: p4rt SWITCH", "red")
        return

    def run() -> None:
        rec = _records(cli)
        argv = p4rt_shell_argv(rec, rec.switch(args[0]))
        missing = p4rt_shell_missing()
        if missing or not sys.stdin.isatty():
            _say(
                cli,
                (missing + "\n" if missing else "") + f"p4runtime-shell for {args[0]}: {shlex.join(argv)}",
            )
            return
        interactive(argv, {})

    _guarded(cli, "p4rt", run)
