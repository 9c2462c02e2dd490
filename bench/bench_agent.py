"""Agent speed against the raw-socket ceiling and against an older commit, in one run (root).

Why: the host agent is Python on raw sockets, so its packets/s are bounded by what a bare
AF_PACKET loop can move between two namespaces. This benchmark builds two namespaces
joined by one veth (``bench.vethlab``, prefix ``agb``) and measures, in order:

1. with the veth at MTU 1500 (the fabric's MTU in older commits): the bare ``send()`` /
   ``recv`` loops with 1364-byte payload frames, and the *before* agent (``--before``, a
   ``git worktree`` of an older commit, default fbde7b5) -- "today's goodput";
2. with the veth at the fabric MTU (mrc_fabric.frames.FABRIC_MTU, 4096-byte payloads):
   the bare loops again, the *before* agent (same frame size), the *previous* agent
   (``--previous COMMIT``, e.g. the parent commit, its modules compiled as its own
   ``make build`` would), the *after* agent (this tree) and the after agent with
   ``--no-icrc-check`` (the cost of verifying the ICRC) and with each ``--also`` set of flags;
3. in-process: µs per ``decode_frame`` of a 4 KiB DATA frame with and without the ICRC.

Everything runs in ``--repeat`` rounds (each round: the bare loops, then every agent
configuration once, one ``--size`` transfer per mode, verified by the receiver), so load
drift on a shared machine hits them alike; each run's share of the raw loop is taken
against the raw loop of its own round, and medians are reported. Every run also records the
CPU time (user + system) per packet of each agent and per frame of each raw loop: a
hypervisor's steal slows the clock-time rates but not these, so ``cpu_fraction_of_raw`` (the
busier side's CPU per frame, raw loop over agent) is the steady measure on a noisy machine.
Each agent's figure is also split into its user and system parts (a change to the agent's
code moves the first; the second also follows how often load makes it sleep and wake), and
with ``--previous`` (repeatable: e.g. the parent commit and an older reference, in the same
rounds) each figure of the after agent is set against each previous agent's of the same round
(``paired_vs_previous``, by commit: median, min and max of the ratios over the rounds).
``--agent-flags`` starts every agent, previous and after alike, with the same flags (e.g. a
larger ``--window``), so a paired comparison under other settings stays like for like.
Writes ``agent.json`` and ``agent.png`` under ``--out`` (default results/).

    sudo .venv/bin/python -m bench.bench_agent --out results/ [--quick] [--before fbde7b5]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SENDER = r"""
import socket, sys, time
frame = bytes.fromhex(sys.argv[2]); seconds = float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
n = errors = 0
end = time.perf_counter() + seconds
start = time.perf_counter()
while True:
    for _ in range(256):
        try:
            s.send(frame); n += 1
        except OSError:
            errors += 1
    if time.perf_counter() >= end:
        break
print(n, errors, time.perf_counter() - start, time.process_time())
"""

RECEIVER = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)
s.bind((sys.argv[1], 0x86DD))
s.settimeout(float(sys.argv[2]))
print("ready", flush=True)
n = 0; first = last = None
buf = bytearray(65536)
try:
    while True:
        s.recv_into(buf)
        last = time.perf_counter()
        if first is None:
            first = last
        n += 1
        s.settimeout(1.0)
except (socket.timeout, TimeoutError):
    pass
print(n, (last - first) if first is not None and last is not None else 0.0, time.process_time())
"""


# The ring loops: the same frames through packet rings (mrc_host/agent/rings.py sets them up as
# the agent does), a flush per 64 frames written, each received frame's header read and its slot
# handed back -- no system call per frame either way
RING_SENDER = r"""
import mmap, select, socket, sys, time
from mrc_host.agent.rings import TX_DATA, TX_STATUS, RingGeometry, setup_rings
ifname, frame, seconds = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
version = int(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
geo = RingGeometry(version, len(frame))
setup_rings(s, geo)
s.bind((ifname, 0))
m = mmap.mmap(s.fileno(), geo.rx_bytes + geo.tx_bytes)
words = memoryview(m).cast("I")
slots = [geo.rx_bytes + (i // geo.tx_per_block) * geo.tx_block + (i % geo.tx_per_block) * geo.tx_slot
         for i in range(geo.tx_frames)]
st, data, size, lens = TX_STATUS[version], TX_DATA[version], len(frame), (4, 8) if version == 1 else (12, 16)
n = full = req = i = 0
end = time.perf_counter() + seconds
start = time.perf_counter()
while True:
    for _ in range(256):
        off = slots[i]
        if words[(off + st) >> 2]:  # the kernel still holds the slot: wait for room
            full += 1
            if req:
                s.send(b"", socket.MSG_DONTWAIT); req = 0
            select.select([], [s], [], 0.01)
            continue
        m[off + data : off + data + size] = frame
        words[(off + lens[0]) >> 2] = size
        words[(off + lens[1]) >> 2] = size
        words[(off + st) >> 2] = 1
        n += 1; req += 1
        i = i + 1 if i + 1 < len(slots) else 0
        if req >= 64:
            s.send(b"", socket.MSG_DONTWAIT); req = 0
    if time.perf_counter() >= end:
        break
s.send(b"")
print(n, full, time.perf_counter() - start, time.process_time())
"""

RING_RECEIVER = r"""
import mmap, select, socket, sys, time
from mrc_host.agent.rings import RingGeometry, setup_rings
ifname, timeout, version, size = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x86DD))
geo = RingGeometry(version, size)
setup_rings(s, geo)
s.bind((ifname, 0x86DD))
m = mmap.mmap(s.fileno(), geo.rx_bytes + geo.tx_bytes)
words = memoryview(m).cast("I")
p = select.poll(); p.register(s, select.POLLIN)
print("ready", flush=True)
n = i = 0; first = last = None; wait = timeout * 1000
if version == 1:
    slots = [(k // geo.rx_per_block) * geo.rx_block + (k % geo.rx_per_block) * geo.rx_slot
             for k in range(geo.rx_frames)]
    while True:
        off = slots[i]
        if not words[off >> 2] & 1:
            if not p.poll(wait):
                break
            wait = 1000
            continue
        _len = words[(off + 8) >> 2]  # snaplen
        words[off >> 2] = 0
        n += 1; last = time.perf_counter(); first = first or last
        i = i + 1 if i + 1 < len(slots) else 0
else:
    while True:
        b = i * geo.rx_block
        if not words[(b + 8) >> 2] & 1:
            if not p.poll(wait):
                break
            wait = 1000
            continue
        off = b + words[(b + 16) >> 2]
        for _ in range(words[(b + 12) >> 2]):
            _len = words[(off + 12) >> 2]  # snaplen
            off += words[off >> 2]
            n += 1
        last = time.perf_counter(); first = first or last
        words[(b + 8) >> 2] = 0
        i = i + 1 if i + 1 < geo.rx_blocks else 0
print(n, (last - first) if first is not None and last is not None else 0.0, time.process_time())
"""

RING_VERSIONS = {"socket": 0, "ring v2": 1, "ring v3": 2}  # loop -> TPACKET version (0: raw socket)


def ceiling(lab: Any, payload: int, seconds: float, loop: str = "socket") -> dict[str, Any]:
    """One loop's frames/s and CPU per frame: ``loop`` "socket" (a system call per frame), or
    "ring v2" / "ring v3" (packet rings of that version, TPACKET_V3 receiving block-wise)."""
    from mrc_host.wire.codec import FrameEncoder
    from mrc_host.wire.framing import FrameAddressing
    from mrc_host.wire.messages import DataPacket

    a, b = lab.hosts
    enc = FrameEncoder(
        FrameAddressing(a.mac, b.mac, "fcbb:bb00:c000::1", "fcbb:bb00:c000::1", "fcbb:bb00:c001::1")
    )
    frame = enc.encode(DataPacket(qp=1, psn=0, vaddr=0, rkey=1, payload=b"\xa5" * payload), bytes(16))
    version = RING_VERSIONS[loop]
    ring_args = [str(version), str(len(frame))] if version else []
    rx = subprocess.Popen(
        ["ip", "netns", "exec", b.name, sys.executable, "-c", RING_RECEIVER if version else RECEIVER,
         b.ifname, "30", *ring_args],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert rx.stdout is not None and rx.stdout.readline().strip() == "ready"
        cmd = [
            "ip",
            "netns",
            "exec",
            a.name,
            sys.executable,
            "-c",
            RING_SENDER if version else SENDER,
            a.ifname,
            frame.hex(),
            str(seconds),
            *ring_args[:1],
        ]
        tx = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=seconds + 60)
        sent, errors, tx_s, tx_cpu = tx.stdout.split()
        out, _ = rx.communicate(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    received, rx_s, rx_cpu = out.split()
    return {
        "loop": loop,
        "frame_bytes": len(frame),
        "payload_bytes": payload,
        "seconds": float(tx_s),
        "sent": int(sent),
        "send_errors": int(errors),
        "received": int(received),
        "send_frames_per_s": int(sent) / float(tx_s),
        "recv_frames_per_s": int(received) / max(float(rx_s), 1e-9),
        "payload_mbit_s_at_recv_rate": int(received) / max(float(rx_s), 1e-9) * payload * 8 / 1e6,
        # CPU time (user + system, which a hypervisor's steal does not inflate) per frame
        "send_cpu_us_per_frame": float(tx_cpu) / max(int(sent), 1) * 1e6,
        "recv_cpu_us_per_frame": float(rx_cpu) / max(int(received), 1) * 1e6,
    }


def agent_runs(
    lab: Any,
    size: int,
    repeat: int,
    modes: list[str],
    label: str,
    source: Path | None = None,
    extra: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    from mrc_host.agent.client import AgentClient

    a, b = lab.hosts
    for h in lab.hosts:
        lab.start_agent(h, *extra, source=source)
    try:
        client = AgentClient(a.control, timeout_s=120)
        client.send(b.name, "1M")  # warm-up: connections, templates, first RTT samples
        rows = []
        for mode in modes:
            for i in range(repeat):
                cpu0 = [_cpu_seconds(h.agent) for h in lab.hosts]
                s = client.send(b.name, size, mode=mode, timeout_s=300)
                cpu = [_cpu_delta(_cpu_seconds(h.agent), c0) for h, c0 in zip(lab.hosts, cpu0, strict=True)]
                if not s["ok"]:
                    raise RuntimeError(f"{label}: transfer not verified: {s}")
                row = {"agent": label, "mode": mode, "run": i} | {k: s[k] for k in (
                    "bytes", "seconds", "goodput_mbit_s", "packets_per_s", "data_packets_sent",
                    "retransmissions", "evs_retired", "verified")}  # fmt: skip
                # CPU time per DATA packet of each agent (busy polling counts as CPU too), and its
                # user and system parts: code changes act on the user part; the system part
                # also moves with how often the machine's load makes an agent sleep and wake
                packets = max(s["data_packets_sent"], 1)
                for side, (user, system) in zip(("sender", "receiver"), cpu, strict=True):
                    row[f"{side}_cpu_us_per_packet"] = (user + system) / packets * 1e6
                    row[f"{side}_user_us_per_packet"] = user / packets * 1e6
                    row[f"{side}_sys_us_per_packet"] = system / packets * 1e6
                rows.append(row)
                print(f"{label:24} {mode:12} run {i}: {s['goodput_mbit_s']:8.1f} Mbit/s "
                      f"{s['packets_per_s']:9.0f} pkt/s retx {s['retransmissions']}", flush=True)  # fmt: skip
        stats = AgentClient(b.control).stats()
        rows_meta = {
            "receiver_socket_drops": sum(p["socket_drops"] for p in stats["ports"]),
            "mtu": stats["mtu"],
        }
        for r in rows:
            r.update(rows_meta)
        return rows
    finally:
        for h in lab.hosts:
            lab.stop_agent(h)


def _cpu_seconds(proc: Any) -> tuple[float, float, float]:
    """CPU time of a running process (``ip netns exec`` execs the agent in place): its user and
    system parts (clock ticks: 10 ms steps, split by sampling) and their total to the
    nanosecond (the scheduler's run time, /proc/PID/schedstat)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    total = int(Path(f"/proc/{proc.pid}/schedstat").read_text().split()[0]) / 1e9
    return int(fields[11]) / tick, int(fields[12]) / tick, total


def _cpu_delta(now: tuple[float, float, float], before: tuple[float, float, float]) -> tuple[float, float]:
    """User and system time between two readings: their total the precise one, split as the
    ticks were."""
    user, system, total = now[0] - before[0], now[1] - before[1], now[2] - before[2]
    share = user / (user + system) if user + system > 0 else 1.0
    return total * share, total * (1 - share)


def decode_cost(payload: int, n: int = 20_000) -> dict[str, float]:
    """µs per decode_frame of one DATA frame, with and without the ICRC check (one core)."""
    from mrc_host.wire.codec import decode_frame, encode
    from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_data

    frame = encode(sample_data(payload), SAMPLE_CARRIER, SAMPLE_ADDRESSING)
    out = {}
    for key, verify in (("decode_us", False), ("decode_icrc_us", True)):
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(n):
                decode_frame(frame, verify_icrc=verify)
            best = min(best, (time.perf_counter() - t0) / n * 1e6)
        out[key] = best
    out["icrc_us"] = out["decode_icrc_us"] - out["decode_us"]
    return out


def before_tree(commit: str, where: Path) -> Path:
    """A ``git worktree`` of ``commit`` (the agent before); removed again by ``drop_tree``."""
    repo = Path(__file__).resolve().parents[1]
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(where), commit],
                   check=True, capture_output=True)  # fmt: skip
    return where


def build_tree(where: Path) -> None:
    """Compile the tree's mypyc modules in place, as ``make build`` would have for that commit
    (a fresh worktree has none, and its agent would run as pure Python)."""
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=where, check=True,
                   capture_output=True)  # fmt: skip


def drop_tree(where: Path) -> None:
    repo = Path(__file__).resolve().parents[1]
    subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force", str(where)],
                   check=False, capture_output=True)  # fmt: skip


def _loop_key(mtu: int, loop: str) -> str:
    """The ceilings' key of a raw loop at an MTU ("mtu4232", "mtu4232 ring v2", ...)."""
    return f"mtu{mtu}" if loop == "socket" else f"mtu{mtu} {loop}"


def summarise(rows: list[dict[str, Any]], payload: int, loops: list[str] | None = None) -> dict[str, Any]:
    """Medians over the rounds; the fractions set each run against its own round's fastest raw
    loop (``fraction_of_recv_ceiling_*``) and against each loop (``fraction_of_<loop>_bits``)."""
    out = {
        "goodput_mbit_s": statistics.median(r["goodput_mbit_s"] for r in rows),
        "packets_per_s": statistics.median(r["packets_per_s"] for r in rows),
        "retransmissions": sum(r["retransmissions"] for r in rows),
        "payload_bytes": payload,
        "fraction_of_recv_ceiling_pps": statistics.median(
            r["packets_per_s"] / r["raw_recv_frames_per_s"] for r in rows
        ),
        # bits/s of the same frames: the agent's goodput against the raw loop's payload rate
        "fraction_of_recv_ceiling_bits": statistics.median(
            r["goodput_mbit_s"] / (r["raw_recv_frames_per_s"] * payload * 8 / 1e6) for r in rows
        ),
    }
    for lp in loops or []:
        key = f"{lp} recv_frames_per_s"
        out[f"fraction_of_{lp.replace(' ', '_')}_bits"] = statistics.median(
            r["goodput_mbit_s"] / (r[key] * payload * 8 / 1e6) for r in rows if r.get(key)
        )
    for side in ("sender", "receiver"):
        for part in ("cpu", "user", "sys"):
            key = f"{side}_{part}_us_per_packet"
            out[key] = statistics.median(r[key] for r in rows)
    return out


PAIRED = (
    "sender_cpu_us_per_packet",
    "receiver_cpu_us_per_packet",
    "sender_user_us_per_packet",
    "receiver_user_us_per_packet",
    "goodput_mbit_s",
)


def paired(after: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Each figure of ``PAIRED`` as after / other, set against the run of the same round and
    mode (the two ran back to back): median, min and max over the rounds."""
    by_round = {(r["run"], r["mode"]): r for r in other}
    out = {}
    for key in PAIRED:
        ratios = [a[key] / o[key] for a in after if (o := by_round.get((a["run"], a["mode"]))) and o[key] > 0]
        if ratios:
            out[key] = {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
                        "rounds": len(ratios)}  # fmt: skip
    return out


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, pps, mbit, colors = [], [], [], []
    for mtu_key, c in doc["ceilings"].items():
        per_frame = c["payload_bytes"] * 8 / 1e6
        labels.append(f"raw {c.get('loop', 'socket')} loop\n{c['payload_bytes']} B")
        pps.append(c["recv_frames_per_s"])
        mbit.append(c["recv_frames_per_s"] * per_frame)
        colors.append("#bcbcbc")
        for name, s in doc["agent_summary"].items():
            if s["mtu_key"] != mtu_key:  # (agents are drawn after their MTU's socket loop)
                continue
            labels.append(f"{name}\n{s['payload_bytes']} B")
            pps.append(s["packets_per_s"])
            mbit.append(s["goodput_mbit_s"])
            kind = name.split()[0]
            colors.append({"before": "#ff7f0e", "previous": "#9467bd"}.get(kind, "#1f77b4"))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    for ax, values, ylabel in ((ax1, [p / 1e3 for p in pps], "thousand frames/s (agent: DATA packets)"),
                               (ax2, mbit, "Mbit/s of payload (agent: verified goodput)")):  # fmt: skip
        ax.bar(range(len(labels)), values, color=colors)
        ax.set_xticks(range(len(labels)), labels, fontsize=7, rotation=20)
        ax.set_ylabel(ylabel)
    ax1.set_title("packets/s")
    r = doc["ratios"]
    for key, what in (("after_vs_before_today", "before (today)"), ("after_vs_previous", "previous"),
                      ("after_fraction_of_raw_bits", "the fastest loop")):  # fmt: skip
        if key in r:
            ax2.set_title(f"goodput: after = {r[key]:.2f}x {what}")
            break
    fig.suptitle(
        f"two namespaces over one veth, {doc['cpus']} CPUs, load {doc['load_before'][0]:.1f}; "
        f"before = {doc['before_commit'] or '-'}, previous = {doc['previous_commit'] or '-'}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_agent", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="short run: 16 MiB transfers, 2 s ceiling, 1 repeat")
    ap.add_argument("--size", default=None, help="bytes per transfer (default 64M, quick 16M)")
    ap.add_argument("--seconds", type=float, default=None, help="length of the raw-socket loop (default 5)")
    ap.add_argument("--repeat", type=int, default=None, help="transfers per mode (default 3)")
    ap.add_argument("--modes", default="mrc", help="comma-separated modes")
    ap.add_argument(
        "--loops",
        default="socket,ring v2,ring v3",
        help="the raw loops each round runs (comma-separated): socket (a system call per frame), "
        "ring v2, ring v3 (packet rings: TPACKET_V3 receives block-wise); the fastest is the ceiling",
    )
    ap.add_argument("--before", default="fbde7b5", help="commit of the 'before' agent ('' to skip)")
    ap.add_argument(
        "--previous",
        action="append",
        default=[],
        metavar="COMMIT",
        help="also run the agent of this commit, compiled as its make build would (e.g. the parent commit); "
        "or of this checkout directory, already built (a worktree kept between runs); repeatable",
    )
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="FLAGS",
        help="one more 'after' configuration with these agent flags, e.g. --also='--window 1M' (repeatable)",
    )
    ap.add_argument(
        "--agent-flags",
        default="",
        metavar="FLAGS",
        help="flags every agent of the run gets, before/previous/after alike (a like-for-like "
        "comparison under other settings), e.g. --agent-flags='--window 512K'",
    )
    return ap


# one agent configuration: its label, the MTU it runs at, the tree it runs from (None: this
# one) and its agent flags
Config = tuple[str, int, Path | None, tuple[str, ...]]


def _previous_trees(names: list[str], tmp: Path) -> tuple[dict[str, Path], list[Path]]:
    """The ``--previous`` agents' trees by commit or directory, and those of them made here (a
    worktree of the commit, compiled), which ``drop_tree`` removes at the end."""
    previous: dict[str, Path] = {}
    built: list[Path] = []
    for i, name in enumerate(names):
        if Path(name).is_dir():
            previous[name] = Path(name)
            continue
        previous[name] = before_tree(name, tmp / f"previous{i}")
        built.append(previous[name])
        print(f"building the compiled modules of {name} ...", flush=True)
        build_tree(previous[name])
    return previous, built


def _configs(
    args: argparse.Namespace, before: Path | None, previous: dict[str, Path], mtu: int
) -> list[Config]:
    """Every agent configuration of the run, each with ``--agent-flags`` first."""
    configs: list[Config] = []
    if before is not None:
        configs.append(("before (today, MTU 1500)", 1500, before, ()))
        configs.append(("before, same frames", mtu, before, ()))
    for name, tree in previous.items():
        configs.append((f"previous ({name})", mtu, tree, ()))
    configs.append(("after", mtu, None, ()))
    configs.append(("after, no ICRC check", mtu, None, ("--no-icrc-check",)))
    for flags in args.also:
        configs.append((f"after, {flags}", mtu, None, tuple(flags.split())))
    common = tuple(args.agent_flags.split())
    return [(label, m, source, common + extra) for label, m, source, extra in configs]


def _rounds(
    lab: Any,
    configs: list[Config],
    loops: list[str],
    repeat: int,
    seconds: float,
    size: int,
    modes: list[str],
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The raw loops and every configuration once per round: the loops' rounds by (MTU, loop),
    the agents' runs by configuration, and all of those runs.

    A change in the machine's speed (it is shared, with hypervisor steal) hits all of them
    alike instead of whichever phase ran then; each run is set against its own round's loops."""
    from mrc_fabric.frames import payload_for_mtu

    mtus = sorted({c[1] for c in configs})
    # one list of rounds per (MTU, loop): "mtu4232" is the socket loop's, "mtu4232 ring v2" ...
    raw: dict[str, list[dict[str, Any]]] = {_loop_key(mtu, lp): [] for mtu in mtus for lp in loops}
    by_label: dict[str, list[dict[str, Any]]] = {c[0]: [] for c in configs}
    rows: list[dict[str, Any]] = []
    for i in range(repeat):
        for mtu in mtus:
            lab.set_mtu(mtu)
            for lp in loops:
                c = ceiling(lab, payload_for_mtu(mtu), seconds, lp)
                raw[_loop_key(mtu, lp)].append(c | {"mtu": mtu, "run": i})
                print(f"MTU {mtu} round {i}, {lp} loop: send {c['send_frames_per_s']:.0f} frames/s, "
                      f"recv {c['recv_frames_per_s']:.0f} frames/s ({c['frame_bytes']} B frames)",
                      flush=True)  # fmt: skip
        # the order turns each round: no configuration always runs first after the raw loop
        for label, mtu, source, extra in configs[i % len(configs) :] + configs[: i % len(configs)]:
            lab.set_mtu(mtu)
            rs = agent_runs(lab, size, 1, modes, label, source, extra)
            this_round = {lp: raw[_loop_key(mtu, lp)][-1] for lp in loops}
            for r in rs:
                r["run"] = i
                # the ceiling: the fastest loop of this round (its frames/s received)
                r["raw_recv_frames_per_s"] = max(c["recv_frames_per_s"] for c in this_round.values())
                for lp, c in this_round.items():
                    r[f"{lp} recv_frames_per_s"] = c["recv_frames_per_s"]
            by_label[label] += rs
            rows += rs
    return raw, by_label, rows


def _ceilings(raw: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each raw loop's first round with the medians over all its rounds, and the rounds."""
    medians = (
        "send_frames_per_s",
        "recv_frames_per_s",
        "payload_mbit_s_at_recv_rate",
        "send_cpu_us_per_frame",
        "recv_cpu_us_per_frame",
    )
    return {
        key: rounds[0] | {k: statistics.median(r[k] for r in rounds) for k in medians} | {"rounds": rounds}
        for key, rounds in raw.items()
    }


def _summaries(
    configs: list[Config],
    by_label: dict[str, list[dict[str, Any]]],
    ceilings: dict[str, dict[str, Any]],
    loops: list[str],
) -> dict[str, dict[str, Any]]:
    """Each configuration's medians (``summarise``) and its CPU-bound share of the raw loops."""
    from mrc_fabric.frames import payload_for_mtu

    summary: dict[str, dict[str, Any]] = {}
    for label, mtu, _source, _extra in configs:
        payload = payload_for_mtu(mtu)
        summary[label] = summarise(by_label[label], payload, loops) | {"mtu_key": f"mtu{mtu}"}
        # steal-proof: the rate each would reach with a CPU per side and CPU its only limit
        # (the busier side's CPU time per frame; an agent's busy polling counts against it),
        # against the loop that needs the least CPU per frame
        raw_cpu = min(
            max(c["send_cpu_us_per_frame"], c["recv_cpu_us_per_frame"])
            for c in (ceilings[_loop_key(mtu, lp)] for lp in loops)
        )
        sl = summary[label]
        agent_cpu = max(sl["sender_cpu_us_per_packet"], sl["receiver_cpu_us_per_packet"])
        sl["cpu_fraction_of_raw"] = raw_cpu / agent_cpu
    return summary


def _ratios(summary: dict[str, dict[str, Any]], with_before: bool, previous: list[str]) -> dict[str, float]:
    """The after agent against the raw loops, without its ICRC check, the before agent and each
    previous one (goodput)."""
    after = summary["after"]
    ratios: dict[str, float] = {
        "after_fraction_of_raw_bits": after["fraction_of_recv_ceiling_bits"],
        "after_cpu_fraction_of_raw": after["cpu_fraction_of_raw"],
        "icrc_check_goodput_cost": 1
        - after["goodput_mbit_s"] / summary["after, no ICRC check"]["goodput_mbit_s"],
    }
    # the agent's share of each loop's bits/s (the ring loops: what this host moves with no
    # system call per frame)
    ratios |= {
        f"after_{k}": v for k, v in after.items() if k.startswith("fraction_of_") and k.endswith("_bits")
    }
    if with_before:
        ratios["after_vs_before_today"] = (
            after["goodput_mbit_s"] / summary["before (today, MTU 1500)"]["goodput_mbit_s"]
        )
        ratios["after_vs_before_same_frames"] = (
            after["goodput_mbit_s"] / summary["before, same frames"]["goodput_mbit_s"]
        )
    for i, name in enumerate(previous):
        key = "after_vs_previous" + (f"_{i}" if i else "")
        ratios[key] = after["goodput_mbit_s"] / summary[f"previous ({name})"]["goodput_mbit_s"]
    return ratios


def _print_report(doc: dict[str, Any], out: Path) -> None:
    for key, c in doc["ceilings"].items():
        print(f"raw loop ({key}): {c['recv_frames_per_s']:.0f} frames/s received; CPU µs per frame: "
              f"send {c['send_cpu_us_per_frame']:.2f}, recv {c['recv_cpu_us_per_frame']:.2f}")  # fmt: skip
    for name, s in doc["agent_summary"].items():
        print(f"{name:24}: {s['goodput_mbit_s']:7.1f} Mbit/s, {s['packets_per_s']:6.0f} pkt/s "
              f"= {s['fraction_of_recv_ceiling_bits']:.0%} of the raw loop's bits/s; CPU µs per packet: "
              f"sender {s['sender_cpu_us_per_packet']:.2f}, receiver {s['receiver_cpu_us_per_packet']:.2f} "
              f"(= {s['cpu_fraction_of_raw']:.0%} of the raw loop's rate if CPU-bound)")  # fmt: skip
    print("ratios:", json.dumps({k: round(v, 3) for k, v in doc["ratios"].items()}))
    for name, figures in doc["paired_vs_previous"].items():
        for key, r in figures.items():
            print(f"after / previous ({name}), {key}: {r['median']:.3f} [{r['min']:.3f}-{r['max']:.3f}] "
                  f"over {r['rounds']} rounds")  # fmt: skip
    print("decode µs (4 KiB DATA):", json.dumps({k: round(v, 2) for k, v in doc["decode_cost_4096"].items()}))
    print(f"wrote {out / 'agent.json'} and {out / 'agent.png'}")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if os.geteuid() != 0:
        print("bench_agent needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    import tempfile

    from bench.vethlab import VethLab
    from mrc_fabric.frames import FABRIC_MTU
    from mrc_host.agent.protocol import parse_size

    size = parse_size(args.size or ("16M" if args.quick else "64M"))
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    repeat = args.repeat or (1 if args.quick else 3)
    modes = [m for m in args.modes.split(",") if m]
    args.out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="agb-before-"))
    before = before_tree(args.before, tmp / "tree") if args.before else None
    # the --previous agents' trees, and those made here (dropped at the end)
    previous, built = _previous_trees(args.previous, tmp)
    lab: VethLab | None = None
    try:  # the worktrees above are dropped however this ends (a lab that cannot open included)
        lab = VethLab(prefix="agb").open()
        configs = _configs(args, before, previous, FABRIC_MTU)
        loops = [lp for lp in args.loops.split(",") if lp]
        raw, by_label, rows = _rounds(lab, configs, loops, repeat, seconds, size, modes)
        ceilings = _ceilings(raw)
        summary = _summaries(configs, by_label, ceilings, loops)
    finally:
        if lab is not None:
            lab.close()
        for tree in built if before is None else [before, *built]:
            drop_tree(tree)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    ratios = _ratios(summary, before is not None, list(previous))
    # by previous: after / previous, round by round
    vs_previous = {name: paired(by_label["after"], by_label[f"previous ({name})"]) for name in previous}
    doc = {
        "benchmark": "agent goodput and packets/s: before vs after vs a bare AF_PACKET loop, "
        "two namespaces, one veth",
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "transfer_bytes": size,
        "before_commit": args.before,
        "previous_commit": ", ".join(args.previous),
        "agent_flags": args.agent_flags,  # what every agent of the run was started with
        "ceilings": ceilings,
        "agent_runs": rows,
        "agent_summary": summary,
        "ratios": ratios,
        "paired_vs_previous": vs_previous,
        "decode_cost_4096": decode_cost(4096),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / "agent.json").write_text(json.dumps(doc, indent=1))
    plot(doc, args.out / "agent.png")
    _print_report(doc, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
