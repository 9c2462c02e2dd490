"""The compiled per-frame functions read no global name through a module's dict.

Why: in code mypyc compiles, a module-level name that is ``Final`` (or a function or class
of a compiled module, or a ``Final`` literal it can inline) is read from a C static. Any
other global, such as a name imported from a module that runs as Python (``zlib_ng``'s
``crc32``, a constant computed in ``framing.py``), or a builtin such as ``memoryview``,
is looked up on every use: about 9 ns more than a ``Final`` for a global, 18 ns for
``memoryview`` (mypyc ``-O3``, load 10), paid per packet here. The check reads the sources,
so it holds whether or not the extensions are built.
"""

from __future__ import annotations

import ast
import builtins

import pytest
from test_compiled_modules import ROOT, compiled_list

# the functions run once or more per DATA or SACK frame, by module
HOT: dict[str, tuple[str, ...]] = {
    "mrc_host/wire/codec.py": (
        "_fast_data",
        "_fast_sack",
        "FrameEncoder.encode_into",
        "FrameEncoder._pack_data",
        "FrameEncoder._pack_sack",
    ),
    "mrc_host/wire/header_check.py": ("header_check_after",),
    "mrc_host/agent/payload.py": ("Verifier.add",),
    "mrc_host/core/sack_by_seq.py": ("SackBySeq.set", "SackBySeq.set_all", "SackBySeq.get", "SackBySeq.pop"),
}
# builtins mypyc compiles to native operations (the others are looked up on every use)
NATIVE_BUILTINS = {"len", "isinstance", "type", "int", "bool", "bytes", "bytearray", "range", "min", "max"}


def _module_path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _is_final(node: ast.stmt) -> bool:
    ann = node.annotation if isinstance(node, ast.AnnAssign) else None
    if ann is None:
        return False
    return (isinstance(ann, ast.Name) and ann.id == "Final") or (
        isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id == "Final"
    )


def _fast_globals(path: str) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """The module's names read from a C static (``Final``, its functions and classes), and
    its ``from`` imports: name -> (module, name there)."""
    tree = ast.parse((ROOT / path).read_text())
    fast: set[str] = set()
    imported: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            fast.add(node.name)
        elif isinstance(node, ast.AnnAssign) and _is_final(node) and isinstance(node.target, ast.Name):
            fast.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and node.module:
            module = node.module
            if node.level:  # a relative import, from this package
                module = ".".join([*path[:-3].split("/")[: -node.level], node.module])
            for alias in node.names:
                imported[alias.asname or alias.name] = (module, alias.name)
    return fast, imported


def _literal_final(path: str, name: str) -> bool:
    """``name`` is a ``Final`` in ``path`` whose value is a literal, or arithmetic on literals
    and on such names of the same module (mypy folds it; mypyc inlines the value)."""
    if not (ROOT / path).exists():
        return False
    values = {
        node.target.id: node.value
        for node in ast.parse((ROOT / path).read_text()).body
        if isinstance(node, ast.AnnAssign) and _is_final(node) and isinstance(node.target, ast.Name)
    }

    def folded(v: ast.expr | None) -> bool:
        if isinstance(v, ast.Constant):
            return isinstance(v.value, int)
        if isinstance(v, ast.UnaryOp):
            return folded(v.operand)
        if isinstance(v, ast.BinOp):
            return folded(v.left) and folded(v.right)
        return isinstance(v, ast.Name) and folded(values.get(v.id))

    return folded(values.get(name))


def _slow_reads(path: str) -> dict[str, set[str]]:
    """For each hot function of ``path``: the globals it reads through a dict."""
    compiled = compiled_list()
    fast, imported = _fast_globals(path)
    tree = ast.parse((ROOT / path).read_text())
    funcs: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            funcs[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    funcs[f"{node.name}.{item.name}"] = item
    found: dict[str, set[str]] = {}
    for qual in HOT[path]:
        fn = funcs[qual]
        local = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        local |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        cold = {id(n) for r in ast.walk(fn) if isinstance(r, ast.Raise) for n in ast.walk(r)}
        # annotations are never evaluated (``from __future__ import annotations``)
        notes = [a.annotation for a in fn.args.args + fn.args.kwonlyargs if a.annotation]
        notes += [fn.returns] if fn.returns else []
        notes += [a.annotation for a in ast.walk(fn) if isinstance(a, ast.AnnAssign)]
        cold |= {id(n) for note in notes for n in ast.walk(note)}
        # nor is an ``except`` clause's type until something is raised
        caught = [h.type for h in ast.walk(fn) if isinstance(h, ast.ExceptHandler) and h.type]
        cold |= {id(n) for c in caught for n in ast.walk(c)}
        slow = set()
        for n in ast.walk(fn):
            if not isinstance(n, ast.Name) or not isinstance(n.ctx, ast.Load) or n.id in local:
                continue
            if id(n) in cold or n.id in fast:  # (an error path or an annotation; a static)
                continue
            if n.id in imported:
                module, name = imported[n.id]
                src = _module_path(module)
                if src in compiled:
                    src_fast, src_imported = _fast_globals(src)
                    if name in src_fast and name not in src_imported:
                        continue  # a compiled module's own function, class or Final
                elif _literal_final(src, name):
                    continue
                slow.add(n.id)
            elif hasattr(builtins, n.id) and n.id not in NATIVE_BUILTINS:
                slow.add(n.id)
            elif not hasattr(builtins, n.id) and n.id not in imported:
                slow.add(n.id)  # a plain module-level variable
        found[qual] = slow
    return found


@pytest.mark.parametrize("path", sorted(HOT))
def test_per_frame_functions_read_globals_from_statics(path: str) -> None:
    slow = {qual: names for qual, names in _slow_reads(path).items() if names}
    assert slow == {}, f"bind these as Final module names: {slow}"
