"""Every module of the sans-I/O core runs compiled where the install built them (setup.py).

Why: a core module left out of the list runs as interpreted Python inside the compiled
packet path. ``acks.py`` (SACK handling, split out of the sender) was once left out, and
the agent's sender spent 2 us more per packet, 27 % of its speed, with every test green.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# not per packet: the EV state table (its exception subclasses a builtin, which mypyc refuses)
# and the EV profile expansion (once per connection)
INTERPRETED = {"mrc_host/core/ev_state.py", "mrc_host/core/ev_fields.py"}


def compiled_list() -> set[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPILED" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no COMPILED list")


def test_every_core_module_is_compiled() -> None:
    core = {p.relative_to(ROOT).as_posix() for p in (ROOT / "mrc_host" / "core").glob("*.py")}
    assert core - INTERPRETED - compiled_list() == set()


def test_the_compiled_list_names_only_modules_that_exist() -> None:
    assert {m for m in compiled_list() if not (ROOT / m).is_file()} == set()
