"""``make bench`` stage ``sim-gray``: gray failures over seeds, each figure against its target.

Why one stage: the issue's gray failures (a slow plane, a flapping link, knowledge that goes
stale, loss under a queue) are measured by four benches that each run alone
(``bench.sim_slow_plane``, ``bench.sim_flap``, ``bench.sim_knowledge``,
``bench.sim_incast_fault``); this runs them over seeds 1-10 (``--quick``: 1-3, a shorter
flap) and writes ``sim_gray.json``, ``sim_gray.md`` (median and range per row) and
``sim_gray.png``. Targets (design.md section 8):

- slow plane: goodput >= 0.9 x the planes' capacity, each plane's byte share within 0.05 of
  its capacity share, never slower than the slow planes dead;
- flap: each down phase <= 1.3 x floor + 1 per connection, JCT <= 1.1 x, no plane retired;
- knowledge: a healed link at 0.8-1.25 of its siblings' share within 6 RTT; no DATA lost
  on a dead path once the connection knew it;
- oracle: a black hole during an incast <= 1.25 x ``oracle_sent`` + 2 (8 -> 1, 15 -> 1);
  16 -> 1 and a fault 100 us in <= 2 x.

    python -m bench.sim_gray --out DIR [--quick] [--seeds 1-10] [--against OLD/sim_gray.json]
        [--transport key=value ...]

``--transport`` sets TransportConfig fields for every row (``cc_algorithm="nscc+rccc"``: the
gray failures under receiver credits; with ``--against`` a record of the default, each figure
beside NSCC's seed by seed).

Each row keeps its figures per seed (``per_seed``, the flap's ``rows``); ``--against`` sets
them beside an earlier record's, seed by seed (``gray_paired.py``), into
``sim_gray_paired.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from bench import gray_paired, sim_flap, sim_incast_fault, sim_knowledge, sim_slow_plane
from bench.sim_bench import finish, record_head, save_figure
from bench.sim_incast_fault import spread
from mrc_host.core.config import EXPERIMENTAL_KEYS, TransportConfig
from mrc_host.sim.scenario_file import key_values

# (name, dead (plane, T1)s, senders, fault time in ns, factor, slack)
ORACLE_SHAPES: tuple[tuple[str, tuple[tuple[int, int], ...], int, int, float, float], ...] = (
    ("8to1", ((0, 1),), 8, 150_000, 1.25, 2.0),
    ("15to1", ((0, 1),), 15, 150_000, 1.25, 2.0),
    ("16to1", ((0, 1),), 16, 150_000, 2.0, 0.0),
    ("8to1_at_100us", ((0, 1),), 8, 100_000, 2.0, 0.0),
)


def slow_planes(seeds: range, transport: dict[str, object]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, rates, where in sim_slow_plane.CASES:
        rows = [sim_slow_plane.case(name, rates, where, s, transport) for s in seeds]
        out[name] = sim_slow_plane.summary(rows)
        print(f"   slow {name}: {json.dumps(out[name])}", flush=True)
        out[name]["per_seed"] = [
            {
                "seed": s,
                "of_capacity": r["slow"]["of_capacity"],
                "share_error": r["slow"]["share_error"],
                "vs_dead": r["vs_dead"],
            }
            for s, r in zip(seeds, rows, strict=True)
        ]
    return out


def flap(seeds: range, size: int, transport: dict[str, object]) -> dict[str, Any]:
    rows = [sim_flap.seed_row(s, 500_000, size, "p0-t0_0-t1_1", transport) for s in seeds]
    out = {
        "jct_ratio": spread([r["jct_ratio"] or 0.0 for r in rows]),
        "worst_phase_over_limit": spread([r["worst_phase"] for r in rows]),
        "up_share": spread([r["up_share"] or 0.0 for r in rows]),
        "plane_failed_evs": sum(r["plane_failed_evs"] for r in rows),
        "rtos": sum(r["rtos"] for r in rows),
        "seeds_holding": sum(r["holds"] for r in rows),
        "seeds": len(rows),
        "rows": rows,
    }
    print(f"   flap: {json.dumps({k: v for k, v in out.items() if k != 'rows'})}", flush=True)
    return out


def knowledge(seeds: range, transport: dict[str, object]) -> dict[str, Any]:
    heal = [sim_knowledge.heal(s, 300, transport) for s in seeds]
    skip = [sim_knowledge.skip(s, transport) for s in seeds]
    out = {
        "heal_back_rtts": spread([r["back_rtts"] if r["back_rtts"] is not None else 99 for r in heal]),
        "heal_holding": sum(r["holds"] for r in heal),
        "lost_known": spread([r["lost_known"] for r in skip]),
        "skip_holding": sum(r["holds"] for r in skip),
        "seeds": len(heal),
    }
    print(f"   knowledge: {json.dumps(out)}", flush=True)
    out["per_seed"] = [
        {"seed": s, "heal_back_rtts": h["back_rtts"], "lost_known": k["lost_known"]}
        for s, h, k in zip(seeds, heal, skip, strict=True)
    ]
    return out


def oracle(seeds: range, transport: dict[str, object]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, t1s, senders, at, factor, slack in ORACLE_SHAPES:
        rows = [sim_incast_fault.run(s, t1s, senders, at, transport=transport) for s in seeds]
        faults = [f for r in rows for f in r["faults"]]
        out[name] = {
            "lost": spread([f["lost"] for f in faults]),
            "oracle_sent": spread([f["oracle_sent"] for f in faults]),
            "lost_over_oracle_sent": spread([f["lost_over_oracle_sent"] for f in faults]),
            "within": sum(f["lost"] <= factor * f["oracle_sent"] + slack for f in faults),
            "faults": len(faults),
            "limit": f"{factor} x oracle_sent + {slack:g}",
            "rtos": sum(r["rtos"] for r in rows),
        }
        print(f"   oracle {name}: {json.dumps(out[name])}", flush=True)
        out[name]["per_seed"] = [
            {"seed": s, "lost": f["lost"], "oracle_sent": f["oracle_sent"]}
            for s, r in zip(seeds, rows, strict=True)
            for f in r["faults"]
        ]
    return out


def targets(d: dict[str, Any]) -> dict[str, bool]:
    slow = d["slow_plane"]
    t = {
        "slow_plane_every_case_every_seed": all(v["seeds_holding"] == v["seeds"] for v in slow.values()),
        "flap_every_seed": d["flap"]["seeds_holding"] == d["flap"]["seeds"],
        "flap_no_plane_retired": d["flap"]["plane_failed_evs"] == 0,
        "heal_back_within_6_rtt_every_seed": d["knowledge"]["heal_holding"] == d["knowledge"]["seeds"],
        "nothing_lost_once_known_every_seed": d["knowledge"]["skip_holding"] == d["knowledge"]["seeds"],
    }
    for name, row in d["oracle"].items():
        t[f"oracle_{name}_every_seed"] = row["within"] == row["faults"]
    return t


def table(d: dict[str, Any]) -> str:
    """The figures as a markdown table: median [min, max] over the seeds."""

    def mr(s: dict[str, float], digits: int = 3) -> str:
        return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"

    lines = ["| row | figure | median [range] | seeds holding |", "|---|---|---|---|"]
    for name, v in d["slow_plane"].items():
        lines.append(
            f"| slow plane {name} | goodput ÷ capacity; share error; time ÷ dead | {mr(v['of_capacity'])}; "
            f"{mr(v['share_error'])}; {mr(v['vs_dead'])} | {v['seeds_holding']}/{v['seeds']} |"
        )
    f = d["flap"]
    lines.append(
        f"| flap (16-host permutation) | JCT ÷ no flap; worst phase ÷ limit; up share | "
        f"{mr(f['jct_ratio'])}; {mr(f['worst_phase_over_limit'])}; {mr(f['up_share'])} "
        f"(plane-failed EVs {f['plane_failed_evs']}) | {f['seeds_holding']}/{f['seeds']} |"
    )
    k = d["knowledge"]
    lines.append(
        f"| heal in an 8→1 incast | RTTs to 0.8-1.25 of siblings | {mr(k['heal_back_rtts'], 0)} | "
        f"{k['heal_holding']}/{k['seeds']} |"
    )
    lines.append(
        f"| 15→1, dead link | DATA lost once known | {mr(k['lost_known'], 0)} | "
        f"{k['skip_holding']}/{k['seeds']} |"
    )
    for name, o in d["oracle"].items():
        lines.append(
            f"| oracle {name} | lost ÷ oracle_sent (lost; oracle_sent) | {mr(o['lost_over_oracle_sent'])} "
            f"({mr(o['lost'], 0)}; {mr(o['oracle_sent'], 0)}) | "
            f"{o['within']}/{o['faults']} within {o['limit']} |"
        )
    return "\n".join(lines) + "\n"


def plot(d: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    names = list(d["slow_plane"])
    med = [d["slow_plane"][n]["of_capacity"]["median"] for n in names]
    axes[0].barh(names, med)
    axes[0].axvline(0.9, color="k", ls="--", lw=1)
    axes[0].set_title("slow plane: goodput ÷ capacity", fontsize=9)
    axes[0].tick_params(labelsize=7)
    jct = [r["jct_ratio"] or 0.0 for r in d["flap"]["rows"]]
    axes[1].plot(range(1, len(jct) + 1), jct, "o")
    axes[1].axhline(1.1, color="k", ls="--", lw=1)
    axes[1].set_title("flapping link: JCT ÷ no flap, per seed", fontsize=9)
    onames = list(d["oracle"])
    axes[2].bar(onames, [d["oracle"][n]["lost_over_oracle_sent"]["median"] for n in onames])
    axes[2].axhline(1.25, color="k", ls="--", lw=1)
    axes[2].axhline(2.0, color="grey", ls=":", lw=1)
    axes[2].set_title("incast black hole: lost ÷ oracle_sent (median)", fontsize=9)
    axes[2].tick_params(labelsize=7)
    save_figure(fig, path)


def transport_overrides(ap: argparse.ArgumentParser, items: list[str]) -> dict[str, object]:
    """``--transport`` as TransportConfig overrides, each checked before minutes of simulation:
    a field the configuration lacks (nor an experimental switch's name, routed to its section
    as a scenario's table routes it), or a value that is not JSON, is an exit-2 error naming it."""
    known = {f.name for f in dataclasses.fields(TransportConfig)} | EXPERIMENTAL_KEYS
    out: dict[str, object] = {}
    for item in items:
        key, eq, _ = item.partition("=")
        if not eq or key not in known:
            ap.error(f"--transport {item!r}: not key=value with a TransportConfig field as key")
        try:
            out.update(key_values([item]))  # (the parser the benches and mrc-sim fuzz share)
        except ValueError:
            ap.error(
                f"--transport {item!r}: the value is not JSON (a string goes in quotes: {key}='\"...\"')"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_gray", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="seeds 1-3, a 32 MiB permutation")
    ap.add_argument("--seeds", help="first-last (default 1-10, --quick 1-3)")
    ap.add_argument("--against", type=Path, help="an earlier sim_gray.json: compared seed by seed")
    ap.add_argument(
        "--transport", action="append", default=[], help="TransportConfig key=value (JSON), for every row"
    )
    args = ap.parse_args(argv)
    transport = transport_overrides(ap, args.transport)
    try:  # (read first: a bad file is said before minutes of simulation, not after)
        against = gray_paired.load_record(args.against) if args.against else None
    except gray_paired.RecordError as e:
        ap.error(f"--against {e}")
    args.out.mkdir(parents=True, exist_ok=True)
    lo, _, hi = (args.seeds or ("1-3" if args.quick else "1-10")).partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    data: dict[str, Any] = {
        **record_head(args.quick),
        "seeds": [seeds.start, seeds.stop - 1],
        "transport": transport,
    }
    data["slow_plane"] = slow_planes(seeds, transport)
    data["flap"] = flap(seeds, (32 if args.quick else 64) << 20, transport)
    data["knowledge"] = knowledge(seeds, transport)
    data["oracle"] = oracle(seeds, transport)
    data["targets"] = targets(data)
    (args.out / "sim_gray.md").write_text(table(data))
    print(table(data))
    if against is not None:
        paired = gray_paired.table(gray_paired.compare(against, data))
        (args.out / "sim_gray_paired.md").write_text(paired)
        print(f"against {args.against}, seed by seed:\n{paired}")
    return finish(args.out, "sim_gray", data, plot)


if __name__ == "__main__":
    raise SystemExit(main())
