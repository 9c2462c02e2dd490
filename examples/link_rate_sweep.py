"""A sweep over link rates: one fresh fabric per rate, the same transfer, goodput against rate.

Writes sweep.json (one typed point per rate) and sweep.png into --out.

    sudo .venv/bin/python examples/link_rate_sweep.py --rates 5 10 20 [--target linux|bmv2]
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from _common import need_root, parser

from topologies.experiment import transfer
from topologies.testbed import Testbed, TestbedConfig


@dataclass(frozen=True)
class SweepPoint:
    link_rate_mbit_s: float  # every link of the fabric
    size: int  # bytes sent
    ok: bool  # completed and verified
    seconds: float
    goodput_mbit_s: float
    faithful: str  # the run's fidelity verdict: "faithful", or "not faithful: why"


def main(argv: list[str] | None = None) -> int:
    ap = parser(__doc__)
    ap.add_argument("--rates", type=float, nargs="+", default=[5.0, 10.0, 20.0], help="Mbit/s per link")
    ap.add_argument("--seconds", type=float, default=2.0, help="each transfer lasts about this long (2 s)")
    ap.add_argument("--out", type=Path, default=Path("results/link-rate-sweep"))
    args = ap.parse_args(argv)
    need_root()
    points = []
    for rate in args.rates:
        config = TestbedConfig(link_rate=rate, target=args.target, runs_root=args.runs, prefix=args.prefix)
        with Testbed(config) as tb:
            src, dst = tb.host_names()[0], tb.host_names()[-1]
            # two planes carry the transfer: 2 x rate, less the headers; 1 MiB at least
            size = max(1 << 20, int(2 * rate * 1e6 / 8 * args.seconds * 0.8))
            r = transfer(tb, src, dst, size)
            verdict = tb.fidelity.verdict().text if tb.fidelity is not None else "not watched"
        points.append(SweepPoint(rate, size, r.ok, r.seconds, r.goodput_mbit_s, verdict))
        print(f"{rate:6g} Mbit/s links: ok={r.ok} {r.goodput_mbit_s:6.2f} Mbit/s goodput ({verdict})")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sweep.json").write_text(json.dumps([asdict(p) for p in points], indent=1) + "\n")
    plot(points, args.out / "sweep.png")
    print(f"written: {args.out / 'sweep.json'}, {args.out / 'sweep.png'}")
    return 0 if all(p.ok for p in points) else 1


def plot(points: list[SweepPoint], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    rates = [p.link_rate_mbit_s for p in points]
    ax.plot(rates, [p.goodput_mbit_s for p in points], "o-", label="MRC goodput, 2 planes")
    ax.plot(rates, [2 * r for r in rates], "--", color="grey", label="2 x link rate (both planes)")
    ax.set_xlabel("link rate (Mbit/s)")
    ax.set_ylabel("goodput (Mbit/s)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
