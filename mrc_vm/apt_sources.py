"""Which Debian mirror this machine's apt uses, and how its pip reaches the Python index.

The image comes from the same mirror (and through the same proxy) that apt on the host uses, and
`make setup` inside it reaches PyPI as the host's pip does (its index and the certificates it
trusts, for a lab behind a TLS-inspecting proxy), so an offline lab with local mirrors builds it
without any extra setting.
"""

from __future__ import annotations

import configparser
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY = "http://deb.debian.org/debian-security"


@dataclass(frozen=True)
class AptSource:
    """One `deb` line: where, which suite, which components."""

    uri: str
    suite: str
    components: tuple[str, ...]

    def line(self) -> str:
        return f"deb {self.uri} {self.suite} {' '.join(self.components)}"


def parse_one_line(text: str) -> list[AptSource]:
    """`deb [opts] URI SUITE COMP...` lines (sources.list format)."""
    out: list[AptSource] = []
    for raw in text.splitlines():
        words = raw.split("#", 1)[0].split()
        if len(words) < 3 or words[0] != "deb":
            continue
        if words[1].startswith("["):
            close = next((i for i, w in enumerate(words) if i >= 1 and w.endswith("]")), None)
            if close is None:  # an option bracket never closed: not a line apt reads either
                continue
            del words[1 : close + 1]
        if len(words) >= 3:
            out.append(AptSource(words[1].rstrip("/"), words[2], tuple(words[3:]) or ("main",)))
    return out


def parse_deb822(text: str) -> list[AptSource]:
    """Stanzas of a `.sources` file (deb822 format): one source per URI and suite."""
    out: list[AptSource] = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        for raw in stanza.splitlines():
            if raw.startswith("#") or ":" not in raw or raw[:1].isspace():
                continue
            key, _, value = raw.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes") == "no":
            continue
        comps = tuple(fields.get("components", "main").split()) or ("main",)
        for uri in fields.get("uris", "").split():
            out.extend(AptSource(uri.rstrip("/"), suite, comps) for suite in fields.get("suites", "").split())
    return out


def host_sources(root: Path = Path("/")) -> list[AptSource]:
    """Every `deb` source the host's apt reads."""
    out: list[AptSource] = []
    main = root / "etc/apt/sources.list"
    if main.is_file():
        out += parse_one_line(main.read_text(errors="replace"))
    d = root / "etc/apt/sources.list.d"
    for f in sorted(d.glob("*")) if d.is_dir() else []:
        if f.suffix == ".list":
            out += parse_one_line(f.read_text(errors="replace"))
        elif f.suffix == ".sources":
            out += parse_deb822(f.read_text(errors="replace"))
    return out


def debian_sources(sources: list[AptSource], suite: str) -> list[AptSource]:
    """The image's sources: the host's entries for `suite`, `-updates` and `-security`, main only.

    A host without them (an Ubuntu machine, another Debian release) gets deb.debian.org's."""
    wanted = (suite, f"{suite}-updates", f"{suite}-security")
    picked = [AptSource(s.uri, s.suite, ("main",)) for s in sources if s.suite in wanted]
    unique = list(dict.fromkeys(picked))
    if not any(s.suite == suite for s in unique):
        return [
            AptSource(DEFAULT_MIRROR, suite, ("main",)),
            AptSource(DEFAULT_MIRROR, f"{suite}-updates", ("main",)),
            AptSource(DEFAULT_SECURITY, f"{suite}-security", ("main",)),
        ]
    return unique


def mirror_of(sources: list[AptSource], suite: str) -> str:
    """The mirror debootstrap fetches `suite` from."""
    return next(s.uri for s in debian_sources(sources, suite) if s.suite == suite)


def apt_proxy() -> str | None:
    """apt's HTTP proxy (Acquire::http::Proxy), if one is set."""
    try:
        res = subprocess.run(
            ["apt-config", "shell", "P", "Acquire::http::Proxy"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for raw in res.stdout.splitlines():
        if raw.startswith("P="):
            value = raw[2:].strip("'\"")
            return value if value and value.upper() != "DIRECT" else None
    return None


def pip_settings(env: dict[str, str] | None = None, conf_files: tuple[Path, ...] = ()) -> dict[str, str]:
    """The host pip's index URL and CA bundle: PIP_INDEX_URL / PIP_CERT, else pip.conf's `[global]`."""
    env = dict(os.environ) if env is None else env
    files = conf_files or (
        Path("/etc/pip.conf"),
        Path("/etc/xdg/pip/pip.conf"),
        Path.home() / ".config/pip/pip.conf",
    )
    conf = configparser.ConfigParser()
    conf.read([f for f in files if f.is_file()])
    out = {}
    for key, option in (("index_url", "index-url"), ("cert", "cert")):
        value = env.get(f"PIP_{key.upper()}") or conf.get("global", option, fallback="")
        if value:
            out[option] = value
    return out
