"""A fabric of your own shape: 3 planes of 3 T1 switches, one host under each T0.

Brings the fabric up (as `mrc-testbed --planes 3 --t1 3 --hosts-per-t0 1` would), pings
across it with Mininet's own ping, lists the paths from the first host to the last, and
sends an MRC transfer over all of them; --cli then opens the Mininet CLI on it.

    sudo .venv/bin/python examples/custom_fabric.py [--target linux|bmv2] [--cli]
"""

from __future__ import annotations

import sys

from _common import need_root, parser

from topologies.experiment import transfer
from topologies.testbed import Testbed, TestbedConfig, summary


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--cli", action="store_true", help="open the Mininet CLI (with the MRC verbs) at the end")
    args = ap.parse_args(argv)
    need_root()
    config = TestbedConfig(
        planes=3, t0=2, t1=3, hosts_per_t0=1,
        link_rate=20,  # Mbit/s per link: a rate every data plane carries faithfully here
        target=args.target, runs_root=args.runs, prefix=args.prefix,
    )  # fmt: skip
    with Testbed(config) as tb:
        print(summary(tb))
        src, dst = tb.host_names()[0], tb.host_names()[-1]
        loss = tb.net.ping([tb.net.get(src), tb.net.get(dst)], timeout="2")  # Mininet's ping, IPv4
        print(f"ping {src} <-> {dst}: {loss:.0f} % lost")
        paths = tb.controller.paths(src, dst)  # one per (plane, T1), walked through the tables
        print(
            f"{len(paths)} paths {src} -> {dst}: "
            + ", ".join(f"p{p.plane}/T1 {p.t1} {p.status}" for p in paths)
        )
        r = transfer(tb, src, dst, 2 << 20)
        print(
            f"transfer: ok={r.ok} {r.bytes_acked:,} bytes in {r.seconds:.2f} s, {r.goodput_mbit_s:.1f} Mbit/s"
        )
        if args.cli:
            from topologies.cli import MrcCLI

            MrcCLI(tb.net, testbed=tb)
    return 0 if r.ok and loss == 0 and len(paths) == 9 else 1


if __name__ == "__main__":
    sys.exit(main())
