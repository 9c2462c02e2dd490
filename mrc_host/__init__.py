"""MRC host transport: wire format, sans-I/O core, simulator and raw-socket agent.

Where the package was installed with its mypyc-compiled modules (setup.py), Python loads
those; ``MRC_PURE_PYTHON=1`` in the environment makes it load the ``.py`` sources instead
(the finder below), so the same tree runs and is tested both ways. A compiled module older
than its source (edited since the last ``pip install -e .``) would silently run old code,
so then every module loads from source, with a warning; modules compiled together call
each other directly in C, so it is all of them or none.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, PathFinder
from pathlib import Path
from types import ModuleType

_PACKAGE = Path(__file__).resolve().parent


def pure_python_requested() -> bool:
    return os.environ.get("MRC_PURE_PYTHON", "") not in ("", "0")


def _source_of(compiled: Path) -> Path:
    return compiled.with_name(compiled.name.split(".", 1)[0] + ".py")


def built_modules() -> list[Path]:
    """The compiled (mypyc) module files present in the package tree."""
    found = {so for suffix in EXTENSION_SUFFIXES for so in _PACKAGE.rglob("*" + suffix)}  # ".so" matches all
    return sorted(so for so in found if _source_of(so).is_file())


def stale_modules() -> list[Path]:
    """Compiled modules whose source changed after they were built."""
    return [so for so in built_modules() if _source_of(so).stat().st_mtime > so.stat().st_mtime]


class _SourceFirst(MetaPathFinder):
    """Import ``mrc_host.*`` from its ``.py`` file even when a compiled one sits beside it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(__name__ + "."):
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.origin.endswith(tuple(EXTENSION_SUFFIXES)):
            return spec
        source = _source_of(Path(spec.origin))
        if not source.is_file():
            return spec
        return importlib.util.spec_from_file_location(
            fullname, source, submodule_search_locations=spec.submodule_search_locations
        )


def compiled_modules() -> list[str]:
    """The ``mrc_host`` modules imported so far that run compiled (mypyc), sorted."""
    return sorted(
        name
        for name, mod in list(sys.modules.items())
        if name.startswith(__name__ + ".")
        and str(getattr(mod, "__file__", "")).endswith(tuple(EXTENSION_SUFFIXES))
    )


def _use_sources() -> bool:
    if pure_python_requested():
        return True
    stale = stale_modules()
    if stale:
        warnings.warn(
            f"{len(stale)} compiled mrc_host modules are older than their sources (e.g. "
            f"{stale[0].relative_to(_PACKAGE.parent)}): running the pure-Python sources; "
            "rebuild with `pip install -e .` (or set MRC_PURE_PYTHON=1 to silence this)",
            RuntimeWarning,
            stacklevel=2,
        )
        return True
    return False


if _use_sources() and not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
    sys.meta_path.insert(0, _SourceFirst())
