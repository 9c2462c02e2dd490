"""E10: what a user would pick instead: Linux TCP over kernel ECMP routes, same fabric, same faults.

No MRC agents run. ``kernel_routes.connect`` gives the sender and the receiver kernel
multipath routes over all (plane, T1) paths, each next hop SRv6-encapsulating towards
one carrier (docs/experiments.md, E10). ``iperf3`` (Debian's) moves the bytes inside the
host namespaces, ``-P 4`` parallel streams, bounded by ``timeout``. Runs: clean, a black
hole on the busiest uplink under the sender's T0 (twice the clean time, from 20 % of the
clean time), and the T1 behind that uplink down (half the clean time). Measured from
iperf3's 0.2 s intervals: completion time, completion / clean, the longest stall.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

from . import kernel_routes
from .common import Context, Result, experiment_entry, fabric, fabric_info, fmt, step
from .lab import FAULT_SHAPE, ModeRuns, delta, end_hosts, uplink_tx_bytes
from .transfer import FaultPlan, inject

ID = "e10"
TITLE = "Linux kernel TCP (iperf3) over kernel ECMP multipath routes, same faults"
SHAPE = (
    "What MRC replaces: a flow hashed onto a failed path stalls until the transport moves it (TCP RTO and "
    "flow-label rehash here; the paper: RoCE/ECMP stall until routing converges or the fault clears)."
)
PORT = 5201
STREAMS = 4
INTERVAL_S = 0.2
LISTEN_TIMEOUT_S = 10.0


def _wait_listening(node: Any, port: int) -> None:
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    while time.monotonic() < deadline:
        if f":{port} " in node.cmd(f"ss -Hltn 'sport = :{port}'"):
            return
        time.sleep(0.05)  # poll; the deadline bounds the wait
    raise RuntimeError(f"iperf3 server in {node.name} not listening on {port} after {LISTEN_TIMEOUT_S} s")


def _client_command(pair: kernel_routes.TcpPair, size: int, limit_s: float) -> list[str]:
    """iperf3's client: ``size`` bytes over ``STREAMS`` streams, bounded by ``timeout``."""
    return [
        "timeout",
        str(int(limit_s)),
        "iperf3",
        "-c",
        pair.dst_addr,
        "-p",
        str(PORT),
        "-n",
        str(size),
        "-P",
        str(STREAMS),
        "-i",
        str(INTERVAL_S),
        "--json",
        "--get-server-output",
        "--connect-timeout",
        "3000",
    ]


def _iperf_record(
    out: str, err: str, returncode: int, wall: float, limit_s: float, fault: FaultPlan | None
) -> dict[str, Any]:
    """One run's record from the client's JSON report: the receiver's goodput per interval (all
    streams and each), completion and retransmits."""
    try:
        report = json.loads(out)
    except ValueError:
        report = {"error": f"no JSON from iperf3 (rc {returncode}): {err.strip()[:200]}"}
    # the receiver's intervals: the sender's count bytes written into socket buffers, which
    # absorb megabytes after a stream's path died before its writes block
    received = report.get("server_output_json") or {}
    intervals = received.get("intervals") or report.get("intervals", [])
    series = [(round(iv["sum"]["end"], 3), round(iv["sum"]["bits_per_second"] / 1e6, 3)) for iv in intervals]
    per_stream: dict[int, list[tuple[float, float]]] = {}
    for iv in intervals:
        for st in iv.get("streams", []):
            per_stream.setdefault(st["socket"], []).append((st["end"], st["bits_per_second"] / 1e6))
    end = report.get("end", {})
    completed = returncode == 0 and "error" not in report
    seconds = float(end.get("sum_received", {}).get("seconds", wall)) if completed else None
    return {
        "completed": completed,
        "seconds": seconds,
        "wall_s": wall,
        "limit_s": limit_s,
        "returncode": returncode,
        "error": report.get("error", ""),
        "per_stream_mbit_s": {str(k): v for k, v in per_stream.items()},
        "intervals_from": "receiver" if received.get("intervals") else "sender",
        "goodput_mbit_s": series,
        "retransmits": end.get("sum_sent", {}).get("retransmits"),
        "fault": None if fault is None else fault.record(),
    }


def iperf(
    tb: Any,
    pair: kernel_routes.TcpPair,
    size: int,
    limit_s: float,
    fault: FaultPlan | None,
    fault_at_s: float,
) -> dict[str, Any]:
    """One bounded iperf3 run; the fault (if any) is injected ``fault_at_s`` after the client starts."""
    src, dst = tb.net.get(pair.src), tb.net.get(pair.dst)
    server = dst.popen(
        ["timeout", str(int(limit_s + 10)), "iperf3", "-s", "-1", "-J", "-B", pair.dst_addr, "-p", str(PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_listening(dst, PORT)
        done = threading.Event()
        t0 = time.monotonic()

        start_bytes = uplink_tx_bytes(tb, 0)

        def fire() -> None:
            if fault is not None and not done.wait(fault_at_s):
                # the streams' ports (so their paths) are new every run: hit the uplink that
                # carries the most of this run's bytes so far (or the T1 behind it)
                used = delta(uplink_tx_bytes(tb, 0), start_bytes)
                busiest = max(used, key=lambda k: used[k])
                fault.target = busiest if fault.kind != "switch_down" else busiest.split("-", 1)[1]
                inject(tb, fault, time.monotonic() - t0)

        side = threading.Thread(target=fire, daemon=True)
        side.start()
        client = src.popen(
            _client_command(pair, size, limit_s), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        out, err = client.communicate(timeout=limit_s + 15)
        wall = time.monotonic() - t0
        done.set()
        side.join(timeout=30)
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(timeout=15)
        if fault is not None:
            tb.controller.clear()
    return _iperf_record(out, err, client.returncode, wall, limit_s, fault)


def longest_zero_run(series: list[tuple[float, float]], floor_mbit_s: float) -> float:
    longest = run = 0.0
    prev = 0.0
    for t, g in series:
        run = run + (t - prev) if g < floor_mbit_s else 0.0
        longest = max(longest, run)
        prev = t
    return longest


def _faulted(
    ctx: Context, tb: Any, pair: kernel_routes.TcpPair, size: int, plan: FaultPlan, base: float, floor: float
) -> dict[str, Any]:
    """One iperf3 run with the fault from 20 % of the clean time: its record with the longest
    stall of all streams and of one, and how long the fault overlapped the transfer."""
    r = iperf(tb, pair, size, plan.duration_s + ctx.scale(60, 30), plan, 0.2 * base)
    stall = longest_zero_run(r["goodput_mbit_s"], floor)
    stream_stall = max(
        (longest_zero_run(v, floor / STREAMS) for v in r["per_stream_mbit_s"].values()), default=0.0
    )
    ratio = r["seconds"] / base if r["completed"] else None
    # how long the fault overlapped the transfer (iperf3 ends once all streams sent the bytes)
    window = None
    if plan.injected_at is not None:
        window = min(plan.injected_at + plan.duration_s, r["wall_s"]) - plan.injected_at
    r.update(
        {"ratio": ratio, "longest_stall_s": stall, "longest_stream_stall_s": stream_stall, "window_s": window}
    )
    return r


def _judge(res: Result, name: str, r: dict[str, Any], plan: FaultPlan) -> None:
    """For information, beside E1/E3: completion and stalls; a stream on the failed path stalls."""
    window, stream_stall = r["window_s"], r["longest_stream_stall_s"]
    for metric, value, unit, paper, note in (
        (
            "completion / clean",
            r["ratio"],
            "x",
            "compare E1/E3 MRC",
            "" if r["completed"] else "did not complete",
        ),
        (
            "longest stall of all streams together",
            r["longest_stall_s"],
            "s",
            "stalls until repathed or cleared",
            "",
        ),
    ):
        res.info(f"{name}: {metric}", value, unit=unit, mode="tcp", paper=paper, note=note)
    res.add(
        f"{name}: longest stall of one stream",
        stream_stall,
        unit="s",
        mode="tcp",
        paper="a flow on the failed path stalls until the fault clears (no repathing)",
        expect=f">= 0.5 x the fault's time inside the transfer ({fmt(window)} s)",
        holds=window is not None and stream_stall >= 0.5 * window,
        note=f"fault on {plan.target}",
    )


def run(ctx: Context, res: Result) -> None:
    if shutil.which("iperf3") is None:
        res.status, res.reason = "skipped", "iperf3 not installed (apt-get install iperf3)"
        return
    if ctx.target != "linux":
        res.caveats.append("kernel routes are host-side; the switches are BMv2 here")
    size = ctx.size(32, 8)
    with fabric(ctx, agents=False, **FAULT_SHAPE) as tb:
        res.fabric = fabric_info(tb)
        src, dst = end_hosts(tb)
        pair = kernel_routes.connect(tb, src, dst)
        res.data["routes"] = {
            "src": pair.src_addr,
            "dst": pair.dst_addr,
            "next_hops": pair.paths,
            "multipath_hash_policy": kernel_routes.HASH_POLICY,
        }
        step(
            f"E10 kernel multipath routes {src} <-> {dst}: {pair.paths} next hops each way; clean iperf3 run"
        )
        before = uplink_tx_bytes(tb, 0)
        clean = iperf(tb, pair, size, ctx.scale(60, 30), None, 0)
        used = delta(uplink_tx_bytes(tb, 0), before)
        if not clean["completed"]:
            raise RuntimeError(f"clean iperf3 run failed: {clean['error']}")
        base = clean["seconds"]
        busiest = max(used, key=lambda k: used[k])
        t1 = busiest.split("-", 1)[1]
        step(f"   clean: {size >> 20} MiB in {base:.2f} s; busiest uplink {busiest}")
        floor = 0.01 * size * 8 / base / 1e6
        kept = ModeRuns({"clean": clean | {"uplink_bytes": used}}, {"tcp clean": clean["goodput_mbit_s"]})
        # targets are picked when the fault fires (the busiest uplink of that run so far)
        scenarios = {
            "black hole": FaultPlan("blackhole", busiest, None, duration_s=max(1.0, 2 * base)),
            "T1 down": FaultPlan("switch_down", t1, None, duration_s=max(1.0, 0.5 * base)),
        }
        for name, plan in scenarios.items():
            step(f"E10 {name} ({plan.target}) at {0.2 * base:.2f} s for {plan.duration_s:.2f} s")
            r = _faulted(ctx, tb, pair, size, plan, base, floor)
            kept.runs[name] = r
            kept.series[f"tcp {name}"] = r["goodput_mbit_s"]
            if plan.injected_at is not None:
                kept.shades[f"tcp {name}"] = [(plan.injected_at, plan.injected_at + plan.duration_s)]
            step(
                f"   {name}: completed={r['completed']} in {fmt(r['seconds'])} s "
                f"({fmt(r['ratio'])} x clean), longest stall {r['longest_stall_s']:.2f} s "
                f"(one stream: {r['longest_stream_stall_s']:.2f} s) on {plan.target}, "
                f"retransmits {r['retransmits']}"
            )
            _judge(res, name, r, plan)
        res.add("clean completion time", base, unit="s", mode="tcp", expect="info")
        res.caveats.append(
            "iperf3 -n counts bytes over all streams, so healthy streams carry what a stalled one cannot "
            "(as an application that rebalances would); the per-stream stall shows the flow on the "
            "failed path"
        )
        kept.report(ctx, res, "e10", f"E10 kernel TCP, {STREAMS} streams ({size >> 20} MiB)")
        res.caveats.append(
            f"kernel multipath hash policy {kernel_routes.HASH_POLICY} (addresses + ports): each TCP stream "
            "stays on its path, as a flow on an ECMP fabric does; with the default policy 0 all streams of a "
            "host pair would share one path"
        )


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
