"""The testbed CLI (topologies.cli.MrcCLI) keeps running whatever is typed: no root, no fabric.

A command that cannot work on P4 switches (Mininet's ``dpctl``, ``wait``, ``switch``) says why;
a command that raises is a message, and the commands after it still run.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from rich.console import Console

from topologies.cli import MrcCLI
from topologies.mn_commands import REFUSED, parse_rate


class FakeNet(dict):  # type: ignore[type-arg]
    """What Mininet's CLI reads of a net: names to nodes (none here), its hosts."""

    hosts: list[Any] = []


class BoomCLI(MrcCLI):
    def do_boom(self, _line: str) -> None:
        raise RuntimeError("a bug in a command")


def run(tmp_path: Path, lines: list[str]) -> str:
    script = tmp_path / "script"
    script.write_text("\n".join(lines) + "\n")
    out = io.StringIO()
    r, w = os.pipe()
    try:
        with os.fdopen(r) as stdin:
            BoomCLI(
                FakeNet(), stdin=stdin, testbed=None, script=str(script), console=Console(file=out, width=300)
            )
    finally:
        os.close(w)
    return out.getvalue()


def test_commands_that_cannot_work_say_why(tmp_path: Path) -> None:
    out = run(tmp_path, ["dpctl dump-flows", "wait", "switch t1p0n0 stop"])
    for command, why in REFUSED.items():
        assert f"{command}: cannot work here: {why}" in out.replace("\n", " ")


def test_an_exception_in_a_command_is_a_message_and_the_cli_goes_on(tmp_path: Path) -> None:
    out = run(tmp_path, ["boom", "dpctl"])
    assert "boom: RuntimeError: a bug in a command (the fabric is still up)" in out
    assert "dpctl: cannot work here" in out  # the next command ran


def test_iperf_rates_are_read_as_mininet_reads_them() -> None:
    text = "[  1] 0.0-5.0 sec  2.29 GBytes  3.93 Gbits/sec\n[  1] 0.0-5.0 sec  1 MBytes 920 Kbits/sec\n"
    assert parse_rate(text) == "920 Kbits/sec"
    assert parse_rate("connect failed: Connection refused") == ""


def test_every_mrc_verb_is_a_do_method_whose_docstring_is_its_help(tmp_path: Path) -> None:
    from mininet.cli import CLI

    verbs = [n[3:] for n in dir(MrcCLI) if n.startswith("do_") and not hasattr(CLI, n)]
    assert {"mrc", "fault", "faults", "clear", "paths", "evs", "counters", "capture", "view"} <= set(verbs)
    for verb in verbs:
        doc = getattr(MrcCLI, f"do_{verb}").__doc__
        assert doc and doc.split()[0] == verb, f"help {verb} must start with its usage"
    out = run(tmp_path, ["help"])
    listed = next(line for line in out.splitlines() if line.startswith("MRC verbs:"))
    # no hand-kept list: a verb a subclass adds is listed too
    assert set(listed.split(":", 1)[1].split("(")[0].replace(",", " ").split()) == {*verbs, "boom"}
