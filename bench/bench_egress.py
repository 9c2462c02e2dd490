"""Cost of the Linux target's eBPF egress program (linux_target/bpf/mrc_egress.c) per frame.

Why: the program runs on every frame every switch port sends; it must cost far less than
the kernel's own forwarding. Two measures, side by side in one run, in a namespace of its own
(``be-``, removed afterwards):

- the program's own run time per frame (the kernel's BPF statistics, ``run_time_ns /
  run_cnt``, enabled for the run with ``kernel.bpf_stats_enabled`` and restored after) on each
  path: pass (no policy), CE mark, trim (``bpf_skb_change_tail``), tail drop;
- frames/s a raw-socket loop sends out of the port with and without the program (the ratio is
  what the program costs a sender; no HTB, so nothing else shapes the rate);
- how long a shim with 8 ports takes to serve with and without the egress model (HTB and
  the program on every port: bring-up cost, E11's concern).

    sudo python -m bench.bench_egress --out results/ [--frames 50000] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from mrc_host.wire.codec import encode
from mrc_host.wire.messages import Dscp, Ecn, PathMeta
from mrc_host.wire.samples import SAMPLE_ADDRESSING, SAMPLE_CARRIER, sample_data

NS = "be-egress"
DEV, PEER = "be-a", "be-b"
SEND = r"""
import socket, sys, time
iface, count = sys.argv[1], int(sys.argv[2])
frame = bytes.fromhex(sys.stdin.read().strip())
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
t = time.perf_counter()
for _ in range(count):
    try:
        s.send(frame)
    except OSError:  # the program dropped it (tail drop): the send still cost what it cost
        pass
print(count / (time.perf_counter() - t))
"""
PROBE = r"""
import json, sys
from linux_target.egress import Policy, PortEgress
port = PortEgress(sys.argv[1])
case = sys.argv[2]
if case == "install":
    port.install(0)
elif case == "remove":
    port.remove()
else:
    policy = {"pass": None, "mark": Policy(0, 1 << 40, False), "trim": Policy(1 << 40, 0, False),
              "drop": Policy(1 << 40, 1 << 40, False)}[case]
    port.write_policy(policy)
    # a virtual queue that never drains (1 bit/s), so every frame meets a queue; buffer 1 byte for drop
    port.write_link(1, 1 if case == "drop" else 1 << 40)
    print(json.dumps(port.program_id()))
"""


def ns_run(*cmd: str, input: str | None = None) -> str:
    return subprocess.run(
        ["ip", "netns", "exec", NS, *cmd], input=input, capture_output=True, text=True, check=True
    ).stdout


def prog_stats(prog: int) -> tuple[int, int]:
    info = json.loads(subprocess.run(["bpftool", "-j", "prog", "show", "id", str(prog)], capture_output=True,
                                     text=True, check=True).stdout)  # fmt: skip
    return int(info.get("run_time_ns", 0)), int(info.get("run_cnt", 0))


def send_rate(frame: bytes, count: int) -> float:
    return float(ns_run(sys.executable, "-c", SEND, DEV, str(count), input=frame.hex()).strip())


def measure(frames: int) -> dict[str, Any]:
    data = replace(sample_data(1024), meta=PathMeta(ev=0x0123_4567, ecn=Ecn.ECT0, dscp=Dscp.DATA))
    frame = encode(data, SAMPLE_CARRIER, SAMPLE_ADDRESSING)  # trimmable, ECT(0)
    out: dict[str, Any] = {"frame_bytes": len(frame), "frames": frames, "paths": {}}
    out["without_program_fps"] = send_rate(frame, frames)
    ns_run(sys.executable, "-c", PROBE, DEV, "install")
    for case in ("pass", "mark", "trim", "drop"):
        prog = int(ns_run(sys.executable, "-c", PROBE, DEV, case).strip())
        t0, n0 = prog_stats(prog)
        fps = send_rate(frame, frames)
        t1, n1 = prog_stats(prog)
        out["paths"][case] = {"ns_per_frame": (t1 - t0) / max(1, n1 - n0), "runs": n1 - n0, "sender_fps": fps}
    out["with_program_fps"] = out["paths"]["pass"]["sender_fps"]
    out["ratio_with_over_without"] = out["with_program_fps"] / out["without_program_fps"]
    ns_run(sys.executable, "-c", PROBE, DEV, "remove")
    return out


def shim_start_s(ports: int, egress_model: bool, sock: Path) -> float:
    """Seconds from starting a shim with ``ports`` ports (50 Mbit/s each) until it serves."""
    from linux_target.p4rt_client import wait_until_serving

    cmd = ["ip", "netns", "exec", NS, sys.executable, "-m", "linux_target.shim_main", "--name", "be-shim"]
    cmd += ["--device-id", "1", "--listen", f"unix:{sock}"]
    for p in range(1, ports + 1):
        cmd += ["--port", f"{p}=be-p{p}", "--rate", f"{p}=50"]
    if not egress_model:
        cmd.append("--no-egress-model")
    t = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_serving(f"unix:{sock}", 60, alive=lambda: proc.poll() is None)
        return time.monotonic() - t
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def shim_starts(ports: int, repeats: int) -> dict[str, Any]:
    for p in range(1, ports + 1):
        ns_run("ip", "link", "add", f"be-p{p}", "type", "veth", "peer", "name", f"be-q{p}")
    sock = Path(f"/tmp/{NS}.sock")
    out: dict[str, Any] = {"ports": ports}
    for label, model in (("with_egress_model_s", True), ("without_egress_model_s", False)):
        times = sorted(shim_start_s(ports, model, sock) for _ in range(repeats))
        out[label] = times[len(times) // 2]
    sock.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_egress", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--frames", type=int, default=50_000)
    ap.add_argument("--quick", action="store_true", help="10 000 frames per measure")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_egress: needs root (a network namespace, tc, bpftool)", file=sys.stderr)
        return 2
    frames = 10_000 if args.quick else args.frames
    stats_path = Path("/proc/sys/kernel/bpf_stats_enabled")
    stats_before = stats_path.read_text().strip()
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        ns_run("ip", "link", "add", DEV, "type", "veth", "peer", "name", PEER)
        ns_run("ip", "link", "set", DEV, "up")
        ns_run("ip", "link", "set", PEER, "up")
        stats_path.write_text("1")
        result = measure(frames)
        result["shim_start"] = shim_starts(8, 3)
    finally:
        stats_path.write_text(stats_before)
        subprocess.run(["ip", "netns", "del", NS], check=False)
    result.update(
        {"bench": "egress", "machine": platform.machine(), "kernel": platform.release(), "at": time.time()}
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "egress.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    for case, row in result["paths"].items():
        ns, fps = row["ns_per_frame"], row["sender_fps"]
        print(f"{case:5} {ns:7.0f} ns/frame in the program, sender {fps:9.0f} frames/s")
    st = result["shim_start"]
    print(
        f"shim start, {st['ports']} ports at 50 Mbit/s: {st['with_egress_model_s']:.2f} s with the egress "
        f"model, {st['without_egress_model_s']:.2f} s without (median of 3)"
    )
    print(
        f"sender without the program {result['without_program_fps']:.0f} frames/s, with "
        f"{result['with_program_fps']:.0f}: ratio {result['ratio_with_over_without']:.3f} -> {path}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
