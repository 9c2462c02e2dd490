"""The link rule on links fed in bursts and on links the machine did not serve.

One sample a second saw E5's and E7's T0 downlinks (Linux, 20-38 Mbit/s) with a queue at both
ends and nearly every frame held back by HTB, at 58-66 % of their rate: a link fed in bursts
and a starved one look alike there. A modelled link (1 ms steps: frames arrive in bursts or
steadily, HTB sends at the rate, or at part of it when the machine is short) is sampled as the
monitor does, every second and, once short, every 50 ms (``backlog.FineReader``), and judged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from topologies.fidelity.backlog import FineReader
from topologies.fidelity.figures import Backlogged, Interval, LinkDir, RawSample, interval
from topologies.fidelity.judge import Drops, coarse_short, judge
from topologies.fidelity.procfs import IfStats, MachineTimes
from topologies.fidelity.qdiscs import QdiscStats
from topologies.fidelity.thresholds import DEFAULT

LINK = LinkDir("t0p0n1>h3", "t0p0n1-eth2")
RATE = 20.0  # Mbit/s
FRAME = 4096


@dataclass
class ModelLink:
    """An HTB-limited link, stepped 1 ms at a time."""

    served: float = 1.0  # share of its rate the machine lets it send at
    backlog: int = 0
    sent: int = 0
    packets: int = 0
    overlimits: int = 0
    credit: float = 0.0
    arriving: int = 0  # bytes not yet a whole frame

    def step(self, arriving: int) -> None:
        self.arriving += arriving
        frames, self.arriving = divmod(self.arriving, FRAME)
        self.backlog += frames * FRAME
        self.credit = min(self.credit + RATE * 1e6 / 8 / 1000 * self.served, 2 * FRAME)
        while self.backlog >= FRAME and self.credit >= FRAME:
            self.backlog -= FRAME
            self.credit -= FRAME
            self.sent += FRAME
            self.packets += 1
            if self.backlog >= FRAME:
                self.overlimits += 1  # the next frame waits for tokens: held back
        if self.backlog < FRAME:
            self.credit = min(self.credit, FRAME)

    def qdisc(self) -> QdiscStats:
        return QdiscStats(
            "htb", self.sent, self.packets, 0, self.overlimits, self.backlog, self.backlog // FRAME
        )


def sample(t: float, m: ModelLink, fine: dict[str, Backlogged]) -> RawSample:
    ifs = {LINK.ifname: IfStats(0, 0, 0, m.sent, m.packets, 0)}
    return RawSample(
        t,
        {},
        MachineTimes(0, 0, 100, 2),
        0,
        None,
        ifs,
        {LINK.ifname: m.qdisc()},
        {LINK.ifname: RATE},
        backlogged=fine,
    )


def monitored(m: ModelLink, arrivals: list[int], seconds: int) -> list[Interval]:
    """The intervals the monitor would make of ``seconds`` of the link: 1 s samples, and 50 ms
    reads of it from the interval after one its samples found short."""
    step_ms = int(DEFAULT.backlog_step_s * 1000)
    out, watching = [], False
    last = sample(0.0, m, {})
    fine: Backlogged | None = None
    prev_q = m.qdisc()
    for ms in range(1, seconds * 1000 + 1):
        m.step(arrivals[(ms - 1) % len(arrivals)])
        if watching and ms % step_ms == 0:
            q = m.qdisc()
            fine = fine or Backlogged()
            fine.add_step(prev_q, q, step_ms / 1000)
            prev_q = q
        if ms % 1000 == 0:
            now = sample(ms / 1000, m, {LINK.ifname: fine} if fine else {})
            iv = interval(last, now, [LINK])
            out.append(iv)
            last, fine, prev_q = now, None, m.qdisc()
            watching = coarse_short(iv.links[0], DEFAULT)
    return out


def bursts(on_ms: int, off_ms: int, mbit: float, lead_ms: int = 0) -> list[int]:
    """Arrivals per ms: nothing for ``lead_ms``, ``mbit`` Mbit/s for ``on_ms``, nothing for ``off_ms``."""
    per_ms = int(mbit * 1e6 / 8 / 1000)
    return [0] * lead_ms + [per_ms] * on_ms + [0] * off_ms


def test_a_link_fed_in_bursts_is_faithful() -> None:
    """Bursts of 3x the rate, 100 ms in every 500: the queue drains 200 ms after each and the
    link idles until the next. The seconds' samples find it short (a queue at both ends of
    every second, every frame held back, 60 % of its rate); the 50 ms reads see it at its rate
    whenever its queue stood."""
    m = ModelLink()
    ivs = monitored(m, bursts(100, 20, 3 * RATE, lead_ms=380), 20)
    coarse = [iv.links[0] for iv in ivs if coarse_short(iv.links[0], DEFAULT)]
    assert len(coarse) >= 5, [(round(f.mbit_s, 1), f.queued, f.held) for f in (iv.links[0] for iv in ivs)]
    assert all(f.held >= 0.9 and f.mbit_s < 0.7 * RATE for f in coarse)
    fine = [f.fine for f in coarse if f.fine is not None]
    assert fine and all(b.mbit_s >= 0.95 * RATE for b in fine if b.seconds > 0)
    v = judge(ivs, Drops(frames=100_000))
    assert v.faithful, v.reasons
    for iv in ivs:  # the seconds' samples alone (the rule before): called short
        iv.links = [replace(iv.links[0], fine=None)]
    assert not judge(ivs, Drops(frames=100_000)).faithful


def test_a_link_the_machine_does_not_serve_is_not_faithful() -> None:
    """Offered 80 % of its rate steadily, served at 55 % (a late HTB watchdog, a softirq that
    does not run): its queue stands the whole second and the 50 ms reads see it short."""
    m = ModelLink(served=0.55)
    ivs = monitored(m, bursts(1, 0, 0.8 * RATE), 20)
    v = judge(ivs, Drops(frames=100_000))
    assert not v.faithful
    (reason,) = v.reasons
    assert reason.startswith(f"link {LINK.name} carried as little as 5") and "while its queue stood" in reason


def test_a_link_read_finely_with_hardly_a_standing_queue_was_fed_in_bursts() -> None:
    th = DEFAULT
    iv_links = monitored(ModelLink(), bursts(1, 0, 0.5 * RATE), 3)
    assert not any(coarse_short(iv.links[0], th) for iv in iv_links)  # never queued: never read
    short = Backlogged(seconds=th.backlogged_min_s - 0.05, bytes=1000, read_s=1.0)
    assert short.mbit_s < RATE * th.link_min_share  # slow in its few backlogged steps, but few
    ivs = monitored(ModelLink(served=0.55), bursts(1, 0, 0.8 * RATE), 6)
    for iv in ivs[1:]:
        iv.links = [replace(iv.links[0], fine=short)]
    assert judge(ivs, Drops(frames=100_000)).faithful


def test_fine_reads_of_part_of_a_second_leave_it_to_its_samples() -> None:
    """A link first read late in an interval (read_s under fine_min_read_s) is judged as before."""
    th = DEFAULT
    ivs = monitored(ModelLink(served=0.55), bursts(1, 0, 0.8 * RATE), 6)
    partial = Backlogged(seconds=0.3, bytes=int(RATE * 1e6 / 8 * 0.3), read_s=th.fine_min_read_s - 0.1)
    for iv in ivs[1:]:
        iv.links = [replace(iv.links[0], fine=partial)]
    v = judge(ivs, Drops(frames=100_000))
    assert not v.faithful and "with packets queued" in v.reasons[0]


class _Reader:
    """A namespace's qdisc reader that replays given stats."""

    def __init__(self, stats: list[QdiscStats]) -> None:
        self.ifnames = {LINK.ifname, "other"}
        self.stats = stats

    def read(self) -> dict[str, QdiscStats]:
        return {LINK.ifname: self.stats.pop(0), "other": QdiscStats("htb", 0, 0, 0, 0, 9000, 2)}


def test_the_fine_reader_adds_steps_of_watched_links_only() -> None:
    q = [
        QdiscStats("htb", 0, 0, 0, 0, 8192, 2),
        QdiscStats("htb", 100_000, 25, 0, 25, 8192, 2),  # a standing queue: counts
        QdiscStats("htb", 150_000, 37, 0, 30, 0, 0),  # drained: does not
    ]
    fr = FineReader([], 0.05)
    reader = _Reader(q)
    fr.watch({LINK.ifname})
    fr.close()  # its thread, if any, ends; the reads below are made by hand
    for _ in range(3):
        fr.read(reader, {LINK.ifname})  # type: ignore[arg-type]
    got = fr.take()
    assert set(got) == {LINK.ifname}  # "other" was not watched
    b = got[LINK.ifname]
    assert b.bytes == 100_000 and 0 < b.seconds < b.read_s
    assert fr.take() == {}  # taken once
