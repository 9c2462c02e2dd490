"""Faults that add up, paths that come back, dead reverse paths, a dead path under an incast.

Why: the transport handled one fault at a time; what breaks is a second and third fault
(the ``ev_min_active`` floor kept traffic on dead paths) and a fault that clears (the
path never came back into the rotation). Every run uses the real core and the same seeds
in every mode. Writes ``sim_faults.json`` and ``sim_faults.png`` under ``--out``.

    python -m bench.sim_faults --out results/ [--quick]
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.sim_bench import finish, record_head, save_figure, start
from mrc_fabric.ev import ev_plane
from mrc_host.sim.fabric import DATA_OVERHEAD, FabricShape
from mrc_host.sim.scenario import SimConfig, Simulation

from . import sim_incast_fault
from .sim_transport import link_delay_for_rtt

# the T0-T1 links and T1 switches hit one after the other, 200 us apart (source side,
# another plane, destination side: each fault takes paths no earlier one took)
BLACKHOLES = ("blackhole:p0-t0_0-t1_1", "blackhole:p1-t0_0-t1_2", "blackhole:p0-t0_1-t1_3")
T1_FAILURES = ("switch-down:p0-t1_1", "switch-down:p1-t1_2", "switch-down:p0-t1_3")
FIRST_US = 200
APART_US = 200
# the base RTT of the compound faults' target (as the restore and reverse-path figures); the
# short one (the default 200 ns links, 3.4 us) is kept beside it: floors of 2-3 packets, where
# each fault's +1 decides
COMPOUND_RTT_US = 21.0
SHORT_LINK_DELAY_NS = FabricShape().link_delay_ns
# most paths dead at once: three of four T1s of both planes stop together (6 of 8 paths)
MOST_DEAD_FAULTS = tuple(f"switch-down:p{p}-t1_{t}@{FIRST_US}us" for p in (0, 1) for t in (1, 2, 3))
MOST_DEAD_SIZE = 8 << 20
# a failure under congestion: 8 -> 1 incast, the receiver T0's uplink to one T1 black-holed
# once the incast is steady (its last hop trims: the news of a dead packet waits in its queue)
INCAST_FAULT = "blackhole:p0-t0_0-t1_1"
INCAST_FAULT_AT_NS = 150_000
INCAST_SIZE = 4 << 20


def most_dead_shape() -> FabricShape:
    return FabricShape(planes=2, t1=4, link_delay_ns=link_delay_for_rtt(COMPOUND_RTT_US))


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def placed_at(sim: Simulation, t_ns: int) -> tuple[int, int]:
    """(time, bytes placed) of the last goodput sample at or before ``t_ns``."""
    best = (0, 0)
    for t, placed in sim.goodput_samples:
        if t > t_ns:
            break
        best = (t, placed)
    return best


def compound(seeds: range, size: int, link_delay_ns: int | None = None) -> list[dict[str, Any]]:
    """Two and three faults 200 us apart on 2 x 4 x 100G (links of ``link_delay_ns``, by
    default a 21 us base RTT): loss per fault against its floor, goodput after the last one
    against the surviving capacity (200 Gb/s: the host links, since the T0 uplinks left still
    carry more than that)."""
    rows = []
    delay = link_delay_for_rtt(COMPOUND_RTT_US) if link_delay_ns is None else link_delay_ns
    shape = FabricShape(planes=2, t1=4, link_delay_ns=delay)
    rtt_us = 0.0
    for kind, specs in (("blackhole", BLACKHOLES), ("t1-failure", T1_FAILURES)):
        for n in (2, 3):
            faults = [f"{spec}@{FIRST_US + k * APART_US}us" for k, spec in enumerate(specs[:n])]
            per_seed = []
            for seed in seeds:
                s = Simulation(SimConfig(shape=shape, size=size, faults=faults, seed=seed))
                r = s.run()
                rtt_us = s.base_rtt_ns / 1e3
                paths = 2 * shape.t1
                bdp_pkts = s.base_rtt_ns * shape.link_gbps * shape.planes / 8 / (4096 + DATA_OVERHEAD)
                limit = 1.3 * bdp_pkts / paths + 1
                # each fault's own floor: the paths still alive when it strikes (each earlier
                # fault took one), whose in-flight share grew accordingly
                own = [1.3 * bdp_pkts / (paths - k) + 1 for k in range(n)]
                lost = [f["data_packets_lost"] for f in r["faults"]]
                last = (FIRST_US + (n - 1) * APART_US) * 1000 + 10 * s.base_rtt_ns
                t0, b0 = placed_at(s, last)
                t1, b1 = s.goodput_samples[-1] if s.goodput_samples else (0, 0)
                after = (b1 - b0) * 8 / (t1 - t0) if t1 > t0 else 0.0
                good = sum(1 for e in s.sender.evset.entries.values() if e.state == "GOOD")
                per_seed.append(
                    {
                        "seed": seed,
                        "completed": r["completed"] and r["data_ok"],
                        "lost_per_fault": lost,
                        "limit": round(limit, 2),
                        "own_limits": [round(x, 2) for x in own],
                        "within_own": all(lo <= x for lo, x in zip(lost, own, strict=True)),
                        "goodput_after_gbps": after,
                        "after_over_surviving": after / (shape.link_gbps * shape.planes),
                        "retransmissions": r["retransmissions"],
                        "floor_holds": r["counters"]["sender"]["ev_retire_floor_holds"],
                        "good_evs_at_end": good,
                    }
                )
            worst = [max(x["lost_per_fault"]) for x in per_seed]
            ratio = [x["after_over_surviving"] for x in per_seed]
            row = {
                "kind": kind,
                "faults": n,
                "specs": faults,
                "limit": per_seed[0]["limit"],
                "worst_lost_per_fault": spread([float(w) for w in worst]),
                "after_over_surviving": spread(ratio),
                "within": all(w <= x["limit"] for w, x in zip(worst, per_seed, strict=True)),
                "within_own_floor": all(x["within_own"] for x in per_seed),
                "after_ge_0.9": all(v >= 0.9 for v in ratio),
                "completed": all(x["completed"] for x in per_seed),
                "seeds": per_seed,
            }
            row["base_rtt_us"] = round(rtt_us, 2)
            rows.append(row)
            print(
                f"   {kind} x{n} at {rtt_us:.1f} us: worst lost/fault {row['worst_lost_per_fault']}"
                f" (limit {row['limit']}),"
                f" after {row['after_over_surviving']}",
                flush=True,
            )
    return rows


def most_dead(seeds: range) -> dict[str, Any]:
    """Six of the eight paths of 2 x 4 x 100G (21 us) die at once: each fault's loss against
    its floor (1.3 x BDP / 8 + 1: each T1 carried an eighth of the flight) and the job time
    against the same seed without faults. ``most_dead_toml`` replays a seed."""
    shape = most_dead_shape()
    per_seed = []
    limit = 0.0
    for seed in seeds:
        clean = Simulation(SimConfig(shape=shape, size=MOST_DEAD_SIZE, seed=seed)).run()
        s = Simulation(SimConfig(shape=shape, size=MOST_DEAD_SIZE, faults=list(MOST_DEAD_FAULTS), seed=seed))
        r = s.run()
        bdp_pkts = s.base_rtt_ns * shape.link_gbps * shape.planes / 8 / (4096 + DATA_OVERHEAD)
        limit = 1.3 * bdp_pkts / (shape.planes * shape.t1) + 1
        lost = [f["data_packets_lost"] for f in r["faults"]]
        done = r["completion_time_us"]
        per_seed.append(
            {
                "seed": seed,
                "completed": r["completed"] and r["data_ok"],
                "lost_per_fault": lost,
                "job_over_clean": done / clean["completion_time_us"] if done else None,
                "rtos": r["losses"]["rto_fired"],
                "retransmissions": r["retransmissions"],
            }
        )
        print(f"   most paths dead, seed {seed}: {per_seed[-1]}", flush=True)
    jobs = [x["job_over_clean"] or float("inf") for x in per_seed]
    worst = [float(max(x["lost_per_fault"])) for x in per_seed]
    return {
        "specs": list(MOST_DEAD_FAULTS),
        "limit": round(limit, 2),
        "worst_lost_per_fault": spread(worst),
        "job_over_clean": spread(jobs),
        "within": all(w <= limit for w in worst),
        "completed": all(x["completed"] for x in per_seed),
        "seeds": per_seed,
    }


def most_dead_toml(seed: int) -> str:
    """The most-paths-dead run of ``seed`` as a scenario file (``mrc-sim --scenario``, and
    ``mrc-sim fuzz --replay`` judges it by the fuzzer's invariants)."""
    shape = most_dead_shape()
    faults = ", ".join(f'"{f}"' for f in MOST_DEAD_FAULTS)
    return (
        f'name = "most-paths-dead"\nseed = {seed}\nmodes = ["mrc"]\nfaults = [{faults}]\n\n'
        f'[fabric]\nplanes = {shape.planes}\nt1 = {shape.t1}\nlink_delay = "{shape.link_delay_ns}ns"\n\n'
        f'[[traffic]]\npattern = "flow"\nname = "flow"\nsrc = 0\ndst = {shape.hosts - 1}\n'
        f"size = {MOST_DEAD_SIZE}\n"
    )


def incast_fault(seeds: range) -> dict[str, Any]:
    """8 -> 1 incast (2 x 4, 3 T0s, 21 us, 4 MiB each) with ``INCAST_FAULT`` at 150 us, while
    the receiver's last hop trims: the data lost in the black hole against its floor (the data
    that entered the link in the base RTT before it failed), the aim 1.3 x floor + 1, and its
    oracle (``bench.fault_oracle``: what no endpoint-driven transport keeps off the link)."""
    per_seed = []
    for seed in seeds:
        r = sim_incast_fault.run(seed, ((0, 1),), 8, INCAST_FAULT_AT_NS, INCAST_SIZE)
        per_seed.append({k: v for k, v in r.items() if k != "faults"} | r["faults"][0])
        print(f"   incast fault, seed {seed}: {per_seed[-1]}", flush=True)
    return {
        "spec": f"{INCAST_FAULT}@{INCAST_FAULT_AT_NS}ns",
        **{
            k: spread([x[k] for x in per_seed])
            for k in ("lost_over_floor", "lost_over_oracle", "lost_over_oracle_sent", "due_us")
        },
        "within_aim": sum(x["within_aim"] for x in per_seed),
        "within_1.3_oracle_sent": sum(x["lost"] <= 1.3 * x["oracle_sent"] + 1 for x in per_seed),
        "completed": all(x["completed"] for x in per_seed),
        "rtos": sum(x["rtos"] for x in per_seed),
        "seeds": per_seed,
    }


def _snapshot(ports: dict[str, Any], into: dict[str, int]) -> None:
    into.update({n: p.tx_data_bytes for n, p in ports.items()})


def restore(seeds: range, size: int) -> dict[str, Any]:
    """A T0-T1 black hole from 10 % to 30 % of the transfer (2 x 4, 21 us), then cleared:
    the uplink's bytes against its siblings', overall and from 10 RTT after it cleared."""
    shape = FabricShape(planes=2, t1=4, link_delay_ns=link_delay_for_rtt(21))
    link = "p0-t0_0>p0-t1_1"
    per_seed = []
    for seed in seeds:
        s = Simulation(
            SimConfig(shape=shape, size=size, faults=["blackhole:p0-t0_0-t1_1@10%-30%"], seed=seed)
        )
        fault_end = int(0.3 * s.ideal_ns) + 10 * s.base_rtt_ns
        ports = {p.name: p for p in s.fabric.ports.values() if p.name.startswith("p0-t0_0>")}
        snap: dict[str, int] = {}
        s.loop.at(fault_end, _snapshot, ports, snap)
        r = s.run()
        up = r["t1_uplink_bytes"]
        sibs = [v for k, v in up.items() if k.startswith("p0-") and k != link]
        after = {k: up[k] - snap.get(k, 0) for k in up if k.startswith("p0-")}
        sib_after = [v for k, v in after.items() if k != link]
        restored = [
            e["t_us"]
            for e in r["ev_timeline"]
            if e["side"] == "sender"
            and e["new"] == "GOOD"
            and e["old"] == "ASSUMED_BAD"
            and "probes answered" in e["reason"]
        ]
        per_seed.append(
            {
                "seed": seed,
                "completed": r["completed"] and r["data_ok"],
                "overall_over_sibling": up[link] / statistics.fmean(sibs),
                "after_over_fair": after[link] / statistics.fmean(sib_after),
                "restored_after_clear_us": (min(restored) - 0.3 * s.ideal_ns / 1e3) if restored else None,
                "base_rtt_us": r["base_rtt_us"],
            }
        )
        print(f"   restore seed {seed}: {per_seed[-1]}", flush=True)
    overall = [x["overall_over_sibling"] for x in per_seed]
    back = [x["after_over_fair"] for x in per_seed]
    return {
        "overall_over_sibling": spread(overall),
        "after_over_fair": spread(back),
        "overall_ge_0.7": all(v >= 0.7 for v in overall),
        "after_ge_0.9": all(v >= 0.9 for v in back),
        "seeds": per_seed,
    }


def reverse_path(seeds: range, size: int) -> dict[str, Any]:
    """The receiver's reverse EVs on one path die (a black hole on the destination T0's
    uplink to one T1, which carries SACKs back): how long until the receiver retires them,
    and how many SACKs/NACKs (and control packets in all) the black hole swallowed."""
    shape = FabricShape(planes=2, t1=4, link_delay_ns=link_delay_for_rtt(21))
    per_seed = []
    for seed in seeds:
        s = Simulation(SimConfig(shape=shape, size=size, faults=["blackhole:p0-t0_1-t1_1@30%"], seed=seed))
        r = s.run()
        fault = r["faults"][0]
        start = fault["start_us"]
        t = [
            e["t_us"]
            for e in r["ev_timeline"]
            if e["side"] == "receiver" and e["new"] == "ASSUMED_BAD" and ev_plane(int(e["ev"], 16)) == 0
        ]
        found = (min(t) - start) / r["base_rtt_us"] if t else None
        per_seed.append(
            {
                "seed": seed,
                "found_after_rtt": found,
                "acks_lost": fault["acks_lost"],
                "control_packets_lost": fault["control_packets_lost"],
                "completed": r["completed"],
            }
        )
        print(f"   reverse seed {seed}: {per_seed[-1]}", flush=True)
    found_all = [x["found_after_rtt"] for x in per_seed if x["found_after_rtt"] is not None]
    return {
        "found_after_rtt": spread(found_all) if found_all else None,
        "acks_lost": spread([x["acks_lost"] for x in per_seed]),
        "control_packets_lost": spread([x["control_packets_lost"] for x in per_seed]),
        "within_3_rtt": len(found_all) == len(per_seed) and all(v <= 3 for v in found_all),
        "seeds": per_seed,
    }


def _per_seed_panel(
    ax: Any,
    rows: list[dict[str, Any]],
    value: Callable[[dict[str, Any]], float],
    bound: float,
    ylabel: str,
    title: str,
) -> None:
    """One column of dots per compound-fault row (one dot a seed) against the dashed ``bound``."""
    for k, r in enumerate(rows):
        ys = [value(x) for x in r["seeds"]]
        ax.plot([k] * len(ys), ys, "o", alpha=0.6)
    ax.axhline(bound, color="r", linestyle="--", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r['kind']} x{r['faults']}\n{r['base_rtt_us']:.0f} us" for r in rows], fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(22, 4.2))
    rows = data["compound"] + data["compound_short_rtt"]
    _per_seed_panel(
        axes[0],
        rows,
        lambda x: max(lo / own for lo, own in zip(x["lost_per_fault"], x["own_limits"], strict=True)),
        1.0,
        "worst lost / (1.3 BDP/paths alive + 1)",
        "faults 200 us apart: loss per fault",
    )
    _per_seed_panel(
        axes[1],
        rows,
        lambda x: x["after_over_surviving"],
        0.9,
        "goodput after / surviving capacity",
        "goodput after the last fault",
    )
    ax = axes[2]
    rs = data["restore"]["seeds"]
    ax.plot([x["seed"] for x in rs], [x["overall_over_sibling"] for x in rs], "o-", label="overall / sibling")
    ax.plot([x["seed"] for x in rs], [x["after_over_fair"] for x in rs], "s-", label="after return / fair")
    ax.axhline(0.7, color="r", linestyle=":", linewidth=0.8)
    ax.axhline(0.9, color="r", linestyle="--", linewidth=0.8)
    ax.set_xlabel("seed")
    ax.set_title("black hole 10-30 % then cleared (2x4, 21 us)", fontsize=9)
    ax.legend(fontsize=7)
    ax = axes[3]
    rv = data["reverse"]["seeds"]
    ax.plot([x["seed"] for x in rv], [x["found_after_rtt"] for x in rv], "o", label="RTT to detection")
    ax.axhline(3, color="r", linestyle="--", linewidth=0.8)
    ax.set_xlabel("seed")
    ax.set_ylabel("RTT after the black hole")
    ax2 = ax.twinx()
    ax2.plot(
        [x["seed"] for x in rv], [x["acks_lost"] for x in rv], "s", color="gray", label="SACKs/NACKs lost"
    )
    ax2.set_ylabel("SACKs/NACKs lost", fontsize=8)
    ax2.set_ylim(bottom=0)
    ax.set_ylim(bottom=0)
    ax.set_title("dead reverse path (2x4, 21 us)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    ax2.legend(fontsize=7, loc="upper right")
    ax = axes[4]
    inc = data["incast_fault"]["seeds"]
    ax.plot([x["seed"] for x in inc], [x["lost_over_floor"] for x in inc], "o", label="lost / floor")
    ax.plot(
        [x["seed"] for x in inc], [x["lost_over_oracle_sent"] for x in inc], "s", label="lost / oracle (sent)"
    )
    ax.axhline(1.3, color="r", linestyle="--", linewidth=0.8)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seed")
    ax.set_ylabel("lost / floor, lost / oracle")
    ax.legend(fontsize=7)
    ax.set_title("8->1 incast, receiver T0 uplink dead at 150 us (21 us)", fontsize=9)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> int:
    args = start("python -m bench.sim_faults", __doc__, "fewer seeds, smaller transfers", argv)
    started = time.monotonic()
    seeds = range(1, 4) if args.quick else range(1, 11)
    data: dict[str, Any] = record_head(args.quick)
    # (32 MiB even when quick: at 21 us, 16 MiB ends before 10 RTT after the third fault)
    data["compound"] = compound(seeds, 32 << 20)
    data["compound_short_rtt"] = compound(seeds, (16 if args.quick else 32) << 20, SHORT_LINK_DELAY_NS)
    data["restore"] = restore(seeds, 64 << 20)
    data["reverse"] = reverse_path(seeds, (16 if args.quick else 32) << 20)
    data["incast_fault"] = incast = incast_fault(seeds)
    data["most_dead"] = most_dead(range(10))  # (8 MiB: cheap, and seeds 0 and 8 were the worst)
    (args.out / "most_paths_dead.toml").write_text(most_dead_toml(0))
    data["seconds"] = round(time.monotonic() - started, 1)
    data["targets"] = {
        # each fault against its own floor: after k of the 8 paths died, the next one dead
        # carried 1/(8 - k) of the flight, not 1/8 (``within``, BDP/8 for every fault, stays
        # in the rows as context)
        "compound_loss_per_fault_within_own_floor": all(r["within_own_floor"] for r in data["compound"]),
        "compound_short_rtt_within_own_floor": all(r["within_own_floor"] for r in data["compound_short_rtt"]),
        "compound_goodput_after_ge_0.9": all(r["after_ge_0.9"] for r in data["compound"]),
        "compound_completed": all(r["completed"] for r in data["compound"]),
        "restore_overall_ge_0.7_of_sibling": data["restore"]["overall_ge_0.7"],
        "restore_after_ge_0.9_of_fair": data["restore"]["after_ge_0.9"],
        "reverse_found_within_3_rtt": data["reverse"]["within_3_rtt"],
        "most_dead_loss_per_fault_within_floor": data["most_dead"]["within"],
        "most_dead_job_le_1.3_of_clean": data["most_dead"]["job_over_clean"]["max"] <= 1.3,
        # (the aim, 1.3 x floor + 1, is not a target yet: ``within_aim`` counts the seeds that
        # meet it -- none; the transport doc says why)
        "incast_fault_completed_without_rto": incast["completed"] and not incast["rtos"],
    }
    return finish(args.out, "sim_faults", data, plot)


if __name__ == "__main__":
    raise SystemExit(main())
