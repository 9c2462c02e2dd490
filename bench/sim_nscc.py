"""NSCC's figures in ``mrc-sim`` over several seeds (JSON + PNG under results/).

- jitter: one 2 x 4 x 100 Gb/s transfer with random per-hop delay on every link, at 21 us
  base RTT with 3 us per hop and at 3 us with 1 us per hop: goodput over line rate (the
  window cap must leave room for the RTT the jitter adds);
- two flows of different RTTs (one under the receiver's own leaf, one across the spine)
  into one host: Jain's index of their goodputs while both run (needs a congestion signal
  from the last hop, where the fabric marks no ECN);
- an 8->1 incast on the htsim cross-check fabric: completion over the on-wire ideal, trims,
  and whether the windows shrank (their sum halfway through below the start, and at most
  one trim a flow in the second half).

Run: ``python -m bench.sim_nscc [--quick] [--seeds N]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench.htsim_xcheck import XFabric, cases, run_mrcsim
from bench.sim_transport import link_delay_for_rtt
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.scenario import SimConfig, Simulation

JITTER_POINTS = ((21.0, "3us", 0.85), (3.0, "1us", 0.7))  # base RTT (us), jitter per hop, bar
JAIN_BAR = 0.99
INCAST_BAR = 1.05
SECOND_HALF_TRIMS = 8  # one a flow


def jitter_point(rtt_us: float, jitter: str, seed: int, size: int) -> float:
    shape = FabricShape(planes=2, t1=4, link_delay_ns=link_delay_for_rtt(rtt_us))
    s = Simulation(SimConfig(shape=shape, size=size, faults=[f"jitter={jitter}:all"], seed=seed, max_evs=128))
    r = s.run()
    return float(r["goodput_gbps"]) / (shape.link_gbps * shape.planes)


def jain(xs: list[float]) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) if any(xs) else 0.0


def two_rtts(seed: int, size: int) -> dict[str, Any]:
    """Host 1 (same leaf as host 0: 2 hops) and host 2 (another leaf: 4 hops) both send to host 0."""
    shape = FabricShape(planes=2, t0=2, t1=4, hosts_per_t0=2, link_delay_ns=link_delay_for_rtt(8.0))
    net = Network(shape, seed)
    # UET configures the target delay fabric-wide, not per flow: both flows get the far
    # one's target, and its base RTT as the last-hop threshold and floor period
    probe = Network(shape, seed).add_flow(FlowSpec("probe", 2, 0), 1)
    fabric_wide: dict[str, object] = {
        "target_delay": probe.tcfg.nscc.target_delay,
        "lasthop_delay": probe.base_rtt_ns,
    }
    near = net.add_flow(FlowSpec("near", 1, 0, max_evs=128, nscc=fabric_wide), size)
    far = net.add_flow(FlowSpec("far", 2, 0, max_evs=128, nscc=fabric_wide), size)
    net.post(near, size)
    net.post(far, size)
    net.run(200_000_000)
    # both run until the first finishes; skip the first fifth (the start is not the steady state)
    ends = [max(t for t, _ in c.goodput_samples) for c in (near, far)]
    t1 = min(ends)
    t0 = t1 // 5
    rates = [c.throughput_gbps(t0, t1) for c in (near, far)]
    cc = [c.sender.sender.congestion for c in (near, far)]
    return {
        "gbps": [round(x, 2) for x in rates],
        "jain": jain(rates),
        "base_rtt_us": [c.base_rtt_ns / 1e3 for c in (near, far)],
        "decreases": [getattr(x, "decreases", 0) for x in cc],
    }


def incast(seed: int, quick: bool) -> dict[str, Any]:
    fab = XFabric()
    case = cases(fab, quick, seed)[0]
    r = run_mrcsim(fab, case, seed)
    r["over_ideal"] = None if r["completion_us"] is None else r["completion_us"] / r["ideal_us"]
    r["trimmed_fraction"] = r["trims"] / max(r["data_packets"], 1)
    # the windows shrank: halfway through, their sum is below where they started and the
    # receiver's port no longer trims (a few trims at most in the second half)
    r["windows_shrank"] = (
        r["windows_half_pkts"] < r["windows_start_pkts"] and r["trims_second_half"] <= SECOND_HALF_TRIMS
    )
    return r


def summary(xs: list[float]) -> dict[str, float]:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_nscc", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="smaller transfers")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--only", choices=("jitter", "rtts", "incast"), action="append")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(1, args.seeds + 1))
    only = set(args.only or ("jitter", "rtts", "incast"))
    data: dict[str, Any] = {"seeds": seeds, "quick": args.quick}
    targets: dict[str, bool] = {}
    if "jitter" in only:
        size = (8 if args.quick else 32) << 20
        for rtt, jit, bar in JITTER_POINTS:
            xs = [jitter_point(rtt, jit, s, size) for s in seeds]
            key = f"rtt{rtt:g}us_jitter{jit}"
            data[key] = {"line_rate_fraction": xs, **summary(xs), "bar": bar}
            targets[f"{key}>={bar}"] = statistics.median(xs) >= bar
            print(f"   {key}: {summary(xs)}", flush=True)
    if "rtts" in only:
        size = (4 if args.quick else 16) << 20
        runs = [two_rtts(s, size) for s in seeds]
        js = [r["jain"] for r in runs]
        data["two_rtts"] = {"runs": runs, **summary(js), "bar": JAIN_BAR}
        targets[f"two_rtts_jain>={JAIN_BAR}"] = statistics.median(js) >= JAIN_BAR
        print(f"   two RTTs: jain {summary(js)} {[r['gbps'] for r in runs]}", flush=True)
    if "incast" in only:
        runs = [incast(s, args.quick) for s in seeds]
        over = [r["over_ideal"] or float("inf") for r in runs]
        trims = [float(r["trims"]) for r in runs]
        data["incast"] = {
            "runs": runs,
            "over_ideal": summary(over),
            "trims": summary(trims),
            "bar": INCAST_BAR,
        }
        targets[f"incast<={INCAST_BAR}x_ideal"] = statistics.median(over) <= INCAST_BAR
        targets["incast_windows_shrink"] = all(r["windows_shrank"] for r in runs)
        late = [float(r["trims_second_half"]) for r in runs]
        data["incast"]["trims_second_half"] = summary(late)
        print(f"   incast: over ideal {summary(over)} trims {summary(trims)}", flush=True)
        print(f"   incast: trims in the second half {summary(late)}", flush=True)
    data["targets"] = targets
    (args.out / "sim_nscc.json").write_text(json.dumps(data, indent=1))
    plot(data, args.out / "sim_nscc.png")
    for k, v in targets.items():
        print(f"   {'ok  ' if v else 'MISS'} {k}")
    return 0


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2))
    panels = [
        ([k for k in data if k.startswith("rtt")], "line-rate fraction", "jittery fabric"),
        (["two_rtts"], "Jain index", "two RTTs, one host"),
        (["incast"], "completion / ideal", "8->1 incast"),
    ]
    for ax, (keys, label, title) in zip(axes, panels, strict=True):
        for i, k in enumerate(keys):
            if k not in data:
                continue
            d = data[k]
            ys: list[float]
            if k == "two_rtts":
                ys = [r["jain"] for r in d["runs"]]
            elif k == "incast":
                ys = [r["over_ideal"] or 0.0 for r in d["runs"]]
            else:
                ys = d["line_rate_fraction"]
            ax.scatter([i] * len(ys), ys, s=12)
            ax.axhline(d["bar"], ls="--", lw=0.8, color="grey")
        ax.set_xticks(range(len(keys)), keys, fontsize=7)
        ax.set_ylabel(label)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
