"""Replays of the two egress queue models on a paced burst: which frames each target marks CE
and trims, from the arrival times alone (no switch). The BMv2-vs-Linux differential test takes
its expected offsets from here; ``python tests/bmv2/queue_models.py`` prints how far late sends
move them.

Times are in drain slots (one full frame on the congested link); every frame is one full
frame (1514 bytes); thresholds are in queued packets, as ``port_policy`` has them.

- BMv2 (``bm_sim/queueing.h`` QueueingLogicPriRL, ``simple_switch.cpp``, ``p4src/mrc_switch.p4``):
  each priority queue has its own rate; a frame gets its departure time when queued (one slot
  after the previous frame of its queue, or now) and leaves the queue at that instant.
  ``enq_qdepth`` = frames of its priority queue waiting when it is queued (ECN: CE if above the
  threshold, for trimmed headers too, whose queue is priority 7). Trimming reads the register
  ``egress_qdepth``, which egress sets to ``deq_qdepth`` (frames waiting after the pop) of each
  departing data frame.
- Linux (``linux_target/bpf/mrc_egress.c``): a virtual queue in bytes drained continuously at
  the link rate, the frame on the wire included; trim if above the trim threshold (the header,
  146/1514 of a frame, joins the queue), else CE if above the ECN threshold; a trimmed frame is
  never marked. Checked against the real kernel (the Linux half of the differential test, 7
  runs on a fabric port, 4 on a last-hop port): the same first indices and counts every time;
  of 5 runs whose index sets were compared, 3 equal, and in 2 the trimmed/untrimmed alternation
  of the trimming phase, where the queue sits within a few ms of the threshold, was one frame
  off in three places.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

HEADER_CELLS = 146 / 1514


@dataclass(frozen=True)
class Replay:
    marked: frozenset[int]
    trimmed: frozenset[int]

    def measures(self, n: int) -> dict[str, int]:
        return {
            "first marked": min(self.marked, default=n),
            "first trimmed": min(self.trimmed, default=n),
            "marked": len(self.marked),
            "trimmed": len(self.trimmed),
        }


def bmv2(arrivals: list[float], ecn: int, trim: int, last_hop: bool = False) -> Replay:
    data: list[float] = []  # departure times of the data frames still queued (priority 0)
    high: list[float] = []  # and of the trimmed headers (priority 7)
    last_data = last_high = float("-inf")
    register = 0
    marked, trimmed = set(), set()
    for k, t in enumerate(arrivals):
        while data and data[0] <= t:  # departures before this arrival, in order
            data.pop(0)
            register = len(data)
        while high and high[0] <= t:
            high.pop(0)
        if register > trim:
            trimmed.add(k)
            if not last_hop and len(high) > ecn:
                marked.add(k)
            last_high = max(t, last_high + 1)
            high.append(last_high)
        else:
            if not last_hop and len(data) > ecn:
                marked.add(k)
            last_data = max(t, last_data + 1)
            data.append(last_data)
            if data[0] <= t and len(data) == 1:  # into an idle queue: leaves at once, none behind
                data.pop(0)
                register = 0
    return Replay(frozenset(marked), frozenset(trimmed))


def linux(arrivals: list[float], ecn: int, trim: int, last_hop: bool = False) -> Replay:
    queue, last = 0.0, arrivals[0]
    marked, trimmed = set(), set()
    for k, t in enumerate(arrivals):
        queue, last = max(0.0, queue - (t - last)), t
        if queue > trim:
            trimmed.add(k)
            queue += HEADER_CELLS
        else:
            if not last_hop and queue > ecn:
                marked.add(k)
            queue += 1
    return Replay(frozenset(marked), frozenset(trimmed))


def offsets(arrivals: list[float], ecn: int, trim: int, last_hop: bool = False) -> dict[str, int]:
    """BMv2 minus Linux for each measure, both replayed on the same arrivals."""
    n = len(arrivals)
    b, lx = bmv2(arrivals, ecn, trim, last_hop).measures(n), linux(arrivals, ecn, trim, last_hop).measures(n)
    return {k: b[k] - lx[k] for k in b}


def worst_deviation(
    schedule: list[float], ecn: int, trim: int, late: float, runs: int = 2000, seed: int = 1
) -> int:
    """The largest |offset - the on-time offset| over ``runs`` replays in which every send after
    the first is up to ``late`` slots late (independently on each target)."""
    rng = random.Random(seed)
    want = offsets(schedule, ecn, trim)
    worst = 0
    for _ in range(runs):
        a = [schedule[0]] + [t + rng.uniform(0, late) for t in schedule[1:]]
        b = [schedule[0]] + [t + rng.uniform(0, late) for t in schedule[1:]]
        n = len(schedule)
        mb, ml = bmv2(a, ecn, trim).measures(n), linux(b, ecn, trim).measures(n)
        worst = max(worst, *(abs(mb[k] - ml[k] - want[k]) for k in want))
    return worst


if __name__ == "__main__":
    schedule = [0.0] + [(k + 0.5) / 2 for k in range(1, 40)]
    n = len(schedule)
    print("on time: BMv2", bmv2(schedule, 4, 8).measures(n), "Linux", linux(schedule, 4, 8).measures(n))
    for late in (0.25, 0.4, 0.5, 0.6):
        print(f"sends up to {late} slot late: worst deviation {worst_deviation(schedule, 4, 8, late)}")
