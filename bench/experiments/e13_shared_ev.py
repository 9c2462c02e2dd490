"""E13: a second flow forced onto the same EV: ECN moves one of them, both stay near line rate.

Two hosts under T0 0 send to two hosts under the last T0. Flow *a* sprays over all its
EVs; flow *b* is forced onto one path, the (plane 0, T1 0) uplink one of a's EVs uses:
every EV of b's connection on another path is DENIED through the agent's API, as an
operator would. b alone fills that uplink (its one NIC port has the uplink's rate), so a's
share of it overflows the queue: the switch marks CE, a's receiver echoes it on that EV,
and a skips it for its sibling EV of the plane (the other T1). Measured: a's data share
on b's path with b running over its share without b, and each flow's goodput against its
own run alone.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from .common import Context, Result, at_least, at_most, experiment_entry, fabric, fabric_info, step
from .e9_congestion import FRAME_BYTES, LINUX_ECN_THRESHOLD, bmv2_trim_packets, is_linux, slow_port
from .lab import FAULT_SHAPE, LINK_RATE, WARMUP_BYTES
from .plots import timelines
from .transfer import TransferRun, run_transfer

ID = "e13"
TITLE = "a second flow forced onto the same EV"
SHAPE = "Second flow forced onto the same EV: ECN moves one of them; both stay near line rate."
SHARED = (0, 0)  # (plane, T1) of the path b is forced onto


def on_path(rows: dict[str, dict[str, Any]], path: tuple[int, int]) -> list[str]:
    return [ev for ev, r in rows.items() if (int(r["plane"]), int(r["t1"])) == path]


def share_on(run: TransferRun, path: tuple[int, int]) -> float | None:
    """The part of ``run``'s data packets sent on ``path``'s EVs."""
    per_ev = run.data_per_ev()
    total = sum(per_ev.values())
    return sum(per_ev.get(ev, 0) for ev in on_path(run.ev_after, path)) / total if total else None


def goodput(run: TransferRun) -> float | None:
    g = run.summary.get("goodput_mbit_s")
    return float(g) if run.ok and g else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def pin(tb: Any, src: str, dst: str, path: tuple[int, int]) -> int:
    """Deny every EV of ``src``'s connection to ``dst`` that is not on ``path``; returns how
    many EVs remain on it."""
    client = tb.agent(src).client
    run_transfer(tb, src, dst, WARMUP_BYTES, "mrc")  # opens the connection: its EVs are drawn
    rows = {
        r["ev"]: r
        for r in client.evs()
        if r.get("peer") == dst and r.get("conn") == "send" and r["mode"] == "mrc"
    }
    keep = on_path(rows, path)
    if not keep:
        raise RuntimeError(f"{src} drew no EV on path {path}")
    for ev in rows:
        if ev not in keep:
            client.deny(ev)
    return len(keep)


def together(
    tb: Any, a: tuple[str, str, int], b: tuple[str, str, int], delay_s: float
) -> tuple[TransferRun, TransferRun]:
    """a, and b ``delay_s`` later (about a tenth of a's time alone: b then runs inside a)."""
    runs: dict[str, TransferRun] = {}

    def go(name: str, src: str, dst: str, size: int) -> None:
        runs[name] = run_transfer(tb, src, dst, size, "mrc")

    t_a = threading.Thread(target=go, args=("a", *a), daemon=True)
    t_b = threading.Timer(delay_s, go, args=("b", *b))
    t_a.start()
    t_b.start()
    t_a.join(120)
    t_b.join(120)
    if "a" not in runs or "b" not in runs:
        raise RuntimeError("a transfer did not return within 120 s")
    return runs["a"], runs["b"]


def queue_in_the_switch(tb: Any, path: tuple[int, int]) -> str:
    """BMv2: the shared uplink's rate set in BMv2's own egress queue, so the queue that ECN
    reads builds inside the switch (elsewhere the link's rate is kept by the host kernel's
    qdisc behind BMv2, which marks nothing). The Linux target's egress program already keeps
    the queue in front of its HTB. Returns what was done."""
    if is_linux(tb):
        return "Linux: the port's eBPF egress queue, the controller's thresholds"
    topo = tb.topology
    t0, t1 = topo.t0(path[0], 0), topo.t1(*path)
    link = topo.find_link(f"{t0.name}-{t1.name}")
    port = link.a.port if link.a.node == t0.name else link.b.port
    pps = int(float(tb.config.link_rate or LINK_RATE) * 1e6 / 8 / FRAME_BYTES)
    slow_port(tb, t0.name, port, pps, 64, thresholds=(LINUX_ECN_THRESHOLD, bmv2_trim_packets(pps)))
    return f"BMv2: {t0.name} port {port} queue at {pps} packets/s, ECN above {LINUX_ECN_THRESHOLD} packet"


def run(ctx: Context, res: Result) -> None:
    size_a = ctx.size(40, 20)
    size_b = size_a // 5  # at a quarter of a's rate: b lasts about 80 % of a
    with fabric(ctx, **FAULT_SHAPE) as tb:
        res.fabric = fabric_info(tb)
        res.caveats.append(queue_in_the_switch(tb, SHARED))
        topo = tb.topology
        left = [h.name for h in topo.hosts if h.t0_index == 0]
        right = [h.name for h in topo.hosts if h.t0_index == topo.t0_per_plane - 1]
        (src_a, src_b), (dst_b, dst_a) = left[:2], right[:2]
        run_transfer(tb, src_a, dst_a, WARMUP_BYTES, "mrc")
        step(f"E13 a alone: {src_a} -> {dst_a}, {size_a >> 20} MiB over every path")
        alone_a = run_transfer(tb, src_a, dst_a, size_a, "mrc")
        kept = pin(tb, src_b, dst_b, SHARED)
        step(f"E13 b alone: {src_b} -> {dst_b}, {size_b >> 20} MiB forced onto p0/T1 0 ({kept} EVs)")
        alone_b = run_transfer(tb, src_b, dst_b, size_b, "mrc")
        step("E13 a and b together")
        with_a, with_b = together(tb, (src_a, dst_a, size_a), (src_b, dst_b, size_b), 0.1 * alone_a.seconds)
        moved = ratio(share_on(with_a, SHARED), share_on(alone_a, SHARED))
        signals = sum(
            with_a.ev_delta("ecn").get(ev, 0) + with_a.ev_delta("trims").get(ev, 0)
            for ev in on_path(with_a.ev_after, SHARED)
        )
        ga, gb = ratio(goodput(with_a), goodput(alone_a)), ratio(goodput(with_b), goodput(alone_b))
        step(
            f"   a's share on b's path {share_on(with_a, SHARED) or 0:.3f} with b, "
            f"{share_on(alone_a, SHARED) or 0:.3f} alone (x{moved or 0:.2f}); congestion signals on it "
            f"{signals}; goodput with/alone a {ga or 0:.2f}, b {gb or 0:.2f}"
        )
        paper = "ECN moves one of them"
        res.add("a's data share on b's path, with b / alone", moved, unit="x", mode="mrc", paper=paper,
                **at_most(moved, 0.8))  # fmt: skip
        res.add("congestion signals on a's shared EVs (ECN echoes + trims)", signals, mode="mrc", paper=paper,
                **at_least(signals, 1, "> 0"))  # fmt: skip
        near = "both stay near line rate"
        res.add("a's goodput with b / alone", ga, unit="x", mode="mrc", paper=near, **at_least(ga, 0.8))
        res.add("b's goodput with a / alone", gb, unit="x", mode="mrc", paper=near, **at_least(gb, 0.8))
        res.data.update(
            {
                "a": {"alone": alone_a.record(), "with_b": with_a.record()},
                "b": {"alone": alone_b.record(), "with_a": with_b.record(), "evs_on_path": kept},
            }
        )
        res.plots.append(
            timelines(
                ctx.out / "e13.png",
                "E13 a sprays, b forced onto one of a's paths",
                {
                    "a alone": alone_a.record()["goodput_mbit_s"],
                    "a with b": with_a.record()["goodput_mbit_s"],
                    "b with a": with_b.record()["goodput_mbit_s"],
                },
                {},
            ).name
        )
        res.caveats.append("b is forced onto one path by denying its other EVs through the agent's API")


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
