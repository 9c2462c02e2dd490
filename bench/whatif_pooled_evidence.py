"""What receiver-pooled path evidence would save on ``bench.sim_incast_fault``'s shapes (a what-if).

Why: before a wire change (a report from the receiver naming a silent path), measure what it
could buy. The receiver's NIC sees every connection's DATA (and trimmed headers: the path
works, the last hop is full) by (plane, T1). The rule weighed: a path is judged silent once its
plane's other paths delivered ``E`` x its own recent share of the plane's packets (a 1/64
moving average at its last arrival) since its last one -- or ``K`` packets outright. The
senders stop once a report could reach them (4 control hops later); what they sent by then
still enters the link (2 data hops on). ``est`` is the link's losses that entered before then
(at most the real loss); ``false`` counts verdicts on live paths over the whole run. With no
``NAME`` of ``bench.sim_incast_fault.NEIGHBOURS`` (``clean``) the incast runs fault-free.

It records packets through the network's sink, which compiled code fixes: it runs the sources.

    MRC_PURE_PYTHON=1 python -m bench.whatif_pooled_evidence NAME SEED...
"""

from __future__ import annotations

import os
import sys
from typing import Any

from mrc_host.sim import network
from mrc_host.sim.fabric import CONTROL_BYTES, DATA_OVERHEAD, SimPacket
from mrc_host.wire.messages import DataPacket

from . import sim_incast_fault
from .fault_oracle import OracleWatch

RULES = (("K", 16), ("K", 32), ("E", 4), ("E", 6), ("E", 8))
T1S = 4
ALPHA = 1 / 64


class Tap:
    """The network's sink in front of it: every DATA packet reaching host 0, by path."""

    def __init__(self, net: network.Network, into: list[tuple[int, int, int]]) -> None:
        self.net = net
        self.into = into

    def deliver(self, pkt: SimPacket, now: int) -> None:
        if pkt.dst == 0 and type(pkt.msg) is DataPacket and pkt.t1 is not None:
            self.into.append((now, pkt.plane, pkt.t1))
        self.net.deliver(pkt, now)

    def departed(self, pkt: SimPacket, now: int, port_gbps: float) -> None:
        self.net.departed(pkt, now, port_gbps)


def verdicts(arrivals: list[tuple[int, int, int]], kind: str, bound: float) -> list[tuple[int, int, int]]:
    """(time, plane, T1) of each verdict of the rule ``kind`` (``K``: count, ``E``: share)."""
    share: dict[tuple[int, int], float] = {}
    at_last: dict[tuple[int, int], float] = {}
    since: dict[tuple[int, int], int] = {}
    judged: set[tuple[int, int]] = set()
    out = []
    for t, p, j in arrivals:
        for jj in range(T1S):
            key = (p, jj)
            share[key] = share.get(key, 1 / T1S) * (1 - ALPHA) + (ALPHA if jj == j else 0.0)
        at_last[(p, j)] = share[(p, j)] if kind == "E" else 1.0
        since[(p, j)] = 0
        judged.discard((p, j))
        for jj in range(T1S):
            key = (p, jj)
            if jj == j or key not in at_last:
                continue
            since[key] += 1
            if since[key] * at_last[key] >= bound and key not in judged:
                judged.add(key)
                out.append((t, p, jj))
    return out


def one(name: str, seed: int) -> list[str]:
    shapes = {s[0]: s for s in sim_incast_fault.NEIGHBOURS}
    _, t1s, senders, at = shapes.get(name, ("clean", (), 8, 150_000))
    arrivals: list[tuple[int, int, int]] = []
    watches: list[OracleWatch] = []
    make, figures = network.Network.__init__, OracleWatch.figures

    def tapped(self: network.Network, *a: Any, **k: Any) -> None:
        make(self, *a, **k)
        self.fabric.sink = Tap(self, arrivals)  # type: ignore[assignment]

    def kept(self: OracleWatch) -> dict[str, Any]:
        watches.append(self)
        return figures(self)

    network.Network.__init__ = tapped  # type: ignore[method-assign]
    OracleWatch.figures = kept  # type: ignore[method-assign]
    try:
        r = sim_incast_fault.run(seed, t1s, senders, at)
    finally:
        network.Network.__init__ = make  # type: ignore[method-assign]
        OracleWatch.figures = figures  # type: ignore[method-assign]
    dead = {(w.dead.plane, w.dead.spine) for w in watches}
    lines = []
    if not watches:
        cells = [f"{k}{b}: false {len(verdicts(arrivals, k, b))}" for k, b in RULES]
        return [f"clean seed {seed}: " + " | ".join(cells)]
    for w, f in zip(watches, r["faults"], strict=True):
        path, start = (w.dead.plane, w.dead.spine), w.fault.start_ns
        c_hop = int(CONTROL_BYTES * w.dead.ns_per_byte) + w.dead.delay_ns
        d_hop = int((DATA_OVERHEAD + 4096) * w.dead.ns_per_byte) + w.dead.delay_ns
        drops = [d.at_ns for d in w.fault.drops if d.data]
        cells = []
        for kind, bound in RULES:
            v = verdicts(arrivals, kind, bound)
            hit = [t for t, p, j in v if (p, j) == path and t >= start]
            false = sum(1 for t, p, j in v if (p, j) not in dead or t < start)
            if hit:
                heard = hit[0] + 4 * c_hop + 2 * d_hop
                est = min(f["lost"], sum(t < heard for t in drops))
                cells.append(
                    f"{kind}{bound}: verdict +{(hit[0] - start) / 1e3:.1f}us est {est} false {false}"
                )
            else:
                cells.append(f"{kind}{bound}: none false {false}")
        lines.append(
            f"{name} seed {seed} {path}: lost {f['lost']} floor {f['floor']} oracle_sent {f['oracle_sent']} "
            f"due {f['due_us']} | " + " | ".join(cells)
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or os.environ.get("MRC_PURE_PYTHON") != "1":
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    for seed in map(int, args[1:]):
        for line in one(args[0], seed):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
