"""The per-port egress model of the Linux target: HTB with two classes and an eBPF program.

Per switch port (docs/linux-target.md, "Egress"):

- an HTB root ``1:`` whose parent class ``1:10`` runs at the link rate, with a high-priority
  leaf ``1:1`` (trimmed headers and control) and a data leaf ``1:2`` that borrows what the
  high class leaves; unclassified frames fall into ``1:2``;
- a clsact qdisc whose egress hook runs ``bpf/mrc_egress.c`` (cls_bpf, direct action): it keeps
  a virtual copy of the data queue in bytes, drained at the link rate, marks CE, trims, tail
  drops and puts each frame in its class through ``skb->priority``.

The program is loaded with libbpf and attached by file descriptor (``bpf_loader``), not by
``tc ... bpf obj``: tc's loader needs a BPF filesystem and misreads a Mininet node's. The
program's maps (``mrc_policy``, ``mrc_link``, ``mrc_state``) belong to the loaded program:
nothing is pinned, so removing the clsact qdisc (or the interface) frees them. The shim finds
them from the filter's program id (``bpftool net show``, ``bpftool prog show``) and reads and
writes them with ``bpftool`` as raw little-endian bytes.

The BPF object is compiled from the source in the repository at first use into
``linux_target/bpf/build/`` (ignored by git) with Debian's clang and libbpf headers.

CLI ``mrc-egress`` (= ``python -m linux_target.egress``; run inside the switch's namespace;
the testbed uses it to slow a port on purpose)::

    python -m linux_target.egress set-link --dev IFNAME --rate-mbit 50 [--buffer-bytes N]   (0: unlimited)
    python -m linux_target.egress set-policy --dev IFNAME --ecn-packets 20 --trim-packets 64 [--last-hop]
    python -m linux_target.egress show --dev IFNAME
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .bpf_loader import BpfLoadError, load_and_attach
from .netlink_backend import KernelError

BPF_DIR = Path(__file__).resolve().parent / "bpf"
SOURCE = BPF_DIR / "mrc_egress.c"
BUILD_DIR = BPF_DIR / "build"
OBJECT = BUILD_DIR / "mrc_egress.o"

# A P4 queue depth of N packets is N full frames at the standard 1500-byte MTU (+ Ethernet).
QUEUE_CELL_BYTES = 1514
# Default buffer of a data queue: BMv2's default queue depth (64 packets) twice over, so the
# controller's trim threshold (64 packets) has room below it.
DEFAULT_BUFFER_PACKETS = 128
DEFAULT_BUFFER_BYTES = DEFAULT_BUFFER_PACKETS * QUEUE_CELL_BYTES
# The real HTB data queue is longer than the virtual one, so only the program drops.
DATA_FIFO_PACKETS = 10000
# HTB's own choice of a class's quantum: rate / r2q (default 10), clamped with a warning
HTB_R2Q, HTB_QUANTUM_MIN, HTB_QUANTUM_MAX = 10, 1000, 200_000
HIGH_FIFO_PACKETS = 1000

# struct policy / struct link / struct state in mrc_egress.c (little-endian, x86_64/arm64).
_POLICY = struct.Struct("<IIQQ")
_LINK = struct.Struct("<QQ")
_STATE = struct.Struct("<II12Q")
STATE_FIELDS = (
    "queue_bytes",
    "last_ns",
    "max_queue_bytes",
    "marked_packets",
    "marked_bytes",
    "trimmed_packets",
    "trimmed_bytes",
    "dropped_packets",
    "dropped_bytes",
    "high_packets",
    "sent_packets",
    "sent_bytes",
)
MAP_NAMES = ("mrc_policy", "mrc_link", "mrc_state")
PROGRAM_NAME = "mrc_egress"  # the program's function name in mrc_egress.c


class EgressError(KernelError):
    """tc or bpftool refused a change, or the egress model is missing."""


class BpfBuildError(EgressError):
    """The BPF program cannot be built here; the message names the missing tool."""


@dataclass(frozen=True)
class PortState:
    """One read of a port's ``mrc_state``: the virtual queue and the counters."""

    queue_bytes: int = 0
    last_ns: int = 0
    max_queue_bytes: int = 0
    marked_packets: int = 0
    marked_bytes: int = 0
    trimmed_packets: int = 0
    trimmed_bytes: int = 0
    dropped_packets: int = 0
    dropped_bytes: int = 0
    high_packets: int = 0
    sent_packets: int = 0
    sent_bytes: int = 0

    def queue_at(self, now_ns: int, rate_bps: int) -> int:
        """The virtual queue at ``now_ns`` (CLOCK_MONOTONIC, as bpf_ktime_get_ns): the program
        only updates it when a frame passes, so drain what the link sent since then."""
        if rate_bps <= 0:
            return 0
        drained = max(0, now_ns - self.last_ns) * (rate_bps // 8) // 1_000_000_000
        return max(0, self.queue_bytes - drained)


@dataclass(frozen=True)
class Policy:
    """A port's ``port_policy`` entry in bytes (None: no entry, never mark or trim)."""

    ecn_threshold_bytes: int
    trim_threshold_bytes: int
    last_hop: bool

    @classmethod
    def from_packets(cls, ecn_packets: int, trim_packets: int, last_hop: bool) -> Policy:
        return cls(ecn_packets * QUEUE_CELL_BYTES, trim_packets * QUEUE_CELL_BYTES, last_hop)


# -- build ---------------------------------------------------------------------------------


def multiarch_include() -> Path:
    """/usr/include/<triplet>: where Debian keeps asm/types.h, which linux/bpf.h needs."""
    try:
        triplet = subprocess.run(
            ["gcc", "-print-multiarch"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        triplet = ""
    if not triplet:
        machine = os.uname().machine
        triplet = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}.get(
            machine, f"{machine}-linux-gnu"
        )
    return Path("/usr/include") / triplet


def missing_tools() -> list[str]:
    """What stops building and loading the program here, each with its Debian package."""
    out = []
    if shutil.which("clang") is None:
        out.append("clang (apt-get install clang llvm)")
    if not Path("/usr/include/bpf/bpf_helpers.h").exists():
        out.append("libbpf headers /usr/include/bpf/bpf_helpers.h (apt-get install libbpf-dev)")
    if not (multiarch_include() / "asm" / "types.h").exists():
        out.append(f"kernel UAPI headers {multiarch_include()}/asm/types.h (apt-get install linux-libc-dev)")
    if shutil.which("bpftool") is None:
        out.append("bpftool (apt-get install bpftool)")
    if shutil.which("tc") is None:
        out.append("tc (apt-get install iproute2)")
    return out


def build_object(force: bool = False) -> Path:
    """Compile ``mrc_egress.c`` unless an up-to-date object exists; return the object's path.

    The object is written to a temporary file and renamed, so shims starting together never
    load a half-written object.
    """
    if not force and OBJECT.exists() and OBJECT.stat().st_mtime >= SOURCE.stat().st_mtime:
        return OBJECT
    missing = missing_tools()
    if missing:
        raise BpfBuildError(
            "cannot build the Linux target's egress program (ECN, trimming, priority queues): missing "
            + "; ".join(missing)
            + " — scripts/install-system-deps.sh installs them"
        )
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".mrc_egress.", suffix=".o", dir=BUILD_DIR)
    os.close(fd)
    cmd = [
        "clang",
        "-O2",
        "-g",
        "-target",
        "bpf",
        f"-I{multiarch_include()}",
        "-c",
        str(SOURCE),
        "-o",
        tmp,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        raise BpfBuildError(f"clang could not build {SOURCE}: {proc.stderr.strip()[-2000:]}")
    os.chmod(tmp, 0o644)
    os.replace(tmp, OBJECT)
    return OBJECT


# -- tc and bpftool -------------------------------------------------------------------------


def _run(cmd: list[str], check: bool = True) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise EgressError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def _tc_batch(cmds: list[list[str]]) -> None:
    """Run tc commands in one ``tc -batch -`` (stops at the first refusal, naming it); one
    process each when an argument (a path with a space) cannot go through a batch line."""
    lines = []
    for cmd in cmds:
        if any(not arg or any(c.isspace() or c in "\"'\\#" for c in arg) for arg in cmd[1:]):
            for one in cmds:
                _run(one)
            return
        lines.append(" ".join(cmd[1:]))
    proc = subprocess.run(
        ["tc", "-batch", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise EgressError(f"tc -batch: {proc.stderr.strip() or proc.stdout.strip()}")


def _tc_force(lines: list[str]) -> None:
    """tc commands in one ``tc -force -batch -`` whose refusals do not matter (removing what
    may not be there)."""
    if lines:
        subprocess.run(
            ["tc", "-force", "-batch", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True
        )


def _bpftool_batch(lines: list[str]) -> list[Any]:
    """bpftool commands in one ``bpftool -j batch file -``; each command's JSON output, in
    order. bpftool stops at the first command that fails: that one is named in the error."""
    if not lines:
        return []
    proc = subprocess.run(
        ["bpftool", "-j", "batch", "file", "-"], input="\n".join(lines) + "\n", capture_output=True, text=True
    )
    try:
        results = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError as exc:
        raise EgressError(f"bpftool batch: unreadable output ({exc}): {proc.stderr.strip()}") from exc
    outputs = [r.get("output") for r in results]
    for line, out in zip(lines, outputs, strict=False):
        if isinstance(out, dict) and "error" in out:
            raise EgressError(f"bpftool {line}: {out['error']}")
    if proc.returncode != 0 or len(outputs) < len(lines):
        raise EgressError(f"bpftool batch: {proc.stderr.strip() or 'stopped early'}")
    return outputs


def install_ports(
    rates_bps: dict[str, int], buffer_bytes: int = DEFAULT_BUFFER_BYTES
) -> dict[str, PortEgress]:
    """The egress model on every given interface at once (``rates_bps``: interface -> rate, 0
    for no HTB); replaces what was there.

    Why at once: one port's install took nine tc and bpftool processes, and a fabric of 128
    switches with nine ports each spent most of its start-up in them. Here a whole switch
    takes six, whatever its number of ports: the old state removed, the qdiscs added, the
    programs' maps found (three), and the link parameters written; the programs themselves
    are loaded in this process (``bpf_loader``: no bpffs needed, none touched)."""
    obj = build_object()
    devs = sorted(rates_bps)
    ports = {d: PortEgress(d) for d in devs}
    _tc_force([line for p in ports.values() for line in p.removal_lines()])
    cmds: list[list[str]] = []
    for d in devs:
        cmds += ports[d].setup_commands(rates_bps[d])
    _tc_batch(cmds)
    try:
        load_and_attach(obj, PROGRAM_NAME, devs)
    except BpfLoadError as exc:
        raise EgressError(f"the egress program does not load here: {exc}") from exc
    find_maps(list(ports.values()))
    _bpftool_batch([ports[d].update_line("mrc_link", _LINK.pack(rates_bps[d], buffer_bytes)) for d in devs])
    return ports


def egress_programs() -> dict[str, int]:
    """Interface -> id of the egress program on it, for every interface of this namespace
    (one ``bpftool net show``)."""
    try:
        nets = json.loads(_run(["bpftool", "-j", "net", "show"], check=False) or "[]")
    except json.JSONDecodeError:
        return {}
    progs: dict[str, int] = {}
    for net in nets:
        for hook in net.get("tc", []):
            if hook.get("kind") == "clsact/egress" and str(hook.get("name", "")).startswith(PROGRAM_NAME):
                progs[hook["devname"]] = int(hook["id"])
    return progs


def find_maps(ports: list[PortEgress]) -> None:
    """Each port's map ids, for all ports with three processes."""
    if not ports:
        return
    progs = egress_programs()
    missing = sorted(p.dev for p in ports if p.dev not in progs)
    if missing:
        raise EgressError(f"{', '.join(missing)}: no {PROGRAM_NAME} program on the egress hook")
    infos = _bpftool_batch([f"prog show id {progs[p.dev]}" for p in ports])
    map_ids = [[int(m) for m in info.get("map_ids", [])] for info in infos]
    shows = _bpftool_batch([f"map show id {m}" for ids in map_ids for m in ids])
    names = iter(shows)
    for port, ids in zip(ports, map_ids, strict=True):
        maps = {str(next(names)["name"]): mid for mid in ids}
        if set(MAP_NAMES) - set(maps):
            raise EgressError(f"{port.dev}: its program lacks maps {sorted(set(MAP_NAMES) - set(maps))}")
        port.maps = maps


def _hex(data: bytes) -> list[str]:
    return [f"{b:02x}" for b in data]


def htb_quantum(rate_bps: float) -> int:
    """The quantum HTB gives a class of ``rate_bps`` by itself (rate / r2q 10, held within
    1,000..200,000 bytes), written out: the kernel then has no "quantum of class ... is big/
    small. Consider r2q change" to print, which start-up showed once per port as an error."""
    return int(min(HTB_QUANTUM_MAX, max(HTB_QUANTUM_MIN, rate_bps / 8 / HTB_R2Q)))


def htb_commands(dev: str, rate_bps: int, verb: str = "add") -> list[list[str]]:
    """The HTB classes of one port at ``rate_bps`` (``verb`` add or change). Interface names
    never contain white space, so each command is written as one line and split."""
    rate, q = f"{rate_bps}bit", QUEUE_CELL_BYTES
    cls = f"tc class {verb} dev {dev} parent"
    return [
        f"{cls} 1: classid 1:10 htb rate {rate} ceil {rate} quantum {htb_quantum(rate_bps)}".split(),
        f"{cls} 1:10 classid 1:1 htb rate {rate} ceil {rate} prio 0 quantum {q}".split(),
        f"{cls} 1:10 classid 1:2 htb rate 8kbit ceil {rate} prio 1 quantum {q}".split(),
    ]


class PortEgress:
    """The egress model of one interface in the current network namespace."""

    def __init__(self, dev: str) -> None:
        self.dev = dev
        self.maps: dict[str, int] | None = None

    # -- life cycle --------------------------------------------------------------------
    def install(self, rate_bps: int, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> None:
        """HTB (when ``rate_bps`` > 0) and the clsact egress program; replaces what was there
        (``install_ports`` for one port)."""
        self.maps = install_ports({self.dev: rate_bps}, buffer_bytes)[self.dev].maps

    def setup_commands(self, rate_bps: int) -> list[list[str]]:
        """The tc commands that put HTB (``rate_bps`` > 0) and the clsact qdisc the program
        hangs from on this port."""
        cmds = self._htb_setup(rate_bps) if rate_bps > 0 else []
        cmds.append(["tc", "qdisc", "add", "dev", self.dev, "clsact"])
        return cmds

    def _htb_setup(self, rate_bps: int) -> list[list[str]]:
        dev = self.dev
        cmds = [f"tc qdisc add dev {dev} root handle 1: htb default 2".split()]
        cmds += htb_commands(dev, rate_bps)
        for parent, handle, limit in (("1:1", "11:", HIGH_FIFO_PACKETS), ("1:2", "12:", DATA_FIFO_PACKETS)):
            cmds.append(f"tc qdisc add dev {dev} parent {parent} handle {handle} pfifo limit {limit}".split())
        return cmds

    def _add_htb(self, rate_bps: int) -> None:
        _tc_batch(self._htb_setup(rate_bps))

    def _has_htb(self) -> bool:
        return '"htb"' in _run(["tc", "-j", "qdisc", "show", "dev", self.dev, "root"])

    def remove(self) -> None:
        """Remove the clsact qdisc (freeing the program and its maps) and the root qdisc."""
        _tc_force(self.removal_lines())
        self.maps = None

    def removal_lines(self) -> list[str]:
        """The tc batch lines that take this port's program, maps and qdiscs away."""
        return [f"qdisc del dev {self.dev} clsact", f"qdisc del dev {self.dev} root"]

    def installed(self) -> bool:
        return self.program_id() is not None

    # -- maps --------------------------------------------------------------------------
    def program_id(self) -> int | None:
        return egress_programs().get(self.dev)

    def map_ids(self) -> dict[str, int]:
        if self.maps is None:
            find_maps([self])
        assert self.maps is not None
        return self.maps

    def update_line(self, name: str, value: bytes) -> str:
        """The bpftool command (without ``bpftool``) that writes ``value`` into map ``name``."""
        key, val = " ".join(_hex(b"\0" * 4)), " ".join(_hex(value))
        return f"map update id {self.map_ids()[name]} key hex {key} value hex {val}"

    def _update(self, name: str, value: bytes) -> None:
        _run(["bpftool", *self.update_line(name, value).split()])

    def _lookup(self, name: str) -> bytes:
        mid = self.map_ids()[name]
        out = json.loads(
            _run(["bpftool", "-j", "map", "lookup", "id", str(mid), "key", "hex", *_hex(b"\0" * 4)])
        )
        return bytes(int(b, 16) for b in out["value"])

    def write_link(self, rate_bps: int, buffer_bytes: int) -> None:
        self._update("mrc_link", _LINK.pack(rate_bps, buffer_bytes))

    def write_policy(self, policy: Policy | None) -> None:
        if policy is None:
            self._update("mrc_policy", _POLICY.pack(0, 0, 0, 0))
        else:
            self._update(
                "mrc_policy",
                _POLICY.pack(
                    1, int(policy.last_hop), policy.ecn_threshold_bytes, policy.trim_threshold_bytes
                ),
            )

    def read_policy(self) -> Policy | None:
        valid, last_hop, ecn, trim = _POLICY.unpack(self._lookup("mrc_policy"))
        return Policy(ecn, trim, bool(last_hop)) if valid else None

    def read_link(self) -> tuple[int, int]:
        rate, buffer = _LINK.unpack(self._lookup("mrc_link"))
        return rate, buffer

    def read_state(self) -> PortState:
        values = _STATE.unpack(self._lookup("mrc_state"))[2:]
        return PortState(**dict(zip(STATE_FIELDS, values, strict=True)))

    # -- slowing a port on purpose -----------------------------------------------------
    def set_link(self, rate_bps: int, buffer_bytes: int) -> None:
        """Change the port's rate (HTB classes and the virtual queue's drain rate) and buffer.

        A port without a rate gets its HTB here; ``rate_bps`` 0 removes it (unlimited again).
        """
        if rate_bps < 0:
            raise EgressError(f"rate: {rate_bps} is negative")
        self.map_ids()  # the program must be there before the qdisc changes
        if rate_bps == 0:
            self.write_link(0, buffer_bytes)
            _run(["tc", "qdisc", "del", "dev", self.dev, "root"], check=False)
            return
        if self._has_htb():
            _tc_batch(htb_commands(self.dev, rate_bps, verb="change"))
        else:
            self._add_htb(rate_bps)
        self.write_link(rate_bps, buffer_bytes)


@dataclass(frozen=True)
class DataFifo:
    """One read of the leaf fifo under HTB's data class 1:2: what waits in it, and the bytes it
    has handed to HTB so far (a fifo counts a frame when it is dequeued)."""

    backlog_bytes: int
    backlog_packets: int
    sent_bytes: int


def data_fifo(dev: str) -> DataFifo:
    """The data fifo 12: of ``dev``, read with one ``tc -s`` call."""
    out = json.loads(_run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]))
    for q in out:
        if q.get("handle") == "12:":
            return DataFifo(int(q.get("backlog", 0)), int(q.get("qlen", 0)), int(q.get("bytes", 0)))
    raise EgressError(f"{dev}: no data fifo 12:")


# -- CLI ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m linux_target.egress", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="compile the BPF object (at first use otherwise)")
    b.add_argument("--force", action="store_true")
    s = sub.add_parser("set-link", help="change a port's rate and buffer")
    s.add_argument("--dev", required=True)
    s.add_argument("--rate-mbit", type=float, required=True)
    s.add_argument("--buffer-bytes", type=int, default=DEFAULT_BUFFER_BYTES)
    p = sub.add_parser("set-policy", help="write a port's thresholds directly (bypasses the shim's tables)")
    p.add_argument("--dev", required=True)
    p.add_argument("--ecn-packets", type=int, required=True)
    p.add_argument("--trim-packets", type=int, required=True)
    p.add_argument("--last-hop", action="store_true")
    sh = sub.add_parser("show", help="print a port's policy, link and state as JSON")
    sh.add_argument("--dev", required=True)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build_object(force=args.force))
        elif args.cmd == "set-link":
            PortEgress(args.dev).set_link(int(args.rate_mbit * 1e6), args.buffer_bytes)
        elif args.cmd == "set-policy":
            PortEgress(args.dev).write_policy(
                Policy.from_packets(args.ecn_packets, args.trim_packets, args.last_hop)
            )
        else:
            port = PortEgress(args.dev)
            policy = port.read_policy()
            rate, buffer = port.read_link()
            state = port.read_state()
            now = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            print(
                json.dumps(
                    {
                        "policy": asdict(policy) if policy else None,
                        "rate_bps": rate,
                        "buffer_bytes": buffer,
                        "state": asdict(state),
                        "queue_bytes_now": state.queue_at(now, rate),
                        "htb_data_backlog_bytes": data_fifo(args.dev).backlog_bytes if rate else None,
                    }
                )
            )
    except EgressError as exc:
        print(f"egress: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
