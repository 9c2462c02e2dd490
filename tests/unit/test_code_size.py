"""No class over 450 lines and no function over 80 in the product packages and ``bench/``.

Why: the readability bar a newcomer needs (one module, one job; a function that fits on a
screen) only holds if something fails when a change breaks it. The benchmarks are read and
changed as often as the product (a researcher's next experiment starts from one), so they
are held to the same limits. Generated protobuf modules are left out, and so is ``tests/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("mrc_fabric", "mrc_host", "controller", "linux_target", "topologies", "mrc_view", "mrc_p4rt")
CHECKED = (*PRODUCT, "bench")
MAX_CLASS, MAX_FUNCTION = 450, 80


def test_no_class_or_function_over_its_limit() -> None:
    over = []
    files = [f for p in CHECKED for f in (ROOT / p).rglob("*.py") if "_pb2" not in f.name]
    assert len(files) > 100 and any(f.parts[-2] == "experiments" for f in files)
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            limit = MAX_CLASS if isinstance(node, ast.ClassDef) else MAX_FUNCTION
            if size > limit:
                over.append(f"{f.relative_to(ROOT)}:{node.name} {size} lines (limit {limit})")
    assert over == []
