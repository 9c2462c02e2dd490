"""E9 (BMv2 only): congestion: incast with a bystander (trimming on/off), ECN on one EV.

Only BMv2 marks ECN and trims (the Linux target cannot: no RED/netem in this kernel), so
E9 always runs on BMv2 when it is installed, whatever ``--target`` says, and is skipped
with the reason otherwise. Fabric: 2 planes x 2 T0 x 2 T1, 3 hosts per T0.

A. Incast with a bystander. The receiver's last-hop port in every plane is slowed
   (``set_queue_rate``/``set_queue_depth`` on its T0, the BMv2 node's helpers). Three
   senders write to that receiver at once while a bystander flow crosses the same T0s and
   T1s to another host. Per mode (MRC, single-path) and with trimming on (the
   controller's thresholds) or off (every port's trim threshold raised out of reach with
   simple_switch_CLI ``table_modify``): the bystander's goodput against its goodput alone,
   and the incast flows' retransmissions and EVs retired (without trimming, congestion
   drops look like path failures).
B. ECN on one EV. The sender T0's uplink to T1 0 in plane 0 is slowed so its queue
   builds above the ECN threshold; an MRC transfer sprays over all paths. Measured: ECN
   echoes per EV, the slowed path's share of the data against an equal split, and goodput
   against the same transfer without the slow link.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from .common import Context, Result, experiment_main, fabric, fabric_info, fmt, step
from .plots import bars
from .transfer import run_concurrent, run_transfer

ID = "e9"
TITLE = "BMv2 congestion: incast with a bystander (trimming on/off), ECN moving traffic off an EV"
SHAPE = (
    "Incast with a bystander flow: single-path RoCE costs the bystander 25-75 %; MRC none. "
    "Trimming separates "
    "congestion from failure. A flow on a congested EV: ECN moves it; rates stay near line rate."
)
SHAPE_FABRIC = {"planes": 2, "t0": 2, "t1": 2, "hosts_per_t0": 3}
PRIORITY_DATA = 0  # p4src/include/constants.p4: data queue; trimmed headers use 7
TRIM_OFF = (1 << 19) - 1  # the largest 19-bit trim threshold: a queue never gets that deep
POLICY_TABLE = "MrcIngress.port_policy"
POLICY_ACTION = "MrcIngress.set_port_policy"
_ENTRY = re.compile(
    r"Dumping entry (0x[0-9a-f]+)\s*\nMatch key:\s*\n\*\s*port\s*:\s*EXACT\s+([0-9a-f]+)\s*\n"
    r"Action entry: " + re.escape(POLICY_ACTION) + r" - ([0-9a-f]+),\s*([0-9a-f]+),\s*([0-9a-f]+)",
    re.IGNORECASE,
)


def switch_cli(sw: Any, *commands: str) -> str:
    """simple_switch_CLI on one BMv2 switch. Not the node's ``cli`` helper: that one takes the
    ``**********`` separators of ``table_dump`` for errors."""
    from topologies.bmv2_switch import LOOPBACK, cli_command

    res = subprocess.run(
        [*cli_command(), "--thrift-port", str(sw.thrift_port), "--thrift-ip", LOOPBACK],
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if res.returncode != 0 or "Error" in res.stdout or "Invalid" in res.stdout:
        raise RuntimeError(
            f"{sw.name}: simple_switch_CLI {commands[:2]!r}...: {(res.stdout + res.stderr)[-300:]}"
        )
    return res.stdout


def policies(sw: Any) -> list[tuple[str, int, int, int, int]]:
    """(handle, port, ecn, trim, last_hop) of every port_policy entry of a BMv2 switch."""
    out = switch_cli(sw, f"table_dump {POLICY_TABLE}")
    return [(h, int(p, 16), int(e, 16), int(t, 16), int(lh, 16)) for h, p, e, t, lh in _ENTRY.findall(out)]


def set_trimming(tb: Any, on: bool, saved: dict[str, list]) -> int:
    """Trimming off: every port's trim threshold to TRIM_OFF (remembering the controller's); on: restore."""
    changed = 0
    for sw in tb.net.switches:
        entries = saved.setdefault(sw.name, policies(sw)) if not on else saved.get(sw.name, [])
        cmds = [
            f"table_modify {POLICY_TABLE} {POLICY_ACTION} {int(h, 16)} {ecn} {trim if on else TRIM_OFF} {lh}"
            for h, _port, ecn, trim, lh in entries
        ]
        if cmds:
            switch_cli(sw, *cmds)
            changed += len(cmds)
    return changed


def slow_port(tb: Any, switch: str, port: int, pps: int, depth: int) -> None:
    """Slow the data queue (priority 0) of one port; trimmed headers (priority 7) still pass."""
    sw = tb.net.get(switch)
    sw.set_queue_depth(port, depth, priority=PRIORITY_DATA)
    sw.set_queue_rate(port, pps, priority=PRIORITY_DATA)


def incast(ctx: Context, tb: Any, res: Result) -> dict[str, Any]:
    topo = tb.topology
    left = [h.name for h in topo.hosts if h.t0_index == 0]
    right = [h.name for h in topo.hosts if h.t0_index == 1]
    victim, bystander_dst = right[-1], right[0]
    senders = [*left[1:], right[1]]
    bystander = (left[0], bystander_dst)
    pps, depth = int(ctx.scale(400, 400)), 128  # deeper than the trim threshold (64): trimming has room
    for port in topo.host(victim).ports:
        slow_port(tb, port.t0, port.t0_port, pps, depth)
    size = ctx.size(2, 1) // 2
    out: dict[str, Any] = {
        "victim": victim,
        "senders": senders,
        "bystander": bystander,
        "last_hop_pps": pps,
        "queue_depth": depth,
        "size": size,
    }
    saved: dict[str, list] = {}
    groups: dict[str, dict[str, float]] = {}
    for trimming in (True, False):
        set_trimming(tb, trimming, saved)
        label = f"trimming {'on' if trimming else 'off'}"
        for mode in ("mrc", "single-path"):
            tb.send(bystander[0], bystander[1], 64 << 10, mode=mode)  # open the connection
            alone = run_transfer(tb, *bystander, size, mode)
            pairs = [bystander] + [(s, victim) for s in senders]
            runs, job_s = run_concurrent(tb, pairs, size, mode, deadline_s=ctx.scale(120, 60))
            by = runs[0]
            ratio = (
                (by.summary.get("goodput_mbit_s", 0) / alone.summary["goodput_mbit_s"])
                if by.ok and alone.ok
                else None
            )
            inc = runs[1:]
            row = {
                "bystander_alone_mbit_s": alone.summary.get("goodput_mbit_s"),
                "bystander_with_incast_mbit_s": by.summary.get("goodput_mbit_s"),
                "bystander_ratio": ratio,
                "incast_ok": all(r.ok for r in inc),
                "incast_retransmissions": sum(int(r.summary.get("retransmissions", 0)) for r in inc),
                "incast_evs_retired": sum(int(r.summary.get("evs_retired", 0)) for r in inc),
                "job_s": job_s,
            }
            out.setdefault(label, {})[mode] = row
            groups.setdefault(label, {})[mode] = ratio or 0.0
            step(
                f"E9 incast {label:12} {mode:11}: bystander {fmt(ratio)} of alone, incast retx "
                f"{row['incast_retransmissions']}, EVs retired {row['incast_evs_retired']}, job {job_s:.1f} s"
            )
            paper = "MRC: none" if mode == "mrc" else "single-path RoCE: bystander loses 25-75 %"
            expect, holds = ("info", None)
            if mode == "mrc" and trimming:
                expect, holds = ">= 0.75", ratio is not None and ratio >= 0.75
            res.add(
                f"bystander goodput with incast / alone, {label}",
                ratio,
                unit="x",
                mode=mode,
                paper=paper,
                expect=expect,
                holds=holds,
            )
        mrc = out[label]["mrc"]
        res.add(
            f"incast EVs retired, {label}",
            mrc["incast_evs_retired"],
            mode="mrc",
            paper="trimming separates congestion from failure",
            expect="fewer with trimming on" if not trimming else "info",
            holds=(mrc["incast_evs_retired"] >= out["trimming on"]["mrc"]["incast_evs_retired"])
            if not trimming
            else None,
        )
    set_trimming(tb, True, saved)
    res.plots.append(
        bars(
            ctx.out / "e9_incast.png",
            "E9 bystander goodput with incast / alone",
            groups,
            "ratio",
            reference=1.0,
        ).name
    )
    return out


def ecn(ctx: Context, tb: Any, res: Result) -> dict[str, Any]:
    topo = tb.topology
    src = next(h.name for h in topo.hosts if h.t0_index == 0)
    dst = next(h.name for h in topo.hosts if h.t0_index == 1)
    size = ctx.size(2, 1)
    tb.send(src, dst, 64 << 10, mode="mrc")
    clean = run_transfer(tb, src, dst, size, "mrc")
    t0, t1 = topo.t0(0, 0), topo.t1(0, 0)
    link = topo.find_link(f"{t0.name}-{t1.name}")
    port = link.a.port if link.a.node == t0.name else link.b.port
    pps = int(ctx.scale(150, 150))
    slow_port(tb, t0.name, port, pps, 64)
    try:
        r = run_transfer(tb, src, dst, size, "mrc")
    finally:
        slow_port(tb, t0.name, port, 0, 64)
    per_ev = r.data_per_ev()
    total = sum(per_ev.values()) or 1
    slow_evs = [ev for ev, row in r.ev_after.items() if row["plane"] == 0 and row["t1"] == 0]
    share = sum(per_ev.get(ev, 0) for ev in slow_evs) / total
    fair = len(slow_evs) / max(1, len(per_ev))
    echoes = {ev: row["ecn"] - r.ev_before.get(ev, {}).get("ecn", 0) for ev, row in r.ev_after.items()}
    ratio = (
        r.summary.get("goodput_mbit_s", 0) / clean.summary["goodput_mbit_s"] if r.ok and clean.ok else None
    )
    step(
        f"E9 ECN: slowed {t0.name}->{t1.name} to {pps} pps: its EVs carried {share:.1%} (fair {fair:.1%}), "
        f"ECN echoes {sum(echoes.get(ev, 0) for ev in slow_evs)} on it / {sum(echoes.values())} total, "
        f"goodput {fmt(ratio)} of clean"
    )
    res.add(
        "data share of the ECN-marked EV",
        share,
        unit="share",
        mode="mrc",
        paper="ECN moves traffic off it",
        expect=f"< fair share {fair:.3f}",
        holds=share < fair,
    )
    res.add(
        "ECN echoes on the congested EV",
        float(sum(echoes.get(ev, 0) for ev in slow_evs)),
        mode="mrc",
        paper="marks come from the congested hop",
        expect="> 0",
        holds=sum(echoes.get(ev, 0) for ev in slow_evs) > 0,
    )
    res.add(
        "goodput with one slow path / clean",
        ratio,
        unit="x",
        mode="mrc",
        paper="stays near line rate",
        expect=">= 0.7",
        holds=ratio is not None and ratio >= 0.7,
    )
    return {
        "link": link.name,
        "pps": pps,
        "share": share,
        "fair": fair,
        "ecn_echoes": echoes,
        "clean": clean.record(),
        "slowed": r.record(),
        "ratio": ratio,
    }


def run(ctx: Context, res: Result) -> None:
    with fabric(ctx, **SHAPE_FABRIC) as tb:
        res.fabric = fabric_info(tb)
        res.data["ecn"] = ecn(ctx, tb, res)
        res.data["incast"] = incast(ctx, tb, res)
        res.caveats.append(
            "BMv2 forwards a few thousand packets/s per switch, so queues are slowed to hundreds of "
            "packets/s to "
            "be the bottleneck; transfers are a few MiB"
        )


def main(argv: list[str] | None = None) -> int:
    return experiment_main(ID, TITLE, SHAPE, run, argv, target_override="bmv2")


if __name__ == "__main__":
    sys.exit(main())
