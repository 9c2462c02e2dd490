"""A fault at 25 % of a transfer: a T0-T1 link turns into a black hole, and MRC carries on.

One transfer from the first host to the last; once a quarter of its bytes are acknowledged
the first T0-T1 uplink of plane 0 drops everything (FaultAt: no thread or sleep of your own).
Prints the typed result, what the fault cost, and the EVs it retired.

    sudo .venv/bin/python examples/fault_mid_transfer.py [--target linux|bmv2] [--size-mib 8]
"""

from __future__ import annotations

import sys

from _common import need_root, parser

from topologies.experiment import FaultAt, transfer
from topologies.testbed import Testbed, TestbedConfig


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--size-mib", type=int, default=8, help="transfer size (default 8 MiB)")
    args = ap.parse_args(argv)
    need_root()
    config = TestbedConfig(link_rate=20, target=args.target, runs_root=args.runs, prefix=args.prefix)
    with Testbed(config) as tb:
        src, dst = tb.host_names()[0], tb.host_names()[-1]
        link = f"{args.prefix}t0p0n0-{args.prefix}t1p0n0"  # the sender's T0 to T1 0, plane 0
        r = transfer(tb, src, dst, args.size_mib << 20, faults=[FaultAt(0.25, "blackhole", link)])
        f = r.faults[0]
        print(
            f"{src} -> {dst}: ok={r.ok} verified={r.verified} {r.seconds:.2f} s {r.goodput_mbit_s:.1f} Mbit/s"
        )
        if f.injected_s is None:
            print(f"fault not injected: {f.error}")
            return 1
        print(
            f"{f.kind} {f.target}: due at {f.at:.0%}, fired at {f.injected_s:.2f} s, "
            f"{f.bytes_acked_at_injection / r.bytes:.0%} acknowledged then (a 1 MiB write at a time): "
            f"{f.packets_dropped} packets dropped there, {r.retransmissions} retransmissions"
        )
        retired = [c for c in r.ev_changes if c.new == "ASSUMED_BAD"]
        on_path = all((c.plane, c.t1) == (0, 0) for c in retired)
        print(f"{len(retired)} EVs retired, all on the dead path (plane 0, T1 0): {on_path}")
        tb.controller.clear(f.fault_id)
    return 0 if r.ok and f.packets_dropped > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
