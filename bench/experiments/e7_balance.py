"""E7: spray balance: bytes per T1 uplink, MRC against ECMP, with few flows.

Fabric: 2 planes x 2 T0 x 4 T1 (8 uplinks under each T0), links at the calibrated rate. 1, 2 and 4
concurrent flows go from the hosts under T0 0 to the hosts under T0 1; the bytes each
T0 0 uplink sent come from the switches' port counters, read through the controller
(``GetCounters``), before and after. Balance = max / mean over the 8 uplinks (1.0 =
perfectly even). MRC rotates over one EV per (plane, T1); ECMP draws as many random EVs
and lets the T0 hash them onto T1s, so few flows collide on some uplinks.
"""

from __future__ import annotations

import sys
from typing import Any

from topologies.fidelity.rates import CALIBRATED

from .common import Context, Result, at_most, experiment_entry, fabric, fabric_info, step
from .lab import delta, uplink_tx_bytes
from .plots import bars
from .transfer import run_concurrent

ID = "e7"
TITLE = "spray balance over T1 uplinks, MRC vs ECMP, few flows"
SHAPE = (
    "MRC sprays every connection evenly over all paths (max/mean near 1); ECMP hashing with few flows "
    "leaves some uplinks idle and others doubled (the reason MRC avoids ECMP)."
)
SHAPE_FABRIC: dict[str, Any] = {"planes": 2, "t0": 2, "t1": 4, "hosts_per_t0": 2, "link_rate": CALIBRATED}
MODES = ("mrc", "ecmp")


def flow_sets(tb: object) -> dict[str, list[tuple[str, str]]]:
    topo = tb.topology  # type: ignore[attr-defined]
    left = [h.name for h in topo.hosts if h.t0_index == 0]
    right = [h.name for h in topo.hosts if h.t0_index == topo.t0_per_plane - 1]
    pairs = [(a, b) for a in left for b in right]
    return {"1 flow": pairs[:1], "2 flows": [pairs[0], pairs[-1]], "4 flows": pairs[:4]}


def balance(per_link: dict[str, int]) -> float:
    values = list(per_link.values())
    mean = sum(values) / len(values)
    return max(values) / mean if mean else float("nan")


def run(ctx: Context, res: Result) -> None:
    size = ctx.size(16, 4)
    with fabric(ctx, **SHAPE_FABRIC) as tb:
        res.fabric = fabric_info(tb)
        sets = flow_sets(tb)
        groups: dict[str, dict[str, float]] = {}
        data: dict[str, dict[str, Any]] = {}
        for label, pairs in sets.items():
            groups[label] = {}
            for mode in MODES:
                for src, dst in pairs:  # open the connections (EV draws) outside the measurement
                    tb.send(src, dst, 64 << 10, mode=mode)
                before = uplink_tx_bytes(tb, 0)
                runs, job_s = run_concurrent(tb, pairs, size, mode)
                per_link = delta(uplink_tx_bytes(tb, 0), before)
                b = balance(per_link)
                groups[label][mode] = b
                data.setdefault(label, {})[mode] = {
                    "pairs": pairs,
                    "bytes_per_uplink": per_link,
                    "max_over_mean": b,
                    "idle_uplinks": sum(1 for v in per_link.values() if v < 0.05 * max(per_link.values())),
                    "job_s": job_s,
                    "ok": all(r.ok for r in runs),
                }
                step(
                    f"E7 {label:7} {mode:4}: max/mean {b:.2f} over {len(per_link)} uplinks, job {job_s:.2f} s"
                )
            mrc, ecmp = groups[label]["mrc"], groups[label]["ecmp"]
            res.add(
                f"uplink max/mean, {label}",
                mrc,
                unit="x",
                mode="mrc",
                paper="even spray",
                **at_most(mrc, 1.15),
            )
            res.add(
                f"uplink max/mean, {label}",
                ecmp,
                unit="x",
                mode="ecmp",
                paper="hash collisions with few flows",
                expect="> MRC's",
                holds=ecmp > mrc,
            )
        res.data["cases"] = data
        res.plots.append(
            bars(
                ctx.out / "e7.png",
                "E7 bytes per T1 uplink: max / mean (1 = even)",
                groups,
                "max / mean",
                reference=1.0,
            ).name
        )


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
