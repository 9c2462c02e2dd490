"""Your own P4 program on every BMv2 switch, and its table read back: packets per EV path.

Runs examples/p4/ev_telemetry.p4 (mrc_switch.p4 plus a table `ev_path` with a direct
counter) on every switch; the controller installs the MRC tables as always and leaves
`ev_path` to us. We add one entry per (plane, T1) path on the sender's T0 switches over
BMv2's Thrift runtime (what `p4 SWITCH table_add ...` does in the CLI, found through the
run's switches.json), send a transfer, and read each entry's counter.

    sudo .venv/bin/python examples/p4_telemetry.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import need_root, parser

from topologies.experiment import transfer
from topologies.switch_records import load_switch_records
from topologies.switch_tools import counter_read, table_add
from topologies.testbed import Testbed, TestbedConfig

PROGRAM = Path(__file__).resolve().parent / "p4" / "ev_telemetry.p4"
TABLE = "MrcIngress.user_ingress.ev_path"
COUNTER = "MrcIngress.user_ingress.ev_path_hits"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    need_root()
    config = TestbedConfig(
        link_rate=20, p4=PROGRAM, target=args.target, runs_root=args.runs, prefix=args.prefix
    )
    with Testbed(config) as tb:
        src, dst = tb.host_names()[0], tb.host_names()[-1]
        switches = load_switch_records(tb.run.path)  # what `mrc-testbed switches` shows
        t0s = [s for s in switches.switches if s.role == "t0" and s.index == 0]  # the sender's, per plane
        handles = {}
        for sw in t0s:
            for t1 in range(tb.topology.t1_per_plane):
                handles[(sw.name, sw.plane, t1)] = table_add(sw, TABLE, "count_path", [sw.plane << 10 | t1])
        r = transfer(tb, src, dst, 2 << 20)
        counts = {key: counter_read(switches.switch(key[0]), COUNTER, h) for key, h in handles.items()}
    print(
        f"transfer ok={r.ok}, {r.data_packets_sent} data packets sent; packets per path at the sender's T0s:"
    )
    for (name, plane, t1), (packets, nbytes) in sorted(counts.items()):
        print(f"  {name} plane {plane} T1 {t1}: {packets:6d} packets {nbytes:10,d} bytes")
    return 0 if r.ok and all(packets > 0 for packets, _b in counts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
