"""Captures with a size cap (topologies.captures), fed by a stand-in for tcpdump: no root needed.

The stand-in writes what tcpdump writes with ``-w -`` (a pcap stream) and its "listening on"
line, then ``frames`` records of ``size`` bytes. The file must be a valid pcap, hold whole
records only, and never exceed the cap; captures sharing one budget stop together.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

from scapy.utils import rdpcap

from topologies.captures import EMPTY_HEADER, Budget, start_capture

FAKE_TCPDUMP = r"""
import os, struct, sys, time
frames, size, linger, gate = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
out = sys.stdout.buffer
sys.stderr.write("listening on fake0, link-type EN10MB (Ethernet)\n"); sys.stderr.flush()
deadline = time.monotonic() + 30
while gate and not os.path.exists(gate) and time.monotonic() < deadline:
    time.sleep(0.01)  # (held until the test opens the gate: the frames come after every start)
if frames:
    out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))
for i in range(frames):
    frame = bytes(12) + b"\x86\xdd" + bytes([i % 256]) * (size - 14)
    out.write(struct.pack("<IIII", 1, i, len(frame), len(frame)) + frame)
out.flush()
time.sleep(linger)
"""


class FakeNode:
    """``gate``: a path the stand-in waits for before it sends its frames (none: at once)."""

    def __init__(self, frames: int, size: int, linger: float = 30.0, gate: Path | None = None) -> None:
        self.args = [str(frames), str(size), str(linger), str(gate or "")]

    def popen(self, _cmd: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-c", FAKE_TCPDUMP, *self.args], **kw)


def test_a_capture_stops_at_its_cap_on_a_record_boundary(tmp_path: Path) -> None:
    path = tmp_path / "a.pcap"
    cap = start_capture(FakeNode(1000, 1000), "fake0", path, Budget(50_000))
    assert cap.listening
    assert cap.proc.wait(timeout=20) is not None  # stopped by the cap, not by its 30 s linger
    cap.stop()
    assert cap.cut_short and path.stat().st_size <= 50_000
    packets = rdpcap(str(path))
    assert len(packets) == cap.packets == (50_000 - 24) // (16 + 1000)
    assert all(len(p) == 1000 for p in packets)


def test_captures_sharing_a_budget_all_stop_when_it_is_full(tmp_path: Path) -> None:
    # the busy one sends once both have started: else, on a busy machine, its frames could fill
    # the budget before the quiet one takes its header (which then refuses to start, rightly)
    budget, gate = Budget(100_000), tmp_path / "go"
    busy = start_capture(FakeNode(1000, 1000, gate=gate), "busy", tmp_path / "busy.pcap", budget)
    quiet = start_capture(FakeNode(0, 0), "quiet", tmp_path / "quiet.pcap", budget)
    gate.touch()
    assert busy.proc.wait(timeout=20) is not None and quiet.proc.wait(timeout=20) is not None
    busy.stop()
    quiet.stop()
    assert budget.full and budget.used <= 100_000
    assert (tmp_path / "quiet.pcap").read_bytes() == EMPTY_HEADER  # a valid, empty pcap
    assert len(rdpcap(str(tmp_path / "busy.pcap"))) == busy.packets > 0


def test_a_stopped_capture_keeps_every_record_it_got(tmp_path: Path) -> None:
    cap = start_capture(FakeNode(20, 200, linger=30), "fake0", tmp_path / "s.pcap", Budget(1 << 20))
    cap.stop()  # before the cap: tcpdump ended by PID
    assert not cap.cut_short and len(rdpcap(str(tmp_path / "s.pcap"))) == cap.packets <= 20
    header = (tmp_path / "s.pcap").read_bytes()[:24]
    assert struct.unpack("<I", header[:4])[0] == 0xA1B2C3D4


def test_a_capture_added_after_its_budget_filled_is_stopped_too(tmp_path: Path) -> None:
    # the budget can fill while a capture starts: between taking its header and joining the list
    budget = Budget(100)
    assert budget.take(24) and not budget.take(100) and budget.full
    late = FakeNode(0, 0).popen([], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    budget.add(late)
    assert late.wait(timeout=20) is not None  # stopped, not left to its 30 s linger
