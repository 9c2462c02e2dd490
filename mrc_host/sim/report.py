"""Turn a finished Simulation into the JSON-able result and a human summary."""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mrc_host.core.evset import EvSet

    from .network import Connection, Network
    from .scenario import Simulation
    from .traffic import Job

from mrc_host.core import EvState

from .network import START_NS


def _goodput_timeline(sim: Simulation, end_ns: int, buckets: int = 50) -> list[dict[str, float]]:
    span = max(end_ns - START_NS, 1)
    width = max(span // buckets, 1)
    samples = sim.goodput_samples  # (time, bytes placed so far), in time order
    out = []
    prev = 0
    for b in range(buckets + 1):
        # bytes placed by the end of bucket b: the last sample before it ends (a search, not
        # a walk over a sample per packet)
        i = bisect_left(samples, START_NS + (b + 1) * width, key=itemgetter(0))
        placed = samples[i - 1][1] if i else 0
        out.append({"t_us": b * width / 1e3, "gbps": (placed - prev) * 8 / width})
        prev = placed
    return out


def evs_per_path(evset: EvSet) -> dict[str, dict[str, int]]:
    """Per path (``p<plane>-t1_<t1>``), how many of the connection's EVs are in the rotation
    ("active"), spare ("backup") or in each other state at the end of the run."""
    out: dict[str, dict[str, int]] = {}
    for e in evset.entries.values():
        if not e.member:
            continue
        row = out.setdefault(f"p{e.plane}-t1_{e.t1}", {})
        key = e.state.value if e.state is not EvState.GOOD else ("active" if e.active else "backup")
        row[key] = row.get(key, 0) + 1
    return dict(sorted(out.items()))


def ev_paths(evset: EvSet) -> dict[str, Any]:
    """A connection's EVs in the rotation, the distinct (plane, T1) paths they name, and EVs
    per path (the spread ``max_evs`` gives on this fabric)."""
    paths = evset.evs_per_path()
    n = sum(paths.values())
    return {"evs": n, "paths": len(paths), "evs_per_path": round(n / len(paths), 3) if paths else None}


def summarise(sim: Simulation) -> dict[str, Any]:
    cfg = sim.cfg
    s = sim.sender.counters
    r = sim.receiver.counters
    done = sim.sent_done_ns is not None and sim.received_done_ns is not None
    end = max(sim.sent_done_ns or 0, sim.received_done_ns or 0) if done else sim.loop.now
    elapsed = end - START_NS
    data_ok = sim.conn.holds(cfg.size)
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
        "payload": sim.net.payload,
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
        "max_evs": cfg.max_evs,
        "ev_spread": ev_paths(sim.sender.evset),
        "evs_per_path": {
            "sender": evs_per_path(sim.sender.evset),
            "receiver": evs_per_path(sim.receiver.evset),
        },
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


# ---- many connections ------------------------------------------------------------------
def _timeline(samples: list[tuple[int, int]], end_ns: int, buckets: int) -> list[float]:
    """Goodput (Gb/s) in ``buckets`` equal slices of [START_NS, end_ns]."""
    width = max((end_ns - START_NS) // buckets, 1)
    out = [0.0] * buckets
    prev = 0
    for t, placed in samples:
        b = min((t - START_NS) // width, buckets - 1)
        out[b] += (placed - prev) * 8 / width
        prev = placed
    return [round(v, 3) for v in out]


def _flow_summary(conn: Connection, end: int, buckets: int) -> dict[str, Any]:
    """One connection's figures: what it moved, how fast, what it lost and what its EVs did."""
    s, r = conn.sender.counters, conn.receiver.counters
    done = [w for w in conn.writes if w.done]
    first = conn.writes[0].posted_ns if conn.writes else None
    last = max((max(w.sent_ns or 0, w.received_ns or 0) for w in done), default=None)
    busy = (last - first) if first is not None and last is not None and last > first else None
    placed = r.data_bytes_placed
    fab = conn.net.fabric
    qps = (conn.sender.local_qp, conn.receiver.local_qp)  # what reaches each side
    return {
        "name": conn.name,
        "src": conn.spec.src,
        "dst": conn.spec.dst,
        "mode": conn.spec.mode.value,
        "pin_path": list(conn.spec.pin_path) if conn.spec.pin_path else None,
        "writes_posted": len(conn.writes),
        "writes_done": len(done),
        "bytes_placed": placed,
        "first_write_fct_us": (
            (max(conn.writes[0].sent_ns or 0, conn.writes[0].received_ns or 0) - conn.writes[0].posted_ns)
            / 1e3
            if conn.writes and conn.writes[0].done
            else None
        ),
        "goodput_gbps": round(placed * 8 / busy, 3) if busy else None,
        "data_ok": conn.data_ok,
        "data_packets_sent": s.data_packets_sent,
        "retransmissions": s.retransmissions,
        "losses": {"gap": s.losses_gap, "rto": s.losses_rto, "rto_fired": s.rto_fired},
        "trim_nacks": s.nacks_received.get("TRIMMED", 0) + s.nacks_received.get("TRIMMED_LASTHOP", 0),
        # its packets (both ways) the fabric dropped (congestion, faults) or trimmed
        "fabric_drops": sum(fab.drops_by_qp.get(q, 0) for q in qps),
        "fabric_trims": sum(fab.trims_by_qp.get(q, 0) for q in qps),
        "ecn_echoes": s.ecn_echoes_received,
        "ev_retired": s.ev_retired,
        "ev_skipped": s.ev_skipped,
        "ev_spread": ev_paths(conn.sender.evset),
        "ev_changes": len(conn.ev_timeline),
        # retirements, restorations and denials on the sender (no SKIPs), the first 200
        "ev_events": [
            e
            for e in conn.ev_timeline
            if e["side"] == "sender" and "SKIP" not in (e["old"], e["new"]) and e["old"] != e["new"]
        ][:200],
        "goodput_timeline_gbps": _timeline(conn.goodput_samples, end, buckets),
    }


def _job_summary(job: Job, flows: list[dict[str, Any]]) -> dict[str, Any]:
    from .traffic import jain

    names = {c.name for c in job.connections}
    rates = [f["goodput_gbps"] or 0.0 for f in flows if f["name"] in names]
    return {
        "pattern": job.pattern,
        "background": job.background,
        "connections": len(job.connections),
        "ranks": len(job.rank_done_ns),
        "ranks_done": sum(1 for t in job.rank_done_ns.values() if t is not None),
        "completion_time_us": None if job.completion_ns is None else job.completion_ns / 1e3,
        "flow_goodput_jain": jain(rates),
    }


def summarise_network(net: Network, jobs: list[Job], label: str, buckets: int = 50) -> dict[str, Any]:
    """The JSON-able result of a multi-connection run."""
    end = net.loop.now
    flows = [_flow_summary(conn, end, buckets) for conn in net.connections]
    job_out = {job.name: _job_summary(job, flows) for job in jobs}
    foreground = [j for j in jobs if not j.background]
    ports = net.fabric.ports.values()
    return {
        "simulator": "mrc-sim (discrete-event, runs the real mrc_host.core)",
        "run": label,
        "seed": net.seed,
        "payload": net.payload,
        "completed": all(j.done for j in foreground),
        "data_ok": all(f["data_ok"] for f in flows),
        "elapsed_us": (end - START_NS) / 1e3,
        "timeline_bucket_us": max((end - START_NS) // buckets, 1) / 1e3,
        "jobs": job_out,
        "flows": flows,
        "faults": [f.as_dict() for f in net.faults],
        "congestion_drops": sum(p.drops_congestion for p in ports),
        "switch_trims": sum(p.trimmed for p in ports if not p.nic),
        "nic_trims": sum(p.trimmed for p in ports if p.nic),
        "pfc": _pfc(net),
        "t0_uplink_data_bytes": _uplinks(net),
        "events": net.loop.events,
    }


def _pfc(net: Network) -> dict[str, object] | None:
    """Lossless runs: pause frames, headroom drops and each paused port's pause time (µs)."""
    fab = net.fabric
    if not fab.pfc:
        return None
    paused = {p.name: fab.pause_ns(p) / 1e3 for p in fab.ports.values() if p.pauses}
    return {
        "pauses": sum(p.pauses for p in fab.ports.values()),
        "headroom_drops": sum(p.pfc_overflow for p in fab.ports.values()),
        "pause_us_by_port": dict(sorted(paused.items())),
    }


def _uplinks(net: Network) -> dict[str, list[list[int]]]:
    """Payload bytes each T0 sent up to each T1, ``{t0: [[per T1] per plane]}``, for the
    T0s that sent any: how evenly a mode spreads a few flows over the uplinks (spray balance)."""
    fab = net.fabric
    out: dict[str, list[list[int]]] = {}
    for a in range(net.shape.t0):
        rows = [[port.tx_data_bytes for port in fab.leaf_up[p][a]] for p in range(net.shape.planes)]
        if any(any(r) for r in rows):
            out[str(a)] = rows
    return out


def human_network(result: dict[str, Any]) -> str:
    lines = [
        f"[{result['run']}] elapsed {result['elapsed_us']:.1f} us, completed {result['completed']}, "
        f"data ok {result['data_ok']}, congestion drops {result['congestion_drops']}, "
        f"trims switch/NIC {result['switch_trims']}/{result['nic_trims']}"
    ]
    for name, j in result["jobs"].items():
        jct = j["completion_time_us"]
        jain_ = j["flow_goodput_jain"]
        lines.append(
            f"  job {name:24} {j['pattern']:15} ranks {j['ranks_done']}/{j['ranks']} "
            + (
                f"JCT {jct:10.1f} us"
                if jct is not None
                else ("background" if j["background"] else "NOT DONE")
            )
            + (f"  Jain {jain_:.3f}" if jain_ is not None else "")
        )
    flows = result["flows"]
    for f in flows[:16]:
        gp = f["goodput_gbps"]
        lines.append(
            f"    {f['name']:28} {f['mode']:11} h{f['src']}->h{f['dst']} "
            + (f"{gp:7.1f} Gb/s" if gp is not None else "   -   Gb/s")
            + f"  retx {f['retransmissions']:5}  trims {f['trim_nacks']:5}  ecn {f['ecn_echoes']:5}"
        )
    if len(flows) > 16:
        lines.append(f"    ... {len(flows) - 16} more flows (see --json)")
    for f in result["faults"]:
        lines.append(
            f"  fault {f['spec']}: data lost {f['data_packets_lost']} (in flight {f['in_flight_dropped']}, "
            f"queued {f['queued_dropped']}), trimmed {f['trimmed']}, marked {f['ecn_marked']}"
        )
    return "\n".join(lines)
