"""Turn a finished Simulation into the JSON-able result and a human summary."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .scenario import Simulation

from .network import START_NS


def _goodput_timeline(sim: Simulation, end_ns: int, buckets: int = 50) -> list[dict[str, float]]:
    span = max(end_ns - START_NS, 1)
    width = max(span // buckets, 1)
    placed = [0] * (buckets + 1)
    last = 0
    idx = 0
    samples = sim.goodput_samples
    for b in range(buckets + 1):
        t_end = START_NS + (b + 1) * width
        while idx < len(samples) and samples[idx][0] < t_end:
            last = samples[idx][1]
            idx += 1
        placed[b] = last
    out = []
    prev = 0
    for b in range(buckets + 1):
        out.append({"t_us": b * width / 1e3, "gbps": (placed[b] - prev) * 8 / width})
        prev = placed[b]
    return out


def summarise(sim: Simulation) -> dict[str, Any]:
    cfg = sim.cfg
    s = sim.sender.counters
    r = sim.receiver.counters
    done = sim.sent_done_ns is not None and sim.received_done_ns is not None
    end = max(sim.sent_done_ns or 0, sim.received_done_ns or 0) if done else sim.loop.now
    elapsed = end - START_NS
    data_ok = bytes(sim.region.buffer[: cfg.size]) == sim.data
    fab = sim.fabric
    shape = cfg.shape
    src_t0 = shape.t0_of(cfg.src)
    uplinks = {}
    for p in range(shape.planes):
        for t in range(shape.t1):
            port = fab.ports[(f"p{p}-t0_{src_t0}", f"p{p}-t1_{t}")]
            uplinks[port.name] = port.tx_data_bytes
    values = list(uplinks.values())
    mean = sum(values) / len(values) if values else 0
    balance = (max(values) / mean) if mean else None
    return {
        "simulator": "mrc-sim (discrete-event, runs the real mrc_host.core)",
        "mode": cfg.mode.value,
        "seed": cfg.seed,
        "fabric": {
            "planes": shape.planes,
            "t0": shape.t0,
            "t1": shape.t1,
            "hosts_per_t0": shape.hosts_per_t0,
            "link_gbps": shape.link_gbps,
            "link_delay_ns": shape.link_delay_ns,
        },
        "size_bytes": cfg.size,
        "mtu": cfg.mtu,
        "src": cfg.src,
        "dst": sim.dst,
        "completed": done and bool(sim.send_ok),
        "data_ok": data_ok,
        "completion_time_us": elapsed / 1e3 if done else None,
        "ideal_time_us": sim.ideal_ns / 1e3,
        "base_rtt_us": sim.base_rtt_ns / 1e3,
        "goodput_gbps": (cfg.size * 8 / elapsed) if done and elapsed > 0 else None,
        "retransmissions": s.retransmissions,
        "data_packets_sent": s.data_packets_sent,
        "losses": {"gap": s.losses_gap, "rto": s.losses_rto, "rto_fired": s.rto_fired},
        "faults": [f.as_dict() for f in sim.faults],
        "congestion_drops": sum(p.drops_congestion for p in fab.ports.values()),
        "ev_timeline": sim.ev_timeline,
        "ev_final": {"sender": sim.sender.evset.snapshot(), "receiver": sim.receiver.evset.snapshot()},
        "t1_uplink_bytes": uplinks,
        "t1_balance_max_over_mean": balance,
        "goodput_timeline": _goodput_timeline(sim, end),
        "events": sim.loop.events,
        "counters": {"sender": s.as_dict(), "receiver": r.as_dict()},
    }


def human(result: dict[str, Any]) -> str:
    lines = [
        f"mrc-sim ({result['mode']}) {result['size_bytes']} B from h{result['src']} to h{result['dst']}",
    ]
    if result["completed"]:
        lines.append(
            f"  completed in {result['completion_time_us']:.1f} us (ideal {result['ideal_time_us']:.1f} us), "
            f"goodput {result['goodput_gbps']:.1f} Gb/s, bytes placed correctly: {result['data_ok']}"
        )
    else:
        lines.append("  DID NOT COMPLETE within the time limit")
    losses = result["losses"]
    lines.append(
        f"  data packets sent {result['data_packets_sent']}, retransmissions {result['retransmissions']}, "
        f"losses gap/rto {losses['gap']}/{losses['rto']}"
    )
    for f in result["faults"]:
        lines.append(
            f"  fault {f['spec']}: data packets lost {f['data_packets_lost']}, control lost "
            f"{f['control_packets_lost']}, marked {f['ecn_marked']}, trimmed {f['trimmed']}"
        )
    bal = result["t1_balance_max_over_mean"]
    if bal is not None:
        lines.append(f"  T1 uplink balance (max/mean bytes): {bal:.3f}")
    changes = [e for e in result["ev_timeline"] if e["old"] != e["new"]]
    lines.append(f"  EV state changes: {len(changes)}")
    for e in changes[:12]:
        lines.append(
            f"    {e['t_us']:9.2f} us {e['side']:8} {e['ev']} {e['old']} -> {e['new']} ({e['reason']})"
        )
    if len(changes) > 12:
        lines.append(f"    ... {len(changes) - 12} more (see --json)")
    return "\n".join(lines)
