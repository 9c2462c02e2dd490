"""A transfer's summary adds up: every retransmission is counted under the loss kind that
queued it (gap, timeout, trim NACK, path retired, plane dead, tail probe, go-back-N ...), the
kinds sum to ``retransmissions``, and the tables the CLIs print show each kind.

Before, the summary printed ``retransmissions 6 ... losses (gap / timeout) 0 / 0`` after a black
hole on a host link: the resends came from kinds the table never showed. Scenarios here vary
the fault (a dead host link, random loss both ways, trimming switches, lost ACKs, a lost
tail), the mode and the seed, over two agents' logic on a simulated clock (agent_duo).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

import pytest
from agent_duo import FakeClient, Net
from rich.console import Console

from mrc_host.core import Mode
from mrc_host.core.counters import RETX_CAUSES
from mrc_host.wire.codec import decode_frame, trim
from mrc_host.wire.messages import DataPacket

SIZE = 2_000_000


def _plane(frame: bytes) -> int:
    msg = decode_frame(frame)
    return int(msg.meta.ev) >> 28 & 0xF  # type: ignore[union-attr]


def _is_data(frame: bytes) -> bool:
    return isinstance(decode_frame(frame), DataPacket)


def host_link_dead(net: Net, rng: random.Random) -> None:
    """uch0's plane-0 link black-holed both ways once 300 frames went by."""
    seen = [0]

    def drop(src: str, dst: str, frame: bytes) -> bool:
        seen[0] += 1
        return seen[0] > 300 and "uch0" in (src, dst) and _plane(frame) == 0

    net.drop = drop


def random_loss(net: Net, rng: random.Random) -> None:
    net.drop = lambda src, dst, frame: rng.random() < 0.02


def trimming(net: Net, rng: random.Random) -> None:
    """A switch on the way trims 3 % of the DATA frames to their headers."""
    net.mangle = lambda src, dst, frame: trim(frame) if _is_data(frame) and rng.random() < 0.03 else frame


def acks_lost(net: Net, rng: random.Random) -> None:
    """Every frame back to the sender lost for a while: its timers fire."""
    seen = [0]

    def drop(src: str, dst: str, frame: bytes) -> bool:
        seen[0] += 1
        return dst == "uch0" and 400 < seen[0] < 700

    net.drop = drop


def tail_lost(net: Net, rng: random.Random) -> None:
    """The last DATA frames of the transfer are lost once each."""
    lost: set[int] = set()

    def drop(src: str, dst: str, frame: bytes) -> bool:
        msg = decode_frame(frame)
        tail = isinstance(msg, DataPacket) and msg.vaddr + len(msg.payload) > SIZE - 20_000
        if tail and msg.psn not in lost:
            lost.add(msg.psn)
            return True
        return False

    net.drop = drop


FAULTS: dict[str, Callable[[Net, random.Random], None]] = {
    "host link dead": host_link_dead,
    "random loss": random_loss,
    "trimming": trimming,
    "acks lost": acks_lost,
    "tail lost": tail_lost,
}


@functools.cache
def transfer(fault: str, mode: Mode, seed: int) -> dict[str, Any]:
    net = Net(seed=seed)
    FAULTS[fault](net, random.Random(seed))
    client = FakeClient()
    net["uch0"].send("uch3", SIZE, net.now, mode=mode, client=client)
    net.run(lambda: client.final is not None, limit=3_000_000)
    assert client.final is not None
    summary: dict[str, Any] = client.final["summary"]
    return summary


def printed(summary: dict[str, Any]) -> str:
    from topologies.cli import MrcCommands

    console = Console(width=200, record=True)
    console.print(MrcCommands._summary_table("uch0", "uch3", SIZE, summary["mode"], summary, 1.0))
    return console.export_text()


SEEDS = (1, 2)
MODES = (Mode.MRC, Mode.SINGLE_PATH)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_every_retransmission_has_a_printed_loss_kind(fault: str, mode: Mode, seed: int) -> None:
    s = transfer(fault, mode, seed)
    causes = s["retransmissions_by_cause"]
    assert "unattributed" not in causes and set(causes) <= set(RETX_CAUSES), causes
    assert sum(causes.values()) == s["retransmissions"], s
    text = printed(s)
    row = next(line for line in text.splitlines() if "of which, by loss" in line)
    shown = {label: int(n.replace(",", "")) for label, n in _pairs(row)}
    assert sum(shown.values()) == s["retransmissions"], row
    for cause, n in causes.items():
        assert shown[RETX_CAUSES[cause]] == n, row


def _pairs(row: str) -> list[tuple[str, str]]:
    cell = row.split("of which, by loss", 1)[1].strip(" │|")
    if cell == "none":
        return []
    return [tuple(part.strip().rsplit(" ", 1)) for part in cell.split(" + ")]  # type: ignore[misc]


def test_the_scenarios_exercise_many_loss_kinds() -> None:
    """The scenarios above (cached: run once) resend for many different reasons."""
    seen: dict[str, int] = {}
    for fault in FAULTS:
        for mode in MODES:
            for seed in SEEDS:
                for cause, n in transfer(fault, mode, seed)["retransmissions_by_cause"].items():
                    seen[cause] = seen.get(cause, 0) + n
    assert {"gap", "timeout", "trim_nack", "go_back_n", "path", "tail_probe"} <= set(seen), seen
