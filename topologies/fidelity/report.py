"""A verdict in words: the demo's summary lines, one line for a report row, advice.

Works on the verdict as written to JSON (``Verdict.as_dict``, ``fidelity.json``), so the
demo, ``bench/report.py``, the CLI and ``mrc view`` say the same thing the same way.
"""

from __future__ import annotations

from typing import Any

ADVICE = (
    "what to do: rerun with a lower --link-rate or after `mrc-testbed calibrate`; on a busy machine, "
    "when nothing else runs; docs/testbed.md, 'Fidelity'"
)


def busiest(v: dict[str, Any], n: int = 3) -> list[tuple[str, float]]:
    """The ``n`` judged processes that used the most CPU (median cores), most first."""
    procs = v.get("figures", {}).get("processes", {})
    rows = [(k, float(p.get("cpu_median", 0))) for k, p in procs.items() if not k.startswith("driver")]
    return sorted(rows, key=lambda kv: -kv[1])[:n]


def figures_line(v: dict[str, Any]) -> str:
    """The numbers behind a verdict, in one line."""
    f = v.get("figures", {})
    rate = f.get("link_rate_mbit_s")
    links = f.get("links", {})
    top = max((float(x.get("mbit_s_max", 0)) for x in links.values()), default=0.0)
    drops = f.get("drops", {})
    parts = [
        f"{v.get('active_intervals', 0)} s of traffic judged",
        f"links {f'{rate:g}' if rate else 'unlimited'} Mbit/s, busiest direction {top:.1f}",
        "CPU " + ", ".join(f"{k} {c:.2f}" for k, c in busiest(v)),
        f"machine busy {f.get('machine_busy_median') or 0:.0%} "
        f"(other work {f.get('outside_cores_median') or 0:.1f} cores)",
        f"{drops.get('total', 0)} of {drops.get('frames', 0)} frames dropped outside the design",
    ]
    pacers = f.get("agent_pacers")
    if pacers:  # the agents' own NIC queues (mrc_host/agent/pacer.py)
        most = max(pacers.values(), key=lambda p: p.get("mean_wait_ms", 0))
        parts.append(
            f"agent pacers: at most {max(int(p.get('max_queued', 0)) for p in pacers.values())} frames "
            f"waiting, mean wait up to {most.get('mean_wait_ms', 0):g} ms"
        )
    if drops.get("by_design"):  # a queue slowed on purpose, full: the experiment's congestion
        parts.append(f"{sum(drops['by_design'].values())} lost in BMv2 queues slowed on purpose")
    return "; ".join(parts)


def summary_lines(v: dict[str, Any]) -> list[str]:
    """The demo's fidelity paragraph."""
    head = "fidelity: " + ("faithful" if v.get("faithful") else "NOT FAITHFUL")
    lines = [head + f" ({figures_line(v)})"]
    if not v.get("faithful"):
        lines += [f"  - {r}" for r in v.get("reasons", [])]
        lines.append(f"  {ADVICE}")
    return lines


def cell(v: dict[str, Any] | None) -> str:
    """One short phrase for a report row: 'faithful', or 'not faithful: <first reason>'."""
    if not v:
        return "not judged (no monitor)"
    if v.get("faithful"):
        return "faithful"
    reasons = v.get("reasons", [])
    more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
    return f"not faithful: {reasons[0] if reasons else '?'}{more}"
