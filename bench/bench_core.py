"""Sans-I/O core speed: DATA packets/s through a sender and a receiver, no I/O at all.

Why: the core runs inside the host agent's packet loop, so its per-packet cost is a
floor under the agent's cost (codec and sockets come on top). Two endpoints are wired
back to back in memory (mrc_host.sim.loopback); every DATA packet, SACK and timer is
processed by the real state machines. Optional random loss exercises loss recovery.
Writes ``core.json`` and ``core.png`` under ``--out``.

    python -m bench.bench_core --out results/ [--quick]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mrc_host.core import Mode
from mrc_host.sim.loopback import BASE, RKEY, make_pair
from mrc_host.wire.messages import DataPacket


@dataclass
class Result:
    mode: str
    mtu: int
    loss: float
    data_packets: int  # DATA packets the sender put on the wire (incl. retransmissions)
    seconds: float
    packets_per_s: float
    goodput_gbit_per_s_cpu: float  # payload bytes per CPU second, as if I/O were free
    completed: bool


def one(mode: Mode, mtu: int, size: int, loss: float, seed: int = 1) -> Result:
    p = make_pair(size=size, mode=mode, mtu=mtu)
    drop = random.Random(seed)
    data = random.Random(seed + 1).randbytes(size)
    t0 = time.perf_counter()
    _, acts = p.a.post_write(data, BASE, RKEY, p.now)
    p.absorb(p.a, acts)
    for _ in range(1_000_000):
        if p.sent_done():
            break
        if not p.in_flight:
            p.fire_timers()
            continue
        batch, p.in_flight = p.in_flight, []
        p.now += 100
        for dst, msg in batch:
            if loss and isinstance(msg, DataPacket) and drop.random() < loss:
                continue
            p.absorb(dst, dst.receive(msg, p.now))
    seconds = time.perf_counter() - t0
    sent = p.a.counters.data_packets_sent
    region = p.b.regions.get(RKEY)
    ok = bool(p.sent_done()) and region is not None and bytes(region.buffer) == data
    return Result(mode.value, mtu, loss, sent, seconds, sent / seconds, size * 8 / seconds / 1e9, ok)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_core", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="smaller transfers")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    size = (4 if args.quick else 32) << 20
    results = []
    for mode in (Mode.MRC, Mode.SINGLE_PATH, Mode.ECMP):
        for mtu in (1024, 4096):
            results.append(one(mode, mtu, size if mtu == 4096 else size // 4, 0.0))
    results.append(one(Mode.MRC, 1024, size // 4, 0.01))
    for r in results:
        print(
            f"{r.mode:12} mtu {r.mtu:5} loss {r.loss:4.0%}: {r.packets_per_s:9.0f} DATA pkt/s "
            f"({r.goodput_gbit_per_s_cpu:5.2f} Gb/s of payload per CPU second), ok={r.completed}"
        )
    doc = {
        "benchmark": "sans-I/O core: sender + receiver in one process, in-memory wire",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": [asdict(r) for r in results],
    }
    (args.out / "core.json").write_text(json.dumps(doc, indent=1))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    labels = [f"{r.mode}\nmtu {r.mtu}" + (f"\n{r.loss:.0%} loss" if r.loss else "") for r in results]
    ax.bar(range(len(results)), [r.packets_per_s / 1e3 for r in results], color="#2ca02c")
    ax.set_xticks(range(len(results)), labels, fontsize=7)
    ax.set_ylabel("thousand DATA packets/s (one core)")
    ax.set_title("MRC core without I/O: sender + receiver + SACKs")
    fig.tight_layout()
    fig.savefig(args.out / "core.png", dpi=110)
    plt.close(fig)
    print(f"wrote {args.out / 'core.json'} and {args.out / 'core.png'}")
    return 0 if all(r.completed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
