"""Planes of unequal rate: is each used in proportion to what it delivers?

Why: a gray failure is rarely a dead plane; an optic that renegotiates down, a NIC port at
a lower speed or a plane whose T1s run slower leaves every path alive and every probe
answered. The transport must then use each plane for what it can carry (design.md section 8:
goodput at least 0.9 of the planes' summed capacity, each plane's share of the bytes within
0.05 of its share of the capacity) and never do worse than if the slow plane were dead.

One connection, 21 us base RTT (2-8 planes x 4 T1, 2 T0), a write sized to last about 40
RTTs at the planes' summed rate. A *mix* gives each plane's rate; *where* it is slow (one
place for every slow plane, or one per plane for a mix of places):

- ``plane``: every link of the plane, NIC links included (``rate=G:pK``);
- ``nic``: only the two hosts' NIC links on the plane (the port speed at the NIC);
- ``inside``: only the plane's T1 switches, each at the plane's rate over its T1 count (the
  spine layer then carries the plane's rate in all; the NIC links stay at line rate).

Each case runs three times on a seed: as drawn, with every plane slower than the fastest
dead from the start (the sender's NIC port down: the alternative of not using it; the planes
kept stay as drawn), and clean (every plane at line rate). Reported per case: goodput over
capacity, the worst plane's share error, the time against the slow planes dead.

    python -m bench.sim_slow_plane [--seeds 1-10] [--only NAME] [--json FILE]
        [--transport key=value ...]
"""

from __future__ import annotations

import argparse
from typing import Any

from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.faults import parse_fault
from mrc_host.sim.network import FlowSpec, Network
from mrc_host.sim.scenario_file import key_values
from mrc_host.sim.traffic import Job, point_to_point

from .sim_incast_fault import report_rows, seed_args, seed_range, spread, write_json
from .sim_transport import link_delay_for_rtt

RTT_US = 21.0
LINE_GBPS = 100.0
RTTS = 40  # the write lasts about this many base RTTs at the summed capacity
T1 = 4
GOODPUT_MIN = 0.9
SHARE_TOL = 0.05

Where = str | tuple[str, ...]  # one place for every slow plane, or one per plane

# (name, each plane's rate in Gb/s, where the slow planes are slow)
CASES: tuple[tuple[str, tuple[float, ...], Where], ...] = (
    ("2p_50_plane", (100, 50), "plane"),
    ("2p_50_nic", (100, 50), "nic"),
    ("2p_50_inside", (100, 50), "inside"),
    ("2p_10_plane", (100, 10), "plane"),
    ("4p_mix_plane", (100, 75, 50, 25), "plane"),
    ("4p_mix_nic", (100, 75, 50, 25), "nic"),
    ("4p_mix_inside", (100, 75, 50, 25), "inside"),
    ("4p_25_nic", (100, 100, 100, 25), "nic"),
    ("8p_25_plane", (100, 25, 100, 100, 100, 100, 100, 100), "plane"),
    ("8p_25_nic", (100, 25, 100, 100, 100, 100, 100, 100), "nic"),
    ("8p_25_inside", (100, 25, 100, 100, 100, 100, 100, 100), "inside"),
    ("8p_two_50_plane", (100, 100, 50, 100, 100, 50, 100, 100), "plane"),
    ("8p_5_plane", (100, 100, 100, 5, 100, 100, 100, 100), "plane"),
    ("2p_10_inside", (100, 10), "inside"),
    ("8p_5_inside", (100, 100, 100, 5, 100, 100, 100, 100), "inside"),
    ("4p_two_5_inside", (100, 5, 5, 100), "inside"),
    # no plane at full rate: plane 0 slow inside, the other slow at its ports or everywhere
    ("2p_60in_10nic", (60, 10), ("inside", "nic")),
    ("2p_50in_75plane", (50, 75), ("inside", "plane")),
    ("4p_mixed_where", (100, 50, 25, 10), ("plane", "inside", "nic", "inside")),
    # no plane at full rate, the one beside the plane slowed inside at a slow port
    ("2p_5in_75plane", (5, 75), ("inside", "plane")),
)


def slow_faults(rates: tuple[float, ...], where: Where, src: int, dst: int, shape: FabricShape) -> list[str]:
    """The fault specs that slow each plane below line rate, ``where`` it is slow."""
    out = []
    for k, g in enumerate(rates):
        if g >= LINE_GBPS:
            continue
        at = where if isinstance(where, str) else where[k]
        if at == "plane":
            out.append(f"rate={g:g}:p{k}@0")
        elif at == "nic":
            out += [f"rate={g:g}:h{src}-p{k}@0", f"rate={g:g}:h{dst}-p{k}@0"]
        else:
            out += [f"rate={g / shape.t1:g}:p{k}-t1_{j}@0" for j in range(shape.t1)]
    return out


def run(
    rates: tuple[float, ...],
    where: Where,
    seed: int,
    variant: str = "slow",
    transport: dict[str, object] | None = None,
) -> dict[str, Any]:
    """One transfer; ``variant``: ``slow`` (as drawn), ``dead`` (the planes slower than the
    fastest dead, the others as drawn), ``clean``."""
    planes = len(rates)
    shape = FabricShape(planes=planes, t0=2, t1=T1, hosts_per_t0=1, link_delay_ns=link_delay_for_rtt(RTT_US))
    capacity = sum(rates)
    size = int(capacity * 1e9 / 8 * RTTS * RTT_US * 1e-6) // 4096 * 4096
    net = Network(shape, seed, payload="virtual")
    src, dst = 0, 1
    if variant == "slow":
        specs = slow_faults(rates, where, src, dst, shape)
    elif variant == "dead":
        top = max(rates)
        kept = tuple(g if g >= top else LINE_GBPS for g in rates)
        specs = [f"nic-down:h{src}-p{k}@0" for k, g in enumerate(rates) if g < top]
        specs += slow_faults(kept, where, src, dst, shape)
    else:
        specs = []
    for s in specs:  # (before the flow, whose first packets leave as it is posted)
        net.add_fault(parse_fault(s, 0))
    job = point_to_point(
        net, Job("flow", "flow", 0), FlowSpec("x", 0, 0, transport=dict(transport or {})), [(0, 1)], size
    )
    net.run(200_000_000)
    conn = job.connections[0]
    done = job.completion_ns
    ports = net.fabric.nic_up[src]
    sent = [p.tx_data_bytes for p in ports]
    total = sum(sent) or 1
    elapsed = done or 0
    goodput = size * 8 / elapsed if elapsed else 0.0
    cap = capacity if variant != "clean" else LINE_GBPS * planes
    if variant == "dead":
        cap = sum(g for g in rates if g >= max(rates))
    share = [b / total for b in sent]
    cap_share = [g / capacity for g in rates]
    c = conn.sender.counters
    return {
        "completed": done is not None and conn.data_ok,
        "time_us": elapsed / 1e3,
        "goodput_gbps": round(goodput, 2),
        "of_capacity": round(goodput / cap, 4),
        "share": [round(x, 4) for x in share],
        "share_error": round(max(abs(a - b) for a, b in zip(share, cap_share, strict=True)), 4),
        "resent": c.retransmissions,
        "rtos": c.rto_fired,
    }


def case(
    name: str, rates: tuple[float, ...], where: Where, seed: int, transport: dict[str, object]
) -> dict[str, Any]:
    slow = run(rates, where, seed, "slow", transport)
    dead = run(rates, where, seed, "dead", transport)
    clean = run(rates, where, seed, "clean", transport)
    return {
        "case": name,
        "seed": seed,
        "slow": slow,
        "dead_time_us": dead["time_us"],
        "clean_of_capacity": clean["of_capacity"],
        "vs_dead": round(slow["time_us"] / dead["time_us"], 4) if dead["time_us"] else None,
        "holds": slow["completed"]
        and slow["of_capacity"] >= GOODPUT_MIN
        and slow["share_error"] <= SHARE_TOL
        and slow["time_us"] <= dead["time_us"],
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "of_capacity": spread([r["slow"]["of_capacity"] for r in rows]),
        "share_error": spread([r["slow"]["share_error"] for r in rows]),
        "vs_dead": spread([r["vs_dead"] or 0.0 for r in rows]),
        "clean_of_capacity": spread([r["clean_of_capacity"] for r in rows]),
        "seeds_holding": sum(r["holds"] for r in rows),
        "seeds": len(rows),
    }


def _line(r: dict[str, Any]) -> str:
    s = r["slow"]
    return (
        f"{s['of_capacity']:.3f} of capacity, shares {s['share']} "
        f"(error {s['share_error']:.3f}), {s['time_us']:.0f} us vs dead {r['dead_time_us']:.0f} "
        f"({r['vs_dead']}), clean {r['clean_of_capacity']:.3f}, resent {s['resent']} rto {s['rtos']}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_slow_plane", description=__doc__.split("\n")[0])
    seed_args(ap)
    ap.add_argument("--only", action="append", default=[], help="a case by name (repeatable)")
    args = ap.parse_args(argv)
    seeds = seed_range(args.seeds)
    transport = key_values(args.transport)
    out: dict[str, Any] = {"transport": transport}
    for name, rates, where in CASES:
        if args.only and name not in args.only:
            continue
        rows = [case(name, rates, where, s, transport) for s in seeds]
        report_rows(out, name, rows, _line, summary)
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
