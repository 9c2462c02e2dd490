"""Dead-path knowledge under an incast: proven before it is used, fresh once the link heals.

Why: what a sender knows of a path goes stale. A path that sat out a penalty (SKIP) may have
died meanwhile, and one retired for a failure may have healed. design.md section 3: an EV
leaving SKIP or coming back after a heal is proven before it carries a full share, and a
healed link is back at 0.8-1.25 of its siblings' share within 6 RTT.

Two shapes, the incast of ``bench.sim_incast_fault`` (2 planes x 4 T1, 3 T0s, 21 us):

- ``heal``: 8 -> 1, the link from plane 0's T1 1 to the receiver's T0 black-holed from 150 us
  to ``heal`` us. Per base RTT after the heal, the bytes that link carried over the mean of
  its siblings' (the other T1s' links into that T0); averaged over 3 RTTs (a bin holds a
  handful of packets), the first RTT from which it stays within 0.8-1.25 for 20 RTTs
  (``back_rtts``), and its share over those 20;
- ``skip``: 15 -> 1, the same link black-holed at 150 us for good: DATA each connection sent
  after it knew (had retired an EV of the path) and lost on it: an EV back from SKIP, or from
  a probe, onto the dead link. Judged by when the sender sent each packet, not when the link
  dropped it: a packet sent just before the verdict can wait in its NIC's queue behind the
  others and reach the link well after it.

    python -m bench.sim_knowledge [--seeds 1-10] [--only heal|skip] [--heal-us 300] [--json FILE]
        [--transport key=value ...]
"""

from __future__ import annotations

import argparse
import itertools
import json
from typing import Any

from mrc_host.sim.fabric import FabricShape
from mrc_host.sim.fault_state import Drop
from mrc_host.sim.faults import parse_fault
from mrc_host.sim.network import START_NS, FlowSpec, Network
from mrc_host.sim.scenario_file import key_values
from mrc_host.sim.traffic import Job, point_to_point

from .sim_incast_fault import seed_args, seed_range, spread, write_json
from .sim_transport import link_delay_for_rtt

RTT_US = 21.0
SIZE = 4 << 20
FAULT_US = 150
SHARE_LO, SHARE_HI = 0.8, 1.25
BACK_RTTS = 6
HOLD_RTTS = 20


def _net(seed: int, senders: int, transport: dict[str, object]) -> tuple[Network, Job]:
    per_t0 = max(4, -(-senders // 2))
    shape = FabricShape(planes=2, t0=3, t1=4, hosts_per_t0=per_t0, link_delay_ns=link_delay_for_rtt(RTT_US))
    net = Network(shape, seed, payload="virtual")
    base = FlowSpec("x", 0, 0, transport=dict(transport))
    pairs = [(s, 0) for s in range(per_t0, per_t0 + senders)]
    return net, point_to_point(net, Job("incast", "incast", 0), base, pairs, SIZE)


def heal(seed: int, heal_us: int, transport: dict[str, object]) -> dict[str, Any]:
    """The 8 -> 1 incast with the link dead from 150 us to ``heal_us``: its share after."""
    net, job = _net(seed, 8, transport)
    net.add_fault(parse_fault(f"blackhole:p0-t0_0-t1_1@{FAULT_US}us-{heal_us}us", 0))
    ports = net.fabric.ports
    links = [ports[(f"p0-t1_{t}", "p0-t0_0")] for t in range(4)]
    rtt = job.connections[0].base_rtt_ns
    samples: list[list[int]] = []

    def sample() -> None:
        samples.append([p.tx_data_bytes for p in links])
        if job.completion_ns is None:
            net.loop.at(net.loop.now + rtt, sample)

    net.loop.at(START_NS + heal_us * 1000, sample)
    net.run(200_000_000)
    shares = []
    for a, b in itertools.pairwise(samples):
        d = [y - x for x, y in zip(a, b, strict=True)]
        sib = [d[t] for t in (0, 2, 3)]
        mean = sum(sib) / len(sib)
        if mean <= 0:
            break  # (the incast is over)
        shares.append(round(d[1] / mean, 3))
    # a round trip's bins are a handful of packets each: judged on 3-RTT means
    means = [sum(shares[k : k + 3]) / 3 for k in range(max(0, len(shares) - 2))]
    back = next(
        (k for k in range(len(means)) if all(SHARE_LO <= m <= SHARE_HI for m in means[k : k + HOLD_RTTS])),
        None,
    )
    later = means[back : back + HOLD_RTTS] if back is not None else []
    conns = job.connections
    return {
        "seed": seed,
        "completed": job.completion_ns is not None and all(c.data_ok for c in conns),
        "back_rtts": back,
        "shares": shares[:40],
        "share_after": spread(later) if later else None,
        "holds": back is not None and back <= BACK_RTTS,
    }


def sent_once_known(drops: list[Drop], qp: int, known_ns: int) -> list[int]:
    """When each DATA packet to ``qp`` that the fault dropped was dropped, of those its sender
    sent after ``known_ns`` (the sender's verdict on the path): the loss a sender chose
    knowing the path dead. (A drop's time says nothing of it: a packet sent a moment before
    the verdict can wait behind others in its NIC's queue and reach the link microseconds
    after.)"""
    return [d.at_ns for d in drops if d.data and d.qp == qp and d.sent_ns > known_ns]


def skip(seed: int, transport: dict[str, object]) -> dict[str, Any]:
    """The 15 -> 1 incast with the link dead from 150 us on: DATA each connection sent onto
    it once it knew (its first EV of the path retired): an EV back from SKIP or a probe
    unproven (``lost_known``, with how long after the fault each was dropped)."""
    net, job = _net(seed, 15, transport)
    net.add_fault(parse_fault(f"blackhole:p0-t0_0-t1_1@{FAULT_US}us", 0))
    net.run(200_000_000)
    fault = net.faults[0]
    at = START_NS + FAULT_US * 1000
    known: list[float] = []
    for c in job.connections:
        retired = [
            START_NS + round(float(e["t_us"]) * 1000)  # type: ignore[arg-type]
            for e in c.ev_timeline
            if e["side"] == "sender" and int(str(e["ev"]), 16) >> 18 == 1 and str(e["new"]) == "ASSUMED_BAD"
        ]
        first = min((t for t in retired if t >= at), default=None)
        if first is None:
            continue
        known += [round((t - at) / 1e3, 1) for t in sent_once_known(fault.drops, c.receiver.local_qp, first)]
    conns = job.connections
    return {
        "seed": seed,
        "completed": job.completion_ns is not None and all(c.data_ok for c in conns),
        "lost": fault.data_dropped,
        "lost_known": len(known),
        "lost_known_us": sorted(known)[:20],
        "rtos": sum(c.sender.counters.rto_fired for c in conns),
        "holds": not known,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim_knowledge", description=__doc__.split("\n")[0])
    seed_args(ap)
    ap.add_argument("--only", choices=("heal", "skip"))
    ap.add_argument("--heal-us", type=int, default=300, help="when the link heals (us)")
    args = ap.parse_args(argv)
    seeds = seed_range(args.seeds)
    transport = key_values(args.transport)
    out: dict[str, Any] = {"transport": transport}
    if args.only in (None, "heal"):
        rows = [heal(s, args.heal_us, transport) for s in seeds]
        for r in rows:
            print(
                f"heal seed {r['seed']}: back after {r['back_rtts']} RTT, shares {r['shares'][:16]}",
                flush=True,
            )
        backs = [r["back_rtts"] if r["back_rtts"] is not None else 99 for r in rows]
        out["heal"] = {"back_rtts": spread(backs), "holding": sum(r["holds"] for r in rows), "seeds": rows}
        print("heal", json.dumps({k: v for k, v in out["heal"].items() if k != "seeds"}), flush=True)
    if args.only in (None, "skip"):
        rows = [skip(s, transport) for s in seeds]
        for r in rows:
            print(
                f"skip seed {r['seed']}: lost {r['lost']}, {r['lost_known']} of them once known "
                f"{r['lost_known_us']} us after the fault, rto {r['rtos']}",
                flush=True,
            )
        out["skip"] = {
            "lost_known": spread([r["lost_known"] for r in rows]),
            "holding": sum(r["holds"] for r in rows),
            "seeds": rows,
        }
        print("skip", json.dumps({k: v for k, v in out["skip"].items() if k != "seeds"}), flush=True)
    write_json(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
