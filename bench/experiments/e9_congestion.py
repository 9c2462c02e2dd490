"""E9: congestion: incast with a bystander (trimming on/off), ECN on one EV.

Runs on either target (``--target``): BMv2 marks ECN and trims in the P4 program; the Linux
target does the same in its per-port eBPF egress program in front of HTB
(docs/linux-target.md). Fabric: 2 planes x 2 T0 x 2 T1, 3 hosts per T0.

Slowing a port on purpose: on BMv2 the data queue's rate (packets/s) and depth (packets)
through simple_switch_CLI; on Linux the port's HTB rate (Mbit/s) and the program's buffer
(``LinuxSrv6Switch.set_port_rate``). Trimming off: every port's trim threshold out of reach,
behind the controller's back (simple_switch_CLI ``table_modify`` / the egress program's map).

A. Incast with a bystander, on a fabric of its own whose links run at a set rate
   (``INCAST_LINK_MBIT``), twice the rate of the receiver's last-hop port, which is slowed in
   every plane: the bystander's rate, alone and beside the incast, is a link's, not the
   CPU's (unlimited links made it one ~30 ms transfer at whatever the agents reached, which
   swung 0.45-1.31 of alone). Three senders write to that receiver at once while a bystander
   flow, twice their size, crosses the same T0s and T1s to another host; it ends inside the
   incast (checked and recorded). Per mode (MRC, single-path) and with trimming on (the
   controller's thresholds) or off (every port's trim threshold raised out of reach with
   simple_switch_CLI ``table_modify``): the bystander's goodput against its goodput alone,
   and the incast flows' retransmissions and EVs retired (without trimming, congestion
   drops look like path failures).
B. ECN on one EV. The sender T0's uplink to T1 0 in plane 0 is slowed so its queue
   builds above the ECN threshold (on both targets that port's thresholds become 1 packet
   for ECN and, for trimming, the queue that drains within half the agents' reordering
   window: the controller's 20/64 packets at 150 packets/s would be seconds of queue);
   an MRC transfer sprays over all paths. Measured: ECN echoes per EV, the slowed path's
   share of the data against an equal split, and goodput against the same transfer without
   the slow link.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from mrc_fabric.p4info import default_index
from mrc_fabric.p4names import Action, Counter, Table

from .common import Context, Result, at_least, experiment_entry, fabric, fabric_info, fmt, step
from .plots import bars
from .transfer import run_concurrent, run_transfer

ID = "e9"
TITLE = "Congestion: incast with a bystander (trimming on/off), ECN moving traffic off an EV"
SHAPE = (
    "Incast with a bystander flow: single-path RoCE costs the bystander 25-75 %; MRC none. "
    "Trimming separates "
    "congestion from failure. A flow on a congested EV: ECN moves it; rates stay near line rate."
)
SHAPE_FABRIC: dict[str, Any] = {"planes": 2, "t0": 2, "t1": 2, "hosts_per_t0": 3}
# Linux target: slowed rates in Mbit/s (an agent moves about 120-300 Mbit/s unslowed here) and the
# thresholds of the slowed ports, in packets. With no propagation delay the fabric's RTT is well
# under a millisecond; what decides whether a queue reads as congestion or as loss is the agents'
# reordering window (the core's gap rule: base RTT / 4, 2.5 ms with the agents' 10 ms base RTT).
# A packet that waits longer than that behind a slowed port, while packets sent after it on the
# plane's other T1 arrive, is declared lost and its path retired. At 20 Mbit/s one full frame
# takes 0.6 ms, so the first window a sender sprays onto the slowed path (tens of packets, sent
# before any mark can come back) queued 37 frames (22 ms) in the ECN run and 306 EVs were
# retired by loss. The slowed ports therefore trim above a queue whose delay fits inside the
# reordering window (``window_packets``): the burst is trimmed and NACKed (congestion, not
# failure), and ECN, marking above one packet, keeps the path's share down after it.
LINUX_INCAST_MBIT = 20.0
# Every link of the incast's fabric (Mbit/s per target): twice the slowed last hop, so that the
# incast's bottleneck is its last hop and the bystander's its own links (two planes: about twice
# this alone), well below what the agents or switches carry here (docs/testbed.md, "Fidelity").
INCAST_LINK_MBIT = {"linux": 40.0, "bmv2": 14.0}
OUTLASTED = "cannot be shown here: the bystander outlasted the incast"  # bench.evidence.CANNOT
BMV2_INCAST_PPS = 200  # ~6.8 Mbit/s of 4.2 kB frames: half the BMv2 incast fabric's links
# The ECN port runs faster than the incast ports: the agents send RoCE-sized frames (4 KiB
# payload, ~4.2 kB on the wire), one of which takes 1.7 ms at 20 Mbit/s, so a queue of two frames
# there already outlasts the reordering window; at 50 Mbit/s (still below the ~75 Mbit/s a
# quarter of the spray offers) a frame takes 0.7 ms.
LINUX_ECN_MBIT = 50.0
LINUX_ECN_THRESHOLD = 1
AGENT_REORDER_WINDOW_S = 10e-3 / 4  # mrc_host/agent DEFAULT_BASE_RTT_US / 4 (TransportConfig.for_rtt)
FRAME_BYTES = 4096 + 146  # the agents' payload MTU plus the MRC headers (the trimmed frame)
MIN_TRIM_CELLS = 2


def window_packets(mbit: float) -> int:
    """A trim threshold (in 1514-byte cells) for a port at ``mbit``: the queue it allows, plus
    the frame in service, drains within half the agents' reordering window (half: room for
    the trimmed headers served first and the receiver's jitter), so queued packets do not pass
    for lost; at least ``MIN_TRIM_CELLS``."""
    from linux_target.egress import QUEUE_CELL_BYTES

    room = AGENT_REORDER_WINDOW_S / 2 * mbit * 1e6 / 8 - FRAME_BYTES
    return max(MIN_TRIM_CELLS, int(room / QUEUE_CELL_BYTES))


PRIORITY_DATA = 0  # p4src/include/constants.p4: data queue; trimmed headers use 7
TRIM_OFF = (1 << 19) - 1  # the largest 19-bit trim threshold: a queue never gets that deep
# simple_switch_CLI speaks p4c's full names (MrcIngress.port_policy)
POLICY_TABLE = default_index().table(Table.PORT_POLICY).name
POLICY_ACTION = default_index().action(Action.SET_PORT_POLICY).name
ECN_COUNTER = default_index().counter(Counter.ECN_MARKED).name
_ENTRY = re.compile(
    # the key prints as the field P4 matched on: "* scalars.metadata_t.out_port: EXACT 0004"
    r"Dumping entry (0x[0-9a-f]+)\s*\nMatch key:\s*\n\*\s*[\w.]*port\s*:\s*EXACT\s+([0-9a-f]+)\s*\n"
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
    """(handle, port, ecn, trim, last_hop) of every port_policy entry of a BMv2 switch.

    Every port has one (the controller installs them): finding none means the dump's format
    was not understood, and a trimming switch that silently changed nothing would be worse."""
    out = switch_cli(sw, f"table_dump {POLICY_TABLE}")
    found = [(h, int(p, 16), int(e, 16), int(t, 16), int(lh, 16)) for h, p, e, t, lh in _ENTRY.findall(out)]
    if not found:
        raise RuntimeError(f"{sw.name}: no port_policy entry understood in the table dump:\n{out}")
    return found


def set_trimming(tb: Any, on: bool, saved: dict[str, list[Any]]) -> int:
    """Trimming off: every port's trim threshold to TRIM_OFF (remembering the controller's); on: restore."""
    if is_linux(tb):
        return linux_set_trimming(tb, on, saved)
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


def slow_port(
    tb: Any,
    switch: str,
    port: int,
    pps: int,
    depth: int,
    mbit: float = 0.0,
    thresholds: tuple[int, int] | None = None,
) -> None:
    """Slow the data queue of one port; trimmed headers (high priority) still pass.

    BMv2: ``pps`` packets/s (0 = unlimited), ``depth`` packets. Linux: ``mbit`` Mbit/s
    (0 = unlimited), a buffer of ``depth`` full frames, and (ECN, trim) ``thresholds`` in
    packets written into the port's egress program (None: leave the controller's)."""
    sw = tb.net.get(switch)
    if is_linux(tb):
        from linux_target.egress import QUEUE_CELL_BYTES

        sw.set_port_rate(port, mbit, depth * QUEUE_CELL_BYTES)
        if thresholds is not None:
            pol = sw.port_egress(port)["policy"]
            sw.set_port_policy(port, *thresholds, bool(pol and pol["last_hop"]))
        return
    if pps and tb.fidelity is not None:  # its full queue is this experiment's congestion
        tb.fidelity.queue_slowed(switch)
    sw.set_queue_depth(port, depth, priority=PRIORITY_DATA)
    sw.set_queue_rate(port, pps, priority=PRIORITY_DATA)
    if thresholds is not None:
        set_port_thresholds(sw, port, *thresholds)


def set_port_thresholds(sw: Any, port: int, ecn: int, trim: int) -> None:
    """A BMv2 port's ECN and trim thresholds (packets), behind the controller's back."""
    for handle, p, _ecn, _trim, last_hop in policies(sw):
        if p == port:
            switch_cli(
                sw, f"table_modify {POLICY_TABLE} {POLICY_ACTION} {int(handle, 16)} {ecn} {trim} {last_hop}"
            )
            return
    raise RuntimeError(f"{sw.name}: no port_policy entry for port {port}")


def bmv2_trim_packets(pps: int) -> int:
    """BMv2's trim threshold for a port slowed to ``pps``: the queue it allows drains within
    half the agents' reordering window (as ``window_packets`` for Linux, in packets)."""
    return max(MIN_TRIM_CELLS, int(pps * AGENT_REORDER_WINDOW_S / 2))


def ecn_marks(sw: Any, port: int) -> int | None:
    """Packets the P4 program marked CE on one BMv2 port (its ``ecn_marked`` counter)."""
    out = switch_cli(sw, f"counter_read {ECN_COUNTER} {port}")
    m = re.search(r"(\d+) packets", out)  # "MrcEgress.ecn_marked[4]= (8240 bytes, 2 packets)"
    return int(m.group(1)) if m else None


def is_linux(tb: Any) -> bool:
    return bool(tb.choice.target.value == "linux")


def linux_set_trimming(tb: Any, on: bool, saved: dict[str, list[Any]]) -> int:
    """The Linux target's trimming switch: every port's trim threshold in its egress program."""
    from linux_target.egress import QUEUE_CELL_BYTES

    changed = 0
    for sw in tb.net.switches:
        if not on:
            entries = []
            for port in sorted(sw.port_map()):
                pol = sw.port_egress(port)["policy"]
                if pol:
                    cell = QUEUE_CELL_BYTES
                    entries.append(
                        (
                            port,
                            pol["ecn_threshold_bytes"] // cell,
                            pol["trim_threshold_bytes"] // cell,
                            pol["last_hop"],
                        )
                    )
            saved[sw.name] = entries
        for port, ecn, trim, last_hop in saved.get(sw.name, []):
            sw.set_port_policy(port, ecn, trim if on else TRIM_OFF, last_hop)
            changed += 1
    return changed


def bystander_evidence(alone: Any, by: Any) -> dict[str, Any]:
    """What the bystander met beside the incast: congestion signals and losses on its own EVs
    (the sender's EV table before and after), its goodput over time, and alone's for reference."""
    from .transfer import goodput_bins

    return {
        "ecn": sum(by.ev_delta("ecn").values()),
        "trims": sum(by.ev_delta("trims").values()),
        "lost": sum(by.ev_delta("lost").values()),
        "evs_retired": int(by.summary.get("evs_retired", 0)),
        "retransmissions": int(by.summary.get("retransmissions", 0)),
        "srtt_us": by.summary.get("srtt_us"),
        "alone_srtt_us": alone.summary.get("srtt_us"),
        "seconds": by.seconds,
        "alone_seconds": alone.seconds,
        "goodput_bins": goodput_bins(by.progress, 0.1),
        "alone_goodput_bins": goodput_bins(alone.progress, 0.1),
    }


def _incast_setup(ctx: Context, tb: Any) -> tuple[dict[str, Any], list[str], str, tuple[str, str], int, int]:
    """The victim's last hops slowed in every plane; the incast's description, its senders, the
    victim, the bystander's (source, destination) and the incast's and bystander's sizes."""
    topo = tb.topology
    left = [h.name for h in topo.hosts if h.t0_index == 0]
    right = [h.name for h in topo.hosts if h.t0_index == 1]
    victim, bystander_dst = right[-1], right[0]
    senders = [*left[1:], right[1]]
    bystander = (left[0], bystander_dst)
    pps, depth = BMV2_INCAST_PPS, 128  # deeper than the trim threshold (64): trimming has room
    mbit = LINUX_INCAST_MBIT
    for port in topo.host(victim).ports:
        slow_port(tb, port.t0, port.t0_port, pps, depth, mbit, (TRIM_OFF, window_packets(mbit)))
    size = (ctx.size(8, 2) if is_linux(tb) else ctx.size(2, 1)) // 2
    by_size = 2 * size  # alone: well under the incast's time at the slowed last hops
    out: dict[str, Any] = {
        "victim": victim,
        "senders": senders,
        "bystander": bystander,
        "link_mbit_s": tb.config.link_rate,
        "last_hop_pps": None if is_linux(tb) else pps,
        "last_hop_mbit_s": mbit if is_linux(tb) else None,
        "queue_depth": depth,
        "size": size,
        "bystander_size": by_size,
    }
    return out, senders, victim, bystander, size, by_size


def _incast_row(
    ctx: Context,
    tb: Any,
    mode: str,
    label: str,
    bystander: tuple[str, str],
    incast_pairs: list[tuple[str, str]],
    size: int,
    by_size: int,
) -> tuple[dict[str, Any], float | None]:
    """The bystander alone, then beside the incast: what it met, and its goodput ratio."""
    tb.send(bystander[0], bystander[1], 64 << 10, mode=mode)  # open the connection
    alone = run_transfer(tb, *bystander, by_size, mode)
    pairs = [bystander, *incast_pairs]
    sizes = [by_size] + [size] * len(incast_pairs)
    runs, job_s = run_concurrent(tb, pairs, size, mode, deadline_s=ctx.scale(120, 60), sizes=sizes)
    by = runs[0]
    ratio = (
        (by.summary.get("goodput_mbit_s", 0) / alone.summary["goodput_mbit_s"])
        if by.ok and alone.ok
        else None
    )
    inc = runs[1:]
    inside = by.wall_s <= min(r.wall_s for r in inc)
    ev = bystander_evidence(alone, by)
    row = {
        "bystander_inside_incast": inside,
        "bystander": ev,
        "bystander_alone_mbit_s": alone.summary.get("goodput_mbit_s"),
        "bystander_with_incast_mbit_s": by.summary.get("goodput_mbit_s"),
        "bystander_ratio": ratio,
        "incast_ok": all(r.ok for r in inc),
        "incast_retransmissions": sum(int(r.summary.get("retransmissions", 0)) for r in inc),
        "incast_evs_retired": sum(int(r.summary.get("evs_retired", 0)) for r in inc),
        "job_s": job_s,
    }
    step(
        f"E9 incast {label:12} {mode:11}: bystander {fmt(ratio)} of alone "
        f"({fmt(by.summary.get('goodput_mbit_s'))} / {fmt(alone.summary.get('goodput_mbit_s'))} "
        f"Mbit/s, {'inside' if inside else 'NOT inside'} the incast; its ECN echoes {ev['ecn']}, "
        f"trim NACKs {ev['trims']}, losses {ev['lost']}, EVs retired {ev['evs_retired']}), "
        f"incast retx {row['incast_retransmissions']}, EVs retired {row['incast_evs_retired']}, "
        f"job {job_s:.1f} s"
    )
    return row, ratio


def incast(ctx: Context, tb: Any, res: Result) -> dict[str, Any]:
    out, senders, victim, bystander, size, by_size = _incast_setup(ctx, tb)
    saved: dict[str, list[Any]] = {}
    groups: dict[str, dict[str, float]] = {}
    for trimming in (True, False):
        set_trimming(tb, trimming, saved)
        label = f"trimming {'on' if trimming else 'off'}"
        for mode in ("mrc", "single-path"):
            row, ratio = _incast_row(
                ctx, tb, mode, label, bystander, [(s, victim) for s in senders], size, by_size
            )
            out.setdefault(label, {})[mode] = row
            groups.setdefault(label, {})[mode] = ratio or 0.0
            paper = "MRC: none" if mode == "mrc" else "single-path RoCE: bystander loses 25-75 %"
            judged: dict[str, Any] = {"expect": "info"}
            if mode == "mrc" and trimming:  # a bystander that outlasted the incast did not meet it all along
                judged = at_least(ratio, 0.75) if row["bystander_inside_incast"] else {"expect": OUTLASTED}
            res.add(
                f"bystander goodput with incast / alone, {label}",
                ratio,
                unit="x",
                mode=mode,
                paper=paper,
                **judged,
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


def _slowed_run(
    ctx: Context, tb: Any, src: str, dst: str, size: int, t0: str, port: int
) -> tuple[Any, Any, dict[str, Any]]:
    """The transfer with the port slowed (its thresholds set for ECN), the port restored after:
    the run, the CE marks the port made (None where unknown) and its egress state (Linux)."""
    pps = int(ctx.scale(150, 150))
    mbit = LINUX_ECN_MBIT
    sw = tb.net.get(t0)
    marked_before = 0
    if is_linux(tb):
        saved = sw.port_egress(port)["policy"]
        thresholds = (LINUX_ECN_THRESHOLD, window_packets(mbit))
    else:
        saved = next(({"ecn": e, "trim": t} for _h, p, e, t, _lh in policies(sw) if p == port), None)
        thresholds = (LINUX_ECN_THRESHOLD, bmv2_trim_packets(pps))
        marked_before = ecn_marks(sw, port) or 0
    slow_port(tb, t0, port, pps, 64, mbit, thresholds)
    try:
        r = run_transfer(tb, src, dst, size, "mrc")
    finally:
        restore = None
        if saved and is_linux(tb):  # the controller's thresholds again (bytes in the map, packets in P4)
            from linux_target.egress import QUEUE_CELL_BYTES as CELL

            restore = (saved["ecn_threshold_bytes"] // CELL, saved["trim_threshold_bytes"] // CELL)
        elif saved:
            restore = (saved["ecn"], saved["trim"])
        slow_port(tb, t0, port, 0, 64, 0.0, restore)
    if is_linux(tb):
        port_state = sw.port_egress(port)["state"]
        marked = port_state.get("marked_packets")
    else:
        port_state = {}
        after = ecn_marks(sw, port)
        marked = None if after is None else after - marked_before
    return r, marked, port_state


def _ecn_figures(r: Any, clean: Any) -> dict[str, Any]:
    """The slowed path's (plane 0, T1 0) share of the data and its congestion signals, goodput
    against the clean run, and the loss guesses and retirements of the run."""
    per_ev = r.data_per_ev()
    total = sum(per_ev.values()) or 1
    slow_evs = [ev for ev, row in r.ev_after.items() if row["plane"] == 0 and row["t1"] == 0]
    echoes = r.ev_delta("ecn")
    # trim NACKs: the slowed port is a fabric port, so its trimmed headers carry CE (TRIMMED)
    trims = r.ev_delta("trims")
    # loss guesses by path: on the slowed one (its queue) or elsewhere (the software fabric's jitter)
    lost_on: dict[str, int] = {}
    for ev, lost in r.ev_delta("lost").items():
        key = f"p{r.ev_after[ev]['plane']}t{r.ev_after[ev]['t1']}"
        lost_on[key] = lost_on.get(key, 0) + lost
    guesses = int(r.summary.get("losses_gap", 0)) + int(r.summary.get("losses_rto", 0))
    spurious = int(r.summary.get("spurious_losses", 0))
    trimmed = int(r.summary.get("losses_trimmed_after_guess", 0))
    return {
        "share": sum(per_ev.get(ev, 0) for ev in slow_evs) / total,
        "fair": len(slow_evs) / max(1, len(per_ev)),
        "echoes": echoes,
        "trims": trims,
        "slow_echoes": sum(echoes.get(ev, 0) for ev in slow_evs),
        "slow_trims": sum(trims.get(ev, 0) for ev in slow_evs),
        "ratio": (
            r.summary.get("goodput_mbit_s", 0) / clean.summary["goodput_mbit_s"]
            if r.ok and clean.ok
            else None
        ),
        "retired": int(r.summary.get("evs_retired", 0)),
        "by_loss": int(r.summary.get("evs_retired_by_loss", 0)),
        "lost_on": lost_on,
        "hot": int(r.summary.get("losses_while_hot", 0)),
        "guesses": guesses,
        "spurious": spurious,
        "trimmed": trimmed,
        "real": max(0, guesses - spurious - trimmed),
    }


def _ecn_judge(res: Result, f: dict[str, Any], marked: Any, port_state: dict[str, Any]) -> None:
    """The shape: ECN, not loss, moves traffic off the slowed EV, and the rate holds."""
    share, fair, slow_echoes, slow_trims = f["share"], f["fair"], f["slow_echoes"], f["slow_trims"]
    echoes, trims = f["echoes"], f["trims"]
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
        "congestion signals on the congested EV (ECN echoes + CE trim NACKs)",
        float(slow_echoes + slow_trims),
        mode="mrc",
        paper="marks come from the congested hop",
        expect="> 0",
        holds=slow_echoes + slow_trims > 0,
        note=(
            f"{slow_echoes} ECN echoes, {slow_trims} trim NACKs; elsewhere "
            f"{sum(echoes.values()) - slow_echoes} echoes, {sum(trims.values()) - slow_trims} trims"
        ),
    )
    res.add(
        "CE marks / trims at the slowed port",
        float(marked or 0),
        mode="mrc",
        paper="ECN, not loss, moves the traffic",
        expect=f"info (trims {port_state.get('trimmed_packets')}: the first window's burst)",
        holds=None,
    )
    res.add(
        "EVs retired by loss during the ECN run",
        float(f["by_loss"]),
        mode="mrc",
        paper="ECN, not loss, moves the traffic",
        expect="0",
        holds=f["by_loss"] == 0,
        note=(
            f"{f['guesses']} loss guesses, {f['hot']} on a path marked or trimmed lately (it sat out, no "
            f"retirement), {f['spurious']} proven reordering, {f['trimmed']} proven trimmed; "
            f"EVs retired for any reason (e.g. a late liveness probe) {f['retired']}"
        ),
    )
    res.add(
        "loss guesses proven neither reordering nor trimmed during the ECN run",
        float(f["real"]),
        mode="mrc",
        paper="ECN, not loss, moves the traffic",
        expect="info",
        holds=None,
        note=f"each resent, none retired a path; tail drops at the port {port_state.get('dropped_packets')}",
    )
    res.add(
        "goodput with one slow path / clean",
        f["ratio"],
        unit="x",
        mode="mrc",
        paper="stays near line rate",
        **at_least(f["ratio"], 0.7),
    )


def ecn(ctx: Context, tb: Any, res: Result) -> dict[str, Any]:
    topo = tb.topology
    src = next(h.name for h in topo.hosts if h.t0_index == 0)
    dst = next(h.name for h in topo.hosts if h.t0_index == 1)
    size = ctx.size(16, 4) if is_linux(tb) else ctx.size(2, 1)  # Linux: ~100 Mbit/s, not ~1
    tb.send(src, dst, 64 << 10, mode="mrc")
    clean = run_transfer(tb, src, dst, size, "mrc")
    t0, t1 = topo.t0(0, 0), topo.t1(0, 0)
    link = topo.find_link(f"{t0.name}-{t1.name}")
    port = link.a.port if link.a.node == t0.name else link.b.port
    pps = int(ctx.scale(150, 150))
    mbit = LINUX_ECN_MBIT
    r, marked, port_state = _slowed_run(ctx, tb, src, dst, size, t0.name, port)
    f = _ecn_figures(r, clean)
    echoes, trims = f["echoes"], f["trims"]
    slowed_to = f"{mbit:g} Mbit/s" if is_linux(tb) else f"{pps} pps"
    step(
        f"E9 ECN: slowed {t0.name}->{t1.name} to {slowed_to}: its EVs carried {f['share']:.1%} "
        f"(fair {f['fair']:.1%}), ECN echoes {f['slow_echoes']} and trim NACKs {f['slow_trims']} on it / "
        f"{sum(echoes.values())} and {sum(trims.values())} total, "
        f"goodput {fmt(f['ratio'])} of clean, EVs retired {f['retired']} ({f['by_loss']} by loss; loss "
        f"guesses {r.summary.get('losses_gap', 0)} gap + {r.summary.get('losses_rto', 0)} RTO, {f['hot']} "
        f"on a marked path, {f['spurious']} proven reordering, {f['trimmed']} proven trimmed; by path "
        f"{f['lost_on']}), CE marks at the port {marked}, "
        f"trims {port_state.get('trimmed_packets')}, tail drops {port_state.get('dropped_packets')}, "
        f"deepest queue {port_state.get('max_queue_bytes')} B"
    )
    _ecn_judge(res, f, marked, port_state)
    return {
        "link": link.name,
        "pps": None if is_linux(tb) else pps,
        "mbit_s": mbit if is_linux(tb) else None,
        "ce_marks_at_port": marked,
        "port_state": port_state,
        "evs_retired": f["retired"],
        "evs_retired_by_loss": f["by_loss"],
        "losses_while_hot": f["hot"],
        "loss_guesses_by_path": f["lost_on"],
        "loss_guesses": f["guesses"],
        "spurious_losses": f["spurious"],
        "losses_trimmed_after_guess": f["trimmed"],
        "share": f["share"],
        "fair": f["fair"],
        "ecn_echoes": echoes,
        "trim_nacks": trims,
        "clean": clean.record(),
        "slowed": r.record(),
        "ratio": f["ratio"],
    }


def incast_link_rate(ctx: Context) -> float:
    """The incast fabric's link rate for the data plane this run will use."""
    from topologies.target import choose_target

    return INCAST_LINK_MBIT[choose_target(ctx.target).target.value]


def run(ctx: Context, res: Result) -> None:
    with fabric(ctx, **SHAPE_FABRIC) as tb:
        res.data["ecn_fabric"] = fabric_info(tb)
        res.data["ecn"] = ecn(ctx, tb, res)
    with fabric(ctx, **SHAPE_FABRIC, link_rate=incast_link_rate(ctx)) as tb:
        res.fabric = fabric_info(tb)  # the evidence table's row (the bystander) is the incast's
        res.data["incast"] = incast(ctx, tb, res)
        if is_linux(tb):
            res.caveats.append(
                "Linux target: slowed ports are HTB classes at tens of Mbit/s with the eBPF egress "
                "program's virtual queue (ECN, trimming, tail drop); no propagation delay (no netem); "
                "transfers are a few MiB; the ECN part's links are unlimited, the incast's at "
                f"{INCAST_LINK_MBIT['linux']:g} Mbit/s"
            )
        else:
            res.caveats.append(
                "BMv2 forwards a few thousand packets/s per switch, so queues are slowed to hundreds of "
                "packets/s to be the bottleneck; transfers are a few MiB"
            )


main = experiment_entry(ID, TITLE, SHAPE, run)


if __name__ == "__main__":
    sys.exit(main())
