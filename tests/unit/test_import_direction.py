"""Imports flow the one way docs/design.md §7 draws, read from that page itself.

``mrc_fabric`` ← ``mrc_p4rt`` ← ``mrc_host`` / ``controller`` / ``linux_target`` ← ``mrc_view`` ←
``topologies`` ← ``bench``, and inside ``mrc_host``: ``wire`` ← ``core`` ← ``agent`` / ``sim``. A
module imports from its own package and the tiers to its left only, never from a neighbour across a
``/``. Every import counts, also one inside a function.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
# Imports against the direction, each with the change that removes it. The test fails once one is
# gone, so that its exception goes with it.
KNOWN: dict[tuple[str, str], str] = {}
Ranks = dict[str, tuple[str, int]]  # package -> (its chain, its tier in the chain, 0 leftmost)


def layers(text: str) -> Ranks:
    """The tiers of every chain of §7: ``inside `pkg`, `a` ← `b` / `c``` ranks ``pkg.a`` ... ."""
    section = re.sub(r"\([^)]*\)", "", text.split("## §7", 1)[1].split("\n## ", 1)[0])  # drop what each is
    ranks: Ranks = {}
    for inside, chain in re.findall(r"(?:inside `(\w+)`,\s*)?(`\w+`(?:\s*[←/]\s*`\w+`)+)", section):
        for tier, names in enumerate(chain.split("←")):
            for name in re.findall(r"`(\w+)`", names):
                ranks[f"{inside}.{name}" if inside else name] = (inside, tier)
    return ranks


def _owner(module: str, ranks: Ranks) -> str | None:
    """The ranked package ``module`` belongs to, the innermost one."""
    parts = module.split(".")
    return next((p for p in (".".join(parts[:2]), parts[0]) if p in ranks), None)


def _imports(root: Path, path: Path) -> set[str]:
    parts = path.relative_to(root).with_suffix("").parts
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = parts[: len(parts) - node.level] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            out |= {f"{module}.{a.name}" for a in node.names}
    return out


def _against(mine: str, theirs: str, ranks: Ranks) -> str | None:
    """Why importing ``theirs`` from ``mine`` goes against the chains, None if it does not."""
    if mine.split(".")[0] == theirs.split(".")[0] and ranks[mine][0] != ranks[theirs][0]:
        return None  # a package and its own subpackages
    if ranks[mine][0] != ranks[theirs][0]:  # different chains: compare the packages they are in
        mine, theirs = mine.split(".")[0], theirs.split(".")[0]
    if mine == theirs:
        return None
    (_, mine_tier), (_, their_tier) = ranks[mine], ranks[theirs]
    if their_tier > mine_tier:
        return f"{mine} imports {theirs}, a tier to its right"
    if their_tier == mine_tier:
        return f"{mine} imports {theirs}, its neighbour across a /"
    return None


def wrong_way(root: Path, ranks: Ranks) -> dict[tuple[str, str], str]:
    """(file, imported package) -> why it goes against the chains."""
    bad = {}
    packages = sorted({name.split(".")[0] for name in ranks})
    for path in sorted(p for top in packages for p in (root / top).rglob("*.py")):
        mine = _owner(".".join(path.relative_to(root).with_suffix("").parts), ranks)
        for module in _imports(root, path) if mine else ():
            theirs = _owner(module, ranks)
            why = None if theirs is None or mine is None else _against(mine, theirs, ranks)
            if why is not None and theirs is not None:
                bad[(path.relative_to(root).as_posix(), theirs)] = why
    return bad


def test_the_chains_are_read_from_the_page() -> None:
    ranks = layers(DESIGN.read_text())
    tier = {name: t for name, (_, t) in ranks.items()}
    assert (
        tier["mrc_fabric"] < tier["mrc_p4rt"] < tier["controller"] == tier["mrc_host"] == tier["linux_target"]
    )
    assert tier["controller"] < tier["mrc_view"] < tier["topologies"] < tier["bench"]
    assert tier["mrc_host.wire"] < tier["mrc_host.core"] < tier["mrc_host.sim"] == tier["mrc_host.agent"]
    assert all((ROOT / name.replace(".", "/")).is_dir() for name in ranks), (
        "§7 names a package that is not here"
    )


def test_imports_flow_the_way_the_design_says() -> None:
    bad = wrong_way(ROOT, layers(DESIGN.read_text()))
    unexplained = [f"{f} imports {m}: {why}" for (f, m), why in sorted(bad.items()) if (f, m) not in KNOWN]
    assert not unexplained, "against docs/design.md §7:\n" + "\n".join(unexplained)
    gone = [f"{f} no longer imports {m}: remove it from KNOWN" for f, m in KNOWN if (f, m) not in bad]
    assert not gone, gone


def test_a_wrong_way_import_is_caught(tmp_path: Path) -> None:
    page = "## §7 X\n\n`low` (base) ← `mid` / `peer` ← `top`; inside `mid`, `a` ← `b`.\n## §8\n"
    files = {
        "low/x.py": "import mid.a\n",  # to its right
        "mid/a/y.py": "def f():\n    from ..b import z\n",  # to its right, inside mid, in a function
        "mid/b/z.py": "from mid.a import y\nimport low\nfrom peer import w\n",  # fine, fine, neighbour
        "peer/w.py": "import top\n",  # to its right
        "top/v.py": "import low, mid.b, peer\n",  # all fine
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert wrong_way(tmp_path, layers(page)) == {
        ("low/x.py", "mid.a"): "low imports mid, a tier to its right",
        ("mid/a/y.py", "mid.b"): "mid.a imports mid.b, a tier to its right",
        ("mid/b/z.py", "peer"): "mid imports peer, its neighbour across a /",
        ("peer/w.py", "top"): "peer imports top, a tier to its right",
    }
