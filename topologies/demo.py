"""``make demo`` (``python -m topologies.demo``): MRC riding out two silent failures on a live fabric.

The default fabric (2 planes x 2 T0 x 2 T1, 4 hosts) comes up on BMv2 where it is
installed, else on Linux SRv6 switches, with the controller and an MRC agent in every
host. One transfer crosses it from a host under the first T0 to a host under the last
T0, once without faults (the reference time) and once while, at 25 % of the bytes, a
T0-T1 link of plane 0 becomes a black hole and, at 60 %, a T1 switch of the last plane
silently stops forwarding. The summary says whether it completed with the right bytes,
how long it took against the reference, how many packets each fault cost, how the bytes
spread over planes and T1s, and when which EV changed state. ``results.json`` and
``timeline.png`` land in the run directory (``runs/latest/``).

Without a live agent (``mrc_host.agent`` not installed) it still brings the fabric up,
injects the same faults and shows which paths they cut, then runs the simulator demo
(``mrc_host.sim.demo``) and says so.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import textwrap
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from mrc_fabric.p4names import Counter as P4Counter
from mrc_fabric.time_scale import scaled
from mrc_host.agent.ev_summary import retx_causes_text
from mrc_view.live import recorded
from topologies.agents import agent_available
from topologies.cli import parse_size
from topologies.live_errors import run_explained
from topologies.testbed import Testbed, add_fabric_arguments, config_from_args, nic_args
from topologies.watch import (
    PlannedFault,
    TransferWatch,
    WatchResult,
    completion_series,
    goodput_series,
    send_rows,
)

RECOVERY_TIMEOUT_S = 30.0
MAX_EV_LINES = 4
WIDTH = 120  # columns of every line the demo prints; lists longer than that are summarised or wrapped
USABLE = ("GOOD", "SKIP")  # SKIP only sits out one rotation
AUTO_SECONDS = 4.0  # the fault-free transfer should last about this long, so faults land mid-way
AUTO_PROBE = 8 << 20
AUTO_MIN = 16 << 20
AUTO_MAX = 512 << 20
BLACKHOLE_AT = 0.25
SWITCH_DOWN_AT = 0.60


def pick_endpoints(tb: Testbed) -> tuple[str, str, str, str]:
    """(src, dst, black-holed link, failing T1): src under the first T0, dst under the last."""
    topo = tb.topology
    assert topo is not None
    src = next(h for h in topo.hosts if h.t0_index == 0)
    dst = [h for h in topo.hosts if h.t0_index == topo.t0_per_plane - 1][-1]
    if topo.t0_per_plane < 2:
        raise SystemExit("demo: needs at least 2 T0 switches per plane (--t0 2)")
    link = f"{topo.t0(0, 0).name}-{topo.t1(0, 0).name}"
    t1 = topo.t1(topo.planes - 1, topo.t1_per_plane - 1).name
    return src.name, dst.name, link, t1


def port_bytes(tb: Testbed, host: str) -> dict[int, int]:
    """Bytes the host's agent sent per plane so far."""
    assert tb.topology is not None
    planes = {p.ifname: p.plane for p in tb.topology.host(host).ports}
    stats = tb.agent(host).client.stats()
    return {planes[p["ifname"]]: p["bytes_tx"] for p in stats.get("ports", []) if p["ifname"] in planes}


def t1_bytes(tb: Testbed) -> dict[str, int]:
    """Bytes each T1 switch sent so far (every port, both directions of traffic)."""
    assert tb.topology is not None and tb.controller is not None
    names = [s.name for s in tb.topology.switches if s.role.value == "t1"]
    cells, _errors = tb.controller.counters(names)
    out = dict.fromkeys(names, 0)
    for c in cells:
        if c.counter == P4Counter.PORT_TX:
            out[c.switch] += c.bytes
    return out


def watched_transfer(
    tb: Testbed, src: str, dst: str, size: int, mode: str, faults: list[PlannedFault]
) -> dict[str, Any]:
    planes0, t1s0 = port_bytes(tb, src), t1_bytes(tb)
    # delivered bytes (SACKed or cumulatively acknowledged, each packet once) keep rising
    # while the cumulative ACK stalls behind a hole; agents that do not report them yet
    # leave the series empty and the plot shows the cumulative ACK alone
    delivered: list[tuple[float, int]] = []

    def on_progress(update: dict[str, Any]) -> None:
        if "bytes_delivered" in update:
            delivered.append((watch._now(), int(update["bytes_delivered"])))

    watch = TransferWatch(tb, src, dst, size, mode, faults, on_progress=on_progress)
    result: WatchResult = watch.run()
    planes1, t1s1 = port_bytes(tb, src), t1_bytes(tb)
    evs = []
    for ev, first in sorted(result.ev_first.items()):
        last = result.ev_last[ev]
        initial = first["state"]
        first_change = next((c for c in result.ev_changes if c.ev == ev), None)
        if first_change is not None:
            initial = first_change.old
        evs.append(
            {
                "ev": ev,
                "plane": last["plane"],
                "t1": last["t1"],
                "initial_state": initial,
                "final_state": last["state"],
                "data_sent": last["data_sent"] - first["data_sent"],
                "lost": last["lost"] - first["lost"],
            }
        )
    fault_rows = []
    for f in result.faults:
        hit = [e for e in evs if _ev_crosses(tb, e, f)]
        at = f.evs_at_injection
        lost_after = sum(result.ev_last[e["ev"]]["lost"] - at.get(e["ev"], {}).get("lost", 0) for e in hit)
        fault_rows.append(
            {
                "label": f.label,
                "kind": f.kind,
                "target": f.target,
                "id": f.fault_id,
                "at_fraction": f.at_fraction,
                "injected_at": f.injected_at,  # before its first table write
                "landed_at": f.landed_at,  # every table write done
                "acked_at_injection": f.acked_at_injection,
                "switches": f.switches,
                "switch_fault_drops": f.switch_drops,
                "evs_through_it": [e["ev"] for e in hit],
                "data_packets_lost": lost_after,  # on its EVs, from its injection to the end
                "ev_states_at_injection": {e["ev"]: at.get(e["ev"], {}).get("state", "") for e in hit},
                "ev_states_read_unix": f.evs_sampled_unix,  # when, for the replay (mrc view) to compare
                "error": f.error,
            }
        )
    return {
        "summary": result.summary,
        "wall_s": result.wall_s,
        "goodput_mbit_s": completion_series(result.progress),
        "delivered_mbit_s": goodput_series(delivered),
        "progress": result.progress,
        "ev_changes": [asdict(c) for c in result.ev_changes],
        "evs": evs,
        "faults": fault_rows,
        "bytes_per_plane": {str(p): planes1.get(p, 0) - planes0.get(p, 0) for p in sorted(planes1)},
        "bytes_per_t1": {n: t1s1[n] - t1s0.get(n, 0) for n in sorted(t1s1)},
    }


def _ev_crosses(tb: Testbed, ev: dict[str, Any], f: PlannedFault) -> bool:
    """Does this EV's path (plane, T1) cross the fault's switches?"""
    assert tb.topology is not None
    t1 = tb.topology.t1(ev["plane"], ev["t1"]).name
    if f.kind == "switch_down":
        return f.target == t1
    return t1 in f.switches  # a T0-T1 link fault of the sender's T0: the EVs through that T1


def wait_recovered(tb: Testbed, src: str, dst: str, timeout: float) -> tuple[float | None, dict[str, str]]:
    """Seconds until no sender EV to ``dst`` is retired any more after the faults were cleared.
    A sender that lists no connection to ``dst`` (it was dropped) has nothing left to recover:
    that ends the wait at once, with no states, rather than after ``timeout``."""
    client = tb.agent(src).client
    t0 = time.monotonic()
    states: dict[str, str] = {}
    while time.monotonic() - t0 < timeout:
        states = {ev: r["state"] for ev, r in send_rows(client.evs(), dst).items()}
        if not states:
            return None, states
        if all(s in USABLE for s in states.values()):
            return time.monotonic() - t0, states
        time.sleep(0.1)  # poll interval; the timeout bounds the loop
    return None, states


def auto_size(tb: Testbed, mode: str) -> int:
    """A size whose transfer lasts about AUTO_SECONDS on this machine and target."""
    src, dst, _link, _t1 = pick_endpoints(tb)
    s = tb.send(src, dst, AUTO_PROBE, mode)
    seconds = float(s.get("seconds") or 0) or AUTO_SECONDS
    size = int(AUTO_PROBE / seconds * AUTO_SECONDS) >> 20 << 20
    size = max(AUTO_MIN, min(AUTO_MAX, size))
    floor = f"; {AUTO_MIN >> 20} MiB is the demo's smallest" if size == AUTO_MIN else ""
    print(
        f"size: {size >> 20} MiB, about {size / AUTO_PROBE * seconds:.0f} s a transfer here "
        f"(an {AUTO_PROBE >> 20} MiB probe took {seconds:.2f} s{floor})",
        flush=True,
    )
    return size


def run_live(tb: Testbed, size: int, mode: str) -> dict[str, Any]:
    src, dst, link, t1 = pick_endpoints(tb)
    print(f"transfer: {size:,} bytes {src} -> {dst} (mode {mode})", flush=True)
    print("1/2 reference transfer, no faults ...", flush=True)
    clean = watched_transfer(tb, src, dst, size, mode, [])
    print(f"    {_line(clean)}", flush=True)
    faults = [
        PlannedFault("blackhole", link, BLACKHOLE_AT, label=f"black hole {link}"),
        PlannedFault("switch_down", t1, SWITCH_DOWN_AT, label=f"{t1} stops forwarding"),
    ]
    print(
        f"2/2 same transfer; at {BLACKHOLE_AT:.0%} of the bytes {link} becomes a black hole, "
        f"at {SWITCH_DOWN_AT:.0%} {t1} stops forwarding ...",
        flush=True,
    )
    faulted = watched_transfer(tb, src, dst, size, mode, faults)
    print(f"    {_line(faulted)}", flush=True)
    assert tb.controller is not None
    cleared = tb.controller.clear()
    limit = scaled(RECOVERY_TIMEOUT_S)
    print(
        f"faults cleared ({', '.join(cleared) or 'none'}); waiting up to {limit:.0f} s for probes "
        "to bring the EVs back ...",
        flush=True,
    )
    recovered_s, final_states = wait_recovered(tb, src, dst, limit)
    assert tb.choice is not None and tb.run is not None
    return {
        "target": tb.choice.target.value,
        "target_reason": tb.choice.reason,
        "link_rate_mbit_s": tb.config.link_rate,
        "link_rate_source": tb.rate_source,
        "departure_clock": "pacer" if nic_args(tb.config) else "hand-over",  # mrc_host/agent/pacer.py
        "run_dir": str(tb.run.path),
        "src": src,
        "dst": dst,
        "size": size,
        "mode": mode,
        "clean": clean,
        "faulted": faulted,
        "t1": tb.topology.t1_per_plane if tb.topology else 0,
        "recovery_after_clear_s": recovered_s,
        "ev_states_after_clear": final_states,
    }


def _line(run: dict[str, Any]) -> str:
    """One transfer in a line: time, rate, whether the receiver verified the bytes, what it cost."""
    s = run["summary"]
    undone = s.get("evs_undone", 0)
    late = f", {undone} put back at once (a packet taken for lost came late)" if undone else ""
    return (
        f"{'completed' if s.get('ok') else 'FAILED: ' + str(s.get('error'))} in "
        f"{s.get('seconds', run['wall_s']):.2f} s, {s.get('goodput_mbit_s', 0):.1f} Mbit/s, bytes verified: "
        f"{s.get('verified')}; {s.get('retransmissions')} retransmissions, "
        f"{s.get('evs_retired')} EVs retired{late}"
    )


def wrapped(line: str, indent: str = "    ") -> str:
    """A line of the summary cut at WIDTH columns, later pieces indented: every line fits a terminal."""
    return "\n".join(textwrap.wrap(line, WIDTH, subsequent_indent=indent, break_on_hyphens=False)) or line


def _slowdown(ft: float, ct: float, t1: int) -> str:
    """The fault run against the clean one, and why it costs so little when it does."""
    ratio = ft / ct
    if ratio >= 1.1 or t1 < 2:
        return f"{ratio:.2f}x"
    return (
        f"{ratio:.2f}x: the hosts' links set the pace; the T1 uplinks left in a plane carry "
        "its whole rate, so a dead path costs almost no time"
    )


def _rtt(s: dict[str, Any]) -> str:
    srtt, low = s.get("srtt_us"), s.get("min_rtt_us")
    return "?" if srtt is None or low is None else f"{srtt / 1e3:.2f}/{low / 1e3:.2f} ms"


def print_summary(r: dict[str, Any]) -> None:
    clean, faulted = r["clean"], r["faulted"]
    s, c = faulted["summary"], clean["summary"]
    print("=" * 78)
    print(f"MRC demo -- LIVE fabric on {r['target'].upper()} switches ({r['target_reason']})")
    print("=" * 78)
    rate = r.get("link_rate_mbit_s")
    paced = "; agents pace DATA at it" if r.get("departure_clock") == "pacer" else ""
    print(
        wrapped(
            f"links: {f'{rate:g} Mbit/s' if rate else 'unlimited'} ({r.get('link_rate_source', '?')}{paced})"
        )
    )
    print(f"transfer {r['src']} -> {r['dst']}: {r['size']:,} bytes, mode {r['mode']}")
    print(f"completed: {bool(s.get('ok'))}; bytes verified by the receiver: {s.get('verified')}")
    ct, ft = c.get("seconds") or clean["wall_s"], s.get("seconds") or faulted["wall_s"]
    print(
        wrapped(
            f"completion time: {ft:.2f} s with faults vs {ct:.2f} s without "
            f"({_slowdown(ft, ct, r.get('t1', 2))})"
        )
    )
    print(
        wrapped(
            f"retransmissions: {s.get('retransmissions')} ({retx_causes_text(s)}; "
            f"without faults: {c.get('retransmissions')})"
        )
    )
    print(f"sender RTT: SRTT/min {_rtt(s)} with faults, {_rtt(c)} without")
    print("faults:")
    for f in faulted["faults"]:
        if f["injected_at"] is None:
            print(f"  {f['label']}: NOT injected ({f['error']})")
            continue
        print(
            wrapped(
                f"  {f['label']} at {f['injected_at']:.2f} s "
                f"({f['acked_at_injection'] / r['size']:.0%} acked): "
                f"{f['data_packets_lost']} data packets lost on its EVs, {f['switch_fault_drops']} packets "
                "dropped there (probes too)"
            )
        )
    print(wrapped("bytes sent per plane (sender NIC ports): " + _kv(faulted["bytes_per_plane"], "plane ")))
    print(wrapped("bytes through each T1 (both directions): " + _kv(faulted["bytes_per_t1"])))
    print_ev_changes(faulted)
    recovery = recovery_line(r["recovery_after_clear_s"], r["ev_states_after_clear"])
    print(wrapped(f"after clearing the faults: {recovery}"))
    if r.get("fidelity"):
        from topologies.fidelity.report import summary_lines

        for line in summary_lines(r["fidelity"]):
            print(wrapped(line))


def print_ev_changes(faulted: dict[str, Any]) -> None:
    """The sender's EV changes: those each fault explains (a few lines, the rest counted), the others."""
    changes = [
        e for e in faulted["ev_changes"] if e["old"] != e["new"] and "SKIP" not in (e["old"], e["new"])
    ]
    skips = sum(1 for e in faulted["ev_changes"] if e["new"] == "SKIP" and e["old"] != "SKIP")
    print("EV state changes (sender; seconds since the transfer started; each EV's in results.json):")
    by_fault, others = changes_by_fault(changes, faulted["faults"])
    for f, mine in by_fault:
        states = Counter(st or "?" for st in f.get("ev_states_at_injection", {}).values())
        then = ", ".join(f"{n} {st}" for st, n in states.most_common())
        landed = f.get("landed_at")
        written = f", tables written by {landed:.2f} s" if landed is not None else ""
        head = f"  {f['label']} at {f['injected_at']:.2f} s{written}: {len(f['evs_through_it'])} EVs cross it"
        print(wrapped(f"{head} ({then} then)" if then else head))
        for e in mine[:MAX_EV_LINES]:
            print(
                f"    {e['t']:6.2f} s  EV {e['ev']} (plane {e['plane']}, T1 {e['t1']})  "
                f"{e['old']:>11} -> {e['new']}"
            )
        if len(mine) > MAX_EV_LINES:
            print(f"    ... {len(mine) - MAX_EV_LINES} more, the last at {mine[-1]['t']:.2f} s")
        if not mine:
            final = Counter(e["final_state"] for e in faulted["evs"] if e["ev"] in set(f["evs_through_it"]))
            ends = ", ".join(f"{n} {st}" for st, n in final.most_common())
            print(wrapped(f"    no change recorded after the fault (at the end: {ends or 'none seen'})"))
    retired = sum(1 for e in others if e["new"] == "ASSUMED_BAD")
    print(
        f"  elsewhere: {retired} retirements, {len(others) - retired} other changes on EVs whose path "
        f"crossed no fault then; {skips} ECN/trim SKIPs"
    )
    if others:
        print(
            "    (acknowledgements and probe replies return on the receiver's own EVs, which may cross one)"
        )
    why = Counter(e.get("reason", "").split(" of psn")[0] or "reason not recorded" for e in others)
    if why:
        print(wrapped("    why: " + ", ".join(f"{n} {reason}" for reason, n in why.most_common()), "      "))


def changes_by_fault(
    changes: list[dict[str, Any]], faults: list[dict[str, Any]]
) -> tuple[list[tuple[dict[str, Any], list[dict[str, Any]]]], list[dict[str, Any]]]:
    """Each injected fault with the EV changes it explains, and the changes no fault explains.

    A fault explains a change on an EV whose path crosses it from ``injected_at`` on: the stamp
    taken before its first table write, since the first switch's entry acts at once and the
    others land up to ~0.1 s later (``landed_at``); changes in between are the fault's."""
    explained: set[int] = set()
    by_fault = []
    for f in faults:
        if f["injected_at"] is None:
            continue
        ours = set(f["evs_through_it"])
        mine = [(i, e) for i, e in enumerate(changes) if e["ev"] in ours and e["t"] >= f["injected_at"]]
        explained.update(i for i, _e in mine)
        by_fault.append((f, [e for _i, e in mine]))
    return by_fault, [e for i, e in enumerate(changes) if i not in explained]


def recovery_line(seconds: float | None, states: dict[str, str]) -> str:
    """How the EVs came back after the faults were cleared, naming the ones that did not."""
    if seconds is not None:
        return f"no EV retired any more {seconds:.2f} s after (probes brought them back)"
    if not states:
        return "nothing to recover: the sender has no connection to the receiver left (it was dropped)"
    stuck = {ev: st for ev, st in states.items() if st not in USABLE}
    by_state = Counter(stuck.values())
    named = ", ".join(f"{ev} {st}" for ev, st in sorted(stuck.items())[:MAX_EV_LINES])
    more = f" and {len(stuck) - MAX_EV_LINES} more" if len(stuck) > MAX_EV_LINES else ""
    return (
        f"{len(stuck)} of {len(states)} EVs still not usable after {scaled(RECOVERY_TIMEOUT_S):.0f} s "
        f"({', '.join(f'{n} {st}' for st, n in by_state.most_common())}): {named}{more}"
    )


def report_pointer(results: Path = Path("results")) -> str:
    """Where the full evidence (every published result, sim and live) is, or how to make it."""
    reports = sorted(results.glob("*/REPORT.md"), key=lambda p: p.stat().st_mtime)
    where = f"latest report: {reports[-1]}" if reports else "no report yet"
    return (
        f"{where}; `make bench` (or `make bench QUICK=1`, minutes) writes results/<timestamp>/REPORT.md, "
        "one row per published MRC result (docs/results.md explains the table)"
    )


def _kv(d: dict[str, int], prefix: str = "") -> str:
    total = sum(d.values()) or 1
    return ", ".join(f"{prefix}{k} {v / 1e6:.1f} MB ({v / total:.0%})" for k, v in d.items())


def run_fallback(tb: Testbed, why: str, runs_root: Path) -> int:
    """No live agent: show the faults on the live fabric's paths, then the simulator demo."""
    src, dst, link, t1 = pick_endpoints(tb)
    assert tb.controller is not None
    print(f"NOTE: no live MRC agent ({why}): the live fabric only shows which paths the faults cut;")
    print("      the transfer itself runs in the SIMULATOR below.")
    for kind, target in (("blackhole", link), ("switch_down", t1)):
        tb.controller.inject(kind, target)
        cut = [p for p in tb.controller.paths(src, dst) if p.status != "ok"]
        print(
            f"  {kind} {target}: {len(cut)} of the {src}->{dst} paths dropped: "
            + ", ".join(f"EV {p.ev:08x} at {p.drop_at}" for p in cut)
        )
    tb.controller.clear()
    tb.stop()
    from mrc_host.sim.demo import main as sim_demo

    return sim_demo(["--out", str(runs_root)])


def _say(line: str) -> None:
    """The testbed's notes (link rate, placement, warnings), cut to the demo's width."""
    print(wrapped(f"*** {line}"), file=sys.stderr, flush=True)


def _step(_line: str) -> None:
    """The bring-up's routine steps: the demo prints what matters of them once the fabric is up."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m topologies.demo", description=__doc__.splitlines()[0])
    add_fabric_arguments(ap)
    ap.add_argument(
        "--size",
        default="auto",
        help=f"transfer size, e.g. 64M; auto (default): what takes about {AUTO_SECONDS:g} s here, "
        f"measured with a {AUTO_PROBE >> 20} MiB transfer, within {AUTO_MIN >> 20}M..{AUTO_MAX >> 20}M",
    )
    ap.add_argument("--mode", default="mrc", choices=("mrc", "single-path", "ecmp"))
    ap.add_argument("--no-agents", action="store_true", help="no live agents: the fallback demo")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("demo: the live fabric needs root; running the simulator demo instead", file=sys.stderr)
        from mrc_host.sim.demo import main as sim_demo

        rc = sim_demo([])
        print(report_pointer())
        return rc
    from mininet.log import setLogLevel

    setLogLevel("warning")
    size = 0 if args.size == "auto" else parse_size(args.size)
    tb = Testbed(config_from_args(args, agents=not args.no_agents), say=_say, progress=_step)

    def verdict_so_far() -> None:
        if tb.fidelity_verdict is not None:
            print(f"fidelity of the run so far: {tb.fidelity_verdict.text}", file=sys.stderr)

    return run_explained("demo", lambda: live_demo(tb, args, size), after=verdict_so_far)


def live_demo(tb: Testbed, args: argparse.Namespace, size: int) -> int:
    """The live demo on ``tb`` (started here): the reference and the faulted transfer."""
    started = time.monotonic()
    print("*** starting the fabric, controller and agents ...", file=sys.stderr, flush=True)
    with tb:
        assert tb.choice is not None and tb.run is not None
        print(wrapped(tb.choice.banner()), flush=True)
        print(f"run directory: {tb.run.path} (switches.json: Thrift ports and P4Runtime sockets)", flush=True)
        ok, why = agent_available()
        if args.no_agents:
            ok, why = False, "--no-agents"
        if not ok or not tb.agents:
            return run_fallback(tb, why if not ok else tb.agents_note, args.runs)
        if not size:
            size = auto_size(tb, args.mode)
        assert tb.run is not None
        # the whole fabric as `mrc view` shows it, for its replay: runs/<ts>/recording.jsonl
        with recorded(tb.run.path, "demo"):
            result = run_live(tb, size, args.mode)
            if tb.fidelity is not None:  # the whole run: the size probe and both transfers
                result["fidelity"] = tb.fidelity.verdict().as_dict()
        out = tb.run.path
        (out / "results.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        # matplotlib builds its font cache at its first use by a user (root's, for `sudo ./run.sh
        # demo`) and, where that takes a while, says so in a warning among the demo's lines
        logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
        from topologies.demo_plot import timeline_png

        timeline_png(result, out / "timeline.png")
    print_summary(result)
    print(wrapped(f"written: {out}/results.json (every EV, fault and sample) and timeline.png (runs/latest)"))
    print(f"replay it in a web page: mrc view {out}")
    print(f"demo took {time.monotonic() - started:.0f} s including fabric bring-up and teardown")
    print(wrapped(report_pointer()))
    s = result["faulted"]["summary"]
    return 0 if s.get("ok") and s.get("verified") else 1


if __name__ == "__main__":
    sys.exit(main())
