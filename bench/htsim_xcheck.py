"""mrc-sim side by side with UEC's reference simulator, htsim_uec, on one two-tier fabric.

Why: mrc-sim runs the project's own transport core on the project's own fabric model;
neither was written against an outside reference. htsim_uec (htsim with the Ultra Ethernet
Consortium's NSCC and its receiver-credit CC, RCCC) is one. Both simulators get the same
fabric (one plane: hosts under T0 switches, every T0 linked to every T1, 100 Gb/s, 1 us per
link, the same queue and ECN thresholds in packets) and the same traffic: an 8->1 incast, one
long flow and a random permutation. Each run is judged against its own simulator's on-wire
ideal (its packets carry different header bytes), and the table gives completion, trims,
drops and pauses side by side.

htsim is run in the congestion-control modes that bracket MRC's design:
``nscc`` (UET's default: ECN also on the last hop), ``nscc-no-lasthop-ecn`` (MRC's switches:
no ECN towards hosts, nothing else in its place) and ``nscc+rccc`` (NSCC plus receiver
credit; htsim then turns last-hop ECN off itself) -- the mode whose signals mrc-sim's
transport models, so the verdict (completion within 5 %, trims within 1.5x) is taken
against it.

The incast runs once more over lossless fabrics: mrc-sim's PFC mode against htsim's
``lossless_input`` queues (per-ingress XOFF/XON, pause frames that cross the link, hosts
pausable, no drop path), both with the same thresholds in packets. htsim's other lossless
model, ``lossless`` (``LosslessQueue``), is not used: at the upstream commit the shared build
comes from, its set-up asserts when the fat tree configures it, and it reserves five packets
per switch port out of every queue and never pauses a host. UEC's ``main_uec`` parses only
its own queue types; a build whose parser also takes ``lossless_input`` (and htsim's
``-pfc_thresholds LOW HIGH``, as its RoCE main has) runs the pair, otherwise the pair is
skipped with htsim's own refusal as the reason.

Cost beside accuracy: every run of either simulator is a process of its own, timed from
start to exit, with its CPU time and peak memory (``ru_maxrss``) read from ``wait4``: mrc-sim
once with real payloads and once with virtual ones (``--payload virtual``: the same results,
no buffers), htsim in every mode. ``--rounds N`` runs mrc-sim (both payloads) and htsim's
reference mode N times, interleaved, and gives each figure's median and range, and mrc-sim's
ratios to htsim on the medians (``cost`` in the JSON, ``htsim_xcheck_cost.md``). A bare
interpreter that imports the simulator is measured too (``floor``): what any mrc-sim run pays
before simulating. ``--scale`` adds a 1,024-host permutation and a 256-host all-to-all
(virtual payloads, one round).

htsim is looked for in ``$HTSIM_UEC``, else at ``../shared/htsim/htsim_uec`` from the
repository's root (or from its parent, for a worktree); without it the bench writes a
JSON that says it was skipped.

    python -m bench.htsim_xcheck --out results/ [--quick] [--rounds 3] [--scale] [--only NAME]
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.xcheck_sim import HTSIM_HEADER as HTSIM_HEADER
from bench.xcheck_sim import Case as Case
from bench.xcheck_sim import XFabric as XFabric
from bench.xcheck_sim import child
from bench.xcheck_sim import ideal_us as ideal_us
from bench.xcheck_sim import lossless_shape as lossless_shape
from bench.xcheck_sim import run_mrcsim as run_mrcsim
from mrc_host.sim.fabric import DATA_OVERHEAD as DATA_OVERHEAD
from mrc_host.sim.traffic import permutation_pairs

REPO = Path(__file__).resolve().parent.parent
HTSIM_MODES: dict[str, tuple[str, ...]] = {
    "nscc": ("-sender_cc_only", "-sender_cc_algo", "nscc"),
    "nscc-no-lasthop-ecn": ("-sender_cc_only", "-sender_cc_algo", "nscc", "-no_tor_downlink_ecn"),
    "nscc+rccc": ("-sender_cc", "-sender_cc_algo", "nscc", "-receiver_cc"),
}
REFERENCE = "nscc+rccc"  # the htsim mode whose congestion signals mrc-sim's transport models
COMPLETION_BAR = 0.05  # mrc-sim's completion/ideal within 5 % of htsim's
TRIM_BAR = 1.5  # mrc-sim's trims within 1.5x of htsim's (either way)
# cost targets: mrc-sim (virtual payloads) within this many times htsim's wall time and peak memory
COST_BARS = {"permutation": 3.0, "incast-8to1": 2.0}
PAYLOADS = ("real", "virtual")


def find_htsim() -> Path | None:
    """``$HTSIM_UEC``, else ``shared/htsim/htsim_uec`` in the directory holding the repository
    (or the one above it: a git worktree of it); None if none is an executable file."""
    env = os.environ.get("HTSIM_UEC")
    candidates = [Path(env)] if env else []
    candidates += [up / "shared" / "htsim" / "htsim_uec" for up in REPO.parents[:2]]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def scale_cases(quick: bool, seed: int) -> list[tuple[XFabric, Case]]:
    """Production-scale cases, each on its own fabric: a 1,024-host permutation (32 T0 x 32
    hosts, 32 T1) and a 256-host all-to-all (16 x 16, 16 T1: 65,280 connections)."""
    big = XFabric(t0=32, t1=32, hosts_per_t0=32)
    a2a = XFabric(t0=16, t1=16, hosts_per_t0=16)
    perm = tuple(permutation_pairs(list(range(big.hosts)), random.Random(seed)))
    everyone = tuple((a, b) for a in range(a2a.hosts) for b in range(a2a.hosts) if a != b)
    return [
        (big, Case("permutation-1024", perm, (256 << 10) if quick else (2 << 20))),
        # 16 EVs a connection, one per path: at the default 128, 65,280 connections hold ~7 GB
        (a2a, Case("all-to-all-256", everyone, (16 << 10) if quick else (64 << 10), evs=16)),
    ]


def cases(fab: XFabric, quick: bool, seed: int) -> list[Case]:
    per = fab.hosts_per_t0
    incast = tuple((per + i, 0) for i in range(8))  # 8 senders under other T0s -> host 0
    hosts = list(range(fab.hosts))
    perm = tuple(permutation_pairs(hosts, random.Random(seed)))
    return [
        Case("incast-8to1", incast, (512 << 10) if quick else (2 << 20)),
        Case("long-flow", ((0, fab.hosts - 1),), (4 << 20) if quick else (16 << 20)),
        Case("permutation", perm, (256 << 10) if quick else (2 << 20)),
    ]


def htsim_matrix(fab: XFabric, case: Case) -> str:
    lines = [f"Nodes {fab.hosts}", f"Connections {len(case.pairs)}"]
    lines += [f"{s}->{d} id {i + 1} start 0 size {case.size}" for i, (s, d) in enumerate(case.pairs)]
    return "\n".join(lines) + "\n"


_FINISHED = re.compile(r"^Flow \S+ flowId (\d+) .* finished at ([0-9.]+)")
_TOTALS = re.compile(r"^New: (\d+) Rtx: (\d+) .* NACKs: (\d+)")


def parse_htsim(text: str, flows: int) -> dict[str, Any]:
    """Completion (last flow's finish), trims (NACKs) and retransmissions from htsim's stdout."""
    finished = [float(m[2]) for line in text.splitlines() if (m := _FINISHED.match(line))]
    totals = next((m for line in text.splitlines() if (m := _TOTALS.match(line))), None)
    if totals is None:
        raise RuntimeError("htsim_uec printed no totals line (New: ... NACKs: ...)")
    new, rtx, nacks = (int(totals[i]) for i in (1, 2, 3))
    return {
        "completed": len(finished) == flows,
        "flows_finished": len(finished),
        "completion_us": max(finished) if len(finished) == flows else None,
        "data_packets": new,
        "retransmissions": rtx,
        "trims": nacks,  # every trimmed packet is answered by one NACK
        "drops": None,  # not in htsim's summary
        # a resend no NACK explains: a timeout (of a dropped packet, or a spurious one)
        "timeout_resends": max(0, rtx - nacks),
        "pauses": None,  # not in htsim's summary
    }


class HtsimUnsupported(RuntimeError):
    """The htsim_uec build lacks an option the case needs (its UEC main takes few queue types)."""


def htsim_command(binary: Path, fab: XFabric, mode: str, end_us: int, lossless: bool = False) -> list[str]:
    """htsim_uec's command line for a case (files ``fabric.topo`` and ``traffic.cm``)."""
    queue = fab.buffer_pkts if lossless else fab.queue_pkts
    xon, xoff = fab.pfc_pkts
    lossless_args = ("-queue_type", "lossless_input", "-pfc_thresholds", str(xon), str(xoff))
    return [
        str(binary), "-topo", "fabric.topo", "-tm", "traffic.cm", "-nodes", str(fab.hosts),
        *HTSIM_MODES[mode], "-mtu", str(fab.htsim_packet), "-q", str(queue),
        "-ecn", str(fab.ecn_pkts), str(fab.ecn_pkts), "-end", str(end_us), "-o", "htsim.log",
        *(lossless_args if lossless else ()),
    ]  # fmt: skip


def run_htsim(
    binary: Path, fab: XFabric, case: Case, mode: str, end_us: int, lossless: bool = False
) -> dict[str, Any]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="htsim-xcheck-") as tmp:
        d = Path(tmp)
        (d / "fabric.topo").write_text(fab.htsim_topo())
        (d / "traffic.cm").write_text(htsim_matrix(fab, case))
        cmd = htsim_command(binary, fab, mode, end_us, lossless)
        code, stdout, stderr, cost = measured(cmd, d, timeout=3600)
        unknown = re.search(r"Unknown (?:queue type|parameter) \S*", stdout)
        if unknown is not None:
            raise HtsimUnsupported(f"this htsim_uec build refuses it: {unknown[0]}")
        if code != 0:
            raise RuntimeError(f"htsim_uec exited {code}: {stderr.strip()[-300:]}")
        out = parse_htsim(stdout, len(case.pairs))
    out["seconds"] = cost["wall_s"]
    out["cost"] = cost
    out["ideal_us"] = ideal_us(case, fab.htsim_packet, fab.payload, fab.gbps)
    return out


GNU_TIME = Path("/usr/bin/time")  # Debian's ``time`` package


def measured(cmd: list[str], cwd: Path | None, timeout: float) -> tuple[int, str, str, dict[str, float]]:
    """Run ``cmd`` as a process of its own: (exit code, stdout, stderr, cost). Cost is its wall
    time from start to exit, its CPU time (user + system, from ``wait4``) and its peak resident
    memory. The peak comes from GNU time, which starts the command from its own small
    process: a process forked from this one counts this one's memory as its own high-water
    mark (Linux keeps it across ``exec``), ~20 MB that htsim's 6 MB would drown in. Without
    GNU time it is read from ``wait4`` and flagged ``peak_includes_launcher``."""
    import subprocess
    import tempfile
    import threading

    with tempfile.TemporaryDirectory(prefix="xcheck-cost-") as tmp:
        peak_file = Path(tmp) / "peak"
        err_file = Path(tmp) / "stderr"
        timed = GNU_TIME.is_file()
        full = [str(GNU_TIME), "-f", "%M", "-o", str(peak_file), *cmd] if timed else cmd
        with err_file.open("wb") as err:
            started = time.perf_counter()
            proc = subprocess.Popen(full, cwd=cwd, stdout=subprocess.PIPE, stderr=err, text=True)
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            try:
                assert proc.stdout is not None
                stdout = proc.stdout.read()
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
            wall = time.perf_counter() - started
            proc.returncode = code = os.waitstatus_to_exitcode(status)
            proc.stdout.close()
        stderr = err_file.read_text(errors="replace")
        peak_kb = float(usage.ru_maxrss)
        if timed:
            last = (peak_file.read_text().strip().splitlines() or ["0"])[-1]
            peak_kb = float(last) if last.isdigit() else peak_kb
    cost: dict[str, float] = {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_mb": round(peak_kb / 1024, 1),
    }
    if not timed:
        cost["peak_includes_launcher"] = 1.0
    return code, stdout, stderr, cost


def run_mrcsim_process(
    fab: XFabric, case: Case, seed: int, lossless: bool = False, payload: str = "real"
) -> dict[str, Any]:
    """``run_mrcsim`` in a fresh interpreter (``python -m bench.xcheck_sim``), with the process's cost."""
    import tempfile

    spec = {
        "fabric": asdict(fab),
        "case": {"name": case.name, "pairs": case.pairs, "size": case.size, "evs": case.evs},
        "seed": seed,
        "lossless": lossless,
        "payload": payload,
    }
    with tempfile.TemporaryDirectory(prefix="xcheck-child-") as tmp:
        path = Path(tmp) / "spec.json"  # (65,280 pairs are too long for a command line)
        path.write_text(json.dumps(spec))
        cmd = [sys.executable, "-m", "bench.xcheck_sim", str(path)]
        code, stdout, stderr, cost = measured(cmd, REPO, timeout=3600)
    if code != 0:
        raise RuntimeError(f"mrc-sim ({payload}) exited {code}: {stderr.strip()[-500:]}")
    out: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    out["cost"] = cost
    return out


FLOOR = "import bench.xcheck_sim"


def floor_cost() -> dict[str, float]:
    """A fresh interpreter that imports the simulator and exits: what every run pays first."""
    return measured([sys.executable, "-c", FLOOR], REPO, timeout=120)[3]


def compare(mrc: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    """mrc-sim against the reference htsim run: each against its own ideal, then the bars."""
    out: dict[str, Any] = {}
    for who, r in (("mrc_sim", mrc), ("htsim", ref)):
        c = r["completion_us"]
        out[f"{who}_over_ideal"] = None if c is None else c / r["ideal_us"]
    a, b = out["mrc_sim_over_ideal"], out["htsim_over_ideal"]
    out["completion_gap"] = None if a is None or b is None else a / b - 1
    out["completion_within"] = (
        out["completion_gap"] is not None and abs(out["completion_gap"]) <= COMPLETION_BAR
    )
    t_m, t_h = mrc["trims"], ref["trims"]
    out["trim_ratio"] = (t_m / t_h) if t_h else (None if t_m else 1.0)
    out["trims_within"] = max(t_m, 1) <= TRIM_BAR * max(t_h, 1) and max(t_h, 1) <= TRIM_BAR * max(t_m, 1)
    return out


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.3f}"


SAME_RESULTS = ("completed", "completion_us", "data_packets", "retransmissions", "trims", "drops", "events")


def run_case(
    binary: Path,
    fab: XFabric,
    case: Case,
    seed: int,
    payloads: tuple[str, ...] = PAYLOADS,
    modes: tuple[str, ...] = tuple(HTSIM_MODES),
) -> dict[str, Any]:
    """Both simulators on one case, each run a process of its own (``measured``): mrc-sim once
    per payload kind (the results must not differ), htsim once per mode."""
    runs = {p: run_mrcsim_process(fab, case, seed, payload=p) for p in payloads}
    mrc = runs[payloads[0]]
    differ = [k for k in SAME_RESULTS for r in runs.values() if r[k] != mrc[k]]
    if differ:
        raise RuntimeError(f"{case.name}: real and virtual payloads differ in {sorted(set(differ))}")
    end_us = int(20 * mrc["ideal_us"]) + 1000
    ht = {mode: run_htsim(binary, fab, case, mode, end_us) for mode in modes}
    v = compare(mrc, ht[REFERENCE])
    ref = ht[REFERENCE]
    print(
        f"   {case.name}: mrc-sim {mrc['completion_us']} us (x{_f(v['mrc_sim_over_ideal'])} ideal), "
        f"{mrc['trims']} trims; htsim {REFERENCE} {ref['completion_us']} us "
        f"(x{_f(v['htsim_over_ideal'])}), {ref['trims']} trims",
        flush=True,
    )
    return {
        "case": case.name,
        "hosts": fab.hosts,
        "flows": len(case.pairs),
        "size": case.size,
        "mrc_sim": mrc,
        "mrc_sim_cost": {p: [r["cost"]] for p, r in runs.items()},
        "htsim": ht,
        "htsim_cost": [ht[REFERENCE]["cost"]],
        "verdict": v,
        "end_us": end_us,
    }


def more_rounds(binary: Path, fab: XFabric, case: Case, row: dict[str, Any], seed: int) -> None:
    """One more round of cost: mrc-sim with each payload, then htsim's reference mode."""
    for p in row["mrc_sim_cost"]:
        row["mrc_sim_cost"][p].append(run_mrcsim_process(fab, case, seed, payload=p)["cost"])
    row["htsim_cost"].append(run_htsim(binary, fab, case, REFERENCE, row["end_us"])["cost"])


def spread(costs: list[dict[str, float]]) -> dict[str, Any]:
    """Median, minimum and maximum of each cost figure over rounds."""
    import statistics

    out: dict[str, Any] = {"rounds": len(costs)}
    for k in ("wall_s", "cpu_s", "peak_mb"):
        xs = [c[k] for c in costs]
        out[k] = {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}
    return out


def cost_summary(row: dict[str, Any]) -> dict[str, Any]:
    """Per simulator the spread of its cost, and mrc-sim's ratios to htsim on the medians."""
    ht = spread(row["htsim_cost"])
    out: dict[str, Any] = {"htsim": ht}
    for p, costs in row["mrc_sim_cost"].items():
        m = spread(costs)
        m["over_htsim"] = {
            k: round(m[k]["median"] / ht[k]["median"], 2) if ht[k]["median"] else None
            for k in ("wall_s", "cpu_s", "peak_mb")
        }
        out[f"mrc_sim_{p}"] = m
    return out


def run_lossless_case(binary: Path, fab: XFabric, case: Case, seed: int) -> dict[str, Any]:
    """The same traffic over lossless fabrics: mrc-sim's PFC mode against htsim's
    ``lossless_input`` queues, with the same XOFF/XON in packets."""
    mrc = run_mrcsim_process(fab, case, seed, lossless=True, payload="virtual")
    end_us = int(20 * mrc["ideal_us"]) + 1000
    ht = {REFERENCE: run_htsim(binary, fab, case, REFERENCE, end_us, lossless=True)}
    v = compare(mrc, ht[REFERENCE])
    print(
        f"   {case.name} lossless: mrc-sim PFC {mrc['completion_us']} us, {mrc['pauses']} pauses; "
        f"htsim lossless_input {ht[REFERENCE]['completion_us']} us",
        flush=True,
    )
    return {
        "case": f"{case.name} (lossless)",
        "flows": len(case.pairs),
        "size": case.size,
        "mrc_sim": mrc,
        "htsim": ht,
        "verdict": v,
    }


def _cell(s: dict[str, Any], k: str) -> str:
    f = s[k]
    if s["rounds"] == 1:
        return f"{f['median']:g}"
    return f"{f['median']:g} ({f['min']:g} to {f['max']:g})"


def cost_table(rows: list[dict[str, Any]], floor: dict[str, float]) -> str:
    """Markdown: per case and simulator, wall, CPU and peak memory (median and range over
    rounds), and mrc-sim's ratios to htsim."""
    head = "| case | hosts | simulator | rounds | wall (s) | CPU (s) | peak (MB) "
    head += "| wall ÷ htsim | peak ÷ htsim |\n"
    head += "|---|---:|---|---:|---:|---:|---:|---:|---:|\n"
    lines = []
    for row in rows:
        if "cost" not in row:
            continue
        for who, s in row["cost"].items():
            ratio = s.get("over_htsim", {})
            cells = [
                row["case"], row["hosts"], who.replace("_", "-"), s["rounds"],
                _cell(s, "wall_s"), _cell(s, "cpu_s"), _cell(s, "peak_mb"),
                ratio.get("wall_s", "—"), ratio.get("peak_mb", "—"),
            ]  # fmt: skip
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    foot = (
        f"\nFloor (a fresh interpreter importing mrc-sim, then exiting): {floor['wall_s']} s, "
        f"{floor['cpu_s']} s CPU, {floor['peak_mb']} MB.\n"
    )
    return head + "\n".join(lines) + "\n" + foot


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one line per simulator and mode, per case."""
    head = (
        "| case | simulator | completion (us) | ideal (us) | x ideal | trims | drops | resends | pauses |\n"
    )
    head += "|---|---|---:|---:|---:|---:|---:|---:|---:|\n"
    lines = []
    for row in rows:
        runs = [("mrc-sim (MRC, NSCC)", row["mrc_sim"])]
        runs += [(f"htsim {m}{' (reference)' if m == REFERENCE else ''}", r) for m, r in row["htsim"].items()]
        for who, r in runs:
            c = r["completion_us"]
            x = "—" if c is None else f"{c / r['ideal_us']:.3f}"
            cs = "did not finish" if c is None else f"{c:.1f}"
            drops, pauses = ("—" if r[k] is None else r[k] for k in ("drops", "pauses"))
            cells = [
                row["case"],
                who,
                cs,
                f"{r['ideal_us']:.1f}",
                x,
                r["trims"],
                drops,
                r["retransmissions"],
                pauses,
            ]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return head + "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    names = ["mrc-sim", *HTSIM_MODES]
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        # a lossless row has htsim's reference mode only: no bar for the others there
        runs = [row["mrc_sim"] if name == "mrc-sim" else row["htsim"].get(name) for row in rows]
        xs = [i + k * width for i, r in enumerate(runs) if r is not None]
        done = [r for r in runs if r is not None]
        axes[0].bar(xs, [(r["completion_us"] or 0) / r["ideal_us"] for r in done], width=width, label=name)
        axes[1].bar(xs, [r["trims"] for r in done], width=width, label=name)
    for ax, title in ((axes[0], "completion / own on-wire ideal"), (axes[1], "packets trimmed")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(rows))])
        ax.set_xticklabels([row["case"] for row in rows])
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="upper center", ncols=len(names))
        ax.set_ylim(0, ax.get_ylim()[1] * 1.2)  # room for the legend above the bars
    axes[0].axhline(1.0, color="k", linewidth=0.6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _parser() -> Any:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m bench.htsim_xcheck", description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results"))
    ap.add_argument("--quick", action="store_true", help="smaller transfers")
    ap.add_argument("--seed", type=int, default=1, help="mrc-sim's seed and the permutation's")
    ap.add_argument("--rounds", type=int, default=1, help="cost rounds (interleaved); medians and ranges")
    ap.add_argument("--scale", action="store_true", help="also a 1,024-host permutation, 256-host all-to-all")
    ap.add_argument("--only", action="append", default=[], metavar="CASE", help="only these cases")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap


def _measure(binary: Path, fab: XFabric, args: Any, data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every case asked for, each with its cost rounds; a scale case that fails is noted in
    ``data["failed"]``, and ``data["floor"]`` is the floor's median over the rounds."""
    import statistics

    runs: list[tuple[XFabric, Case, tuple[str, ...], tuple[str, ...]]]
    runs = [(fab, c, PAYLOADS, tuple(HTSIM_MODES)) for c in cases(fab, args.quick, args.seed)]
    if args.scale:
        runs += [(f, c, ("virtual",), (REFERENCE,)) for f, c in scale_cases(args.quick, args.seed)]
    if args.only:
        runs = [r for r in runs if r[1].name in args.only]
    rows = []
    floors = [floor_cost()]
    for f, case, payloads, modes in runs:
        try:
            row = run_case(binary, f, case, args.seed, payloads, modes)
        except RuntimeError as exc:  # a scale case that ran out of time or memory: said, not fatal
            if f is fab:
                raise
            data.setdefault("failed", []).append({"case": case.name, "reason": str(exc)[-300:]})
            print(f"   {case.name} failed: {exc}", flush=True)
            continue
        for _ in range(1, args.rounds if f is fab else 1):
            more_rounds(binary, f, case, row, args.seed)
            floors.append(floor_cost())
        row["cost"] = cost_summary(row)
        rows.append(row)
        (args.out / "htsim_xcheck.partial.json").write_text(json.dumps({**data, "cases": rows}, indent=1))
    data["floor"] = {k: statistics.median([x[k] for x in floors]) for k in ("wall_s", "cpu_s", "peak_mb")}
    return rows


def _lossless(
    binary: Path, fab: XFabric, args: Any, rows: list[dict[str, Any]], data: dict[str, Any]
) -> bool | None:
    """The incast over PFC beside htsim's lossless queues, appended to ``rows``: whether its
    completion is within the bar (None: the pair did not run; ``data["lossless"]`` says why)."""
    try:
        if args.only:
            raise HtsimUnsupported("not asked for (--only)")
        rows.append(run_lossless_case(binary, fab, cases(fab, args.quick, args.seed)[0], args.seed))
        ok: bool | None = rows[-1]["verdict"]["completion_within"]
        return ok
    except HtsimUnsupported as exc:
        data["lossless"] = {"status": "skipped", "reason": str(exc)}
        print(f"   lossless incast skipped: {exc}")
    except RuntimeError as exc:  # htsim ran and failed (an assertion in its set-up, say)
        data["lossless"] = {"status": "failed", "reason": str(exc)}
        print(f"   lossless incast failed: {exc}")
    return None


def _targets(rows: list[dict[str, Any]], lossless_ok: bool | None) -> dict[str, bool | None]:
    """Each target: met (True), missed (False) or not run (None)."""
    incast = next((r["verdict"] for r in rows if r["case"] == "incast-8to1"), None)
    targets: dict[str, bool | None] = {
        "incast_completion_within_5pct": None if incast is None else incast["completion_within"],
        "incast_trims_within_1.5x": None if incast is None else incast["trims_within"],
        "lossless_incast_completion_within_5pct": lossless_ok,
    }
    for row in rows:
        bar = COST_BARS.get(row["case"])
        if bar is not None and "mrc_sim_virtual" in row.get("cost", {}):
            ratio = row["cost"]["mrc_sim_virtual"]["over_htsim"]
            for k, what in (("wall_s", "wall"), ("peak_mb", "peak_memory")):
                targets[f"{row['case']}_{what}_within_{bar:g}x_htsim"] = (
                    ratio[k] is not None and ratio[k] <= bar
                )
    return targets


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--child":
        # (the timed child is ``python -m bench.xcheck_sim``; this stays for scripts that used it)
        return child(argv[1])
    ap = _parser()
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    binary = find_htsim()
    fab = XFabric()
    data: dict[str, Any] = {"fabric": asdict(fab), "queue_pkts": fab.queue_pkts, "ecn_pkts": fab.ecn_pkts}
    if binary is None:
        data.update(status="skipped", reason="htsim_uec not found ($HTSIM_UEC or ../shared/htsim/htsim_uec)")
        (args.out / "htsim_xcheck.json").write_text(json.dumps(data, indent=1))
        print(f"   skipped: {data['reason']}")
        return 0
    data.update(status="ok", htsim=str(binary), reference=REFERENCE, quick=args.quick, seed=args.seed)
    data["rounds"] = args.rounds
    rows = _measure(binary, fab, args, data)
    floor = data["floor"]
    lossless_ok = _lossless(binary, fab, args, rows, data)
    data["cases"] = rows
    data["targets"] = _targets(rows, lossless_ok)
    (args.out / "htsim_xcheck.json").write_text(json.dumps(data, indent=1))
    (args.out / "htsim_xcheck.md").write_text(table(rows))
    (args.out / "htsim_xcheck_cost.md").write_text(cost_table(rows, floor))
    plot(rows, args.out / "htsim_xcheck.png")
    print(table(rows))
    print(cost_table(rows, floor))
    for k, v in data["targets"].items():
        print(f"   {'skip' if v is None else 'ok  ' if v else 'MISS'} {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
