"""One link flapping under a permutation: does each down phase cost only its floor?

Why: production links flap (an optic at the edge of its budget goes down and up every few
hundred microseconds for minutes). MRC's answer must hold each time, not once: each down
phase should cost each connection crossing the link at most 1.3 x its floor + 1 packets,
the job should take at most 1.1 x as long as without the flap, the link should carry its
share while up, and one link must not take its whole plane out (design.md section 8).

The shape: 16 hosts (2 planes x 4 T0 x 4 hosts, 4 T1: 32 T0-T1 links), 21 us base RTT, a
random permutation (seeded) of ``size`` per host; one T0-T1 link goes down for ``period``
and up for ``period`` from 100 us on, to the job's end. Per seed: the job time against the
same run without the flap, per down phase the loss against the floor (``fuzz_observe``'s
floor, per connection: its packets that entered the link in its base RTT before), the
share of bytes the link carried in its up phases against its siblings', and the "plane
failed" verdicts. Beside each seed, the same job with the link down from the flap's start to
the end: where one T0's hosts all send across the fabric at line rate, the link's absence
alone costs 1.1-1.2 x, so a 1:1 flap cannot cost less than about half that excess, and the
``over_half_down`` figure (the job time less 1 + half that excess) is what finding the link
dead and back costs (``--no-reference`` skips that third run).

    python -m bench.sim_flap [--seeds 1-10] [--period 500us] [--size 16MiB] [--link p0-t0_0-t1_1]
        [--no-reference] [--json FILE] [--transport key=value ...]
"""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

from mrc_host.sim.cli import parse_size
from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.faults import parse_fault, parse_time
from mrc_host.sim.fuzz_observe import Observer
from mrc_host.sim.invariants import floor_limit
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.scenario_file import key_values
from mrc_host.sim.traffic import Job, permutation_pairs, point_to_point

from .sim_incast_fault import seed_args, seed_range, spread, write_json
from .sim_transport import link_delay_for_rtt

RTT_US = 21.0
JCT_MAX = 1.1
START_US = 100


def shape() -> FabricShape:
    return FabricShape(planes=2, t0=4, t1=4, hosts_per_t0=4, link_delay_ns=link_delay_for_rtt(RTT_US))


def run(
    seed: int,
    period_ns: int,
    size: int,
    link: str,
    fault: str | None = "flap",
    transport: dict[str, object] | None = None,
) -> dict[str, Any]:
    """One run of the permutation: ``fault`` "flap", the link flapping; "down", down from the
    same start to the end; None, no fault."""
    s = shape()
    net = Network(s, seed, payload="virtual")
    pairs = permutation_pairs(list(range(s.hosts)), random.Random(seed))
    job = point_to_point(
        net, Job("perm", "permutation", 0), FlowSpec("x", 0, 0, transport=dict(transport or {})), pairs, size
    )
    if fault is not None:
        kind = f"flap={period_ns}ns" if fault == "flap" else fault
        net.add_fault(parse_fault(f"{kind}:{link}@{START_US}us", 0))
    obs = Observer(net, [job], sample_rtt=False)
    obs.arm()
    plane_failed = [0]
    net.run(500_000_000)
    conns = job.connections
    out: dict[str, Any] = {
        "completed": job.completion_ns is not None and all(c.data_ok for c in conns),
        "jct_us": (job.completion_ns or 0) / 1e3,
        "rtos": sum(c.sender.counters.rto_fired for c in conns),
        "resent": sum(c.sender.counters.retransmissions for c in conns),
        "spurious": sum(c.sender.counters.spurious_losses for c in conns),
    }
    for c in conns:
        plane_failed[0] += sum(
            1 for e in c.ev_timeline if e["side"] == "sender" and e["reason"] == "plane failed"
        )
    out["plane_failed_evs"] = plane_failed[0]
    if fault != "flap":
        return out
    phases = []
    for f in obs.observations()["failures"]:
        if not f["reached"]:
            continue
        worst = max((x["lost"] / floor_limit(x["floor"]) for x in f["flows"]), default=0.0)
        phases.append(
            {
                "phase": f["phase"],
                "lost": f["lost"],
                "floor": round(f["floor"], 2),
                "worst_over_limit": round(worst, 3),
                "within": all(x["lost"] <= floor_limit(x["floor"]) for x in f["flows"]),
            }
        )
    out["phases"] = phases
    out["up_share"] = up_share(net, link, period_ns)
    return out


def up_share(net: Network, link: str, period_ns: int) -> float | None:
    """Bytes the link's uplink port carried over its siblings' mean (the other T1 uplinks of its
    T0): the link carries its share in its up phases when this is about the fraction of time
    it was up (a half, flapping 1:1)."""
    plane, t0, t1 = link.split("-")
    ports = net.fabric.ports
    mine = ports[(f"{plane}-{t0}", f"{plane}-{t1}")].tx_data_bytes
    sib = [
        p.tx_data_bytes
        for (a, b), p in ports.items()
        if a == f"{plane}-{t0}" and b.startswith(f"{plane}-t1_") and b != f"{plane}-{t1}"
    ]
    mean = sum(sib) / len(sib) if sib else 0
    return round(mine / mean, 4) if mean else None


def seed_row(
    seed: int, period_ns: int, size: int, link: str, transport: dict[str, object], reference: bool = False
) -> dict[str, Any]:
    """One seed's figures; with ``reference``, also the job time with the link down from the
    flap's start to the end (``down_jct_ratio``). Half of its excess over 1 is about the least a
    1:1 flap can cost: what the link's absence costs while it is down, with nothing lost to
    finding it dead or back."""
    flap = run(seed, period_ns, size, link, "flap", transport)
    clean = run(seed, period_ns, size, link, None, transport)
    jct = flap["jct_us"] / clean["jct_us"] if clean["jct_us"] else None
    phases = flap["phases"]
    down: dict[str, Any] = {}
    if reference and clean["jct_us"]:
        dead = run(seed, period_ns, size, link, "down", transport)
        down["down_jct_ratio"] = round(dead["jct_us"] / clean["jct_us"], 4)
    return {
        "seed": seed,
        "jct_ratio": round(jct, 4) if jct else None,
        **down,
        "clean_jct_us": clean["jct_us"],
        **flap,
        "worst_phase": max((p["worst_over_limit"] for p in phases), default=0.0),
        "holds": flap["completed"]
        and jct is not None
        and jct <= JCT_MAX
        and all(p["within"] for p in phases)
        and flap["plane_failed_evs"] == 0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_flap", description=__doc__.split("\n")[0])
    seed_args(ap)
    ap.add_argument("--period", default="500us", help="down (and up) time of each phase")
    ap.add_argument("--size", default="16MiB", type=parse_size, help="bytes per host (64KiB, 8MiB, 1MB)")
    ap.add_argument("--link", default="p0-t0_0-t1_1")
    ap.add_argument("--no-reference", action="store_true", help="skip the run with the link down throughout")
    args = ap.parse_args(argv)
    period = parse_time(args.period, 0)
    size = args.size
    transport = key_values(args.transport)
    rows = []
    for seed in seed_range(args.seeds):
        r = seed_row(seed, period, size, args.link, transport, reference=not args.no_reference)
        if "down_jct_ratio" in r and r["jct_ratio"]:
            r["over_half_down"] = round(r["jct_ratio"] - (1 + (r["down_jct_ratio"] - 1) / 2), 4)
        rows.append(r)
        reference = f" (down throughout {r['down_jct_ratio']} x)" if "down_jct_ratio" in r else ""
        print(
            f"seed {seed}: JCT {r['jct_ratio']} x{reference} ({r['jct_us']:.0f} us), phases lost "
            f"{[p['lost'] for p in r['phases']]} floor {[p['floor'] for p in r['phases']]} worst/limit "
            f"{r['worst_phase']}, up share {r['up_share']}, plane-failed EVs {r['plane_failed_evs']}, "
            f"rto {r['rtos']}, resent {r['resent']} (spurious {r['spurious']})",
            flush=True,
        )
    summary = {
        "jct_ratio": spread([r["jct_ratio"] or 0.0 for r in rows]),
        "worst_phase": spread([r["worst_phase"] for r in rows]),
        "up_share": spread([r["up_share"] or 0.0 for r in rows]),
        "plane_failed_evs": sum(r["plane_failed_evs"] for r in rows),
        "seeds_holding": sum(r["holds"] for r in rows),
        **(
            {
                "down_jct_ratio": spread([r["down_jct_ratio"] for r in rows]),
                "over_half_down": spread([r["over_half_down"] for r in rows]),
            }
            if rows and all("over_half_down" in r for r in rows)
            else {}
        ),
        "seeds": len(rows),
    }
    print(json.dumps(summary))
    write_json(args.json, {"transport": transport, "summary": summary, "seeds": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
