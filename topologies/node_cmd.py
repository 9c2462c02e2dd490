"""Commands in a Mininet node's shell, batched: one round trip for many.

Why: every ``node.cmd`` is a round trip through the node's shell, and bringing up a fabric
of 128 switches made thousands of them (an MTU per port, a port up per port).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

# A node's shell reads its commands through a terminal, whose line buffer holds 4,095 bytes: a
# longer line never arrives whole (the shell waits forever). Longer batches go through a file.
MAX_LINE = 3000


def ip_batch(node: Any, lines: list[str]) -> None:
    """``ip`` commands run in one ``ip -batch`` in a Mininet node's shell (one round trip,
    not one per command); RuntimeError with ip's answer when one fails."""
    if not lines:
        return
    quoted = " ".join(f"'{line}'" for line in lines)
    if len(quoted) < MAX_LINE:
        out = node.cmd(f"printf '%s\\n' {quoted} | ip -batch -; echo ip-batch-$?")
    else:
        fd, path = tempfile.mkstemp(prefix="mrc-ip-batch-", suffix=".txt")
        try:
            with os.fdopen(fd, "w") as f:
                f.write("\n".join(lines) + "\n")
            out = node.cmd(f"ip -batch {path}; echo ip-batch-$?")
        finally:
            os.unlink(path)
    if "ip-batch-0" not in out:
        raise RuntimeError(f"{node.name}: ip -batch failed: {out.strip()[-2000:]}")
