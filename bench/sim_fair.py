"""Equal flows into one host in ``mrc-sim``: Jain's index while all of them run.

N flows (2, 4, 8) from hosts on other leaves (one base RTT for all) into host 0, on 1 and 2
planes, started together or each at a random time in 0-1,000 us (per seed); the goodputs are
judged from the last start to the first finish, as the fuzzer's ``jain`` invariant judges
them. Each flow sends 1.5 MiB a plane plus what it would have sent at an equal share before
the last one started, so all have about as much left when the last joins. The first round
trips count: unequal windows left by the receiver port's first trims
must converge within a few round trips, not keep their ratio.

``--rtts``: two RTT classes instead, 8 flows on 1 us links, half from hosts under the
receiver's own leaf (4.7 us) and half from other leaves (9.4 us), together and staggered,
1 and 2 planes: Jain's index (bar 0.9) and the short-RTT flows' mean goodput over the long
ones' (bar 0.8-1.25), on every seed.

Run: ``python -m bench.sim_fair [--seeds N] [--only together|staggered] [--flows 2 4 8]
[--rtts] [--cc nscc | --share-scale 0.35 | --queue-share 1.0]`` (``--cc``: a congestion
control by name, the default's otherwise; ``Experimental.lasthop_share_scale`` or
``lasthop_queue_share``; both off by default).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path
from typing import Any

from bench.sim_nscc import jain, summary
from mrc_host.core import TransportConfig
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import FlowSpec, Network

JAIN_BAR = 0.95
STAGGER_NS = 1_000_000
LINK_DELAY_NS = 2_000  # about 17 us base RTT across the spine
# ``--rtts``: 1 us links (4.7 us under one leaf, 9.4 us across the spine), 8 flows
RTTS_LINK_DELAY_NS = 1_000
RTTS_FLOWS = 8
RTTS_JAIN_BAR = 0.9
RTTS_RATIO_BAR = (0.8, 1.25)


def fair_sent(starts: list[int], gbps: float) -> list[int]:
    """The bytes each flow sends before the last one starts, if those running share the line
    equally: each flow is sized so that all have the same left when the last one joins."""
    sent = [0.0] * len(starts)
    for k in range(len(starts) - 1):
        share = gbps * (starts[k + 1] - starts[k]) / 8 / (k + 1)
        for i in range(k + 1):
            sent[i] += share
    return [int(x) for x in sent]


def run_case(
    n: int,
    planes: int,
    staggered: bool,
    seed: int,
    size: int,
    share_scale: float = 0.0,
    queue_share: float = 0.0,
    cc: str = "",
    transport: dict[str, object] | None = None,
) -> dict[str, Any]:
    """N flows into host 0 of a fabric whose other leaves hold one sender each (``share_scale``,
    ``queue_share``: ``Experimental.lasthop_share_scale``, ``lasthop_queue_share``; ``transport``:
    more TransportConfig overrides by name)."""
    shape = FabricShape(planes=planes, t0=n + 1, t1=4, link_delay_ns=LINK_DELAY_NS)
    net = Network(shape, seed)
    rng = random.Random(seed * 1000 + n * 10 + planes)
    starts = sorted(rng.randrange(STAGGER_NS) for _ in range(n)) if staggered else [0] * n
    sizes = [size * planes + x for x in fair_sent(starts, planes * shape.link_gbps)]
    nscc: dict[str, object] = {"lasthop_share_scale": share_scale} if share_scale else {}
    if queue_share:
        nscc["lasthop_queue_share"] = queue_share
    overrides: dict[str, object] = {**(transport or {}), **({"cc_algorithm": cc} if cc else {})}
    specs = [FlowSpec(f"f{i}", i + 1, 0, max_evs=128, nscc=nscc, transport=overrides) for i in range(n)]
    return _judge(net, specs, starts, sizes)


def run_rtts_case(planes: int, staggered: bool, seed: int, size: int, cc: str = "") -> dict[str, Any]:
    """``RTTS_FLOWS`` flows into host 0: half from hosts under its own leaf (4.7 us), half from
    one host on each other leaf (9.4 us), in an order drawn per seed; also the short-RTT flows'
    mean goodput over the long ones' (``short_over_long``)."""
    half = RTTS_FLOWS // 2
    per = half + 1  # the receiver and the short-RTT senders under leaf 0
    shape = FabricShape(planes=planes, t0=half + 1, t1=4, hosts_per_t0=per, link_delay_ns=RTTS_LINK_DELAY_NS)
    net = Network(shape, seed)
    rng = random.Random(seed * 1000 + RTTS_FLOWS * 10 + planes)
    starts = sorted(rng.randrange(STAGGER_NS) for _ in range(RTTS_FLOWS)) if staggered else [0] * RTTS_FLOWS
    srcs = [1 + i for i in range(half)] + [per * (i + 1) for i in range(half)]
    rng.shuffle(srcs)
    sizes = [size * planes + x for x in fair_sent(starts, planes * shape.link_gbps)]
    transport: dict[str, object] = {"cc_algorithm": cc} if cc else {}
    specs = [FlowSpec(f"f{i}", src, 0, max_evs=128, transport=transport) for i, src in enumerate(srcs)]
    out = _judge(net, specs, starts, sizes)
    near = [shape.t0_of(src) == 0 for src in srcs]
    short = [g for g, n in zip(out["gbps"], near, strict=True) if n]
    long = [g for g, n in zip(out["gbps"], near, strict=True) if not n]
    ratio = statistics.fmean(short) / max(statistics.fmean(long), 1e-9)
    # (no span with all of them running: no ratio, as no Jain index)
    out["short_over_long"] = round(ratio, 4) if out["jain"] is not None else None
    out["short_rtt"] = near
    return out


def _judge(net: Network, specs: list[FlowSpec], starts: list[int], sizes: list[int]) -> dict[str, Any]:
    """Run ``specs`` (each posting its size at its start) and judge them from the last start
    to the first finish."""
    conns = [net.add_flow(spec, b) for spec, b in zip(specs, sizes, strict=True)]
    for c, at, b in zip(conns, starts, sizes, strict=True):
        net.post(c, b, at_ns=at)
    net.run(1_000_000_000)
    ends = [max(t for t, _ in c.goodput_samples) for c in conns]
    t0, t1 = max(starts), min(ends)
    rates = [c.throughput_gbps(t0, t1) for c in conns]
    return {
        "jain": jain(rates) if t1 > t0 else None,
        "gbps": [round(x, 2) for x in rates],
        "together_us": round((t1 - t0) / 1e3, 1),
        "starts_us": [s / 1e3 for s in starts],
        "ends_us": [e / 1e3 for e in ends],
        "cc": net.connections[0].tcfg.cc_algorithm,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_fair", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--flows", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--planes", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--only", choices=("together", "staggered"), action="append")
    ap.add_argument("--rtts", action="store_true", help="two RTT classes (4.7 and 9.4 us) instead")
    ap.add_argument("--size", type=int, default=3 << 19, help="bytes a flow sends a plane")
    ap.add_argument("--cc", default="", help="congestion control by name (default: the transport's)")
    ap.add_argument("--share-scale", type=float, default=0.0, help="NSCC's lasthop_share_scale (0: off)")
    ap.add_argument("--queue-share", type=float, default=0.0, help="NSCC's lasthop_queue_share (0: off)")
    ap.add_argument("--first-seed", type=int, default=1, help="seeds first-seed .. first-seed + seeds - 1")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    data: dict[str, Any] = {"seeds": seeds, "bar": RTTS_JAIN_BAR if args.rtts else JAIN_BAR}
    data["link_delay_ns"] = RTTS_LINK_DELAY_NS if args.rtts else LINK_DELAY_NS
    targets: dict[str, bool] = {}
    for mode in args.only or ["together", "staggered"]:
        for planes in args.planes:
            stag = mode == "staggered"
            if args.rtts:
                runs = [run_rtts_case(planes, stag, s, args.size, args.cc) for s in seeds]
                _row(data, targets, f"rtts_{mode}_n{RTTS_FLOWS}_p{planes}", runs)
                continue
            for n in args.flows:
                runs = [
                    run_case(n, planes, stag, s, args.size, args.share_scale, args.queue_share, args.cc)
                    for s in seeds
                ]
                _row(data, targets, f"{mode}_n{n}_p{planes}", runs)
    data["cc"] = args.cc or TransportConfig().cc_algorithm
    data["targets"] = targets
    # (a congestion control named: its own files, beside the default's)
    name = ("sim_fair_rtts" if args.rtts else "sim_fair") + (
        f"_{args.cc.replace('+', '_')}" if args.cc else ""
    )
    (args.out / f"{name}.json").write_text(json.dumps(data, indent=1))
    plot(data, args.out / f"{name}.png")
    for k, v in targets.items():
        print(f"   {'ok  ' if v else 'MISS'} {k}")
    return 0


def _row(data: dict[str, Any], targets: dict[str, bool], key: str, runs: list[dict[str, Any]]) -> None:
    """One cell's runs, their summary and its targets: Jain's index (and for two RTT classes the
    short-RTT flows' share over the long ones') within its bar on every seed."""
    js = [r["jain"] for r in runs if r["jain"] is not None]
    data[key] = {"runs": runs, **(summary(js) if js else {})}
    every = bool(js) and len(js) == len(runs)
    if "short_over_long" in runs[0]:
        ratios = [r["short_over_long"] for r in runs if r["short_over_long"] is not None]
        data[key]["short_over_long"] = summary(ratios) if ratios else None
        lo, hi = RTTS_RATIO_BAR
        targets[f"{key}_jain>={RTTS_JAIN_BAR}"] = every and min(js) >= RTTS_JAIN_BAR
        targets[f"{key}_short/long_in_{lo}-{hi}"] = every and all(lo <= x <= hi for x in ratios)
        gone = len(runs) - len(js)
        jain_s, ratio_s = summary(js) if js else None, data[key]["short_over_long"]
        print(f"   {key}: jain {jain_s} short/long {ratio_s} no overlap: {gone}", flush=True)
        return
    targets[f"{key}_jain>={JAIN_BAR}"] = every and min(js) >= JAIN_BAR
    print(f"   {key}: jain {summary(js) if js else None} {[round(j, 3) for j in js]}", flush=True)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in data if isinstance(data[k], dict) and "runs" in data[k]]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(keys) + 1), 3.2))
    for i, k in enumerate(keys):
        ys = [r["jain"] for r in data[k]["runs"] if r["jain"] is not None]
        ax.scatter([i] * len(ys), ys, s=12)
    ax.axhline(data["bar"], ls="--", lw=0.8, color="grey")
    ax.set_xticks(range(len(keys)), keys, fontsize=7, rotation=45, ha="right")
    ax.set_ylabel("Jain index while all run")
    ax.set_title(f"equal flows into one host ({data.get('cc', '')})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
