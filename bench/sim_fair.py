"""Equal NSCC flows into one host in ``mrc-sim``: Jain's index while all of them run.

N flows (2, 4, 8) from hosts on other leaves (one base RTT for all) into host 0, on 1 and 2
planes, started together or each at a random time in 0-1,000 us (per seed); the goodputs are
judged from the last start to the first finish, as the fuzzer's ``jain`` invariant judges
them. Each flow sends 1.5 MiB a plane plus what it would have sent at an equal share before
the last one started, so all have about as much left when the last joins. The first round
trips count: unequal windows left by the receiver port's first trims
must converge within a few round trips, not keep their ratio.

Run: ``python -m bench.sim_fair [--seeds N] [--only together|staggered] [--flows 2 4 8]
[--share-scale 0.35 | --queue-share 1.0]`` (``Experimental.lasthop_share_scale`` or
``lasthop_queue_share``; both off by default).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from bench.sim_nscc import jain, summary
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import FlowSpec, Network

JAIN_BAR = 0.95
STAGGER_NS = 1_000_000
LINK_DELAY_NS = 2_000  # about 17 us base RTT across the spine


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
) -> dict[str, Any]:
    """N flows into host 0 of a fabric whose other leaves hold one sender each (``share_scale``,
    ``queue_share``: ``Experimental.lasthop_share_scale``, ``lasthop_queue_share``)."""
    shape = FabricShape(planes=planes, t0=n + 1, t1=4, link_delay_ns=LINK_DELAY_NS)
    net = Network(shape, seed)
    rng = random.Random(seed * 1000 + n * 10 + planes)
    starts = sorted(rng.randrange(STAGGER_NS) for _ in range(n)) if staggered else [0] * n
    sizes = [size * planes + x for x in fair_sent(starts, planes * shape.link_gbps)]
    nscc: dict[str, object] = {"lasthop_share_scale": share_scale} if share_scale else {}
    if queue_share:
        nscc["lasthop_queue_share"] = queue_share
    specs = [FlowSpec(f"f{i}", i + 1, 0, max_evs=128, nscc=nscc) for i in range(n)]
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
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_fair", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--flows", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--planes", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--only", choices=("together", "staggered"), action="append")
    ap.add_argument("--size", type=int, default=3 << 19, help="bytes a flow sends a plane")
    ap.add_argument("--share-scale", type=float, default=0.0, help="NSCC's lasthop_share_scale (0: off)")
    ap.add_argument("--queue-share", type=float, default=0.0, help="NSCC's lasthop_queue_share (0: off)")
    ap.add_argument("--first-seed", type=int, default=1, help="seeds first-seed .. first-seed + seeds - 1")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    modes = args.only or ["together", "staggered"]
    data: dict[str, Any] = {"seeds": seeds, "bar": JAIN_BAR, "link_delay_ns": LINK_DELAY_NS}
    targets: dict[str, bool] = {}
    for mode in modes:
        for planes in args.planes:
            for n in args.flows:
                stag = mode == "staggered"
                runs = [
                    run_case(n, planes, stag, s, args.size, args.share_scale, args.queue_share) for s in seeds
                ]
                js = [r["jain"] for r in runs if r["jain"] is not None]
                key = f"{mode}_n{n}_p{planes}"
                data[key] = {"runs": runs, **(summary(js) if js else {})}
                targets[f"{key}_jain>={JAIN_BAR}"] = bool(js) and len(js) == len(runs) and min(js) >= JAIN_BAR
                print(f"   {key}: jain {summary(js) if js else None} {[round(j, 3) for j in js]}", flush=True)
    data["targets"] = targets
    (args.out / "sim_fair.json").write_text(json.dumps(data, indent=1))
    plot(data, args.out / "sim_fair.png")
    for k, v in targets.items():
        print(f"   {'ok  ' if v else 'MISS'} {k}")
    return 0


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
    ax.set_title("equal NSCC flows into one host", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
