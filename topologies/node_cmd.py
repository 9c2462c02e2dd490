"""Commands in a Mininet node's shell, batched: one round trip for many.

Why: every ``node.cmd`` is a round trip through the node's shell, and bringing up a fabric
of 128 switches made thousands of them (an MTU per port, a port up per port).
"""

from __future__ import annotations

from typing import Any


def ip_batch(node: Any, lines: list[str]) -> None:
    """``ip`` commands run in one ``ip -batch`` in a Mininet node's shell (one round trip,
    not one per command); RuntimeError with ip's answer when one fails."""
    if not lines:
        return
    quoted = " ".join(f"'{line}'" for line in lines)
    out = node.cmd(f"printf '%s\\n' {quoted} | ip -batch -; echo ip-batch-$?")
    if "ip-batch-0" not in out:
        raise RuntimeError(f"{node.name}: ip -batch failed: {out.strip()}")
