"""A capture read back with scapy: every MRC frame on one link, decoded by the project's layers.

Captures the first host's plane-0 uplink while it sends a transfer, then reads the pcap
with scapy (the same file opens in Wireshark) and counts the frames by message and by the
path (plane, T1) their EV names.

    sudo .venv/bin/python examples/capture_scapy.py [--target linux|bmv2]
"""

from __future__ import annotations

import sys
from collections import Counter

from _common import need_root, parser
from scapy.utils import rdpcap

from mrc_fabric.ev import EV
from mrc_host.wire.layers import message_from_scapy
from topologies.experiment import transfer
from topologies.testbed import Testbed, TestbedConfig


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    args = ap.parse_args(argv)
    need_root()
    config = TestbedConfig(link_rate=20, target=args.target, runs_root=args.runs, prefix=args.prefix)
    with Testbed(config) as tb:
        src, dst = tb.host_names()[0], tb.host_names()[-1]
        cap = tb.capture(f"{src}:0", seconds=60)  # the host's end of its plane-0 link
        r = transfer(tb, src, dst, 1 << 20)
        cap.stop()  # every frame tcpdump saw is in the file once this returns
    kinds: Counter[str] = Counter()
    paths: Counter[tuple[int, int]] = Counter()
    for pkt in rdpcap(str(cap.path)):
        try:
            msg = message_from_scapy(pkt)  # ValueError: not an MRC frame (neighbour discovery...)
        except ValueError:
            kinds["not MRC"] += 1
            continue
        kinds[type(msg).__name__] += 1
        ev = EV.decode(msg.meta.ev)
        paths[(ev.plane, ev.t1)] += 1
    print(
        f"transfer ok={r.ok}; {cap.path}: {sum(kinds.values())} frames: "
        + ", ".join(f"{n} {k}" for k, n in kinds.most_common())
    )
    print("by path (plane, T1): " + ", ".join(f"{p}: {n}" for p, n in sorted(paths.items())))
    return 0 if r.ok and kinds["DataPacket"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
