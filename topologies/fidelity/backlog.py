"""Fine reads of the queues of links that fell short: bursts, or a machine that did not serve them.

One sample a second cannot tell a link fed in bursts from one the machine did not serve: both
start and end the second with a queue, HTB holds back nearly every frame they send (within a
burst as much as when starved), and both carry part of their rate. The monitor names the links
its two samples found short (``judge.coarse_short``); :class:`FineReader` reads their
namespaces' root qdiscs every ``step_s`` (a netlink dump per namespace, only for those) and
adds each step to the link's :class:`~topologies.fidelity.figures.Backlogged`: the steps whose
queue stood at both ends, and what the link sent in them. The sampler hands what accumulated
to each interval (``RawSample.backlogged``); ``judge.short_share`` judges it.
"""

from __future__ import annotations

import contextlib
import threading
import time

from topologies.fidelity.figures import Backlogged
from topologies.fidelity.qdiscs import NamespaceQdiscs, QdiscStats


class FineReader:
    """A thread that reads the watched links' qdiscs every ``step_s`` while any are watched."""

    def __init__(self, readers: list[NamespaceQdiscs], step_s: float) -> None:
        self.readers = readers
        self.step_s = step_s
        self._watch: set[str] = set()
        self._acc: dict[str, Backlogged] = {}
        self._last: dict[str, tuple[float, QdiscStats]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, ifnames: set[str]) -> None:
        """Read these interfaces from now on (and no others)."""
        with self._lock:
            self._watch = set(ifnames)
            for name in set(self._last) - self._watch:
                del self._last[name]  # watched again later, it starts from a fresh read
        if ifnames and self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="fidelity-backlog", daemon=True)
            self._thread.start()

    def take(self) -> dict[str, Backlogged]:
        """What the reads found since the last take."""
        with self._lock:
            out, self._acc = self._acc, {}
        return out

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at = max(next_at + self.step_s, time.monotonic())  # late: no catching up
            with self._lock:
                watch = set(self._watch)
            for reader in self.readers:
                if watch & reader.ifnames:
                    with contextlib.suppress(OSError, RuntimeError):
                        self.read(reader, watch)

    def read(self, reader: NamespaceQdiscs, watch: set[str]) -> None:
        """One step of the watched interfaces of one namespace."""
        t0 = time.monotonic()
        found = reader.read()
        t = (t0 + time.monotonic()) / 2  # the dump happened somewhere in between
        with self._lock:
            for name in watch & found.keys() & self._watch:
                prev = self._last.get(name)
                self._last[name] = (t, found[name])
                if prev is not None and t > prev[0]:
                    self._acc.setdefault(name, Backlogged()).add_step(prev[1], found[name], t - prev[0])
