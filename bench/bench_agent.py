"""Agent speed against the raw-socket ceiling and against an older commit, in one run (root).

Why: the host agent is Python on raw sockets, so its packets/s are bounded by what a bare
AF_PACKET loop can move between two namespaces. This benchmark builds two namespaces
joined by one veth (``bench.vethlab``, prefix ``agb``) and measures, in order:

1. with the veth at MTU 1500 (the fabric's MTU before issue 13): the bare ``send()`` /
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
with ``--previous`` each figure of the after agent is set against the previous agent's of the
same round (``paired_vs_previous``: median, min and max of the ratios over the rounds).
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


def ceiling(lab: Any, payload: int, seconds: float) -> dict[str, Any]:
    from mrc_host.wire.codec import FrameEncoder
    from mrc_host.wire.framing import FrameAddressing
    from mrc_host.wire.messages import DataPacket

    a, b = lab.hosts
    enc = FrameEncoder(
        FrameAddressing(a.mac, b.mac, "fcbb:bb00:c000::1", "fcbb:bb00:c000::1", "fcbb:bb00:c001::1")
    )
    frame = enc.encode(DataPacket(qp=1, psn=0, vaddr=0, rkey=1, payload=b"\xa5" * payload), bytes(16))
    rx = subprocess.Popen(
        ["ip", "netns", "exec", b.name, sys.executable, "-c", RECEIVER, b.ifname, "30"],
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
            SENDER,
            a.ifname,
            frame.hex(),
            str(seconds),
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


def _cpu_seconds(proc: Any) -> tuple[float, float]:
    """User and system CPU time of a running process (``ip netns exec`` execs the agent in place)."""
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _cpu_delta(now: tuple[float, float], before: tuple[float, float]) -> tuple[float, float]:
    return now[0] - before[0], now[1] - before[1]


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


def summarise(rows: list[dict[str, Any]], payload: int) -> dict[str, Any]:
    """Medians over the rounds; the fractions set each run against its own round's raw loop."""
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
        labels.append(f"raw recv loop\n{c['payload_bytes']} B")
        pps.append(c["recv_frames_per_s"])
        mbit.append(c["recv_frames_per_s"] * per_frame)
        colors.append("#bcbcbc")
        for name, s in doc["agent_summary"].items():
            if s["mtu_key"] != mtu_key:
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
    ax2.set_title(f"goodput: after = {doc['ratios']['after_vs_before_today']:.2f}x before (today)")
    fig.suptitle(
        f"two namespaces over one veth, {doc['cpus']} CPUs, load {doc['load_before'][0]:.1f}; "
        f"before = {doc['before_commit']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_agent", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="short run: 16 MiB transfers, 2 s ceiling, 1 repeat")
    ap.add_argument("--size", default=None, help="bytes per transfer (default 64M, quick 16M)")
    ap.add_argument("--seconds", type=float, default=None, help="length of the raw-socket loop (default 5)")
    ap.add_argument("--repeat", type=int, default=None, help="transfers per mode (default 3)")
    ap.add_argument("--modes", default="mrc", help="comma-separated modes")
    ap.add_argument("--before", default="fbde7b5", help="commit of the 'before' agent ('' to skip)")
    ap.add_argument(
        "--previous",
        default="",
        metavar="COMMIT",
        help="also run the agent of this commit, compiled as its make build would (e.g. the parent commit); "
        "or of this checkout directory, already built (a worktree kept between runs)",
    )
    ap.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="FLAGS",
        help="one more 'after' configuration with these agent flags, e.g. --also='--window 1M' (repeatable)",
    )
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_agent needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    import tempfile

    from bench.vethlab import VethLab
    from mrc_fabric.frames import FABRIC_MTU, payload_for_mtu
    from mrc_host.agent.protocol import parse_size

    size = parse_size(args.size or ("16M" if args.quick else "64M"))
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    repeat = args.repeat or (1 if args.quick else 3)
    modes = [m for m in args.modes.split(",") if m]
    args.out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    tmp = Path(tempfile.mkdtemp(prefix="agb-before-"))
    before = before_tree(args.before, tmp / "tree") if args.before else None
    previous_dir = Path(args.previous) if args.previous and Path(args.previous).is_dir() else None
    previous = previous_dir or (before_tree(args.previous, tmp / "previous") if args.previous else None)
    if previous is not None and previous_dir is None:
        print(f"building the compiled modules of {args.previous} ...", flush=True)
        build_tree(previous)
    lab: VethLab | None = None
    ceilings: dict[str, dict[str, Any]] = {}
    summary: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    try:  # the worktrees above are dropped however this ends (a lab that cannot open included)
        lab = VethLab(prefix="agb").open()
        configs: list[tuple[str, int, Path | None, tuple[str, ...]]] = []
        if before is not None:
            configs.append(("before (today, MTU 1500)", 1500, before, ()))
            configs.append(("before, same frames", FABRIC_MTU, before, ()))
        if previous is not None:
            configs.append((f"previous ({args.previous})", FABRIC_MTU, previous, ()))
        configs.append(("after", FABRIC_MTU, None, ()))
        configs.append(("after, no ICRC check", FABRIC_MTU, None, ("--no-icrc-check",)))
        for flags in args.also:
            configs.append((f"after, {flags}", FABRIC_MTU, None, tuple(flags.split())))
        mtus = sorted({c[1] for c in configs})
        raw: dict[str, list[dict[str, Any]]] = {f"mtu{mtu}": [] for mtu in mtus}
        # rounds: the raw loop and every configuration once per round, so a change in the
        # machine's speed (it is shared, with hypervisor steal) hits all of them alike instead
        # of whichever phase ran then; each run is set against its own round's raw loop
        by_label: dict[str, list[dict[str, Any]]] = {c[0]: [] for c in configs}
        for i in range(repeat):
            for mtu in mtus:
                lab.set_mtu(mtu)
                c = ceiling(lab, payload_for_mtu(mtu), seconds)
                raw[f"mtu{mtu}"].append(c | {"mtu": mtu, "run": i})
                print(f"MTU {mtu} round {i}: raw send {c['send_frames_per_s']:.0f} frames/s, "
                      f"recv {c['recv_frames_per_s']:.0f} frames/s ({c['frame_bytes']} B frames)",
                      flush=True)  # fmt: skip
            # the order turns each round: no configuration always runs first after the raw loop
            for label, mtu, source, extra in configs[i % len(configs) :] + configs[: i % len(configs)]:
                lab.set_mtu(mtu)
                rs = agent_runs(lab, size, 1, modes, label, source, extra)
                for r in rs:
                    r["run"] = i
                    r["raw_recv_frames_per_s"] = raw[f"mtu{mtu}"][-1]["recv_frames_per_s"]
                by_label[label] += rs
                rows += rs
        for key, rounds in raw.items():
            ceilings[key] = (
                rounds[0]
                | {
                    k: statistics.median(r[k] for r in rounds)
                    for k in (
                        "send_frames_per_s",
                        "recv_frames_per_s",
                        "payload_mbit_s_at_recv_rate",
                        "send_cpu_us_per_frame",
                        "recv_cpu_us_per_frame",
                    )
                }
                | {"rounds": rounds}
            )
        for label, mtu, _source, _extra in configs:
            c = ceilings[f"mtu{mtu}"]
            summary[label] = summarise(by_label[label], payload_for_mtu(mtu)) | {"mtu_key": f"mtu{mtu}"}
            # steal-proof: the rate each would reach with a CPU per side and CPU its only limit
            # (the busier side's CPU time per frame; an agent's busy polling counts against it)
            raw_cpu = max(c["send_cpu_us_per_frame"], c["recv_cpu_us_per_frame"])
            sl = summary[label]
            agent_cpu = max(sl["sender_cpu_us_per_packet"], sl["receiver_cpu_us_per_packet"])
            sl["cpu_fraction_of_raw"] = raw_cpu / agent_cpu
    finally:
        if lab is not None:
            lab.close()
        for tree in (before, previous):
            if tree is not None and tree != previous_dir:
                drop_tree(tree)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    after = summary["after"]
    ratios: dict[str, float] = {
        "after_fraction_of_raw_bits": after["fraction_of_recv_ceiling_bits"],
        "after_cpu_fraction_of_raw": after["cpu_fraction_of_raw"],
        "icrc_check_goodput_cost": 1
        - after["goodput_mbit_s"] / summary["after, no ICRC check"]["goodput_mbit_s"],
    }
    if before is not None:
        ratios["after_vs_before_today"] = (
            after["goodput_mbit_s"] / summary["before (today, MTU 1500)"]["goodput_mbit_s"]
        )
        ratios["after_vs_before_same_frames"] = (
            after["goodput_mbit_s"] / summary["before, same frames"]["goodput_mbit_s"]
        )
    vs_previous: dict[str, dict[str, float]] = {}
    if previous is not None:
        prev = summary[f"previous ({args.previous})"]
        ratios["after_vs_previous"] = after["goodput_mbit_s"] / prev["goodput_mbit_s"]
        vs_previous = paired(by_label["after"], by_label[f"previous ({args.previous})"])
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
        "previous_commit": args.previous,
        "ceilings": ceilings,
        "agent_runs": rows,
        "agent_summary": summary,
        "ratios": ratios,
        "paired_vs_previous": vs_previous,  # after / previous, round by round
        "decode_cost_4096": decode_cost(4096),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / "agent.json").write_text(json.dumps(doc, indent=1))
    if before is not None:
        plot(doc, args.out / "agent.png")
    for key, c in ceilings.items():
        print(f"raw loop ({key}): CPU µs per frame: send {c['send_cpu_us_per_frame']:.2f}, "
              f"recv {c['recv_cpu_us_per_frame']:.2f}")  # fmt: skip
    for name, s in summary.items():
        print(f"{name:24}: {s['goodput_mbit_s']:7.1f} Mbit/s, {s['packets_per_s']:6.0f} pkt/s "
              f"= {s['fraction_of_recv_ceiling_bits']:.0%} of the raw loop's bits/s; CPU µs per packet: "
              f"sender {s['sender_cpu_us_per_packet']:.2f}, receiver {s['receiver_cpu_us_per_packet']:.2f} "
              f"(= {s['cpu_fraction_of_raw']:.0%} of the raw loop's rate if CPU-bound)")  # fmt: skip
    print("ratios:", json.dumps({k: round(v, 3) for k, v in ratios.items()}))
    for key, r in vs_previous.items():
        print(f"after / previous, {key}: {r['median']:.3f} [{r['min']:.3f}-{r['max']:.3f}] "
              f"over {r['rounds']} rounds")  # fmt: skip
    print("decode µs (4 KiB DATA):", json.dumps({k: round(v, 2) for k, v in doc["decode_cost_4096"].items()}))
    print(f"wrote {args.out / 'agent.json'} and {args.out / 'agent.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
