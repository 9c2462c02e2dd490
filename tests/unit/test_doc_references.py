"""Every path the docs name, and every ``docs/…`` page the code cites, is in the repo.

A reader who clones the project must be able to follow each reference: the design contract
and the paper's facts live in docs/design.md and docs/mrc-facts.md, never in files outside
the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()

TEXT_SUFFIXES = {".py", ".md", ".c", ".h", ".p4", ".toml", ".sh", ".lua", ".txt", ".json", ".cfg", ".yml"}
# Markdown link targets: [text](target).
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Backticked repo paths: `dir/…` with at least one slash and no placeholders.
CODE_PATH = re.compile(r"`([A-Za-z0-9_.\-]+/[A-Za-z0-9_./\-]*)`")
DOCS_REF = re.compile(r"\bdocs/[A-Za-z0-9_\-]+\.md\b")
OUTSIDE = re.compile(r"DESIGN\.md|MRC_FACTS|DESIGN ?§|/work/shared")
# Build products (git-ignored, made by `make p4` / `make setup`): named in docs, never tracked.
GENERATED = ("p4src/build/", "linux_target/bpf/build/")


def _tracked() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [line for line in out.splitlines() if line]


TRACKED = _tracked()
TRACKED_SET = set(TRACKED)
TOP_DIRS = {p.split("/", 1)[0] for p in TRACKED if "/" in p}
# CHANGELOG.md tells what older versions changed: it may name files that are gone.
DOC_FILES = [p for p in TRACKED if p.endswith(".md") and p != "CHANGELOG.md"]


def _exists(rel: str) -> bool:
    rel = rel.rstrip("/")
    return rel in TRACKED_SET or any(p.startswith(rel + "/") for p in TRACKED)


def _text(rel: str) -> str:
    return (ROOT / rel).read_text(encoding="utf-8", errors="replace")


def _bad_links(rel: str) -> list[str]:
    base = Path(rel).parent
    bad = []
    for target in LINK.findall(_text(rel)):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        resolved = (ROOT / base / path).resolve()
        try:
            inside = resolved.relative_to(ROOT).as_posix()
        except ValueError:
            bad.append(f"{target} (outside the repo)")
            continue
        if not _exists(inside):
            bad.append(target)
    return bad


def _bad_code_paths(rel: str) -> list[str]:
    bad = []
    for path in CODE_PATH.findall(_text(rel)):
        first = path.split("/", 1)[0]
        if first not in TOP_DIRS or any(c in path for c in "<>*{}…") or ".." in path:
            continue
        if (path + "/").startswith(GENERATED):
            continue
        if not _exists(path):
            bad.append(path)
    return bad


@pytest.mark.parametrize("rel", DOC_FILES)
def test_documented_paths_exist(rel: str) -> None:
    bad = _bad_links(rel) + _bad_code_paths(rel)
    assert not bad, f"{rel} names paths that are not in the repo: {bad}"


def test_docs_pages_cited_anywhere_exist() -> None:
    bad = []
    for rel in TRACKED:
        if rel == THIS or (Path(rel).suffix not in TEXT_SUFFIXES and Path(rel).name != "Makefile"):
            continue
        for ref in set(DOCS_REF.findall(_text(rel))):
            if ref not in TRACKED_SET:
                bad.append(f"{rel}: {ref}")
    assert not bad, f"references to docs pages that do not exist: {bad}"


def test_nothing_points_outside_the_repo_for_the_contract() -> None:
    bad = []
    for rel in TRACKED:
        if rel == THIS or (Path(rel).suffix not in TEXT_SUFFIXES and Path(rel).name != "Makefile"):
            continue
        for n, line in enumerate(_text(rel).splitlines(), 1):
            if OUTSIDE.search(line):
                bad.append(f"{rel}:{n}")
    assert not bad, f"cite docs/design.md or docs/mrc-facts.md instead: {bad}"


def test_the_checker_sees_a_missing_path(tmp_path: Path) -> None:
    # The rules above must be able to fail: a made-up page and a made-up module are caught.
    assert not _exists("docs/no-such-page.md")
    assert not _exists("mrc_host/no_such_module.py")
    assert _exists("docs/design.md") and _exists("mrc_fabric")
    assert DOCS_REF.findall("see docs/no-such-page.md") == ["docs/no-such-page.md"]
    assert OUTSIDE.search("as DESIGN §3 says")


def test_the_docs_stay_a_manual_of_at_most_2400_lines() -> None:
    """The docs say what is true now; what changed for users goes into CHANGELOG.md and
    measurements into the generated results/, so the manual stays short enough to read in a day.
    The ceiling grew from 1,800 when the live fabric gained its fidelity monitor, plain host
    traffic and packet rings, and the simulator its fuzzer and virtual payloads; and from 2,000
    with the page for Mininet and P4 users (their own program, the switches' tools, typed
    scripts), the kernel features a host needs (the pre-flight's table), slow machines and the
    VM check: each needs its manual, not a denser paragraph."""
    total = sum(len(p.read_text().splitlines()) for p in (ROOT / "docs").glob("*.md"))
    assert 0 < total <= 2400, f"docs/ holds {total} lines"
