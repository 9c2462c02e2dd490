"""CHANGELOG.md is for users, and nothing else in the project cites it.

Why: a user reads the changelog to learn what a version lets them do or see, one line per
change, as in aioquic's ``docs/changelog.rst``. A lab notebook there (runs, rounds, what was
tried and dropped) hides that; measurements belong in ``results/`` and docs/results.md. Code
and docs say the reason for what they do, never "see the changelog, round N".
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHANGELOG = ROOT / "CHANGELOG.md"
RELEASE = re.compile(r"^## (\d+)\.(\d+)\.(\d+) — (\d{4}-\d{2}-\d{2})$")
SECTIONS = {"### Added", "### Changed", "### Fixed", "### Removed"}
# what a lab notebook says and a changelog does not
NOTEBOOK = re.compile(r"\bround \d+|\(#\d+\)|\bissue #?\d+|tried, not kept|not kept|reverted|not met", re.I)
# a citation of the changelog, of a round or of an issue in code, comments or docs
CITATION = re.compile(r"CHANGELOG|\bround \d+\b|\bissue #?\d+\b|\(#\d+\)|#\d+ item", re.I)
CODE = ("mrc_fabric", "mrc_host", "controller", "linux_target", "topologies", "mrc_view", "mrc_p4rt", "bench")


def _releases(text: str) -> list[tuple[tuple[int, int, int], str]]:
    found = []
    for line in text.splitlines():
        m = RELEASE.match(line)
        if m:
            found.append(((int(m[1]), int(m[2]), int(m[3])), m[4]))
    return found


def _shape_faults(text: str) -> list[str]:
    """Every line below the intro that is not a version, a section, a one-line entry or a
    release's theme (its first line)."""
    lines = text.splitlines()
    start = lines.index("## Unreleased") if "## Unreleased" in lines else 0
    faults: list[str] = []
    theme_allowed = False
    for n, line in enumerate(lines[start:], start + 1):
        if line.startswith("## "):
            if line != "## Unreleased" and not RELEASE.match(line):
                faults.append(f"{n}: not a version heading: {line}")
            theme_allowed = line != "## Unreleased"
        elif not line:
            continue
        elif line in SECTIONS or line.startswith("- "):
            theme_allowed = False
        elif theme_allowed and not line.startswith((" ", "#", "|")):
            theme_allowed = False  # the release's theme: one line, then sections
        else:
            faults.append(f"{n}: not one line per change: {line[:60]}")
    return faults


def test_releases_are_newest_first_and_the_newest_is_the_package_version() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    assert text.splitlines().count("## Unreleased") == 1
    releases = _releases(text)
    assert len(releases) >= 2
    versions = [v for v, _ in releases]
    assert versions == sorted(versions, reverse=True) and len(set(versions)) == len(versions)
    dates = [d for _, d in releases]
    assert dates == sorted(dates, reverse=True)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert ".".join(map(str, versions[0])) == project


def test_each_change_is_one_line_under_its_version() -> None:
    text = CHANGELOG.read_text(encoding="utf-8")
    assert _shape_faults(text) == []
    assert text.index("## Unreleased") < text.index("\n## " + ".".join(map(str, _releases(text)[0][0])))


def test_the_changelog_is_no_lab_notebook() -> None:
    bad = [line for line in CHANGELOG.read_text(encoding="utf-8").splitlines() if NOTEBOOK.search(line)]
    assert bad == []


def test_no_code_or_doc_cites_the_changelog_a_round_or_an_issue() -> None:
    files = [f for p in CODE for f in (ROOT / p).rglob("*.py") if "_pb2" not in f.name]
    files += [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    assert len(files) > 100
    bad = []
    for f in files:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            if CITATION.search(line):
                bad.append(f"{f.relative_to(ROOT)}:{n}: {line.strip()[:80]}")
    assert bad == []


def test_the_checks_can_fail() -> None:
    notebook = "# Changelog\n\n## Unreleased\n\n## 0.2.0 — 2026-01-02\n\ntheme\n\n### Added\n"
    notebook += "- a\n  wrapped\n## Round 3\n"
    assert len(_shape_faults(notebook)) == 2
    assert _releases(notebook) == [((0, 2, 0), "2026-01-02")]
    assert NOTEBOOK.search("## #45 item 1 — a cut (round 16)") and NOTEBOOK.search("tried, not kept")
    assert CITATION.search("# its floor (CHANGELOG, round 20)") and CITATION.search("(issue 44: about 1,020)")
    assert not CITATION.search("per round, round by round, a round trip, --rounds 3")
