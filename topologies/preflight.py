"""Before any live fabric: can this machine run it? Every missing thing, named at once.

Why: a fabric that starts on a machine lacking something fails deep inside Mininet, a shim
or the kernel, one problem per attempt and often as a traceback. :func:`check` looks at all
of it first and :func:`require` raises :class:`PreflightError`, whose message lists each
missing item with what to do about it:

- root;
- the kernel's release (the Linux target needs 6.1) and each kernel feature the data plane
  uses, tried for real in a throwaway network and mount namespace (``topologies.kernel_probe``:
  veth, seg6local End next-csid, nftables netdev chains, HTB, the egress program in a node's
  mount view, TPACKET_V2/V3 rings);
- the tools and Python modules the fabric runs;
- what a run killed before it could clean up left behind: its processes still running, or
  interfaces in the machine's namespace with the names this fabric needs ("run make clean").

The kernel probes run once per process (a kernel does not change under a running process);
the rest is looked at every time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mrc_fabric.time_scale import scaled
from mrc_fabric.topology import Target, Topology
from topologies.kernel_probe import FEATURES, Feature

MIN_KERNEL = (6, 1)  # seg6local flavors next-csid (the uSID shift) arrived in 6.1
PROBE_TIMEOUT_S = 60.0  # the probes take about a second (a BPF build at first use: a few more)
CLEAN = "run `sudo make clean` (it removes only what crashed runs left)"
SETUP = "scripts/install-system-deps.sh (or ./run.sh) installs it"

# tool -> the Debian package that has it
COMMON_TOOLS = {"ip": "iproute2", "tc": "iproute2", "ethtool": "ethtool", "mnexec": "mininet",
                "unshare": "util-linux"}  # fmt: skip
LINUX_TOOLS = {"nft": "nftables", "bpftool": "bpftool"}

_probed: dict[tuple[str, ...], dict[str, str | None]] = {}  # probe names -> results, this process


@dataclass(frozen=True)
class Missing:
    """One thing the fabric needs and this machine lacks, and what to do about it."""

    what: str
    fix: str

    def line(self) -> str:
        return f"  - {self.what}: {self.fix}"


class PreflightError(RuntimeError):
    """The machine cannot run the live fabric; the message names every missing item."""

    def __init__(self, missing: list[Missing]) -> None:
        self.missing = missing
        n = len(missing)
        head = f"this machine cannot run the live fabric yet ({n} thing{'s' if n > 1 else ''} missing):"
        super().__init__("\n".join([head, *(m.line() for m in missing)]))


def kernel_release_tuple(release: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_kernel_release(release: str, target: Target) -> list[Missing]:
    if target != Target.LINUX:
        return []
    version = kernel_release_tuple(release)
    want = ".".join(map(str, MIN_KERNEL))
    if version is None:
        return [Missing(f"kernel release {release!r} unreadable", f"the Linux target needs Linux >= {want}")]
    if version < MIN_KERNEL:
        return [
            Missing(
                f"Linux {release} is older than {want}",
                f"the Linux target needs {want} (seg6local flavors next-csid); "
                "use a newer kernel, or the bmv2 target",
            )
        ]
    return []


def check_tools(target: Target, pcap: bool = False) -> list[Missing]:
    from linux_target.egress import missing_tools

    tools = dict(COMMON_TOOLS)
    if target == Target.LINUX:
        tools.update(LINUX_TOOLS)
    if pcap:
        tools["tcpdump"] = "tcpdump"
    out = [Missing(f"{tool} not on PATH", f"apt-get install {pkg}; {SETUP}") for tool, pkg in tools.items()
           if shutil.which(tool) is None]  # fmt: skip
    if target == Target.LINUX and not _egress_object_ready():
        said = {m.what.split()[0] for m in out}
        out += [Missing(f"to build the egress program: {m}", SETUP) for m in missing_tools()
                if m.split()[0] not in said]  # fmt: skip
    if importlib.util.find_spec("mininet") is None:
        out.append(
            Missing(
                f"Python cannot import mininet ({sys.executable})",
                "apt-get install mininet, and a venv made with --system-site-packages (make setup does)",
            )
        )
    return out


def _egress_object_ready() -> bool:
    from linux_target.egress import OBJECT, SOURCE

    return OBJECT.exists() and OBJECT.stat().st_mtime >= SOURCE.stat().st_mtime


def _can_try(feature: Feature) -> bool:
    """Every tool the probe runs is there (and, for the egress program, it can be built)."""
    from linux_target.egress import missing_tools

    if not all(shutil.which(tool) for tool in feature.tools):
        return False
    return feature.name != "egress_bpf" or _egress_object_ready() or not missing_tools()


def probe_kernel(target: Target) -> dict[str, str | None]:
    """The kernel features ``target`` uses, each tried in a throwaway namespace (cached); a
    feature whose probe needs a missing tool is not tried (the tool is named instead)."""
    names = tuple(
        f.name for f in FEATURES if target.value in f.targets and all(shutil.which(tool) for tool in f.tools)
    )
    if names in _probed:
        return _probed[names]
    cmd = ["unshare", "--net", "--mount", "--propagation", "private", "--",
           sys.executable, "-m", "topologies.kernel_probe", *names]  # fmt: skip
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=scaled(PROBE_TIMEOUT_S), env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return dict.fromkeys(names, f"the probe did not run ({type(exc).__name__}: {exc})")
    try:
        results: dict[str, str | None] = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        said = (proc.stderr or proc.stdout).strip()[-300:]
        return dict.fromkeys(names, f"the probe ended with status {proc.returncode}: {said}")
    if "error" in results:
        return dict.fromkeys(names, f"the probe failed: {results['error']}")
    _probed[names] = results
    return results


def check_kernel_features(target: Target) -> list[Missing]:
    results = probe_kernel(target)
    out = []
    for f in FEATURES:
        err = results.get(f.name)
        if err:
            first = err.strip().splitlines()[0][:400]
            out.append(Missing(f"kernel: {f.what}", f"{first} (in Linux since {f.since})"))
    return out


def root_links() -> set[str]:
    proc = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False)
    return {
        line.split(":")[1].strip().split("@")[0] for line in proc.stdout.splitlines() if line.count(":") > 1
    }


def check_leftovers(runs_root: Path | None, ifnames: Iterable[str] = ()) -> list[Missing]:
    """A killed run's processes still running (in ``runs_root``), or root-namespace interfaces
    with the names this fabric is about to make."""
    from topologies.cleanup import owner_alive
    from topologies.rundir import LATEST, read_records

    out = []
    if runs_root is not None and runs_root.is_dir():
        for run in sorted(runs_root.iterdir()):
            if run.name == LATEST or run.is_symlink() or not run.is_dir() or owner_alive(run):
                continue
            alive = [r for r in read_records(run) if r.alive()]
            if alive:
                kinds = ", ".join(sorted({r.kind for r in alive}))
                out.append(Missing(f"run {run} was killed and left {len(alive)} processes ({kinds})", CLEAN))
    clash = sorted(set(ifnames) & root_links()) if ifnames else []
    if clash:
        shown = ", ".join(clash[:4]) + (f" and {len(clash) - 4} more" if len(clash) > 4 else "")
        out.append(Missing(f"interfaces {shown} exist already (a fabric left behind)", CLEAN))
    return out


def check(
    target: Target,
    runs_root: Path | None = None,
    ifnames: Iterable[str] = (),
    pcap: bool = False,
    release: str | None = None,
    euid: int | None = None,
) -> list[Missing]:
    """Everything missing for a live fabric on ``target``. ``release`` and ``euid`` stand in
    for the machine's own (tests)."""
    release = os.uname().release if release is None else release
    euid = os.geteuid() if euid is None else euid
    out = []
    if euid != 0:
        out.append(
            Missing("not root", "the fabric needs network namespaces, veths and raw sockets: use sudo")
        )
    out += check_kernel_release(release, target)
    out += check_tools(target, pcap)
    if euid == 0 and shutil.which("unshare") and shutil.which("ip"):
        out += check_kernel_features(target)
    out += check_leftovers(runs_root, ifnames)
    return out


def root_ifnames(topology: Topology) -> list[str]:
    """The interfaces of ``topology`` that live in the machine's namespace (BMv2's ports; a
    Linux switch and every host have a namespace of their own, where no name can clash)."""
    switches = {sw.name for sw in topology.switches if sw.target == Target.BMV2}
    return [end.ifname for link in topology.links for end in (link.a, link.b) if end.node in switches]


def require(
    target: Target, runs_root: Path | None = None, ifnames: Iterable[str] = (), pcap: bool = False
) -> None:
    """:func:`check`, raising :class:`PreflightError` when anything is missing."""
    missing = check(target, runs_root, ifnames, pcap)
    if missing:
        raise PreflightError(missing)
