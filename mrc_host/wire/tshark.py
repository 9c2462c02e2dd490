"""Run tshark with the project's Lua dissector (wireshark/mrc.lua): for tests and tools.

``fields`` returns one dict per frame of the requested display fields; ``problems`` lists
every expert item of severity warning or error (and every malformed frame) tshark reports,
so a test can say "this capture decodes cleanly". Both raise ``TsharkMissing`` where tshark
is not installed, so callers can skip.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

LUA_SCRIPT = Path(__file__).resolve().parents[2] / "wireshark" / "mrc.lua"
TIMEOUT_S = 120


class TsharkMissing(RuntimeError):
    pass


def _tshark() -> str:
    exe = shutil.which("tshark")
    if exe is None:
        raise TsharkMissing("tshark not installed (apt-get install tshark)")
    return exe


def _run(pcap: Path, args: list[str], lua: bool) -> str:
    cmd = [_tshark(), "-n", "-r", str(pcap)]
    if lua:
        cmd += ["-X", f"lua_script:{LUA_SCRIPT}"]
    proc = subprocess.run(cmd + args, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"tshark failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def fields(pcap: Path, names: list[str], *, lua: bool = True) -> list[dict[str, str]]:
    """Per frame, ``name -> value`` (several occurrences joined by ',', absent = '')."""
    args = ["-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
    for n in names:
        args += ["-e", n]
    out = _run(pcap, args, lua)
    return [dict(zip(names, line.split("\t"), strict=True)) for line in out.splitlines()]


def problems(pcap: Path, *, lua: bool = True) -> list[str]:
    """'frame N: message' for each expert item at warning/error level and each malformed frame."""
    names = ["frame.number", "_ws.expert.message", "_ws.malformed"]
    args = ["-Y", "_ws.expert.severity >= warning || _ws.malformed", "-T", "fields"]
    for n in names:
        args += ["-e", n]
    out = _run(pcap, args, lua)
    return [f"frame {line.split(chr(9))[0]}: {line.split(chr(9), 1)[-1]}" for line in out.splitlines()]


def details(pcap: Path, frame: int, *, lua: bool = True) -> str:
    """tshark's packet details (``-V``) of frame number ``frame``: the trees as a reader sees them."""
    return _run(pcap, ["-V", "-Y", f"frame.number == {frame}"], lua)
