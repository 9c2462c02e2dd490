"""MRC host transport: wire format, sans-I/O core, simulator and raw-socket agent.

Where the package was installed with its mypyc-compiled modules (setup.py), Python loads
those; ``MRC_PURE_PYTHON=1`` in the environment makes it load the ``.py`` sources instead
(the finder below), so the same tree runs and is tested both ways. A compiled module older
than its source (edited since the last ``pip install -e .``) would silently run old code,
so then every module loads from source, with a warning; modules compiled together call
each other directly in C, so it is all of them or none. The finder is needed because the
compiled modules are built in place, each beside its source, and Python's own finder takes
the extension first (tests/unit/test_compiled.py shows it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec, PathFinder
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

# Every ``mrc-sim`` run starts here, so the check below uses ``os`` alone: a walk with
# ``os.scandir`` and two ``stat`` calls per compiled module (``pathlib``'s ``rglob`` and the
# imports it needs took milliseconds, as long as simulating a small write).
_PACKAGE = os.path.dirname(os.path.abspath(__file__))
_SUFFIXES = tuple(EXTENSION_SUFFIXES)  # ".so" matches all of them


def pure_python_requested() -> bool:
    return os.environ.get("MRC_PURE_PYTHON", "") not in ("", "0")


def _source_of(compiled: str) -> str:
    head, name = os.path.split(compiled)
    return os.path.join(head, name.split(".", 1)[0] + ".py")


def _compiled_files(top: str = _PACKAGE) -> list[str]:
    """Paths of the compiled module files under ``top`` that have a source beside them."""
    found = []
    with os.scandir(top) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and entry.name != "__pycache__":
                found += _compiled_files(entry.path)
            elif entry.name.endswith(_SUFFIXES) and os.path.isfile(_source_of(entry.path)):
                found.append(entry.path)
    return found


def built_modules() -> list[Path]:
    """The compiled (mypyc) module files present in the package tree."""
    from pathlib import Path

    return sorted(Path(so) for so in _compiled_files())


def _stale() -> list[str]:
    return [so for so in _compiled_files() if os.stat(_source_of(so)).st_mtime > os.stat(so).st_mtime]


def stale_modules() -> list[Path]:
    """Compiled modules whose source changed after they were built."""
    from pathlib import Path

    return sorted(Path(so) for so in _stale())


class _SourceFirst:
    """Import ``mrc_host.*`` from its ``.py`` file even when a compiled one sits beside it
    (a meta path finder: ``importlib.abc.MetaPathFinder``'s protocol, without importing it)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(__name__ + "."):
            return None
        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.origin is None or not spec.origin.endswith(_SUFFIXES):
            return spec
        source = _source_of(spec.origin)
        if not os.path.isfile(source):
            return spec
        from importlib.util import spec_from_file_location

        return spec_from_file_location(
            fullname, source, submodule_search_locations=spec.submodule_search_locations
        )


def compiled_modules() -> list[str]:
    """The ``mrc_host`` modules imported so far that run compiled (mypyc), sorted."""
    return sorted(
        name
        for name, mod in list(sys.modules.items())
        if name.startswith(__name__ + ".") and str(getattr(mod, "__file__", "")).endswith(_SUFFIXES)
    )


def _use_sources() -> bool:
    if pure_python_requested():
        return True
    stale = sorted(_stale())
    if stale:
        import warnings

        warnings.warn(
            f"{len(stale)} compiled mrc_host modules are older than their sources (e.g. "
            f"{os.path.relpath(stale[0], os.path.dirname(_PACKAGE))}): running the pure-Python sources; "
            "rebuild with `pip install -e .` (or set MRC_PURE_PYTHON=1 to silence this)",
            RuntimeWarning,
            stacklevel=2,
        )
        return True
    return False


if _use_sources() and not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
    sys.meta_path.insert(0, _SourceFirst())
