"""Agent speed against the raw-socket ceiling, measured in the same run (root).

Why: the host agent is Python on raw sockets, so its packets/s are bounded by what a bare
AF_PACKET loop can move between two namespaces. This benchmark builds two namespaces
joined by one veth (``mrc_host.agent.vethlab``, prefix ``agb``) and measures, in order:

1. the ceiling: a bare ``send()`` loop of MRC-sized DATA frames (built once with the codec)
   in one namespace for ``--seconds``, and a bare ``recv`` loop counting them in the other;
2. the agent: ``mrc serve`` in both namespaces and ``--repeat`` transfers of ``--size`` per
   mode; goodput (verified by the receiver), DATA packets/s, retransmissions.

Writes ``agent.json`` and ``agent.png`` under ``--out`` (default results/).

    sudo .venv/bin/python -m bench.bench_agent --out results/ [--quick]
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
print(n, errors, time.perf_counter() - start)
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
print(n, (last - first) if first is not None and last is not None else 0.0)
"""


def ceiling(lab: Any, payload: int, seconds: float) -> dict[str, Any]:
    from mrc_host.wire.codec import FrameEncoder
    from mrc_host.wire.layers import FrameAddressing
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
        sent, errors, tx_s = tx.stdout.split()
        out, _ = rx.communicate(timeout=60)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    received, rx_s = out.split()
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
    }


def agent_runs(lab: Any, size: int, repeat: int, modes: list[str]) -> list[dict[str, Any]]:
    from mrc_host.agent.client import AgentClient

    a, b = lab.hosts
    for h in lab.hosts:
        lab.start_agent(h)
    try:
        client = AgentClient(a.control, timeout_s=120)
        client.send(b.name, "1M")  # warm-up: connections, templates, first RTT samples
        rows = []
        for mode in modes:
            for i in range(repeat):
                s = client.send(b.name, size, mode=mode, timeout_s=300)
                if not s["ok"]:
                    raise RuntimeError(f"transfer not verified: {s}")
                rows.append({"mode": mode, "run": i} | {k: s[k] for k in (
                    "bytes", "seconds", "goodput_mbit_s", "packets_per_s", "data_packets_sent",
                    "retransmissions", "evs_retired", "verified")})  # fmt: skip
                print(f"agent {mode:12} run {i}: {s['goodput_mbit_s']:8.1f} Mbit/s "
                      f"{s['packets_per_s']:9.0f} pkt/s retx {s['retransmissions']}")  # fmt: skip
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


def plot(doc: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = doc["ceiling"]
    summary = doc["agent_summary"]
    labels = ["raw send loop", "raw recv loop"] + [f"agent {m}" for m in summary]
    pps = [c["send_frames_per_s"], c["recv_frames_per_s"]] + [s["packets_per_s"] for s in summary.values()]
    per_frame = c["payload_bytes"] * 8 / 1e6
    mbit = [c["send_frames_per_s"] * per_frame, c["recv_frames_per_s"] * per_frame] + [
        s["goodput_mbit_s"] for s in summary.values()
    ]
    colors = ["#7f7f7f", "#bcbcbc"] + ["#1f77b4"] * len(summary)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.bar(range(len(labels)), [p / 1e3 for p in pps], color=colors)
    ax1.set_xticks(range(len(labels)), labels, fontsize=8, rotation=15)
    ax1.set_ylabel("thousand frames/s (DATA packets for the agent)")
    ax1.set_title("packets/s: agent vs bare AF_PACKET loops")
    ax2.bar(range(len(labels)), mbit, color=colors)
    ax2.set_xticks(range(len(labels)), labels, fontsize=8, rotation=15)
    ax2.set_ylabel("Mbit/s of payload (agent: verified goodput)")
    ax2.set_title(f"goodput, {c['payload_bytes']} B payload per frame")
    fig.suptitle(
        f"two namespaces over one veth, {doc['cpus']} CPUs, load {doc['load_before'][0]:.1f}", fontsize=9
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
    ap.add_argument("--modes", default="mrc,single-path", help="comma-separated modes")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_agent needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    from mrc_host.agent.protocol import parse_size
    from mrc_host.agent.vethlab import VethLab

    size = parse_size(args.size or ("16M" if args.quick else "64M"))
    seconds = args.seconds or (2.0 if args.quick else 5.0)
    repeat = args.repeat or (1 if args.quick else 3)
    modes = [m for m in args.modes.split(",") if m]
    args.out.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    lab = VethLab(prefix="agb").open()
    try:
        payload = 1500 - 136  # what the agent's default payload MTU is on a 1500-byte veth
        c = ceiling(lab, payload, seconds)
        print(f"ceiling: send {c['send_frames_per_s']:.0f} frames/s, "
              f"recv {c['recv_frames_per_s']:.0f} frames/s ({c['frame_bytes']} B frames)")  # fmt: skip
        rows = agent_runs(lab, size, repeat, modes)
    finally:
        lab.close()
    summary = {}
    for m in modes:
        rs = [r for r in rows if r["mode"] == m]
        summary[m] = {
            "goodput_mbit_s": statistics.median(r["goodput_mbit_s"] for r in rs),
            "packets_per_s": statistics.median(r["packets_per_s"] for r in rs),
            "retransmissions": sum(r["retransmissions"] for r in rs),
            "fraction_of_recv_ceiling": statistics.median(r["packets_per_s"] for r in rs)
            / c["recv_frames_per_s"],
        }
    doc = {
        "benchmark": "agent goodput and packets/s vs a bare AF_PACKET loop, two namespaces over a veth",
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "transfer_bytes": size,
        "ceiling": c,
        "agent_runs": rows,
        "agent_summary": summary,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (args.out / "agent.json").write_text(json.dumps(doc, indent=1))
    plot(doc, args.out / "agent.png")
    for m, s in summary.items():
        print(f"agent {m}: {s['goodput_mbit_s']:.1f} Mbit/s, {s['packets_per_s']:.0f} pkt/s "
              f"= {s['fraction_of_recv_ceiling']:.0%} of the raw receive loop")  # fmt: skip
    print(f"wrote {args.out / 'agent.json'} and {args.out / 'agent.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
