"""A dead link under an incast: the loss against its floor and against its oracle.

Why: a path dying while the receiver's last hop trims should cost at most
1.3 x floor + 1 packets, the floor being the data that entered the failed element in the base
RTT before it failed. Under an incast the news of a dead packet cannot come before its live
siblings, queued behind the same last hop, show it overdue: ``bench.fault_oracle`` measures
that instant and the packets no endpoint-driven transport could have kept off the link.
``sim_faults``' ``incast_fault`` row is the 8 -> 1 shape; ``--neighbours`` runs shapes around
it (another T1, both planes, 4:1 and 16:1, the fault at 100-300 us) on seeds 1-10; ``--more``
shapes around 16:1, where each flow's window holds a packet or two.

    python -m bench.sim_incast_fault [--neighbours | --more] [--seeds 1-10] [--transport key=value ...]
        [--nscc key=value ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from typing import Any

from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.faults import parse_fault
from mrc_host.sim.network import START_NS, FlowSpec, Network
from mrc_host.sim.scenario_file import key_values
from mrc_host.sim.traffic import Job, point_to_point

from .fault_oracle import OracleWatch
from .sim_transport import link_delay_for_rtt

RTT_US = 21.0
SIZE = 4 << 20
MTU = 4096


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run(
    seed: int,
    t1s: tuple[tuple[int, int], ...] = ((0, 1),),
    senders: int = 8,
    at_ns: int = 150_000,
    size: int = SIZE,
    transport: dict[str, object] | None = None,
    watch: bool = True,
    nscc: dict[str, object] | None = None,
) -> dict[str, Any]:
    """``senders`` -> host 0 (2 planes x 4 T1, 3 T0s, 21 us), the links from each (plane, T1)
    of ``t1s`` to the receiver's T0 black-holed at ``at_ns``: per fault its loss, floor and
    oracle (``bench.fault_oracle``; ``watch=False``: none, the oracle figures 0)."""
    per_t0 = max(4, -(-senders // 2))
    shape = FabricShape(planes=2, t0=3, t1=4, hosts_per_t0=per_t0, link_delay_ns=link_delay_for_rtt(RTT_US))
    net = Network(shape, seed)
    base = FlowSpec("x", 0, 0, transport=dict(transport or {}), nscc=dict(nscc or {}))
    pairs = [(s, 0) for s in range(per_t0, per_t0 + senders)]
    job = point_to_point(net, Job("incast", "incast", 0), base, pairs, size)
    rtt = job.connections[0].base_rtt_ns
    watches: list[OracleWatch | None] = []
    seen: list[list[int]] = []
    for p, t in t1s:
        net.add_fault(parse_fault(f"blackhole:p{p}-t0_0-t1_{t}@{at_ns}ns", 0))
        ports = net.fabric.ports
        dead = ports[(f"p{p}-t1_{t}", f"p{p}-t0_0")]
        last_hop = ports[(f"p{p}-t0_0", f"h0:p{p}")]
        watches.append(OracleWatch(net, net.faults[-1], dead, last_hop, at_ns) if watch else None)
        into: list[int] = []
        seen.append(into)
        for when in (at_ns - rtt, at_ns):
            net.loop.at(START_NS + when, lambda port=dead, into=into: into.append(port.tx_data_bytes))
    net.run(200_000_000)
    faults = []
    for fault, oracle, into in zip(net.faults, watches, seen, strict=True):
        floor = (into[1] - into[0]) / MTU
        lost = fault.data_dropped
        fig = oracle.figures() if oracle else {"due_us": 0.0, "oracle": 0, "oracle_sent": 0}
        faults.append(
            {
                "spec": fault.spec,
                "lost": lost,
                "floor": floor,
                **fig,
                "lost_over_floor": round(lost / max(floor, 1.0), 3),
                "lost_over_oracle": round(lost / max(fig["oracle"], 1), 3),
                "lost_over_oracle_sent": round(lost / max(fig["oracle_sent"], 1), 3),
                "within_aim": lost <= 1.3 * floor + 1,
            }
        )
    conns = job.connections
    return {
        "seed": seed,
        "completed": job.completion_ns is not None and all(c.data_ok for c in conns),
        "rtos": sum(c.sender.counters.rto_fired for c in conns),
        "completion_us": (job.completion_ns or 0) / 1e3,
        "faults": faults,
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and ranges over seeds (and faults) of the ratios; seeds within the aim."""
    per_fault = [f for r in rows for f in r["faults"]]
    out: dict[str, Any] = {
        k: spread([f[k] for f in per_fault])
        for k in ("lost", "floor", "oracle", "oracle_sent", "due_us", "lost_over_floor")
    }
    out["lost_over_oracle"] = spread([f["lost_over_oracle"] for f in per_fault])
    out["lost_over_oracle_sent"] = spread([f["lost_over_oracle_sent"] for f in per_fault])
    out["within_aim"] = sum(f["within_aim"] for f in per_fault)
    out["faults"] = len(per_fault)
    out["completed"] = all(r["completed"] for r in rows)
    out["rtos"] = sum(r["rtos"] for r in rows)
    return out


# the neighbour set: (name, dead (plane, T1)s, senders, fault time in ns)
NEIGHBOURS: tuple[tuple[str, tuple[tuple[int, int], ...], int, int], ...] = (
    ("base_8to1_t1_1_150us", ((0, 1),), 8, 150_000),
    ("t1_2", ((0, 2),), 8, 150_000),
    ("plane1_t1_3", ((1, 3),), 8, 150_000),
    ("both_planes", ((0, 1), (1, 1)), 8, 150_000),
    ("4to1", ((0, 1),), 4, 150_000),
    ("16to1", ((0, 1),), 16, 150_000),
    ("at_100us", ((0, 1),), 8, 100_000),
    ("at_300us", ((0, 1),), 8, 300_000),
)
# ``--more``: thin windows (12 to 24 senders, a packet or two in flight each) around the 16 -> 1 shape
MORE: tuple[tuple[str, tuple[tuple[int, int], ...], int, int], ...] = (
    ("16to1_at_100us", ((0, 1),), 16, 100_000),
    ("16to1_at_200us", ((0, 1),), 16, 200_000),
    ("16to1_plane1_t1_3", ((1, 3),), 16, 150_000),
    ("16to1_both_planes", ((0, 1), (1, 1)), 16, 150_000),
    ("12to1", ((0, 1),), 12, 150_000),
    ("24to1", ((0, 1),), 24, 150_000),
)


def seed_args(ap: argparse.ArgumentParser) -> None:
    """The options every seeded bench of this family takes: seeds, transport overrides, JSON out."""
    ap.add_argument("--seeds", default="1-10", help="first-last")
    ap.add_argument("--transport", action="append", default=[], help="TransportConfig key=value")
    ap.add_argument("--json", help="write the rows here")


def seed_range(text: str) -> range:
    """``first-last`` (or one seed) as a range."""
    lo, _, hi = text.partition("-")
    return range(int(lo), int(hi or lo) + 1)


def write_json(path: str | None, data: object) -> None:
    """``data`` as indented JSON at ``path`` (None: nowhere)."""
    if path:
        with open(path, "w") as fh:
            json.dump(data, fh, indent=1)


def report_rows(
    out: dict[str, Any],
    name: str,
    rows: list[dict[str, Any]],
    line: Callable[[dict[str, Any]], str],
    summarize: Callable[[list[dict[str, Any]]], dict[str, Any]],
) -> None:
    """Prints each seed's row (``line``) and the summary of case ``name``; keeps both in ``out``."""
    for r in rows:
        print(f"{name} seed {r['seed']}: {line(r)}", flush=True)
    out[name] = {"summary": summarize(rows), "seeds": rows}
    print(name, json.dumps(out[name]["summary"]), flush=True)


def _line(r: dict[str, Any]) -> str:
    f = r["faults"]
    return (
        f"lost {[x['lost'] for x in f]} floor {[x['floor'] for x in f]} "
        f"oracle {[x['oracle'] for x in f]} sent {[x['oracle_sent'] for x in f]} "
        f"due {[x['due_us'] for x in f]} us rto {r['rtos']} ok {r['completed']} "
        f"{r['completion_us']:.0f} us"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_incast_fault", description=__doc__.split("\n")[0])
    seed_args(ap)
    ap.add_argument("--neighbours", action="store_true", help="every shape of the neighbour set")
    ap.add_argument("--more", action="store_true", help="the thin-window shapes (MORE) instead")
    ap.add_argument("--only", help="one neighbour by name")
    ap.add_argument("--nscc", action="append", default=[], help="NsccParams key=value")
    args = ap.parse_args(argv)
    seeds = seed_range(args.seeds)
    transport, nscc = key_values(args.transport), key_values(args.nscc)
    shapes = MORE if args.more else NEIGHBOURS if args.neighbours else NEIGHBOURS[:1]
    if args.only:
        shapes = tuple(s for s in NEIGHBOURS + MORE if s[0] == args.only)
    out: dict[str, Any] = {"transport": transport, "nscc": nscc}
    for name, t1s, senders, at in shapes:
        rows = [run(seed, t1s, senders, at, transport=transport, nscc=nscc) for seed in seeds]
        report_rows(out, name, rows, _line, summary)
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
