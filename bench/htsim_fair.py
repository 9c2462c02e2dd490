"""Is UEC's reference simulator fair to staggered equal flows into one host? htsim_uec beside mrc-sim.

``bench.sim_fair`` judges mrc-sim by Jain's index over the time all flows run; htsim_uec prints
only each flow's finish time, so both are judged here by what finish times can show. The flows
are sized as ``bench.sim_fair`` sizes them: each has 1.5 MiB left when the last one starts if
the flows before shared the line equally, so fair sharing finishes all of them together. The
*finish proxy* is Jain's index of each flow's mean rate from the last start to its own finish
(its 1.5 MiB over that time). It is kinder than the index over the common span: a flow that
finishes last ran alone at the end, which raises its mean. The spread of the finish times is
shown beside it.

htsim runs on the cross-check's fabric (``bench.xcheck_sim.XFabric``: 100 Gb/s, 1 us links,
flows from hosts under other leaves into host 0) in each of ``bench.htsim_xcheck``'s modes;
mrc-sim runs ``bench.sim_fair``'s one-plane cells (the same start times per seed).

Run: ``python -m bench.htsim_fair [--seeds N] [--flows 2 4 8] [--modes nscc nscc+rccc]
[--cc nscc nscc+rccc]`` (``--cc``: mrc-sim's congestion controls by name, a row each; the
default's alone otherwise).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.htsim_xcheck import HTSIM_MODES, find_htsim, htsim_command
from bench.sim_fair import STAGGER_NS, fair_sent, run_case
from bench.sim_nscc import jain
from bench.xcheck_sim import XFabric

SIZE = 3 << 19  # bytes each flow has left at the last start (``bench.sim_fair``'s, one plane)
_FINISHED = re.compile(r"^Flow \S+ flowId (\d+) .* finished at ([0-9.]+)")


def starts_ns(n: int, seed: int) -> list[int]:
    """``bench.sim_fair``'s staggered one-plane start times for ``n`` flows and this seed."""
    rng = random.Random(seed * 1000 + n * 10 + 1)
    return sorted(rng.randrange(STAGGER_NS) for _ in range(n))


def htsim_matrix(fab: XFabric, starts: list[int]) -> str:
    """htsim's connection matrix: flow i from host (i + 1) x hosts-per-leaf (each under its own
    leaf; past the last leaf, the next host of leaf 1) into host 0, starting in us."""
    sizes = [SIZE + x for x in fair_sent(starts, fab.gbps)]
    per = fab.hosts_per_t0
    lines = [f"Nodes {fab.hosts}", f"Connections {len(starts)}"]
    for i, (at, size) in enumerate(zip(starts, sizes, strict=True)):
        src = per * (i + 1) if per * (i + 1) < fab.hosts else per + i
        lines.append(f"{src}->0 id {i + 1} start {at / 1e3:.3f} size {size}")
    return "\n".join(lines) + "\n"


def finish_proxy(starts_us: list[float], ends_us: list[float]) -> dict[str, float]:
    """Jain's index of the mean rates from the last start to each finish, and the finishes' spread."""
    t0 = max(starts_us)
    rates = [SIZE * 8 / (end - t0) for end in ends_us]
    return {
        "proxy_jain": round(jain(rates), 4),
        "spread_us": round(max(ends_us) - min(ends_us), 1),
        "span_us": round(max(ends_us) - t0, 1),
    }


def run_htsim(binary: Path, n: int, seed: int, mode: str) -> dict[str, float]:
    """One htsim_uec run of ``n`` staggered flows into host 0 in ``mode``."""
    fab = XFabric()
    starts = starts_ns(n, seed)
    with tempfile.TemporaryDirectory(prefix="htsim-fair-") as tmp:
        d = Path(tmp)
        (d / "fabric.topo").write_text(fab.htsim_topo())
        (d / "traffic.cm").write_text(htsim_matrix(fab, starts))
        cmd = htsim_command(binary, fab, mode, 20_000)
        out = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=600, check=True).stdout
    ends = {int(m[1]): float(m[2]) for m in map(_FINISHED.match, out.splitlines()) if m}
    return finish_proxy([s / 1e3 for s in starts], [ends[i + 1] for i in range(n)])


def run_mrcsim(n: int, seed: int, cc: str = "") -> dict[str, float]:
    """``bench.sim_fair``'s staggered one-plane cell, judged by the same proxy (and by its own
    index); ``cc``: a congestion control by name (the default's if empty)."""
    run = run_case(n, 1, True, seed, SIZE, cc=cc)
    return {**finish_proxy(run["starts_us"], run["ends_us"]), "jain": round(run["jain"], 4)}


def summarise(runs: list[dict[str, float]]) -> dict[str, float]:
    """Medians (and the worst proxy, the widest spread) over seeds."""
    out = {f"{k}_median": round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}
    out["proxy_jain_min"] = min(r["proxy_jain"] for r in runs)
    out["spread_us_max"] = max(r["spread_us"] for r in runs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.htsim_fair", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--flows", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--modes", nargs="+", default=list(HTSIM_MODES), choices=list(HTSIM_MODES))
    ap.add_argument(
        "--cc", nargs="+", default=[""], help="mrc-sim's congestion controls (default: the core's)"
    )
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    binary = find_htsim()
    seeds = range(1, args.seeds + 1)
    data: dict[str, Any] = {"seeds": list(seeds), "htsim": str(binary) if binary else None}
    for n in args.flows:
        rows = {f"mrc-sim {cc}".strip(): [run_mrcsim(n, s, cc) for s in seeds] for cc in args.cc}
        if binary is not None:
            for mode in args.modes:
                rows[f"htsim {mode}"] = [run_htsim(binary, n, s, mode) for s in seeds]
        for name, runs in rows.items():
            data[f"n{n} {name}"] = {"summary": summarise(runs), "runs": runs}
            print(f"n={n} {name}: {data[f'n{n} {name}']['summary']}", flush=True)
    (args.out / "htsim_fair.json").write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
