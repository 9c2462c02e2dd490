"""Packet rings on a veth between two namespaces (prefix ``agr``): frames in order and intact
through rings that wrap, frames longer than a slot, a transmit ring the qdisc keeps full, a
port closed with frames still queued, and the plain socket the agent falls back to."""

from __future__ import annotations

import errno
import os
import selectors
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from mrc_fabric.time_scale import scaled

pytestmark = pytest.mark.root

NS = ("agr0", "agr1")
IF = ("agr0-eth0", "agr1-eth0")
MACS = ("02:00:c0:00:ab:00", "02:00:c0:00:ab:01")
T = TypeVar("T")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def veth() -> Iterator[None]:
    for ns in NS:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # a crashed run's
        _ip("netns", "add", ns)
    try:
        _ip("link", "add", IF[0], "netns", NS[0], "type", "veth", "peer", "name", IF[1], "netns", NS[1])
        for ns, ifname, mac in zip(NS, IF, MACS, strict=True):
            _ip("-n", ns, "link", "set", ifname, "address", mac, "mtu", "4232", "up")
        yield
    finally:
        for ns in NS:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in NS if n in listed.split()]


def in_ns(ns: str, fn: Callable[[], T]) -> T:
    """``fn()`` in a thread that entered namespace ``ns`` (the sockets it makes stay there)."""
    from linux_target.ns_worker import CLONE_NEWNET, enter_namespace

    out: dict[str, Any] = {}

    def run() -> None:
        try:
            enter_namespace(f"/run/netns/{ns}", CLONE_NEWNET)
            out["value"] = fn()
        except BaseException as exc:  # raised again in the test's thread
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    value: T = out["value"]
    return value


def _tc(ns: str, *args: str) -> None:
    subprocess.run(["ip", "netns", "exec", ns, "tc", *args], check=True, capture_output=True)


@pytest.fixture
def slow_link(veth: None) -> Iterator[None]:
    """The sender's port shaped to 20 Mbit/s: its qdisc holds frames, so ring slots stay taken."""
    _tc(NS[0], "qdisc", "add", "dev", IF[0], "root", "tbf", "rate", "20mbit", "burst", "16k", "limit", "4m")
    try:
        yield
    finally:
        _tc(NS[0], "qdisc", "del", "dev", IF[0], "root")


def frame(seq: int, size: int = 1400) -> bytes:
    """An IPv6-in-IPv6 frame (what the ports' filter passes) from port 0 to port 1, numbered."""
    body = struct.pack(">Q", seq) + bytes((seq + i) & 0xFF for i in range(size - 62))
    ip6 = struct.pack(">IHBB16s16s", 0x60000000, len(body), 41, 64, bytes(16), bytes(16))
    eth = bytes.fromhex(MACS[1].replace(":", "")) + bytes.fromhex(MACS[0].replace(":", "")) + b"\x86\xdd"
    return eth + ip6 + body


def seq_of(f: bytes) -> int:
    (seq,) = struct.unpack_from(">Q", f, 54)
    return seq


def ring_port(ns: int, version: int = 1, rx_bytes: int = 1 << 18, tx_bytes: int = 1 << 17,
              max_frame: int = 0) -> Any:  # fmt: skip
    from mrc_host.agent.netio import open_port_socket
    from mrc_host.agent.rings import RingPort

    def make() -> Any:
        sock, geo = open_port_socket(
            IF[ns], version, rx_bytes=rx_bytes, tx_bytes=tx_bytes, max_frame=max_frame
        )
        assert geo is not None
        return RingPort(sock, geo)

    return in_ns(NS[ns], make)


def drain(port: Any, into: list[bytes], want: int, timeout_s: float = 10.0) -> None:
    """Read ``port`` until ``want`` frames are in ``into`` (copied: a slot is reused after), for
    at most ``timeout_s`` on the reference machine (scaled to this one)."""
    sel = selectors.DefaultSelector()
    sel.register(port.fileno(), selectors.EVENT_READ)
    deadline = time.monotonic() + scaled(timeout_s)
    try:
        while len(into) < want and time.monotonic() < deadline:
            while port.read_one(lambda f, _p: into.append(bytes(f)), 0) >= 0:
                pass
            if len(into) < want:
                sel.select(0.05)
    finally:
        sel.close()


@pytest.mark.parametrize("version", [1, 2], ids=["v2", "v3"])
def test_frames_cross_rings_that_wrap_in_order_and_intact(veth: None, version: int) -> None:
    from mrc_host.agent.netio import socket_drops

    tx, rx = ring_port(0, version), ring_port(1, version)
    try:
        total = 3 * max(tx.geo.tx_frames, rx.geo.rx_frames)  # both rings go round three times
        got: list[bytes] = []
        for start in range(0, total, 50):
            for seq in range(start, min(start + 50, total)):
                assert tx.send(frame(seq)) == 1
            tx.flush()
            drain(rx, got, min(start + 50, total))
        assert [seq_of(f) for f in got] == list(range(total))
        assert all(f == frame(seq_of(f)) for f in got)
        assert tx.tx_drops == tx.tx_refused == 0 and socket_drops(rx.sock) == 0
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("version", [1, 2], ids=["v2", "v3"])
def test_frames_taken_as_a_batch_stay_intact_until_released_as_rings_wrap(veth: None, version: int) -> None:
    """``take`` keeps each frame's slot (v3: its block) until ``release``: a batch of up to 16
    views reads intact while the sender refills the ring, and every slot comes back (the rings
    go round several times).

    How many frames may be in flight without a drop: v2, a slot each, so up to the ring's
    slots. v3, a block can be handed over holding a single frame (its timer runs out whenever
    frames trickle in, e.g. when the receiving softirq is deferred on a busy machine), so
    ``room`` frames can fill ``room`` blocks; with the kernel's open block that is ``room + 1``,
    and the ring has more. (48 frames in 4 blocks froze the ring now and then: a burst of 16
    dropped.)"""
    from mrc_host.agent.netio import socket_drops

    tx = ring_port(0, version)
    rx = ring_port(1, version, rx_bytes=1 << 17 if version == 1 else 1 << 21)
    sel = selectors.DefaultSelector()
    sel.register(rx.fileno(), selectors.EVENT_READ)
    try:
        room = min(48, rx.geo.rx_frames) if version == 1 else 16  # frames the ring holds
        assert version == 1 or rx.geo.rx_blocks >= room + 2
        # enough frames that every slot, or every block packed as full as 1,400-byte frames go, is
        # used twice at least
        total = 4 * rx.geo.rx_frames if version == 1 else 2 * rx.geo.rx_blocks * (rx.geo.rx_block // 1400)
        got: list[int] = []
        seq = 0
        deadline = time.monotonic() + 20
        while len(got) < total and time.monotonic() < deadline:
            while seq < total and seq - len(got) < room:  # never more than the ring holds
                assert tx.send(frame(seq)) == 1
                seq += 1
            tx.flush()
            batch: list[Any] = []
            while len(batch) < 16 and rx.take(batch) >= 0:
                pass
            if not batch:
                sel.select(0.05)
                continue
            views = [bytes(f) for f in batch]
            tx.flush()  # (more frames may land in other slots meanwhile)
            assert [bytes(f) for f in batch] == views  # held slots were not reused
            assert all(v == frame(seq_of(v)) for v in views)
            got += [seq_of(v) for v in views]
            rx.release()
        assert got == list(range(total)) and socket_drops(rx.sock) == 0
    finally:
        sel.close()
        tx.close()
        rx.close()


def _until(done: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll ``done`` until it holds (True) or ``timeout_s`` runs out (False)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_a_v3_ring_whose_every_block_the_agent_holds_drops_and_counts(veth: None) -> None:
    """Why the batch test keeps fewer frames in flight than blocks: once its timer runs out, a
    v3 block goes to the agent with a single frame in it, so an agent that holds every block
    freezes the ring; the kernel drops and counts what arrives then (``socket_drops``) and
    resumes once a block comes back."""
    from mrc_host.agent.netio import socket_drops
    from mrc_host.agent.rings import TP_STATUS_USER

    tx, rx = ring_port(0, 2), ring_port(1, 2, rx_bytes=1 << 18)
    dropped = 0

    def handed_over(block: int) -> bool:
        return bool(rx.words[(block * rx.geo.rx_block + 8) >> 2] & TP_STATUS_USER)

    def counted() -> bool:
        nonlocal dropped
        dropped += socket_drops(rx.sock)
        return dropped > 0

    try:
        blocks = rx.geo.rx_blocks
        assert blocks == 4
        for b in range(blocks):  # a frame, then the block's timer: every block the agent's
            assert tx.send(frame(b)) == 1
            tx.flush()
            assert _until(lambda b=b: handed_over(b)), f"block {b} never handed over"
        assert not counted()
        tx.send(frame(blocks))  # no block left: dropped, counted
        tx.flush()
        assert _until(counted) and dropped == 1
        views: list[Any] = []
        for _ in range(2 * blocks):  # each block once: no block read again before its release
            if rx.take(views) < 0:
                break
        got = [bytes(f) for f in views]
        rx.release()  # every block back: the ring thaws
        tx.send(frame(blocks + 1))
        tx.flush()
        drain(rx, got, blocks + 1)
        assert [seq_of(f) for f in got] == [*range(blocks), blocks + 1]
        assert socket_drops(rx.sock) == 0
    finally:
        tx.close()
        rx.close()


def test_a_frame_longer_than_a_receive_slot_arrives_whole_through_the_socket(veth: None) -> None:
    tx, rx = ring_port(0), ring_port(1, max_frame=1514)  # slots for MTU 1500, the link's is 4232
    try:
        assert rx.geo.rx_slot < 3000 + 66
        for seq, size in ((1, 200), (2, 3000), (3, 200)):
            tx.send(frame(seq, size))
        tx.flush()
        got: list[bytes] = []
        drain(rx, got, 3)
        assert [len(f) for f in got] == [200, 3000, 200] and got[1] == frame(2, 3000)
        assert rx.rx_copied == 1
    finally:
        tx.close()
        rx.close()


def test_a_frame_longer_than_a_block_is_cut_and_counted(veth: None) -> None:
    """TPACKET_V3 has no copy threshold: the kernel cuts a frame to its block."""
    for ns, ifname in zip(NS, IF, strict=True):
        _ip("-n", ns, "link", "set", ifname, "mtu", "65535")
    tx, rx = ring_port(0, max_frame=65549), ring_port(1, version=2, max_frame=1514)
    try:
        tx.send(frame(7, 65549))
        tx.send(frame(8, 200))
        tx.flush()
        got: list[bytes] = []
        drain(rx, got, 2)
        assert len(got[0]) < 65549 and got[0] == frame(7, 65549)[: len(got[0])] and got[1] == frame(8, 200)
        assert rx.rx_truncated == 1
    finally:
        tx.close()
        rx.close()
        for ns, ifname in zip(NS, IF, strict=True):
            _ip("-n", ns, "link", "set", ifname, "mtu", "4232")


def test_a_frame_longer_than_a_send_slot_is_refused_and_counted(veth: None) -> None:
    tx = ring_port(0, max_frame=1514)
    try:
        assert tx.send(frame(1, 3000)) == 0 and tx.oversized == 1 and tx.requested == 0
    finally:
        tx.close()


def test_a_full_send_ring_holds_frames_back_and_loses_none(slow_link: None) -> None:
    from mrc_host.agent.netio import socket_drops
    from mrc_host.agent.ports import Ports

    tx, rx = ring_port(0, tx_bytes=1 << 16), ring_port(1, rx_bytes=1 << 20)  # 15 slots out, 240 in
    ports = Ports([IF[0]])
    ports.add_port(tx)
    sel = selectors.DefaultSelector()
    ports.sel = sel
    sel.register(tx.fileno(), selectors.EVENT_READ, ("port", 0))
    try:
        total = tx.geo.tx_frames + 150
        for seq in range(total):
            assert ports.send(0, frame(seq))
        ports.flush()
        assert tx.backlog() > 0 and sel.get_key(tx.fileno()).events & selectors.EVENT_WRITE
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < total and time.monotonic() < deadline:
            for _key, mask in sel.select(0.05):
                if mask & selectors.EVENT_WRITE:
                    ports.flush()
            drain(rx, got, len(got) + 1, timeout_s=0.05)
        assert [seq_of(f) for f in got] == list(range(total))
        assert tx.tx_drops == 0 and ports.counters[0].tx_errors == 0 and socket_drops(rx.sock) == 0
        assert tx.backlog() == 0 and not sel.get_key(tx.fileno()).events & selectors.EVENT_WRITE
    finally:
        sel.close()
        tx.close()
        rx.close()


def test_a_port_closed_with_frames_queued_lets_go_of_everything(slow_link: None) -> None:
    before = len(os.listdir("/proc/self/fd"))
    tx, rx = ring_port(0, tx_bytes=1 << 16), ring_port(1)
    held: list[Any] = []
    for seq in range(tx.geo.tx_frames + 50):  # the ring full, the rest waiting, some unflushed
        tx.send(frame(seq))
    assert tx.backlog() > 0
    time.sleep(0.05)
    rx.read_one(lambda f, _p: held.append(f), 0)  # a view of a slot kept past its frame
    t0 = time.monotonic()
    tx.close()
    rx.close()
    assert time.monotonic() - t0 < 1.0
    assert tx.sock.fileno() == -1 and rx.sock.fileno() == -1
    held.clear()
    assert len(os.listdir("/proc/self/fd")) == before


def test_where_rings_are_refused_the_port_is_a_plain_socket(
    veth: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mrc_host.agent import netio

    def refuse(*_args: Any, **_kw: Any) -> Any:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(netio, "setup_rings", refuse)
    tx = in_ns(NS[0], lambda: netio.open_port(IF[0], "v2"))
    rx = in_ns(NS[1], lambda: netio.open_port(IF[1], "v2"))
    try:
        assert tx.describe() == {"io": "socket", "why": "rings refused: [Errno 22] Invalid argument"}
        for seq in range(20):
            assert tx.send(frame(seq)) == 1
        got: list[bytes] = []
        drain(rx, got, 20)
        assert [seq_of(f) for f in got] == list(range(20)) and got[5] == frame(5)
    finally:
        tx.close()
        rx.close()


@pytest.mark.parametrize("ring", ["v2", "v3", "off"])
def test_the_agent_moves_verified_transfers_on_each_kind_of_port_and_says_which(ring: str) -> None:
    from bench.vethlab import VethLab
    from mrc_host.agent.client import AgentClient

    lab = VethLab(prefix="agq").open()
    try:
        lab.set_mtu(4232)
        for h in lab.hosts:
            lab.start_agent(h, "--ring", ring)
        a, b = lab.hosts
        summary = AgentClient(a.control).send(b.name, "3M")
        assert summary["ok"] and summary["verified"] is True
        io = {"v2": "ring TPACKET_V2", "v3": "ring TPACKET_V3", "off": "socket"}[ring]
        for h in lab.hosts:
            st = AgentClient(h.control).stats()
            assert [p["io"] for p in st["ports"]] == [io]
            assert st["malformed"] == {} and st["internal_errors"] == 0
    finally:
        lab.close()
    assert lab.leftovers() == []
