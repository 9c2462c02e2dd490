"""A fault-free all-to-all in mrc-sim beside UEC's htsim_uec, over seeds: timeouts, trims, resends.

Why: an all-to-all starts every host's connections at once, and each host's NIC port is shared by
all of them. With nothing failing it should fire no retransmission timeout and resend no more
than the reference does. Both simulators get the same fabric and traffic (``htsim_xcheck``'s
``XFabric``: 100 Gb/s, queues and ECN thresholds in packets, trimming at the queue's bound; here
one plane, 8 T0 x 4 hosts under 4 T1, 200 ns links, so a queue trims at 8 packets; a write from
every host to every other, 992 connections, each host's peers in turn from the next one on, as
collective libraries post them). With 1 us links (a 16-packet queue) neither simulator trimmed
at all, and the row tested nothing. htsim_uec builds one plane only (its ``-planes`` option
asserts in main_uec), so the production shape -- 8 planes x 16 T1, 16 hosts, 1 us links -- runs
in mrc-sim alone, for the timeout count.

Per seed (mrc-sim's seed; htsim's ``-seed``): completion against each simulator's own on-wire
ideal, trims, resends, timeouts, and in mrc-sim the losses it guessed that proved spurious. The
table gives the median and range over seeds; the verdict: no timeout on any seed, and the median
trims and resends at most 1.5x htsim's (counting 0 as 1). Fewer than htsim's is no failure:
htsim's reference mode paces senders by receiver credits and runs the job at 2.2-2.5x its ideal
(mrc-sim: about 1.3x), so it builds smaller queues by being slower.

    python -m bench.htsim_a2a --out results/ [--seeds 10] [--size-kib 256] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.htsim_xcheck import (
    REFERENCE,
    TRIM_BAR,
    Case,
    XFabric,
    find_htsim,
    htsim_command,
    htsim_matrix,
    ideal_us,
    measured,
    parse_htsim,
)
from bench.sim_bench import save_figure
from mrc_host.sim.fabric import DATA_OVERHEAD, FabricShape
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.traffic import Job, all_to_all_pairs, point_to_point

FABRIC = XFabric(t0=8, t1=4, hosts_per_t0=4, link_ns=200)
# the production shape where the timeouts were found (mrc-sim only: 8 planes), 1 us links
PLANES8 = dict(planes=8, t0=2, t1=16, hosts_per_t0=8)
PLANES8_LINKS = XFabric(t0=4, t1=4, hosts_per_t0=4)
METRICS = ("rto", "trims", "resends", "spurious", "over_ideal")
LOSS_CAUSES = ("gap", "rto", "tail", "plane", "path")
Rows = list[dict[str, Any]]


def planes8_shape() -> FabricShape:
    """The 8-plane shape, with the links and thresholds of ``PLANES8_LINKS``."""
    p = PLANES8
    return replace(
        PLANES8_LINKS.shape(), planes=p["planes"], t0=p["t0"], t1=p["t1"], hosts_per_t0=p["hosts_per_t0"]
    )


def everyone(hosts: int) -> tuple[tuple[int, int], ...]:
    return tuple(all_to_all_pairs(list(range(hosts))))


def run_mrcsim(shape: FabricShape, size: int, seed: int) -> dict[str, Any]:
    """One all-to-all in mrc-sim (virtual payloads): its counters summed over connections."""
    net = Network(shape, seed, "virtual")
    pairs = list(everyone(shape.hosts))
    spec = FlowSpec("a2a", 0, 1, mtu=FABRIC.payload)
    job = point_to_point(net, Job("a2a", "all-to-all", 0), spec, pairs, size)
    net.run(10_000_000_000)
    counters = [c.sender.counters for c in job.connections]
    case = Case("all-to-all", tuple(pairs), size)
    ideal = ideal_us(case, FABRIC.payload + DATA_OVERHEAD, FABRIC.payload, shape.link_gbps * shape.planes)
    done = job.completion_ns
    return {
        "completed": done is not None and all(c.data_ok for c in job.connections),
        "completion_us": None if done is None else done / 1e3,
        "ideal_us": ideal,
        "over_ideal": None if done is None else done / 1e3 / ideal,
        "rto": sum(c.rto_fired for c in counters),
        "trims": sum(p.trimmed for p in net.fabric.ports.values()),
        "drops": sum(p.drops_congestion for p in net.fabric.ports.values()),
        "resends": sum(c.retransmissions for c in counters),
        "tail_twins": sum(c.tail_twins for c in counters),
        "spurious": sum(c.spurious_losses for c in counters),
        "losses": {k: sum(getattr(c, f"losses_{k}") for c in counters) for k in LOSS_CAUSES},
        "data_packets": sum(c.data_packets_sent for c in counters),
    }


def run_htsim(binary: Path, size: int, seed: int) -> dict[str, Any]:
    """The same all-to-all in htsim_uec (reference mode), seeded."""
    case = Case("all-to-all", everyone(FABRIC.hosts), size)
    end_us = int(20 * ideal_us(case, FABRIC.htsim_packet, FABRIC.payload, FABRIC.gbps)) + 1000
    with tempfile.TemporaryDirectory(prefix="htsim-a2a-") as tmp:
        d = Path(tmp)
        (d / "fabric.topo").write_text(FABRIC.htsim_topo())
        (d / "traffic.cm").write_text(htsim_matrix(FABRIC, case))
        cmd = [*htsim_command(binary, FABRIC, REFERENCE, end_us), "-seed", str(seed)]
        code, stdout, stderr, _ = measured(cmd, d, timeout=1800)
        if code != 0:
            raise RuntimeError(f"htsim_uec exited {code}: {stderr.strip()[-300:]}")
        out = parse_htsim(stdout, len(case.pairs))
    out["ideal_us"] = ideal_us(case, FABRIC.htsim_packet, FABRIC.payload, FABRIC.gbps)
    c = out["completion_us"]
    out["over_ideal"] = None if c is None else c / out["ideal_us"]
    # htsim resends trimmed packets and timed-out ones; it counts no timeouts or spurious resends
    out.update(rto=None, resends=out["retransmissions"], spurious=None)
    return out


def spread(rows: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    xs = [r[key] for r in rows if r.get(key) is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def at_most(a: float, b: float) -> bool:
    """``a`` at most ``TRIM_BAR`` x ``b``, counting 0 as 1 (fewer is no failure: module doc)."""
    return max(a, 1) <= TRIM_BAR * max(b, 1)


def verdict(mrc: Rows, ht: Rows, planes8: Rows) -> dict[str, Any]:
    out: dict[str, Any] = {
        "no_rto_any_seed": all(r["rto"] == 0 for r in mrc + planes8),
        "all_completed": all(r["completed"] for r in mrc + planes8),
    }
    if ht:
        for k in ("trims", "resends"):
            m, h = spread(mrc, k), spread(ht, k)
            assert m is not None and h is not None
            out[f"{k}_at_most_{TRIM_BAR:g}x_htsim"] = at_most(m["median"], h["median"])
    return out


def cell(s: dict[str, float] | None, fmt: str = "g") -> str:
    if s is None:
        return "—"
    med, lo, hi = (format(s[k], fmt) for k in ("median", "min", "max"))
    return med if lo == hi else f"{med} ({lo} to {hi})"


def table(runs: dict[str, list[dict[str, Any]]]) -> str:
    head = "| run | seeds | x own ideal | timeouts | trims | resends | spurious |\n"
    head += "|---|---:|---:|---:|---:|---:|---:|\n"
    lines = []
    for name, rows in runs.items():
        if not rows:
            continue
        cells = [name, str(len(rows)), cell(spread(rows, "over_ideal"), ".3f")]
        cells += [cell(spread(rows, k)) for k in ("rto", "trims", "resends", "spurious")]
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def plot(runs: dict[str, list[dict[str, Any]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, rows in runs.items() if rows]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, key, title in zip(
        axes, ("over_ideal", "trims", "resends"), ("completion / own ideal", "trims", "resends"), strict=True
    ):
        for i, name in enumerate(names):
            s = spread(runs[name], key)
            if s is None:
                continue
            ax.bar(i, s["median"], yerr=[[s["median"] - s["min"]], [s["max"] - s["median"]]], capsize=4)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([n.replace(" ", "\n", 1) for n in names], fontsize=7)
        ax.set_title(f"{title} (median, range over seeds)", fontsize=9)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.htsim_a2a", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N")
    ap.add_argument("--size-kib", type=int, default=256, help="each write's size")
    ap.add_argument("--quick", action="store_true", help="64 KiB writes, 3 seeds")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    size = (64 << 10) if args.quick else (args.size_kib << 10)
    seeds = list(range(1, (3 if args.quick else args.seeds) + 1))
    binary = find_htsim()
    runs: dict[str, list[dict[str, Any]]] = {"mrc-sim": [], f"htsim {REFERENCE}": [], "mrc-sim 8 planes": []}
    for seed in seeds:
        runs["mrc-sim"].append(run_mrcsim(FABRIC.shape(), size, seed))
        if binary is not None:
            runs[f"htsim {REFERENCE}"].append(run_htsim(binary, size, seed))
        runs["mrc-sim 8 planes"].append(run_mrcsim(planes8_shape(), size, seed))
        last = {n: r[-1] for n, r in runs.items() if r}
        done = ", ".join(f"{n}: {r['trims']} trims, {r['resends']} resends" for n, r in last.items())
        print(f"   seed {seed}: {done}", flush=True)
    data: dict[str, Any] = {
        "fabric": asdict(FABRIC),
        "planes8": PLANES8,
        "size": size,
        "seeds": seeds,
        "htsim": None if binary is None else str(binary),
        "reference": REFERENCE,
        "runs": runs,
        "summary": {n: {k: spread(rows, k) for k in METRICS} for n, rows in runs.items() if rows},
    }
    data["targets"] = verdict(runs["mrc-sim"], runs[f"htsim {REFERENCE}"], runs["mrc-sim 8 planes"])
    if binary is None:
        data["htsim_status"] = "skipped: htsim_uec not found ($HTSIM_UEC or ../shared/htsim/htsim_uec)"
    (args.out / "htsim_a2a.json").write_text(json.dumps(data, indent=1))
    (args.out / "htsim_a2a.md").write_text(table(runs))
    plot(runs, args.out / "htsim_a2a.png")
    print(table(runs))
    for k, v in data["targets"].items():
        print(f"   {'ok  ' if v else 'MISS'} {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
