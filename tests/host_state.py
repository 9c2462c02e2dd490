"""What the machine looked like when the test session began, and what the session left.

The suite must leave mounts, links, namespaces, processes and BPF objects as it found them,
even when a test fails. :func:`snapshot` records what is there at the start; :func:`left`
says what is there at the end that was not, and was the suite's:

- mounts of the machine's own mount table (``/proc/1/mountinfo``);
- interfaces in the machine's network namespace, and named namespaces (``ip netns``);
- processes still running that the session started (every one inherits ``MRC_TEST_SESSION``
  from the session's environment, however it was started or daemonized), with their network
  namespaces;
- the project's BPF programs (``mrc_*``) still loaded, and files pinned in a BPF filesystem
  of the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SESSION_ENV = "MRC_TEST_SESSION"


@dataclass
class HostState:
    mounts: set[str] = field(default_factory=set)
    links: set[str] = field(default_factory=set)
    netns: set[str] = field(default_factory=set)
    bpf_progs: set[str] = field(default_factory=set)
    bpf_pins: set[str] = field(default_factory=set)


def mark_session() -> str:
    """Tag this process's environment: every process the tests start carries the tag."""
    tag = os.environ.setdefault(SESSION_ENV, uuid.uuid4().hex)
    return tag


def _mounts() -> set[str]:
    """Each mount as "point (fs type)", a second one stacked on the same point as "... #2": a
    bpffs left over the machine's own at /sys/fs/bpf (systemd's) is a leak too."""
    try:
        text = Path("/proc/1/mountinfo").read_text()
    except OSError:  # not readable without root in some sandboxes: our own table then
        text = Path("/proc/self/mountinfo").read_text()
    return mount_keys(text)


def mount_keys(text: str) -> set[str]:
    """The keys of :func:`_mounts` for a mountinfo table."""
    out = set()
    seen: Counter[str] = Counter()
    for line in text.splitlines():
        parts = line.split()
        sep = parts.index("-")
        key = f"{parts[4]} ({parts[sep + 1]})"  # mount point (fs type)
        seen[key] += 1
        out.add(key if seen[key] == 1 else f"{key} #{seen[key]}")
    return out


def _run(*cmd: str) -> str:
    if shutil.which(cmd[0]) is None:
        return ""
    return subprocess.run(list(cmd), capture_output=True, text=True, check=False).stdout


def _links() -> set[str]:
    return {ln.split(":")[1].strip().split("@")[0] for ln in _run("ip", "-o", "link", "show").splitlines()
            if ln.count(":") > 1}  # fmt: skip


def _bpf_progs() -> set[str]:
    if os.geteuid() != 0:
        return set()
    try:
        progs = json.loads(_run("bpftool", "-j", "prog", "show") or "[]")
    except ValueError:
        return set()
    # the project's programs only (mrc_egress): others on a shared machine load and unload theirs
    return {f"{p['name']} (id {p['id']})" for p in progs if str(p.get("name", "")).startswith("mrc")}


def _bpf_pins() -> set[str]:
    pins = set()
    for mount in _mounts():
        point, _, fstype = mount.rpartition(" (")
        if fstype == "bpf)":
            with_files = Path(point).rglob("*") if os.access(point, os.R_OK) else []
            pins |= {str(p) for p in with_files}
    return pins


def snapshot() -> HostState:
    return HostState(
        mounts=_mounts(),
        links=_links(),
        netns={line.split()[0] for line in _run("ip", "netns", "list").splitlines() if line.strip()},
        bpf_progs=_bpf_progs(),
        bpf_pins=_bpf_pins(),
    )


# mounts iproute2 makes once for the machine and keeps for its life: /run/netns becomes a mount
# point of its own at the first `ip netns add` after boot (every named namespace is bound under
# it), and unmounting it would cut every other user's namespaces loose; a fresh boot (the VM
# check) meets it during the session
MACHINE_MOUNTS = ("/run/netns (",)

# helpers that live as long as the process that started them (this one) and end with it
ENDS_WITH_SESSION = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def session_processes(tag: str) -> list[str]:
    """Processes (not this one, nor its helpers that end with it) whose environment carries
    the session's tag."""
    needle = f"{SESSION_ENV}={tag}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            if parent == os.getpid() and any(helper in cmd for helper in ENDS_WITH_SESSION):
                continue
            netns = os.readlink(entry / "ns" / "net")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        out.append(f"pid {entry.name} in {netns}: {cmd[:120]}")
    return out


def left(before: HostState, tag: str, live: bool = True) -> list[str]:
    """What the session left behind, one line each (empty: the machine is as it was).

    Without ``live`` (no root test ran) only the session's own processes are looked at: a
    session of unit tests makes no mount, link or BPF program, and on a shared machine another
    user's live run (holding the live lock, which unit tests do not take) may be making them."""
    if not live:
        return [f"process {p}" for p in session_processes(tag)]
    after = snapshot()
    out = [f"mount {m}" for m in sorted(after.mounts - before.mounts) if not m.startswith(MACHINE_MOUNTS)]
    out += [f"interface {name} in the machine's namespace" for name in sorted(after.links - before.links)]
    out += [f"named network namespace {ns}" for ns in sorted(after.netns - before.netns)]
    out += [f"process {p}" for p in session_processes(tag)]
    out += [f"BPF program {p}" for p in sorted(after.bpf_progs - before.bpf_progs)]
    out += [f"BPF pin {p}" for p in sorted(after.bpf_pins - before.bpf_pins)]
    return out
