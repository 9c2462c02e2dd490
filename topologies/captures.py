"""Packet captures with a size cap: one link end on demand (the CLI's ``capture``), or every link.

tcpdump writes its pcap stream into a pipe; a thread copies whole records into the file while
the capture's byte :class:`Budget` lasts, then stops tcpdump. The file is a valid pcap that
ends on a packet boundary and never exceeds the cap (a full capture says so once). Several
captures may share one budget: ``--pcap`` captures every link of the fabric, first come first
served, into one cap for the run (a full-rate transfer fills a few hundred MB in seconds).
"""

from __future__ import annotations

import struct
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mrc_fabric.time_scale import scaled
from mrc_fabric.topology import Link, LinkEnd, Topology
from topologies.procs import terminate

# how long ``start_capture`` waits for tcpdump to say it listens: it returns the moment it does
# (or exits), so this only bounds a machine too busy to start it (5 s proved too short under a
# loaded CI run: the traffic went by before tcpdump listened, 18 of ~500 frames caught)
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 5.0
MB = 1 << 20
GLOBAL_HEADER = 24
RECORD_HEADER = 16
# an empty capture still gets a valid pcap header (libpcap's: v2.4, snaplen 262144, Ethernet)
EMPTY_HEADER = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1)


class Budget:
    """Bytes that the captures sharing it may still write (thread-safe). Once a record does not
    fit, the budget is full: every capture on it is stopped, a quiet link's too."""

    def __init__(self, limit_bytes: int, on_full: Callable[[], None] | None = None) -> None:
        self.limit = limit_bytes
        self.used = 0
        self.full = False
        self._on_full = on_full
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen[bytes]] = []

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        """Stop ``proc`` with the others once the budget is full, or now if it already is (it
        may fill while ``proc`` starts)."""
        with self._lock:
            self._procs.append(proc)
            full = self.full
        if full:
            threading.Thread(target=terminate, args=(proc, STOP_TIMEOUT_S), daemon=True).start()

    def take(self, n: int) -> bool:
        """Reserve ``n`` bytes; False (and the budget is full from then on) if they do not fit."""
        with self._lock:
            if self.full or self.used + n > self.limit:
                first, self.full = not self.full, True
                procs = list(self._procs)
            else:
                self.used += n
                return True
        if first:
            for proc in procs:  # in the background: the caller is one of their copiers
                threading.Thread(target=terminate, args=(proc, STOP_TIMEOUT_S), daemon=True).start()
            if self._on_full is not None:
                self._on_full()
        return False


@dataclass
class Capture:
    """One running tcpdump and the thread that copies its records into ``path``."""

    ifname: str
    path: Path
    proc: subprocess.Popen[bytes]
    budget: Budget
    timer: threading.Timer | None = None
    ready: threading.Event = field(default_factory=threading.Event)  # listening, or gone
    listening: bool = False
    packets: int = 0
    cut_short: bool = False  # stopped because the budget ran out
    _copier: threading.Thread | None = None

    def stop(self) -> None:
        """Stop tcpdump (by PID) and wait until every record it wrote is in the file."""
        if self.timer is not None:
            self.timer.cancel()
        terminate(self.proc, STOP_TIMEOUT_S)
        if self._copier is not None and self._copier is not threading.current_thread():
            self._copier.join(STOP_TIMEOUT_S)

    def _copy(self) -> None:
        out = self.proc.stdout
        assert out is not None
        with open(self.path, "wb") as f:
            try:
                self._copy_records(out, f)
            finally:
                if f.tell() == 0:  # tcpdump wrote nothing: a valid pcap without packets
                    f.write(EMPTY_HEADER)

    def _copy_records(self, out: IO[bytes], f: IO[bytes]) -> None:
        header = out.read(GLOBAL_HEADER)  # its bytes were taken from the budget at the start
        if len(header) < GLOBAL_HEADER:
            return
        f.write(header)
        order = "<" if header[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
        record = struct.Struct(order + "IIII")
        while True:
            rec = out.read(RECORD_HEADER)
            if len(rec) < RECORD_HEADER:
                return
            data = out.read(record.unpack(rec)[2])
            if not self.budget.take(RECORD_HEADER + len(data)):
                self.cut_short = True
                return
            f.write(rec + data)
            self.packets += 1


def _watch_stderr(cap: Capture, err: IO[bytes]) -> None:
    for line in iter(err.readline, b""):
        if b"listening on" in line:
            cap.listening = True
            cap.ready.set()
    cap.ready.set()  # tcpdump is gone: nothing more to wait for


def start_capture(
    node: Any, ifname: str, path: Path, budget: Budget, seconds: float | None = None
) -> Capture:
    """tcpdump on ``ifname`` in ``node``'s namespace into ``path`` (whole frames) until ``stop()``,
    ``seconds`` or the budget runs out; returns once tcpdump listens (or after READY_TIMEOUT_S).
    ValueError if the budget cannot hold even the file's header."""
    if not budget.take(GLOBAL_HEADER):
        raise ValueError(f"capture of {ifname}: its size cap ({budget.limit} bytes) is used up")
    proc = node.popen(
        # -B: an 8 MiB kernel buffer, so a busy CPU does not cost the capture packets
        ["tcpdump", "-Z", "root", "-U", "-B", "8192", "-n", "-i", ifname, "-w", "-"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    cap = Capture(ifname, path, proc, budget)
    budget.add(proc)
    assert proc.stderr is not None
    threading.Thread(target=_watch_stderr, args=(cap, proc.stderr), daemon=True).start()
    cap._copier = threading.Thread(target=cap._copy, name=f"capture-{ifname}", daemon=True)
    cap._copier.start()
    if seconds is not None:
        cap.timer = threading.Timer(seconds, cap.stop)
        cap.timer.daemon = True
        cap.timer.start()
    cap.ready.wait(scaled(READY_TIMEOUT_S))
    return cap


def link_end(topology: Topology, ident: str) -> LinkEnd:
    """A link end by interface name, ``node:port`` or link name ``a-b`` (its lower end)."""
    for link in topology.links:
        for end in (link.a, link.b):
            if ident == end.ifname:
                return end
    found: Link = topology.find_link(ident)
    if ":" in ident:
        node, _, port = ident.rpartition(":")
        return found.a if (found.a.node, str(found.a.port)) == (node, port) else found.b
    return found.a


class LinkCaptures:
    """Every capture of one run: ``--pcap``'s of every link (one shared cap) and the CLI's
    ``capture`` of one link end; each recorded in the run's ``pids``, all stopped together."""

    def __init__(self, net: Any, topology: Topology, run: Any, say: Callable[[str], None]) -> None:
        self.net, self.topology, self.run, self.say = net, topology, run, say
        self.captures: list[Capture] = []

    def every_link(self, limit_mb: float) -> Path:
        """tcpdump on one end of every link into pcap/<ifname>.pcap, sharing one size cap."""
        full = f"pcaps: the cap of {limit_mb:g} MB is reached; every link's capture stopped"
        budget = Budget(int(limit_mb * MB), lambda: self.say(full))
        pcap_dir: Path = self.run.sub("pcap")
        for link in self.topology.links:
            self.start(link.a, pcap_dir / f"{link.a.ifname}.pcap", budget, None)
        return pcap_dir

    def one(self, ident: str, seconds: float, limit_mb: float) -> Capture:
        """tcpdump on a link end into ``<run_dir>/captures/``; stops after ``seconds`` or at
        ``limit_mb``, whichever comes first."""
        if not seconds > 0:
            raise ValueError(f"seconds: must be > 0, got {seconds}")
        if not limit_mb > 0:
            raise ValueError(f"size cap: must be > 0 MB, got {limit_mb}")
        end = link_end(self.topology, ident)
        stamp = time.strftime("%H%M%S", time.gmtime())
        path = self.run.sub("captures") / f"{end.ifname}-{stamp}-{len(self.captures) + 1}.pcap"
        return self.start(end, path, Budget(int(limit_mb * MB)), seconds)

    def start(self, end: LinkEnd, path: Path, budget: Budget, seconds: float | None) -> Capture:
        cap = start_capture(self.net.get(end.node), end.ifname, path, budget, seconds)
        self.run.record(cap.proc.pid, "capture", end.ifname)
        self.captures.append(cap)
        return cap

    def stop(self) -> None:
        for cap in self.captures:
            cap.stop()
        self.captures.clear()
