"""The mypyc-compiled modules (setup.py) and their pure-Python fallback give the same runs.

Where the install compiled them, ``mrc_host.core`` and the simulator's engine, fabric and
network load as C extensions; ``MRC_PURE_PYTHON=1`` loads their ``.py`` sources instead.
Both must simulate the very same transfer: same seed, same JSON, byte for byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mrc_host

REPO = Path(__file__).resolve().parents[2]
RUN = """
import json, sys
import mrc_host
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.scenario import SimConfig, run
faults = ["loss=0.02:p0-t0_0-t1_1@0", "down:p1-t0_0-t1_2@0"]
r = run(SimConfig(shape=FabricShape(planes=2, t1=4), size=1 << 20, faults=faults))
mods = [(n, getattr(m, "__file__", None)) for n, m in sys.modules.items() if n.startswith("mrc_host.")]
files = {n: f for n, f in mods if f}
print(json.dumps({"compiled": mrc_host.compiled_modules(), "files": files, "result": r}))
"""


def _run(pure: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "MRC_PURE_PYTHON"}
    if pure:
        env["MRC_PURE_PYTHON"] = "1"
    out = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", RUN],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    doc: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def _built() -> bool:
    return bool(mrc_host.built_modules()) and not mrc_host.stale_modules()


def test_pure_python_switch_loads_only_sources() -> None:
    doc = _run(pure=True)
    assert doc["compiled"] == []
    files = doc["files"]
    assert isinstance(files, dict) and "mrc_host.core.sender" in files
    assert all(str(f).endswith(".py") for f in files.values()), files
    result = doc["result"]
    assert isinstance(result, dict) and result["completed"] and result["data_ok"]


def test_compiled_and_pure_python_simulate_the_same_run() -> None:
    if not _built():
        pytest.skip(
            "mrc_host installed without mypyc modules (MRC_PURE_PYTHON=1 at build, or sources edited)"
        )
    compiled, pure = _run(pure=False), _run(pure=True)
    names = compiled["compiled"]
    assert isinstance(names, list)
    assert {
        "mrc_host.core.sender",
        "mrc_host.core.receiver",
        "mrc_host.sim.engine",
        "mrc_host.sim.fabric",
    } <= set(names)
    assert compiled["result"] == pure["result"]


def test_this_process_runs_what_the_environment_asks_for() -> None:
    import mrc_host.core.sender as sender

    if mrc_host.pure_python_requested() or not _built():
        assert sender.__file__ is not None and sender.__file__.endswith(".py")
        assert "mrc_host.core.sender" not in mrc_host.compiled_modules()
    else:
        assert sender.__file__ is not None and not sender.__file__.endswith(".py")
        assert "mrc_host.core.sender" in mrc_host.compiled_modules()


def test_python_alone_would_load_a_compiled_module_beside_its_source(tmp_path: Path) -> None:
    """Why ``mrc_host`` installs an import hook (``_SourceFirst``): with the compiled modules
    built in place (``pip install -e .``), each ``.so`` sits beside its ``.py``, and Python's
    own finder takes the extension first. Without the hook, ``MRC_PURE_PYTHON=1`` could not
    run the sources of a built tree (``make test-pure``), and a source edited since the build
    would silently run as the old compiled code. The hook, asked for a module of the package,
    finds the source instead."""
    from importlib.machinery import EXTENSION_SUFFIXES, PathFinder

    (tmp_path / "mod.py").write_text("WHICH = 'source'\n")
    (tmp_path / f"mod{EXTENSION_SUFFIXES[0]}").write_bytes(b"")  # found, never loaded here
    python_s = PathFinder.find_spec("mod", [str(tmp_path)])
    assert python_s is not None and str(python_s.origin).endswith(EXTENSION_SUFFIXES[0])
    hooks = mrc_host._SourceFirst().find_spec("mrc_host.mod", [str(tmp_path)])
    assert hooks is not None and str(hooks.origin).endswith("mod.py")
    assert mrc_host._SourceFirst().find_spec("other.mod", [str(tmp_path)]) is None  # (only ours)
