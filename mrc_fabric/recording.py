"""A run's recording: the fabric's state over time, as ``mrc view`` shows it live and replays it.

Writers: the live view's collector (``mrc_view.live``, during a testbed run, the demo and
the live bench experiments) and the simulator (``mrc-sim --record``). Reader: the replay
of ``mrc view runs/<dir>``. The format is JSON lines, one record per line, every record an
object with ``k`` (its kind) and ``t`` (seconds since the recording began); records are
written in time order except that EV changes may precede, by less than one sampling
interval, the sample they were read with (a reader sorts by ``t``, stably).

``header`` (the first line, t = 0)
    ``format`` ("mrc-recording"), ``version``, ``source`` (testbed, demo, mrc-sim ...),
    ``title``, ``started_unix``, ``link_mbps`` (link rate, 0 if unknown), ``graph``:
    ``{"planes": P, "nodes": [{name, role: host|t0|t1, plane (-1 for hosts), index}],
    "links": [{name, a, b, plane}]}`` where ``a`` is the lower tier (host below T0, T0 below T1);
    ``truncated`` only where the writer stopped at its size bound: the time from which nothing
    was recorded (the last record is then a ``recording_truncated`` event).
``sample``
    ``links``: ``{link: [Mbit/s a->b, Mbit/s b->a]}`` measured over the last interval;
    ``switches``: ``{switch: up|unreachable|restarting|down}``; ``agents``: ``{host:
    alive|dead|absent}``; ``conns``: the sending ends of the connections, each ``{id, src,
    dst, mode, delivered_bytes, evs: [[ev (8 hex digits), state, active (0/1), data packets
    sent, data packets lost], ...]}``. Any key may be missing (not measured).
``ev``
    one EV state change at its exact time: ``conn`` (a connection id), ``ev``, ``old``,
    ``new``, ``reason``.
``faults``
    the set of faults active from ``t`` on: ``[{id, kind, target, direction, detail, links:
    [link names it cuts], switches: [switch names it takes down]}]``.
``event``
    a line of the event feed: ``kind`` (fault_injected, switch_disconnected,
    process_restarted, agent_dead, ev_states ...), ``text``, ``level`` (info, warn, error).
``fidelity``
    the live run's fidelity verdict so far, as its monitor wrote it to :data:`FIDELITY_FILE`:
    ``faithful`` (true/false), ``verdict`` ("faithful" or "not faithful: why"), ``line`` (its
    figures in one line).

One module owns the format so that the simulator (``mrc_host``) and the view (above the
testbed) agree on it without importing each other.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, Final

from mrc_fabric.topology import Topology

FORMAT: Final = "mrc-recording"
VERSION: Final = 1
FILE_NAME: Final = "recording.jsonl"
SUFFIX: Final = ".recording.jsonl"  # <name>.recording.jsonl: several recordings in one directory
KINDS: Final = frozenset({"header", "sample", "ev", "faults", "event", "fidelity"})
FIDELITY_FILE: Final = "fidelity.json"  # a live run's fidelity verdict (topologies.fidelity)
STATES: Final = ("GOOD", "SKIP", "ASSUMED_BAD", "DENIED")
MAX_LINE: Final = 16 << 20  # a sample of many connections x 1024 EVs stays well below this


class RecordingError(ValueError):
    """A recording that cannot be read; the message names the file and line."""


def graph(planes: int, nodes: list[dict[str, Any]], links: list[dict[str, Any]]) -> dict[str, Any]:
    return {"planes": planes, "nodes": nodes, "links": links}


def graph_from_topology(topo: Topology) -> dict[str, Any]:
    """The drawing graph of a testbed fabric: its switches, hosts and cables by plane."""
    nodes: list[dict[str, Any]] = [
        {"name": s.name, "role": s.role.value, "plane": s.plane, "index": s.index} for s in topo.switches
    ]
    nodes += [{"name": h.name, "role": "host", "plane": -1, "index": h.index} for h in topo.hosts]
    plane_of = {s.name: s.plane for s in topo.switches}
    links = [
        {"name": lk.name, "a": lk.a.node, "b": lk.b.node, "plane": plane_of.get(lk.b.node, 0)}
        for lk in topo.links
    ]
    return graph(topo.planes, nodes, links)


def header(
    source: str, title: str, started_unix: float, graph_: dict[str, Any], link_mbps: float = 0.0
) -> dict[str, Any]:
    return {
        "k": "header",
        "t": 0.0,
        "format": FORMAT,
        "version": VERSION,
        "source": source,
        "title": title,
        "started_unix": started_unix,
        "link_mbps": link_mbps,
        "graph": graph_,
    }


class RecordingWriter:
    """Appends records to a recording file, one JSON line each, flushed per write."""

    def __init__(self, path: Path, head: dict[str, Any]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = open(path, "w")  # noqa: SIM115 - closed by close()
        self.write(head)

    def write(self, record: dict[str, Any]) -> None:
        if self._file.closed:
            return
        self._file.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._file.flush()

    def write_all(self, records: Iterable[dict[str, Any]]) -> None:
        for r in records:
            self.write(r)

    def close(self) -> None:
        self._file.close()


def find(directory: Path) -> list[Path]:
    """The recordings in a run directory: ``recording.jsonl`` first, then ``*.recording.jsonl``."""
    out = [directory / FILE_NAME] if (directory / FILE_NAME).is_file() else []
    return out + sorted(p for p in directory.glob(f"*{SUFFIX}") if p.is_file())


def _check(record: Any, where: str) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise RecordingError(f"{where}: a record is a JSON object, not {type(record).__name__}")
    kind = record.get("k")
    if kind not in KINDS:
        raise RecordingError(f"{where}: k: {str(kind)[:32]!r} is not one of {', '.join(sorted(KINDS))}")
    t = record.get("t")
    if not isinstance(t, int | float) or isinstance(t, bool) or not 0 <= t < 1e9:
        raise RecordingError(f"{where}: t: {str(t)[:32]!r} is not a time in seconds")
    return record


def read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, the other records sorted by time); RecordingError names what is wrong and where.

    A torn last line (the writer was killed mid-line) is skipped, not an error.
    """
    head: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.readlines(1 << 31)
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        if len(line) > MAX_LINE:
            raise RecordingError(f"{where}: line longer than {MAX_LINE} bytes")
        if not line.strip():
            continue
        try:
            record = _check(json.loads(line), where)
        except json.JSONDecodeError as exc:
            if n == len(lines) and not line.endswith("\n"):
                break  # torn last line
            raise RecordingError(f"{where}: not JSON: {exc}") from None
        if head is None:
            if record["k"] != "header" or record.get("format") != FORMAT:
                raise RecordingError(f"{where}: the first record is not an {FORMAT} header")
            if record.get("version") != VERSION:
                raise RecordingError(f"{where}: version {record.get('version')!r} (this reader: {VERSION})")
            if not isinstance(record.get("graph"), dict):
                raise RecordingError(f"{where}: graph: missing")
            head = record
            continue
        records.append(record)
    if head is None:
        raise RecordingError(f"{path}: empty")
    records.sort(key=lambda r: float(r["t"]))
    return head, records


def ev_feed(
    t: float, conn: str, changes: Iterable[tuple[str, str, str]], t1_names: dict[tuple[int, int], str]
) -> list[dict[str, Any]]:
    """Feed lines for a connection's EV changes ``(ev, old, new)``: one per path and change."""
    from mrc_fabric.ev import ev_plane, ev_t1

    groups: dict[tuple[int, int, str, str], int] = {}
    for ev, old, new in changes:
        if old != new:
            value = int(ev, 16)
            key = (ev_plane(value), ev_t1(value), old, new)
            groups[key] = groups.get(key, 0) + 1
    out = []
    for (plane, t1, old, new), n in sorted(groups.items()):
        where = t1_names.get((plane, t1), f"T1 {t1}")
        out.append(
            {
                "k": "event",
                "t": t,
                "kind": "ev_states",
                "level": "error" if new == "ASSUMED_BAD" else "info",
                "text": f"{conn}: {n} EV{'s' if n > 1 else ''} via plane {plane} {where} {old} → {new}",
            }
        )
    return out
