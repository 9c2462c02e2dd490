"""Queue statistics of the fabric's interfaces, read over netlink in each node's namespace.

The root qdisc of an interface (the HTB that TCLink or the Linux shim put there) counts what
it sent, what it dropped, how often it held a packet back for the rate (``overlimits``) and
what sits in it now (``backlog``): the link's queue, as a hardware switch port has one. One
thread per network namespace (``linux_target.ns_worker``: a netlink socket belongs to the
namespace and thread that made it) asks for every qdisc at once; BMv2's ports live in the
root namespace with everyone else's interfaces, so only the fabric's are kept.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from linux_target.ns_worker import NamespaceWorker

TC_H_ROOT = 0xFFFFFFFF


@dataclass(frozen=True)
class QdiscStats:
    """Cumulative counters of an interface's root qdisc, and its queue now."""

    kind: str
    bytes: int
    packets: int
    drops: int
    overlimits: int
    backlog_bytes: int
    qlen: int


def _attr(msg: Any, name: str) -> Any:
    for key, value in msg.get("attrs", []):
        if key == name:
            return value
    return None


def root_qdiscs(ipr: Any, indexes: dict[int, str]) -> dict[str, QdiscStats]:
    """The root qdisc of every interface in ``indexes`` (ifindex -> name) that has one."""
    out: dict[str, QdiscStats] = {}
    for msg in ipr.get_qdiscs():
        name = indexes.get(int(msg.get("index", 0)))
        if name is None or int(msg.get("parent", 0)) != TC_H_ROOT:
            continue
        st = _attr(msg, "TCA_STATS") or {}
        out[name] = QdiscStats(
            str(_attr(msg, "TCA_KIND") or "?"),
            int(st.get("bytes", 0)),
            int(st.get("packets", 0)),
            int(st.get("drop", 0)),
            int(st.get("overlimits", 0)),
            int(st.get("backlog", 0)),
            int(st.get("qlen", 0)),
        )
    return out


def top_rates(ipr: Any, indexes: dict[int, str]) -> dict[str, float]:
    """Configured rate (Mbit/s) of every interface in ``indexes`` whose root qdisc is an HTB:
    its top class's rate (TCLink's 5:1, the Linux shim's 1:10; a slowed port's new rate)."""
    roots = {
        int(m.get("index", 0)): int(m.get("handle", 0))
        for m in ipr.get_qdiscs()
        if int(m.get("parent", 0)) == TC_H_ROOT
    }
    out: dict[str, float] = {}
    for index, name in indexes.items():
        if index not in roots:
            continue
        for msg in ipr.get_classes(index=index):
            if int(msg.get("parent", 0)) not in (TC_H_ROOT, roots[index]):
                continue
            parms = _attr(_attr(msg, "TCA_OPTIONS") or {}, "TCA_HTB_PARMS") or {}
            if parms.get("rate"):
                out[name] = max(out.get(name, 0.0), int(parms["rate"]) * 8 / 1e6)
    return out


def held_levels(ipr: Any, indexes: dict[int, str]) -> dict[str, int]:
    """How many rate-limited HTB classes a frame of each interface passes (interfaces with an
    HTB root only): HTB counts an overlimit for each class a held-back frame runs out of
    tokens in, so the root's overlimits per frame sent reach this many, not one, on a link
    that never ran dry. TCLink's single class ``5:1`` is 1; the Linux shim's parent class
    ``1:10`` at the link rate with its leaves under it (ceil at the link rate) is 2."""
    roots = {
        int(m.get("index", 0)): int(m.get("handle", 0))
        for m in ipr.get_qdiscs()
        if int(m.get("parent", 0)) == TC_H_ROOT and _attr(m, "TCA_KIND") == "htb"
    }
    out: dict[str, int] = {}
    for index, name in indexes.items():
        if index not in roots:
            continue
        classes = list(ipr.get_classes(index=index))
        top_parents = (TC_H_ROOT, roots[index])
        tops = {int(m.get("handle", 0)) for m in classes if int(m.get("parent", 0)) in top_parents}
        under = any(int(m.get("parent", 0)) in tops for m in classes)
        out[name] = 2 if under else 1
    return out


class NamespaceQdiscs:
    """Reads the root qdiscs of some interfaces of one network namespace."""

    def __init__(self, label: str, node_pid: int | None, ifnames: set[str]) -> None:
        self.label = label
        self.ifnames = set(ifnames)
        self.worker = NamespaceWorker(f"fidelity-{label}", node_pid)
        self._ipr: Any = None
        self._indexes: dict[int, str] = {}

    def start(self) -> NamespaceQdiscs:
        self.worker.start()
        self.worker.call(self._open)
        return self

    def _open(self) -> None:
        from pyroute2 import IPRoute

        self._ipr = IPRoute()
        for name in sorted(self.ifnames):
            found = self._ipr.link_lookup(ifname=name)
            if found:
                self._indexes[int(found[0])] = name

    def read(self) -> dict[str, QdiscStats]:
        """Every watched interface's root qdisc now (empty when the namespace is gone)."""
        try:
            return self.worker.call(root_qdiscs, self._ipr, self._indexes)
        except (OSError, RuntimeError):
            return {}

    def rates(self) -> dict[str, float]:
        """Every watched interface's configured rate in Mbit/s (none: not rate limited)."""
        try:
            return self.worker.call(top_rates, self._ipr, self._indexes)
        except (OSError, RuntimeError):
            return {}

    def levels(self) -> dict[str, int]:
        """Every watched HTB interface's ``held_levels``."""
        try:
            return self.worker.call(held_levels, self._ipr, self._indexes)
        except (OSError, RuntimeError):
            return {}

    def close(self) -> None:
        if self._ipr is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self.worker.call(self._ipr.close)
        self.worker.stop()
