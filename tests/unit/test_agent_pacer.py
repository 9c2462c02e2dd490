"""The agent's departure clock (mrc_host/agent/pacer.py): DATA leaves each port at the host
link's rate, each core hears when, control frames go at once, a late loop bursts no more than
the slack -- on its own with stand-in ports, then two agents over real frames (agent_duo)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from agent_duo import FakeClient, Net

from mrc_fabric.ev import ev_plane
from mrc_host.agent.options import AgentOptions
from mrc_host.agent.pacer import SLACK_NS, NicPacer
from mrc_host.agent.ports import PortCounters
from mrc_host.core.config import NIC_BACKLOG_PER_PLANE
from mrc_host.wire.codec import decode_frame
from mrc_host.wire.messages import DataPacket

MS = 1_000_000


@dataclass
class StandInPorts:
    """``Ports.send_msg`` that records (plane, frame, bytes) and counts like the real one;
    DATA with PSN 666 is refused by the codec."""

    counters: list[PortCounters] = field(default_factory=lambda: [PortCounters("p0"), PortCounters("p1")])
    sent: list[tuple[int, Any]] = field(default_factory=list)

    def send_msg(self, plane: int, encoder: Any, msg: Any, carrier: bytes, size: int) -> bool:
        if isinstance(msg, DataPacket) and msg.psn == 666:
            raise ValueError("refused")
        self.sent.append((plane, msg))
        self.counters[plane].bytes_tx += size
        self.counters[plane].frames_tx += 1
        return True


def _data(psn: int) -> DataPacket:
    return DataPacket(qp=1, psn=psn, vaddr=0, rkey=0, payload=b"", send_ts=psn)


class Owner:
    """Stands for the connections: records departures; ``room`` makes them ask for more."""

    def __init__(self, room: bool = False) -> None:
        self.departed: list[tuple[int, int]] = []  # (psn, when)
        self.room = room
        self.ready: list[int] = []

    def on_departed(self, conn: Any, msg: DataPacket, now: int) -> bool:
        self.departed.append((msg.psn, now))
        return self.room

    def on_ready(self, conn: Any, now: int) -> None:
        self.ready.append(now)


def _pacer(mbit_s: float = 8.0, room: bool = False) -> tuple[NicPacer, StandInPorts, Owner]:
    ports, owner = StandInPorts(), Owner(room)
    return NicPacer(ports, mbit_s, owner.on_departed, owner.on_ready), ports, owner  # type: ignore[arg-type]


def test_data_leaves_at_the_rate_and_each_departure_is_reported_when_it_goes() -> None:
    """8 Mbit/s is a byte per microsecond: ten 1000-byte frames handed over at once leave a
    millisecond apart, each reported as it goes, never before its port is free."""
    pacer, _ports, owner = _pacer()
    t0 = 10 * MS
    for psn in range(10):
        pacer.data(None, 0, _data(psn), (None, b"", 1000), t0)
    assert [p for p, _ in owner.departed] == [0]  # the port was free for the first only
    assert pacer.next_due() == t0 + MS
    now = t0
    while (due := pacer.next_due()) is not None:
        now = due + 37_000  # the loop wakes a little late every time
        pacer.run(now)
    assert [p for p, _ in owner.departed] == list(range(10))
    gaps = [b - a for (_, a), (_, b) in zip(owner.departed, owner.departed[1:], strict=False)]
    assert all(g >= MS for g in gaps), gaps  # never faster than the rate ...
    assert owner.departed[-1][1] - t0 < 9 * MS + 10 * 37_000  # ... and late wake-ups are caught up
    c = pacer.counters[0]
    assert (c.paced, c.waited, c.max_queued, c.queued) == (10, 9, 9, 0)


def test_control_frames_go_at_once_and_take_their_time_on_the_port() -> None:
    pacer, ports, _owner = _pacer()
    pacer.data(None, 0, _data(0), (None, b"", 1000), 0)
    pacer.data(None, 0, _data(1), (None, b"", 1000), 0)
    pacer.control(0, "sack", (None, b"", 500), 0)  # (a SACK: ahead of the waiting DATA)
    assert [m for _, m in ports.sent][1] == "sack"
    assert pacer.next_due() == 1500 * 1000  # the DATA waits for the SACK's bytes too
    pacer.control(1, "probe", (None, b"", 500), 0)  # another plane's port is another clock
    assert pacer.free_at[1] == 500 * 1000


def test_a_late_loop_bursts_no_more_than_the_slack() -> None:
    """After an idle second the port has earned no credit: what waits goes at the rate, but
    for the slack's worth at once (a loop that woke late)."""
    pacer, _ports, owner = _pacer(mbit_s=80.0)  # 0.1 us a byte: a 1000-byte frame is 100 us
    t = 1_000 * MS
    for psn in range(40):
        pacer.data(None, 0, _data(psn), (None, b"", 1000), 0)  # handed over long ago
    assert len(owner.departed) == 1  # (the first went then)
    pacer.run(t)
    burst = len(owner.departed) - 1
    assert burst == SLACK_NS // 100_000 + 1  # the slack's frames, and the one due now
    pacer.run(t + 100_000)
    assert len(owner.departed) == burst + 2


def test_room_again_lets_the_core_hand_over_more_in_the_same_turn() -> None:
    """A departure that frees the core's backlog asks for more (once per connection and turn),
    and a frame handed over then waits its turn instead of recursing."""
    ports, conns = StandInPorts(), []
    pacer: NicPacer

    def ready(conn: Any, now: int) -> None:
        conns.append(now)
        if len(conns) < 3:
            pacer.data("c", 0, _data(100 + len(conns)), (None, b"", 1000), now)

    pacer = NicPacer(ports, 8.0, lambda c, m, now: True, ready)  # type: ignore[arg-type]
    pacer.data("c", 0, _data(0), (None, b"", 1000), 0)
    assert conns == [0] and len(ports.sent) == 1 and pacer.counters[0].queued == 1
    pacer.run(MS)
    assert conns == [0, MS] and len(ports.sent) == 2


def test_a_frame_the_codec_refuses_is_counted_and_still_departs() -> None:
    pacer, ports, owner = _pacer()
    pacer.data(None, 0, _data(666), (None, b"", 1000), 5)
    assert pacer.counters[0].errors == 1 and pacer.free_at[0] == 5 and ports.sent == []
    assert owner.departed == [(666, 5)]  # (its core's backlog is not left full)


def test_rate_checked() -> None:
    with pytest.raises(ValueError, match="--nic-rate"):
        AgentOptions(config=None, control=None, nic_rate_mbit=-1).check()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="above 0"):
        _pacer(mbit_s=0)


def test_two_agents_paced_transfer_verifies_at_the_rate_and_the_backlog_holds() -> None:
    """Two agents over real frames at 100 Mbit/s: the transfer verifies; no port carried more
    than the rate (plus the slack) in any window; the pacer never held more than the cores'
    ``nic_backlog``; every SRTT sample excludes the wait here (it is the network's alone)."""
    net = Net(nic_rate_mbit=100.0)
    c = FakeClient()
    net["uch0"].send("uch3", 400_000, net.now, client=c)
    net.run(lambda: c.final is not None, limit=2_000_000)
    assert c.final is not None and c.final["ok"] and c.final["summary"]["verified"], c.final
    pacer = net["uch0"].peers.pacer
    assert pacer is not None
    conn = net["uch0"].peers.send_connections()[0]
    cfg = conn.endpoint.cfg
    assert cfg.nic_departures and cfg.nic_backlog == NIC_BACKLOG_PER_PLANE * 2
    assert all(pc.max_queued <= cfg.nic_backlog for pc in pacer.counters)
    assert sum(pc.paced for pc in pacer.counters) >= 400_000 // 1400
    assert any(pc.waited for pc in pacer.counters)  # (the rate did hold frames back)
    ns_per_byte = 8_000 / 100.0
    for plane in (0, 1):
        sent = [(t, len(f)) for t, who, f in net.log if who == "uch0" and _plane(f) == plane]
        for i, (t, _) in enumerate(sent):
            window = [n for u, n in sent[i:] if u < t + 2 * MS]
            assert sum(window) * ns_per_byte <= 2 * MS + pacer.slack_ns + 2_000 * ns_per_byte
    # the sender's SRTT is the simulated network's, not the pacer's wait (which is not a queue
    # in the network: the cores time their packets from when they left)
    summary = c.final["summary"]
    waits = [pc.wait_ns / pc.paced / 1e3 for pc in pacer.counters if pc.paced]
    assert summary["srtt_us"] <= 2 * summary["min_rtt_us"] < min(waits), (summary, waits)


def _plane(frame: bytes) -> int:
    msg = decode_frame(frame)
    return ev_plane(msg.meta.ev) if isinstance(msg, DataPacket) else -1


def test_mrc_stats_names_the_departure_clock(capsys: pytest.CaptureFixture[str]) -> None:
    """``mrc stats`` says whether a pacer at the link's rate or the hand-over times departures."""
    import argparse

    from mrc_host.agent.cli import cmd_stats
    from mrc_host.agent.pacer import hand_over_clock

    pacer, _ports, _owner = _pacer(mbit_s=20.0)
    pacer.data(None, 0, _data(0), (None, b"", 1000), 0)
    reply: dict[str, Any] = {"host": "h0", "evs": [], "totals": {}, "ports": [], "malformed": {},
                             "kernel_drops": {}, "transfers": {"sent": [], "received": []}}  # fmt: skip

    class Client:
        def __init__(self, departures: dict[str, Any]) -> None:
            self.reply = reply | {"departures": departures}

        def stats(self) -> dict[str, Any]:
            return self.reply

    args = argparse.Namespace(json=False, all=False)
    cmd_stats(args, Client(pacer.describe()))  # type: ignore[arg-type]
    assert "pacer at 20 Mbit/s: max 1 waited 0/1" in capsys.readouterr().out.replace("\n", " ")
    cmd_stats(args, Client(hand_over_clock()))  # type: ignore[arg-type]
    assert "hand-over (no link rate" in capsys.readouterr().out


def test_the_testbed_gives_its_agents_the_link_rate_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from topologies.testbed import TestbedConfig, nic_args

    assert nic_args(TestbedConfig(link_rate=20.0)) == ["--nic-rate", "20"]
    assert nic_args(TestbedConfig(link_rate=37.5, nic_pacing=False)) == []
    assert nic_args(TestbedConfig(link_rate=None)) == nic_args(TestbedConfig(link_rate=0)) == []
    monkeypatch.setenv("MRC_NIC_PACING", "off")
    assert nic_args(TestbedConfig(link_rate=20.0)) == []
    monkeypatch.setenv("MRC_NIC_PACING", "on")
    assert TestbedConfig().nic_pacing
