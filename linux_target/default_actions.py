"""The initial default action of every table, as the P4 program declares it.

P4Runtime says a table's default entry is always there and reads back with
``is_default_action`` even if no client ever modified it. The P4Info of this
program (P4Runtime 1.3 style) does not carry ``initial_default_action``, so the
shim takes it from the one place it is written: the ``default_action = ...;``
of each table in ``p4src/mrc_switch.p4``.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from mrc_fabric.p4info import P4SRC

P4_PROGRAM = P4SRC / "mrc_switch.p4"
_TABLE = re.compile(r"\btable\s+(\w+)\s*\{")
_DEFAULT = re.compile(r"\bdefault_action\s*=\s*(\w+)\s*\(\s*\)\s*;")


@cache
def initial_default_actions(path: Path = P4_PROGRAM) -> dict[str, str]:
    """Table name -> the action name of its initial (parameterless) default action."""
    out: dict[str, str] = {}
    text = path.read_text()
    starts = list(_TABLE.finditer(text))
    for i, table in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        found = _DEFAULT.search(text, table.end(), end)  # the first one in this table's body
        if found:
            out[table.group(1)] = found.group(1)
    return out
