"""Scenario draws for the fuzzer: a fabric, traffic and faults from a stream of integer choices.

Why a stream of choices: every decision of a draw is one ``integer(lo, hi)`` call on a
``Drawer``, so the same generator serves three sources. ``RandomDrawer`` takes them from a
seeded ``random.Random`` (draw ``i`` of seed ``S`` is the same scenario on any worker, in
any order); ``ReplayDrawer`` replays a recorded list, which is what shrinking edits (a
smaller value, a deleted block: Hypothesis' own way of shrinking, on the recorded choices);
``HypothesisDrawer`` asks Hypothesis (``st.data()``), so property tests generate and shrink
draws with Hypothesis' engine. A lower value always means a simpler draw: fewer planes,
items and faults, smaller sizes, the first option of a list.

What a draw holds (bounded so that one runs in about a second at most, 0.15 s as a rule):
1-8 planes, 2-16 T1, 2-4 T0 with 1-4 hosts each, link delays 0.2-2 us; one to three traffic
items (flow, incast with staggered starts, permutation, all-to-all; 4 KiB-2 MiB per plane a
write, at most 4 MiB per plane in all); up to three faults (black hole, link down, switch
down, flap, loss) while the traffic runs, some at the same instant, never so many that a
pair of hosts is left without a path; one time in three (two planes or more) one or two
planes slower than the others from the start (a gray failure: at every link, the NIC links
or the T1s), beside those faults.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from .fabric import FabricShape
from .faults import parse_time
from .network import base_rtt_ns
from .scenario_file import _toml_value

DELAYS_NS = (200, 500, 1000, 2000)
# sizes per plane (a write moves this x planes: the same time on every fabric), starts and
# staggers in base RTTs (cross-leaf)
SIZES = (32 << 10, 128 << 10, 512 << 10, 1 << 20, 2 << 20)
ALL_TO_ALL_SIZES = (4 << 10, 16 << 10, 64 << 10)
STARTS_RTT = (0, 10, 30, 100)
STAGGERS = (0, 4, 2, 1)  # an incast's last sender starts 1/(2 x this) of one's time alone after the first
PATTERNS = ("flow", "incast", "permutation", "incast", "all-to-all")  # incasts twice as often
FAULT_KINDS = ("blackhole", "down", "switch-down", "flap", "loss")
KILLING = frozenset({"blackhole", "down", "switch-down", "flap"})
LOSS_P = (0.2, 0.05, 0.01, 0.001)
SLOW_GBPS = (50, 25, 10, 75)  # a gray plane's rate (the link rate is 100 Gb/s)
SLOW_WHERE = ("plane", "nic", "inside")  # every link of it, the NIC links, its T1s
MAX_BYTES_PER_PLANE = 4 << 20
MTU = 4096


class Drawer(Protocol):
    def integer(self, lo: int, hi: int) -> int:
        """A whole number in ``lo..hi`` (both included)."""
        ...


class RandomDrawer:
    """Choices from a seeded random source, recorded (``choices``) for replay and shrinking."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.choices: list[int] = []

    def integer(self, lo: int, hi: int) -> int:
        v = self.rng.randint(lo, hi)
        self.choices.append(v)
        return v


class ReplayDrawer:
    """Recorded choices played back, each clamped into the range asked; past the end, ``lo``."""

    def __init__(self, choices: list[int]) -> None:
        self.given = list(choices)
        self.choices: list[int] = []  # what was actually used (clamped)

    def integer(self, lo: int, hi: int) -> int:
        k = len(self.choices)
        v = min(max(self.given[k], lo), hi) if k < len(self.given) else lo
        self.choices.append(v)
        return v


class HypothesisDrawer:
    """Choices from Hypothesis (``data`` from ``st.data()``): it generates and shrinks them."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def integer(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return int(self.data.draw(st.integers(lo, hi)))


def draw_rng(seed: int, index: int) -> random.Random:
    """The random source of draw ``index`` of campaign ``seed`` (a string seed hashes the
    same way on every machine and Python run)."""
    return random.Random(f"mrc-fuzz:{seed}:{index}")


def _pick(d: Drawer, options: tuple[Any, ...] | list[Any]) -> Any:
    return options[d.integer(0, len(options) - 1)]


def _sample(d: Drawer, pool: list[int], k: int) -> list[int]:
    """``k`` distinct members of ``pool`` (in the order drawn)."""
    left = list(pool)
    return [left.pop(d.integer(0, len(left) - 1)) for _ in range(min(k, len(left)))]


class _Fabric:
    """What the fault and path checks need of the drawn shape."""

    def __init__(self, shape: FabricShape) -> None:
        self.shape = shape
        self.rtt = base_rtt_ns(shape, MTU, False)

    def pairs_keep_a_path(self, dead: set[str]) -> bool:
        """Whether every pair of hosts still has a path with the elements in ``dead`` failed."""
        s = self.shape

        def alive(p: int, a: int, b: int, h: int, g: int) -> bool:
            if {f"h{h}-p{p}", f"h{g}-p{p}", f"p{p}-t0_{a}", f"p{p}-t0_{b}"} & dead:
                return False
            if a == b:
                return True
            return any(
                not {f"p{p}-t1_{j}", f"p{p}-t0_{a}-t1_{j}", f"p{p}-t0_{b}-t1_{j}"} & dead for j in range(s.t1)
            )

        for h in range(s.hosts):
            for g in range(h + 1, s.hosts):
                a, b = s.t0_of(h), s.t0_of(g)
                if not any(alive(p, a, b, h, g) for p in range(s.planes)):
                    return False
        return True


def _traffic(d: Drawer, shape: FabricShape, rtt: int) -> list[dict[str, Any]]:
    """One to three items; their sizes halved until the draw moves at most MAX_BYTES_PER_PLANE
    per plane."""
    hosts = list(range(shape.hosts))
    n = shape.hosts
    planes = shape.planes
    items: list[dict[str, Any]] = []
    for i in range(_pick(d, (1, 1, 2, 3))):  # one item alone half the time (fairness is judged alone)
        pattern = _pick(d, PATTERNS)
        item: dict[str, Any] = {"pattern": pattern, "name": f"t{i}-{pattern}"}
        start = _pick(d, STARTS_RTT) * rtt
        if pattern == "flow":
            src, dst = _sample(d, hosts, 2)
            item |= {"src": src, "dst": dst, "size": _pick(d, SIZES) * planes}
        elif pattern == "incast":
            dst = _pick(d, hosts)
            others = [h for h in hosts if h != dst]
            remote = [h for h in others if shape.t0_of(h) != shape.t0_of(dst)]
            if d.integer(0, 1) == 0 and len(remote) >= 2:  # senders from other leaves only: one base RTT
                others = remote
            senders = _sample(d, others, d.integer(min(2, len(others)), min(8, len(others))))
            item |= {"dst": dst, "senders": senders, "size": _pick(d, SIZES) * planes}
            item["_stagger"] = _pick(d, STAGGERS)  # set once the size is final
        elif pattern == "permutation":
            k = d.integer(2, n)
            item |= {"hosts": sorted(_sample(d, hosts, k)), "size": _pick(d, SIZES) * planes}
        else:
            k = d.integer(min(3, n), min(8, n))
            item |= {"hosts": sorted(_sample(d, hosts, k)), "size": _pick(d, ALL_TO_ALL_SIZES) * planes}
        if start:
            item["start"] = f"{start}ns"
        items.append(item)
    while sum(_bytes(t) for t in items) > MAX_BYTES_PER_PLANE * planes:
        big = max(items, key=_bytes)
        big["size"] //= 2
    for item in items:
        div = item.pop("_stagger", 0)
        if div and len(item["senders"]) > 1:  # the last starts before the first could have sent
            alone = item["size"] * 8 / (planes * shape.link_gbps)  # half its write alone: all overlap
            item["stagger"] = f"{max(1, int(alone / (2 * div * (len(item['senders']) - 1))))}ns"
    return items


def _bytes(item: dict[str, Any]) -> int:
    size: int = item["size"]
    if item["pattern"] == "incast":
        return size * len(item["senders"])
    if item["pattern"] == "permutation":
        return size * len(item["hosts"])
    if item["pattern"] == "all-to-all":
        k = len(item["hosts"])
        return size * k * (k - 1)
    return size


def _busy_ns(item: dict[str, Any], shape: FabricShape) -> tuple[int, int]:
    """(last connection start, a rough end) of an item, in ns from the run's start."""
    start = parse_time(item.get("start", "0"), 0)
    stagger = parse_time(item.get("stagger", "0"), 0)
    senders = len(item.get("senders", [])) or 1
    last = start + stagger * (senders - 1)
    per_host = item["size"] * (senders if item["pattern"] == "incast" else 1)
    if item["pattern"] == "all-to-all":
        per_host = item["size"] * (len(item["hosts"]) - 1)
    cap = shape.planes * shape.link_gbps / 8  # bytes per ns
    return last, last + int(per_host / cap)


def _faults(d: Drawer, fab: _Fabric, items: list[dict[str, Any]]) -> list[str]:
    """Up to three faults from 5 RTT after the first connection started, some at once."""
    s = fab.shape
    first = min(parse_time(t.get("start", "0"), 0) for t in items)
    end = max(_busy_ns(t, s)[1] for t in items)
    lo = first + 5 * fab.rtt
    hi = max(lo, int(0.8 * end))
    used = sorted({h for t in items for h in _hosts(t)})
    t0s = sorted({s.t0_of(h) for h in used})
    dead: set[str] = set()
    out: list[str] = []
    at = lo
    for _ in range(d.integer(0, 3)):
        kind = _pick(d, FAULT_KINDS)
        p = d.integer(0, s.planes - 1)
        where = d.integer(0, 2 if kind == "loss" else 1)
        if kind == "switch-down":
            target = f"p{p}-t1_{d.integer(0, s.t1 - 1)}" if where == 0 else f"p{p}-t0_{_pick(d, t0s)}"
        elif where == 0:
            target = f"p{p}-t0_{_pick(d, t0s)}-t1_{d.integer(0, s.t1 - 1)}"
        elif where == 1:
            target = f"h{_pick(d, used)}-p{p}"
        else:
            target = "all"
        same = d.integer(0, 2) == 0 and out  # one in three strikes with the fault before
        if not same:
            at = lo + d.integer(0, 9) * (hi - lo) // 10
        value = ""
        stop: int | None = None
        if kind == "loss":
            prob = _pick(d, LOSS_P)
            value = f"={min(prob, 0.01) if target == 'all' else prob}"
        elif kind == "flap":
            period = fab.rtt * _pick(d, (10, 20, 40))
            value = f"={period}ns"
            stop = at + 2 * period * d.integer(1, 3)
        if kind != "flap":
            stop = _pick(d, (None, at + 20 * fab.rtt, at + 100 * fab.rtt))
        if kind in KILLING:
            if not fab.pairs_keep_a_path(dead | {target}):
                continue  # it would cut some pair of hosts off: not drawn
            dead.add(target)
        out.append(f"{kind}{value}:{target}@{at}ns" + (f"-{stop}ns" if stop is not None else ""))
    return out


def _slow(d: Drawer, fab: _Fabric, items: list[dict[str, Any]]) -> list[str]:
    """A gray failure one time in three (with two planes or more): from the start, one or two
    planes slower than the rest -- every link of the plane, only the NIC links of the hosts
    the traffic uses, or only its T1s' links (the plane then carries the T1 count times that
    rate across the spine, at most its NIC links' 100 Gb/s). Rate changes, not failures: they
    are not counted among the draw's three faults."""
    s = fab.shape
    if s.planes < 2 or d.integer(0, 2) != 0:
        return []
    out: list[str] = []
    used = sorted({h for t in items for h in _hosts(t)})
    for p in _sample(d, list(range(s.planes)), d.integer(1, 2)):
        gbps = _pick(d, SLOW_GBPS)
        where = _pick(d, SLOW_WHERE)
        if where == "plane":
            out.append(f"rate={gbps}:p{p}@0")
        elif where == "nic":
            out += [f"rate={gbps}:h{h}-p{p}@0" for h in used]
        else:
            out += [f"rate={gbps}:p{p}-t1_{j}@0" for j in range(s.t1)]
    return out


def _hosts(item: dict[str, Any]) -> list[int]:
    if item["pattern"] == "flow":
        return [item["src"], item["dst"]]
    if item["pattern"] == "incast":
        return [item["dst"], *item["senders"]]
    return list(item["hosts"])


def draw_table(d: Drawer) -> dict[str, Any]:
    """One scenario, as the TOML table ``scenario_file.parse`` reads."""
    shape = FabricShape(
        planes=d.integer(1, 8),
        t1=d.integer(2, 16),
        t0=d.integer(2, 4),
        hosts_per_t0=d.integer(1, 4),
        link_delay_ns=_pick(d, DELAYS_NS),
    )
    seed = d.integer(1, 1000)
    fab = _Fabric(shape)
    items = _traffic(d, shape, fab.rtt)
    faults = _faults(d, fab, items)
    faults += _slow(d, fab, items)
    return {
        "name": "fuzz",
        "seed": seed,
        "modes": ["mrc"],
        "faults": faults,
        "fabric": {
            "planes": shape.planes,
            "t0": shape.t0,
            "t1": shape.t1,
            "hosts_per_t0": shape.hosts_per_t0,
            "link_delay": f"{shape.link_delay_ns}ns",
        },
        "traffic": items,
    }


def table_toml(table: dict[str, Any], header: str = "") -> str:
    """A drawn table as a TOML file (``header``: comment lines on top)."""
    lines = [f"# {line}" if line else "#" for line in header.splitlines()]
    for key in ("name", "seed", "modes", "faults"):
        lines.append(f"{key} = {_toml_value(table[key])}")
    lines += ["", "[fabric]"] + [f"{k} = {_toml_value(v)}" for k, v in table["fabric"].items()]
    for item in table["traffic"]:
        lines += ["", "[[traffic]]"] + [f"{k} = {_toml_value(v)}" for k, v in item.items()]
    settings = table.get("transport", {})  # (``mrc-sim fuzz --transport``: every draw under them)
    if settings:
        lines += ["", "[transport.config]"] + [f"{k} = {_toml_value(v)}" for k, v in settings.items()]
    return "\n".join(lines) + "\n"
