"""Every Python snippet in README.md and docs/*.md runs as it is printed.

A ```python block is a script a reader may paste: each runs in a subprocess of its own (as
root: the testbed's need a fabric), from a scratch directory so its ``runs/`` land there. A
block whose first line says it is "not a script" (an API's shape with placeholders) is left
out, and there must be few of those. A block that brings up a fabric uses the default node
names, so it is skipped while another fabric of that name is up.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.root

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
NOT_A_SCRIPT = "not a script"
TIMEOUT_S = 600


def snippets() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        for n, m in enumerate(BLOCK.finditer(page.read_text()), 1):
            code = m.group(1)
            if NOT_A_SCRIPT not in code.splitlines()[0]:
                out.append((f"{page.relative_to(ROOT)}#{n}", code))
    return out


def test_few_blocks_are_outlines() -> None:
    outlines = sum(
        NOT_A_SCRIPT in m.group(1).splitlines()[0] for page in PAGES for m in BLOCK.finditer(page.read_text())
    )
    assert len(snippets()) >= 3 and outlines <= 2


@pytest.mark.parametrize("name,code", snippets(), ids=[n for n, _c in snippets()])
def test_the_snippet_runs(name: str, code: str, tmp_path: Path) -> None:
    if "Testbed(" in code:
        from live_fabric import skip_without_agent

        skip_without_agent()
        up = subprocess.run(["ip", "link", "show", "h0-eth0"], capture_output=True).returncode == 0
        if up and "prefix=" not in code:
            pytest.skip("a fabric with the default node names is up on this machine")
    script = tmp_path / "snippet.py"
    script.write_text(code)
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=TIMEOUT_S)  # fmt: skip
    assert res.returncode == 0, (
        f"{name} failed:\n{code}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr[-3000:]}"
    )
    assert res.stdout.strip(), f"{name} printed nothing"
