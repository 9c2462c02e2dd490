"""Replay a finished run: the recorded records, a frame for any time the slider picks.

A run directory holds one or more recordings (``mrc_fabric.recording``): the testbed's
``recording.jsonl`` (written by the view's collector during the demo or a bench
experiment) or the simulator's ``*.recording.jsonl``. A demo run from before recordings
existed is read from its ``results.json`` instead (``demo_records``). Seeking copies the
nearest earlier checkpoint of the state and applies the records after it, so moving the
slider costs at most ``CHECKPOINT_EVERY`` records.
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path
from typing import Any

from mrc_fabric import recording
from mrc_fabric.topology import Topology

from .model import Snapshot, Timeline, frame

CHECKPOINT_EVERY = 200


class Replay:
    def __init__(self, head: dict[str, Any], records: list[dict[str, Any]], name: str = "") -> None:
        self.head = head
        self.name = name
        self.records = records = faults_from_injection(records)
        self.times = [float(r["t"]) for r in records]
        self.duration = self.times[-1] if self.times else 0.0
        self.timeline = Timeline()
        self.checkpoints: list[tuple[int, Snapshot]] = [(0, Snapshot())]
        snap = Snapshot()
        for i, r in enumerate(records):
            if i and i % CHECKPOINT_EVERY == 0:
                self.checkpoints.append((i, snap.copy()))
            snap.apply(r)
            self.timeline.apply(r)
        self._cache: tuple[int, Snapshot] = (0, Snapshot())

    def snapshot_at(self, t: float) -> Snapshot:
        """The state after every record at or before ``t``."""
        end = bisect.bisect_right(self.times, t)
        done, snap = self._cache
        if not done <= end or end - done > CHECKPOINT_EVERY:
            k = bisect.bisect_right([i for i, _ in self.checkpoints], end) - 1
            done, snap = self.checkpoints[k][0], self.checkpoints[k][1].copy()
        for r in self.records[done:end]:
            snap.apply(r)
        self._cache = (end, snap)
        snap.t = t
        return snap

    def frame_at(self, t: float) -> dict[str, Any]:
        t = min(max(0.0, t), self.duration)
        return frame(self.snapshot_at(t), self.timeline, t)

    def fault_times(self) -> list[float]:
        return [e["t"] for e in self.timeline.events if e["kind"] == "fault_injected"]


def faults_from_injection(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each fault in the state from its ``fault_injected`` event on, not from the fault list read
    a moment later: a live recording reads the controller's faults after the event (the next
    poll, tens of ms on), so a jump to a fault's time would show the fabric still whole.

    For each fault a ``faults`` record lists first whose injection event (same fault id) came
    earlier, a ``faults`` record at the event's time is added: the faults active then plus it."""
    injected: dict[str, float] = {}
    for r in records:
        if r.get("k") == "event" and r.get("kind") == "fault_injected" and r.get("fault"):
            injected.setdefault(str(r["fault"]), float(r["t"]))
    if not injected:
        return records
    out: list[dict[str, Any]] = []
    active: list[dict[str, Any]] = []
    seen: set[str] = set()
    early: list[dict[str, Any]] = []
    for r in records:
        if r.get("k") != "faults":
            continue
        t = float(r["t"])
        for f in r.get("faults", []):
            fid = str(f.get("id", "")) if isinstance(f, dict) else ""
            if fid and fid not in seen and injected.get(fid, t) < t:
                active = [*active, f]
                early.append({"k": "faults", "t": injected[fid], "faults": active})
            seen.add(fid)
        active = [f for f in r.get("faults", []) if isinstance(f, dict)]
    if not early:
        return records
    out = [*records, *early]
    # stable: an added record sorts after the event at its time and before what followed it
    out.sort(key=lambda r: float(r["t"]))
    return out


def load(run_dir: Path) -> list[Replay]:
    """Every recording of a run directory (or one file), or the demo's results.json."""
    paths = [run_dir] if run_dir.is_file() else recording.find(run_dir)
    out = []
    for p in paths:
        head, records = recording.read(p)
        out.append(Replay(head, records, p.name))
    if not out and (run_dir / "results.json").is_file():
        head, records = demo_records(run_dir)
        out.append(Replay(head, records, "results.json"))
    if not out:
        raise recording.RecordingError(
            f"{run_dir}: no {recording.FILE_NAME}, *{recording.SUFFIX} or demo results.json to replay"
        )
    return out


def demo_records(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A demo's results.json as records: its faulted transfer's EVs, changes, faults and goodput."""
    result = json.loads((run_dir / "results.json").read_text())
    topo = Topology.load(run_dir / "topology.json")
    run = result["faulted"]
    head = recording.header(
        "demo",
        f"demo {result['src']} -> {result['dst']} (results.json)",
        0.0,
        recording.graph_from_topology(topo),
    )
    cid = f"{result['src']}>{result['dst']}/{result.get('mode', 'mrc')}"
    evs = {e["ev"]: [e["initial_state"], 1, 0, 0] for e in run["evs"]}
    conn = {"id": cid, "src": result["src"], "dst": result["dst"], "mode": result.get("mode", "mrc")}
    records: list[dict[str, Any]] = [
        {
            "k": "sample",
            "t": 0.0,
            "conns": [{**conn, "delivered_bytes": 0, "evs": [[ev, *v] for ev, v in evs.items()]}],
        }
    ]
    acked, prev_t = 0.0, 0.0
    for t, mbps in run.get("goodput_mbit_s", [])[1:]:
        acked += mbps * 1e6 / 8 * (t - prev_t)
        prev_t = t
        records.append({"k": "sample", "t": t, "conns": [{**conn, "delivered_bytes": int(acked)}]})
    active: list[dict[str, Any]] = []  # each faults record holds every fault injected so far
    for f in sorted(run.get("faults", []), key=lambda f: f.get("injected_at") or 0.0):
        if f.get("injected_at") is None:
            continue
        links, switches = fault_marks(topo, f["kind"], f["target"])
        active = [
            *active,
            {
                "id": f.get("id", ""),
                "kind": f["kind"],
                "target": f["target"],
                "direction": "both",
                "detail": "",
                "links": links,
                "switches": switches,
            },
        ]
        records.append(
            {
                "k": "event",
                "t": f["injected_at"],
                "kind": "fault_injected",
                "level": "warn",
                "text": f"{f['kind']} {f['target']}",
            }
        )
        records.append({"k": "faults", "t": f["injected_at"], "faults": active})
    for c in run.get("ev_changes", []):
        records.append({"k": "ev", "t": c["t"], "conn": cid, "ev": c["ev"], "old": c["old"], "new": c["new"]})
    records.sort(key=lambda r: float(r["t"]))
    return head, records


def fault_marks(topo: Topology, kind: str, target: str) -> tuple[list[str], list[str]]:
    """(links, switches) a fault marks on the drawing, from its kind and target names."""
    if kind == "switch_down":
        return [], [target] if topo.has_switch(target) else []
    if kind == "nic_port_down":
        host, _, plane = target.replace("-eth", ":").partition(":")
        if topo.has_host(host) and plane.isdigit():
            link = topo.link_at(host, int(plane))
            return ([link.name] if link else []), []
        return [], []
    try:
        return [topo.find_link(target).name], []
    except KeyError:
        return [], []
